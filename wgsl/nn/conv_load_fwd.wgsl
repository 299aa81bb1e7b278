// Loads of the implicit-GEMM convolution forward, one image per batch entry of the matmul
// kernel: A is the (O, C*kh*kw) weight at its strides; B's element (k, n) is the input
// pixel that tap k = (c, i, j) of output pixel n = (oh, ow) reads, zero in the padding
// (no patch matrix in memory). B's base is the image's first element (word 4 + image *
// word 9); the geometry is conv_taps.wgsl's.
fn load_a(base: i32, sm: i32, sk: i32, M: u32, K: u32, m: u32, k: u32) -> {{C}} {
  if (m < M && k < K) { return {{C}}(A[u32(base + i32(m) * sm + i32(k) * sk)]); }
  return {{C}}(0);
}

fn load_b(base: i32, sk: i32, sn: i32, N: u32, K: u32, k: u32, n: u32) -> {{C}} {
  if (n >= N || k >= K) { return {{C}}(0); }
  let c = k / KHW;
  let oh = n / pw(17u);
  let p = tap_in(k - c * KHW, oh, n - oh * pw(17u));
  if (!in_image(p)) { return {{C}}(0); }
  return {{C}}(B[u32(base + i32(c) * pi(22u) + p.x * pi(23u) + p.y * pi(24u))]);
}
