// Max pooling backward, a thread per input element (n, c, r, q): the sum of the output
// gradients of the windows whose chosen tap (arg) is this element, in tap order (a gather:
// no atomics), added in the compute type (float32 for 16-bit gradients) and rounded
// once. g and arg contiguous (N, C, HO, WO); dx contiguous (N, C, H, W).
// Words: 0 N*C*H*W, 1 C, 2 H, 3 W, 4 KH, 5 KW, 6 HO, 7 WO, 8 SH, 9 SW, 10 PH, 11 PW,
// 12 DH, 13 DW, 14 g offset, 15 arg offset
// The geometry is compiled in (constants H, W, KH, KW, HO, WO, SH, SW, PH, PW, DH, DW: its
// divisions by sizes and strides become multiplications); words 1..13 still hold it.
{{GEOMETRY}}
@group(0) @binding(0) var<storage, read> g: array<{{T}}>;
@group(0) @binding(1) var<storage, read> arg: array<i32>;
@group(0) @binding(2) var<storage, read_write> dx: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = linear_id(wid, nwg, lid);
  if (t >= pw(0u)) { return; }
  let q = t % W;
  let r = (t / W) % H;
  let obase = (t / (W * H)) * HO * WO;
  var acc = {{C}}();
  for (var a = 0u; a < KH; a++) {
    let u = i32(r + PH) - i32(a * DH);
    if (u < 0) { break; }
    let uu = u32(u);
    if (uu % SH != 0u || uu / SH >= HO) { continue; }
    for (var b = 0u; b < KW; b++) {
      let v = i32(q + PW) - i32(b * DW);
      if (v < 0) { break; }
      let vv = u32(v);
      if (vv % SW != 0u || vv / SW >= WO) { continue; }
      let o = obase + (uu / SH) * WO + vv / SW;
      if (arg[pw(15u) + o] == i32(a * KW + b)) { acc += {{C}}(g[pw(14u) + o]); }
    }
  }
  dx[t] = wrap_{{D}}({{T}}(acc));
}
