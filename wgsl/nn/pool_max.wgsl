// Max pooling forward, a thread per output element (n, c, ho, wo) of the contiguous
// (N, C, HO, WO) results: the first maximal element of the window in row-major tap order,
// or its first nan (padding taps read -inf); arg is the tap number a*KW + b.
// Words: 0 N*C*HO*WO, 1 C, 2 H, 3 W, 4 KH, 5 KW, 6 HO, 7 WO, 8 SH, 9 SW, 10 PH, 11 PW,
// 12 DH, 13 DW, 14 x offset
@group(0) @binding(0) var<storage, read> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> arg: array<i32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = linear_id(wid, nwg, lid);
  if (t >= pw(0u)) { return; }
  let H = pw(2u);
  let W = pw(3u);
  let KH = pw(4u);
  let KW = pw(5u);
  let HO = pw(6u);
  let WO = pw(7u);
  let wo = t % WO;
  let ho = (t / WO) % HO;
  let base = pw(14u) + (t / (WO * HO)) * H * W;
  var best = -inf_{{D}}();
  var bi = 0u;
  var nan_best = false;
  for (var a = 0u; a < KH; a++) {
    let r = i32(ho * pw(8u) + a * pw(12u)) - i32(pw(10u));
    for (var b = 0u; b < KW; b++) {
      let q = i32(wo * pw(9u) + b * pw(13u)) - i32(pw(11u));
      var v = -inf_{{D}}();
      if (r >= 0 && r < i32(H) && q >= 0 && q < i32(W)) {
        v = x[base + u32(r) * W + u32(q)];
      }
      let tap = a * KW + b;
      let vnan = isnan_{{D}}(v);
      if (tap == 0u || (!nan_best && (v > best || vnan))) {
        best = v;
        bi = tap;
        nan_best = vnan;
      }
    }
  }
  y[t] = best;
  arg[t] = i32(bi);
}
