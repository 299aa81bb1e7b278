// The element loads of the matmul kernels (matmul.wgsl, matmul_big.wgsl): A's element
// (m, k) and B's (k, n) at their strides from a base offset, zero outside the matrix,
// widened to the compute type {{C}}.
fn load_a(base: i32, sm: i32, sk: i32, M: u32, K: u32, m: u32, k: u32) -> {{C}} {
  if (m < M && k < K) { return {{C}}(A[u32(base + i32(m) * sm + i32(k) * sk)]); }
  return {{C}}(0);
}

fn load_b(base: i32, sk: i32, sn: i32, N: u32, K: u32, k: u32, n: u32) -> {{C}} {
  if (n < N && k < K) { return {{C}}(B[u32(base + i32(k) * sk + i32(n) * sn)]); }
  return {{C}}(0);
}
