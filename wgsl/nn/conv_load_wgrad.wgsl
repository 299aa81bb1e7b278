// Loads of the implicit-GEMM convolution's weight gradient: dW[o, (c, i, j)] = sum over
// k = (image, oh, ow) of g[image, o, oh, ow] * x[image, c, ih, iw], (ih, iw) the pixel tap
// (i, j) of (oh, ow) reads. The depth N*HO*WO is cut into slices, one per batch entry of
// the matmul kernel, summed after: a load's k is its slice's, and ``base`` (words 3/4 +
// entry * words 6/9) the slice's first k; word 7 is the whole depth. The input's strides
// are at words 22..24 (channel, row, column) and 25 (image), its offset at 26; the output
// gradient's at 27 (image), 28 (channel), 29 (row), 30 (column) and 31 (offset). The
// output's size is compiled in (conv_taps.wgsl: its divisions, done for every load, become
// multiplications).
const WO = u32(OUT_W);
const HWO = u32(OUT_H) * WO;

// (image, oh, ow) of depth index kg
fn pixel(kg: u32) -> vec3<u32> {
  let img = kg / HWO;
  let p = kg - img * HWO;
  let oh = p / WO;
  return vec3<u32>(img, oh, p - oh * WO);
}

fn load_a(base: i32, sm: i32, sk: i32, M: u32, K: u32, m: u32, k: u32) -> {{C}} {
  let kg = u32(base) + k;
  if (m >= M || k >= K || kg >= pw(7u)) { return {{C}}(0); }
  let px = vec3<i32>(pixel(kg));
  return {{C}}(A[u32(pi(31u) + px.x * pi(27u) + i32(m) * pi(28u) + px.y * pi(29u)
                     + px.z * pi(30u))]);
}

fn load_b(base: i32, sk: i32, sn: i32, N: u32, K: u32, k: u32, n: u32) -> {{C}} {
  let kg = u32(base) + k;
  if (n >= N || k >= K || kg >= pw(7u)) { return {{C}}(0); }
  let px = pixel(kg);
  let c = n / KHW;
  let q = tap_in(n - c * KHW, px.y, px.z);
  if (!in_image(q)) { return {{C}}(0); }
  return {{C}}(B[u32(pi(26u) + i32(px.x) * pi(25u) + i32(c) * pi(22u) + q.x * pi(23u)
                     + q.y * pi(24u))]);
}
