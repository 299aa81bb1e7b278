// Loads of the implicit-GEMM convolution forward: A is the (O, C*kh*kw) weight at its
// strides; B's element (k, n) is the input pixel that tap k = (c, i, j) of output pixel
// (oh, ow) of image img reads (column n = img * HO*WO + oh * WO + ow, conv_store.wgsl),
// zero in the padding (no patch matrix in memory). Image img's first element is B's base
// plus img * word 25 (the images are columns; or one a batch entry, B's base then moving by
// word 9 an entry); the geometry is conv_taps.wgsl's. In slices of the depth (a batch entry
// each, whole channels: words 6 and 9 move A's and B's bases to the slice's first channel)
// k is the slice's.
fn load_a(base: i32, sm: i32, sk: i32, M: u32, K: u32, m: u32, k: u32) -> {{C}} {
  if (m < M && k < K) { return {{C}}(A[u32(base + i32(m) * sm + i32(k) * sk)]); }
  return {{C}}(0);
}

fn load_b(base: i32, sk: i32, sn: i32, N: u32, K: u32, k: u32, n: u32) -> {{C}} {
  if (n >= N || k >= K) { return {{C}}(0); }
  let c = k / KHW;
  let img = n / IMG_PIXELS;
  let q = n - img * IMG_PIXELS;
  let oh = q / IMG_WIDTH;
  let p = tap_in(k - c * KHW, oh, q - oh * IMG_WIDTH);
  if (!in_image(p)) { return {{C}}(0); }
  return {{C}}(B[u32(base + i32(img) * pi(25u) + i32(c) * pi(22u) + p.x * pi(23u)
                     + p.y * pi(24u))]);
}
