// Loads of the implicit-GEMM convolution forward with the depth in tap-major order: k =
// tap * DEPTH_CH + c (DEPTH_CH: the input channels of the product's depth, a depth
// slice's), so that the eight depths of a large-tile step (DEPTH_CH a multiple of 8) share
// one tap. A is the weight at its strides (element (m, k) is W[m, c, tap]); B's column n is
// conv_load_fwd.wgsl's, and a thread's four elements of a step (depths kt + d + 2j, one
// column) are fetched together (fetch_b4): the tap's pixel and its test of the padding are
// worked out once for the four, from the column's image and output pixel, worked out once
// for the kernel (conv_col, conv_store.wgsl).
const DEPTH_CH = {{DEPTH_CH}}u;

fn load_a(base: i32, sm: i32, sk: i32, M: u32, K: u32, m: u32, k: u32) -> {{C}} {
  if (m >= M || k >= K) { return {{C}}(0); }
  let tap = k / DEPTH_CH;
  return {{C}}(A[u32(base + i32(m) * sm + i32((k - tap * DEPTH_CH) * KHW + tap) * sk)]);
}

fn fetch_b4(col: ConvCol, kt: u32, d: u32) -> vec4<{{C}}> {
  let tap = kt / DEPTH_CH;
  let p = tap_in(tap, col.row, col.col);
  if (!col.ok || !in_image(p)) { return vec4<{{C}}>(); }
  let sc = pi(22u);
  let i = col.base + i32(kt - tap * DEPTH_CH + d) * sc + p.x * pi(23u) + p.y * pi(24u);
  return vec4<{{C}}>({{C}}(B[u32(i)]), {{C}}(B[u32(i + 2 * sc)]), {{C}}(B[u32(i + 4 * sc)]),
                     {{C}}(B[u32(i + 6 * sc)]));
}
