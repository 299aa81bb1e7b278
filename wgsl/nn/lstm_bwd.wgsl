// The LSTM cell's pointwise backward (see lstm_fwd.wgsl), a thread per element (n, j) of the
// (N, H) state: the stacked gate gradient dz (N, 4H) and, when {{NEED_DCP}} is 1, dcprev,
// from act, cprev, tc and the gradients that reached h (dh, plus dh2 when {{HAS_DH2}}) and
// c (dc); {{HAS_DH}}/{{HAS_DC}} are 0 where none did (those bindings are not read).
// Words: 0 N*H, 1 H, 2-9 the element offsets of act, cprev, tc, dh, dh2, dc, dz, dcprev
@group(0) @binding(0) var<storage, read> act: array<{{T}}>;
@group(0) @binding(1) var<storage, read> cprev: array<{{T}}>;
@group(0) @binding(2) var<storage, read> tc: array<{{T}}>;
@group(0) @binding(3) var<storage, read> dh: array<{{T}}>;
@group(0) @binding(4) var<storage, read> dh2: array<{{T}}>;
@group(0) @binding(5) var<storage, read> dc: array<{{T}}>;
@group(0) @binding(6) var<storage, read_write> dz: array<{{T}}>;
@group(0) @binding(7) var<storage, read_write> dcp: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = linear_id(wid, nwg, lid);
  if (t >= pw(0u)) { return; }
  let H = pw(1u);
  let a = pw(2u) + (t / H) * 4u * H + t % H;
  let ig = act[a];
  let fg = act[a + H];
  let gg = act[a + 2u * H];
  let og = act[a + 3u * H];
  let tt = tc[pw(4u) + t];
  let one = {{T}}(1);
  var dct = {{T}}();
  var dot = {{T}}();
  if ({{HAS_DH}}u == 1u) {
    var dhs = dh[pw(5u) + t];
    if ({{HAS_DH2}}u == 1u) { dhs = dhs + dh2[pw(6u) + t]; }
    dct = dhs * og * (one - tt * tt);
    dot = dhs * tt;
  }
  if ({{HAS_DC}}u == 1u) {
    if ({{HAS_DH}}u == 1u) { dct = dct + dc[pw(7u) + t]; } else { dct = dc[pw(7u) + t]; }
  }
  let d = pw(8u) + (t / H) * 4u * H + t % H;
  dz[d] = dct * gg * (ig * (one - ig));
  dz[d + H] = dct * cprev[pw(3u) + t] * (fg * (one - fg));
  dz[d + 2u * H] = dct * ig * (one - gg * gg);
  dz[d + 3u * H] = dot * (og * (one - og));
  if ({{NEED_DCP}}u == 1u) { dcp[pw(9u) + t] = dct * fg; }
}
