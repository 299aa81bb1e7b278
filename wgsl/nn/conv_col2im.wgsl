// dx[n, c, y, x] = sum over the taps (i, j) that read pixel (y, x) of dcol[m, r] (the
// gradient of conv_im2col's col: m = (n*HO + oy)*WO + ox, r = (c*KH + i)*KW + j), taps in
// increasing (i, j) order. dcol contiguous (M, K), dx contiguous NCHW.
// Words: 0 N*C*H*W, 1 K, 2 C, 3 H, 4 W, 5 KH, 6 KW, 7 HO, 8 WO, 9 sh, 10 sw, 11 ph, 12 pw,
// 13 dh, 14 dw, 15 dcol offset
@group(0) @binding(0) var<storage, read> dcol: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> dx: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = linear_id(wid, nwg, lid);
  if (t >= pw(0u)) { return; }
  let W = pw(4u);
  let H = pw(3u);
  let C = pw(2u);
  let xx = t % W;
  let y = (t / W) % H;
  let c = (t / (W * H)) % C;
  let n = t / (W * H * C);
  let K = pw(1u);
  let KH = pw(5u);
  let KW = pw(6u);
  let HO = pw(7u);
  let WO = pw(8u);
  let sh = pw(9u);
  let sw = pw(10u);
  let base = pw(15u);
  var acc = {{C}}();
  for (var i = 0u; i < KH; i++) {
    let ty = i32(y + pw(11u)) - i32(i * pw(13u));
    if (ty < 0) { break; }
    let uy = u32(ty);
    if (uy % sh != 0u || uy / sh >= HO) { continue; }
    let row = (n * HO + uy / sh) * WO;
    for (var j = 0u; j < KW; j++) {
      let tx = i32(xx + pw(12u)) - i32(j * pw(14u));
      if (tx < 0) { break; }
      let ux = u32(tx);
      if (ux % sw != 0u || ux / sw >= WO) { continue; }
      acc += {{C}}(dcol[base + (row + ux / sw) * K + (c * KH + i) * KW + j]);
    }
  }
  dx[t] = wrap_{{D}}({{T}}(acc));
}
