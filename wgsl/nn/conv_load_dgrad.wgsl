// Loads of the implicit-GEMM convolution's input gradient: dx[img, c, (ih, iw)] = sum over
// k = (o, i, j) of W[o, c, i, j] * g[img, o, oh, ow] for the output pixel (oh, ow) whose
// tap (i, j) reads (ih, iw), if any (any stride: the other taps load zero). A's element
// (c, k) is W[o, c, i, j] (word 7: the weight's stride per input channel, word 8 per
// output channel, taps contiguous); B's element (k, n) is that output gradient for
// column n = img * H*W + ih * W + iw (conv_store.wgsl), image img's first element at B's
// base plus img * word 25 (or one image a batch entry, B's base moving by word 9), its
// strides at words 22..24; the geometry is conv_taps.wgsl's, the stride compiled in (a
// stride of 1 leaves no division and no divisibility test). In slices of the depth (a
// batch entry each, whole output channels: words 6 and 9 move A's and B's bases to the
// slice's first one) k is the slice's.

fn load_a(base: i32, sm: i32, sk: i32, M: u32, K: u32, m: u32, k: u32) -> {{C}} {
  if (m >= M || k >= K) { return {{C}}(0); }
  let o = k / KHW;
  return {{C}}(A[u32(base + i32(m) * sm + i32(o) * sk + i32(k - o * KHW))]);
}

fn load_b(base: i32, sk: i32, sn: i32, N: u32, K: u32, k: u32, n: u32) -> {{C}} {
  if (n >= N || k >= K) { return {{C}}(0); }
  let o = k / KHW;
  let r = k - o * KHW;
  let i = r / KW;
  let j = r - i * KW;
  let img = n / IMG_PIXELS;
  let q = n - img * IMG_PIXELS;
  let ih = q / IMG_WIDTH;
  let iw = q - ih * IMG_WIDTH;
  let t = tap_out(i, j, ih, iw);
  if (!t.ok) { return {{C}}(0); }
  return {{C}}(B[u32(base + i32(img) * pi(25u) + i32(o) * pi(22u) + t.oh * pi(23u)
                     + t.ow * pi(24u))]);
}
