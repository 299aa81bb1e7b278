// Loads of a strided convolution's input gradient by stride phases: the input pixels
// (ih, iw) = (PA + SH*u, PB + SW*v) of one phase are read only by the taps (i, j) = (I0 +
// SH*r, J0 + SW*s), r < TI, s < TJ, each from the output pixel (oh, ow) = (BH + u - r, BW +
// v - s) (dilation 1), so the phase's product walks those taps alone instead of every tap
// with most loading zero (a quarter of them at stride 2). A's element (c, k) is W[o, c, i,
// j] for k = (o, r, s) (word 7: the weight's stride per input channel, word 8 per output
// channel, taps contiguous); B's element (k, n) is g[img, o, oh, ow] for column n = img *
// U*V + u * V + v (conv_store_phase.wgsl), zero outside the output; image img's first
// element at B's base plus img * word 9, its strides at words 22..24 (the output's size:
// conv_taps.wgsl).
const SH = {{SH}}u;
const SW = {{SW}}u;
const I0 = {{I0}}u;
const J0 = {{J0}}u;
const TI = {{TI}}u;
const TJ = {{TJ}}u;
const BH = {{BH}}i;
const BW = {{BW}}i;
const TIJ = TI * TJ;

fn load_a(base: i32, sm: i32, sk: i32, M: u32, K: u32, m: u32, k: u32) -> {{C}} {
  if (m >= M || k >= K) { return {{C}}(0); }
  let o = k / TIJ;
  let t = k - o * TIJ;
  let r = t / TJ;
  let tap = (I0 + SH * r) * KW + J0 + SW * (t - r * TJ);
  return {{C}}(A[u32(base + i32(m) * sm + i32(o) * sk + i32(tap))]);
}

fn load_b(base: i32, sk: i32, sn: i32, N: u32, K: u32, k: u32, n: u32) -> {{C}} {
  if (n >= N || k >= K) { return {{C}}(0); }
  let o = k / TIJ;
  let t = k - o * TIJ;
  let r = t / TJ;
  let img = n / IMG_PIXELS;
  let q = n - img * IMG_PIXELS;
  let u = q / IMG_WIDTH;
  let oh = BH + i32(u) - i32(r);
  let ow = BW + i32(q - u * IMG_WIDTH) - i32(t - r * TJ);
  if (oh < 0 || ow < 0 || oh >= OUT_H || ow >= OUT_W) { return {{C}}(0); }
  return {{C}}(B[u32(base + i32(img) * pi(9u) + i32(o) * pi(22u) + oh * pi(23u)
                     + ow * pi(24u))]);
}
