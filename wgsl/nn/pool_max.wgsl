// Max pooling forward, a thread per output element (n, c, ho, wo) of the contiguous
// (N, C, HO, WO) results: the first maximal element of the window in row-major tap order,
// or its first nan; padding taps are passed over (a window of -inf gives its first
// element); arg is the tap number a*KW + b.
// Words: 0 N*C*HO*WO, 1 C, 2 H, 3 W, 4 KH, 5 KW, 6 HO, 7 WO, 8 SH, 9 SW, 10 PH, 11 PW,
// 12 DH, 13 DW, 14 x offset
// The geometry is compiled in (constants H, W, KH, KW, HO, WO, SH, SW, PH, PW, DH, DW: its
// divisions by sizes and strides become multiplications); words 1..13 still hold it.
{{GEOMETRY}}
@group(0) @binding(0) var<storage, read> x: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> y: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> arg: array<i32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = linear_id(wid, nwg, lid);
  if (t >= pw(0u)) { return; }
  let wo = t % WO;
  let ho = (t / WO) % HO;
  let base = pw(14u) + (t / (WO * HO)) * H * W;
  var best = -inf_{{D}}();
  var bi = 0u;
  var nan_best = false;
  var seen = false;
  for (var a = 0u; a < KH; a++) {
    let r = i32(ho * SH + a * DH) - i32(PH);
    for (var b = 0u; b < KW; b++) {
      let q = i32(wo * SW + b * DW) - i32(PW);
      if (r >= 0 && r < i32(H) && q >= 0 && q < i32(W)) {
        let v = x[base + u32(r) * W + u32(q)];
        let vnan = isnan_{{D}}(v);
        if (!seen || (!nan_best && (v > best || vnan))) {
          best = v;
          bi = a * KW + b;
          nan_best = vnan;
          seen = true;
        }
      }
    }
  }
  y[t] = best;
  arg[t] = i32(bi);
}
