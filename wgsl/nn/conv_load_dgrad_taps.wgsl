// Loads of the implicit-GEMM convolution's input gradient (stride 1 or dilated:
// conv_load_dgrad.wgsl) with the depth in tap-major order: k = tap * DEPTH_CH + o
// (DEPTH_CH: the output channels of the product's depth, a depth slice's), so that the
// eight depths of a large-tile step (DEPTH_CH a multiple of 8) share one tap. A's element
// (c, k) is W[o, c, tap] (word 7: the weight's stride per input channel, word 8 per output
// channel, taps contiguous); B's column n is the input pixel (ih, iw) of image img (n = img
// * H*W + ih * W + iw), and a thread's four elements of a step (depths kt + d + 2j, one
// column) are fetched together (fetch_b4): the output pixel the tap reads from, and
// whether there is one (tap_out, conv_taps.wgsl), worked out once for the four (the
// column's image and pixel: conv_col, conv_store.wgsl).
const DEPTH_CH = {{DEPTH_CH}}u;

fn load_a(base: i32, sm: i32, sk: i32, M: u32, K: u32, m: u32, k: u32) -> {{C}} {
  if (m >= M || k >= K) { return {{C}}(0); }
  let tap = k / DEPTH_CH;
  return {{C}}(A[u32(base + i32(m) * sm + i32(k - tap * DEPTH_CH) * sk + i32(tap))]);
}

fn fetch_b4(col: ConvCol, kt: u32, d: u32) -> vec4<{{C}}> {
  let tap = kt / DEPTH_CH;
  let i = tap / KW;
  let t = tap_out(i, tap - i * KW, col.row, col.col);
  if (!col.ok || !t.ok) { return vec4<{{C}}>(); }
  let so = pi(22u);
  let e = col.base + i32(kt - tap * DEPTH_CH + d) * so + t.oh * pi(23u) + t.ow * pi(24u);
  return vec4<{{C}}>({{C}}(B[u32(e)]), {{C}}(B[u32(e + 2 * so)]), {{C}}(B[u32(e + 4 * so)]),
                     {{C}}(B[u32(e + 6 * so)]));
}
