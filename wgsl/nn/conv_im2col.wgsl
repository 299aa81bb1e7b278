// col[m, r] = x[n, c, oy*sh + i*dh - ph, ox*sw + j*dw - pw] (0 outside the image), with
// m = (n*HO + oy)*WO + ox and r = (c*KH + i)*KW + j; x contiguous NCHW, col (M, K).
// Words: 0 M*K, 1 K, 2 C, 3 H, 4 W, 5 KH, 6 KW, 7 HO, 8 WO, 9 sh, 10 sw, 11 ph, 12 pw,
// 13 dh, 14 dw, 15 x offset
@group(0) @binding(0) var<storage, read> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> col: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = linear_id(wid, nwg, lid);
  if (t >= pw(0u)) { return; }
  let K = pw(1u);
  let r = t % K;
  let m = t / K;
  let KW = pw(6u);
  let KH = pw(5u);
  let j = r % KW;
  let i = (r / KW) % KH;
  let c = r / (KW * KH);
  let WO = pw(8u);
  let HO = pw(7u);
  let ox = m % WO;
  let oy = (m / WO) % HO;
  let n = m / (WO * HO);
  let y = i32(oy * pw(9u) + i * pw(13u)) - i32(pw(11u));
  let xx = i32(ox * pw(10u) + j * pw(14u)) - i32(pw(12u));
  let H = pw(3u);
  let W = pw(4u);
  var v = {{T}}();
  if (y >= 0 && y < i32(H) && xx >= 0 && xx < i32(W)) {
    v = x[pw(15u) + ((n * pw(2u) + c) * H + u32(y)) * W + u32(xx)];
  }
  col[t] = v;
}
