// Loads of the implicit-GEMM convolution's input gradient (stride 1 or dilated:
// conv_load_dgrad.wgsl) with the depth in tap-major order: k = tap * DEPTH_CH + o
// (DEPTH_CH: the output channels of the product's depth, a depth slice's), so that the
// eight depths of a large-tile step (DEPTH_CH a multiple of 8) share one tap. A's element
// (c, k) is W[o, c, tap] (word 7: the weight's stride per input channel, word 8 per output
// channel, taps contiguous); B's column n is the input pixel (ih, iw) of image img (n = img
// * H*W + ih * W + iw), and a thread's four elements of a step (depths kt + d + 2j, one
// column) are fetched together (fetch_b4): the output pixel the tap reads from, and
// whether there is one, worked out once for the four (the column's image and pixel:
// conv_col, conv_store.wgsl).
const SH = {{SH}}i;
const SW = {{SW}}i;
const DEPTH_CH = {{DEPTH_CH}}u;

fn load_a(base: i32, sm: i32, sk: i32, M: u32, K: u32, m: u32, k: u32) -> {{C}} {
  if (m >= M || k >= K) { return {{C}}(0); }
  let tap = k / DEPTH_CH;
  return {{C}}(A[u32(base + i32(m) * sm + i32(k - tap * DEPTH_CH) * sk + i32(tap))]);
}

fn fetch_b4(col: ConvCol, kt: u32, d: u32) -> vec4<{{C}}> {
  let tap = kt / DEPTH_CH;
  let i = tap / KW;
  // oh * sh = ih + pt - i * dh, likewise for the columns
  let th = i32(col.row + PAD_T) - i32(i * DIL_H);
  let tw = i32(col.col + PAD_L) - i32((tap - i * KW) * DIL_W);
  let oh = th / SH;
  let ow = tw / SW;
  if (!col.ok || th < 0 || tw < 0 || oh * SH != th || ow * SW != tw || oh >= OUT_H
      || ow >= OUT_W) {
    return vec4<{{C}}>();
  }
  let so = pi(22u);
  let e = col.base + i32(kt - tap * DEPTH_CH + d) * so + oh * pi(23u) + ow * pi(24u);
  return vec4<{{C}}>({{C}}(B[u32(e)]), {{C}}(B[u32(e + 2 * so)]), {{C}}(B[u32(e + 4 * so)]),
                     {{C}}(B[u32(e + 6 * so)]));
}
