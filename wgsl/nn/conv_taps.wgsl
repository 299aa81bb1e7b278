// The geometry of the implicit-GEMM convolution loaders (conv_load_*.wgsl): the kernel's
// size KH x KW is compiled in (its divisions become multiplications); at the matmul
// kernels' words 14..21: H, W (input), HO, WO (output), then pairs of 16-bit halves (low,
// high): (kh, kw) (unused: compiled in), (sh, sw), (dh, dw), (pt, pl); at 22..24 the
// strides of the gathered tensor's channels, rows and columns (any layout: NCHW,
// channels-last, a view).
const KH = {{KH}}u;
const KW = {{KW}}u;
const KHW = KH * KW;

fn lo16(i: u32) -> u32 { return pw(i) & 0xffffu; }
fn hi16(i: u32) -> u32 { return pw(i) >> 16u; }

// The input pixel (row, column) that tap r = i*KW + j of output pixel (oh, ow) reads.
fn tap_in(r: u32, oh: u32, ow: u32) -> vec2<i32> {
  let i = r / KW;
  let j = r - i * KW;
  return vec2<i32>(i32(oh * lo16(19u) + i * lo16(20u)) - i32(lo16(21u)),
                   i32(ow * hi16(19u) + j * hi16(20u)) - i32(hi16(21u)));
}

fn in_image(p: vec2<i32>) -> bool {
  return p.x >= 0 && p.y >= 0 && p.x < pi(14u) && p.y < pi(15u);
}
