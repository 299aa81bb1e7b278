// B's element (k, n) for the matmul kernels, as matmul_load_a.wgsl's A.
fn load_b(base: i32, sk: i32, sn: i32, N: u32, K: u32, k: u32, n: u32) -> {{C}} {
  if (n < N && k < K) { return {{C}}(B[u32(base + i32(k) * sk + i32(n) * sn)]); }
  return {{C}}(0);
}
