// A's element (m, k) for the matmul kernels (matmul.wgsl, matmul_big.wgsl) at its strides
// from a base offset, zero outside the matrix, widened to the compute type {{C}}.
fn load_a(base: i32, sm: i32, sk: i32, M: u32, K: u32, m: u32, k: u32) -> {{C}} {
  if (m < M && k < K) { return {{C}}(A[u32(base + i32(m) * sm + i32(k) * sk)]); }
  return {{C}}(0);
}
