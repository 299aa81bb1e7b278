// The geometry of the implicit-GEMM convolution loaders (conv_load_*.wgsl), compiled in
// (the index arithmetic of every load then folds its sizes, strides and padding into
// constants, and its divisions become multiplications): the kernel's size KH x KW, the
// input's IN_H x IN_W and the output's OUT_H x OUT_W, the stride, the dilation and the
// top and left padding. The matmul kernels' words 14..21 still hold them (H, W, HO, WO,
// then 16-bit pairs (kh, kw), (sh, sw), (dh, dw), (pt, pl)); at 22..24 are the strides of
// the gathered tensor's channels, rows and columns (any layout: NCHW, channels-last, a
// view).
const KH = {{KH}}u;
const KW = {{KW}}u;
const KHW = KH * KW;
const IN_H = {{IN_H}}i;
const IN_W = {{IN_W}}i;
const OUT_H = {{OUT_H}}i;
const OUT_W = {{OUT_W}}i;
const STRIDE_H = {{STRIDE_H}}u;
const STRIDE_W = {{STRIDE_W}}u;
const DIL_H = {{DIL_H}}u;
const DIL_W = {{DIL_W}}u;
const PAD_T = {{PAD_T}}u;
const PAD_L = {{PAD_L}}u;

// The input pixel (row, column) that tap r = i*KW + j of output pixel (oh, ow) reads.
fn tap_in(r: u32, oh: u32, ow: u32) -> vec2<i32> {
  let i = r / KW;
  let j = r - i * KW;
  return vec2<i32>(i32(oh * STRIDE_H + i * DIL_H) - i32(PAD_T),
                   i32(ow * STRIDE_W + j * DIL_W) - i32(PAD_L));
}

fn in_image(p: vec2<i32>) -> bool {
  return p.x >= 0 && p.y >= 0 && p.x < IN_H && p.y < IN_W;
}

// The output pixel (oh, ow) whose tap (i, j) reads input pixel (ih, iw), and whether there
// is one (tap_in's inverse: oh * STRIDE_H = ih + PAD_T - i * DIL_H, likewise the columns).
struct TapOut { oh: i32, ow: i32, ok: bool }

fn tap_out(i: u32, j: u32, ih: u32, iw: u32) -> TapOut {
  let th = i32(ih + PAD_T) - i32(i * DIL_H);
  let tw = i32(iw + PAD_L) - i32(j * DIL_W);
  let oh = th / i32(STRIDE_H);
  let ow = tw / i32(STRIDE_W);
  return TapOut(oh, ow, th >= 0 && tw >= 0 && oh * i32(STRIDE_H) == th
                && ow * i32(STRIDE_W) == tw && oh < OUT_H && ow < OUT_W);
}
