// Batch norm's elementwise pass over the (N, C, HW) arrays: mode 0 out = (x - mean) * scale +
// bias, mode 1 out = g * scale - (x - mean) * k - Cf[C + c] (rows of St and Cf as in
// batch_norm_stats.wgsl and batch_norm_coeffs.wgsl), computed in C and rounded once.
// Words: 0 C, 1 HW, 2 total, 3 mode, 4 offset x, 5 offset g, 6 offset St, 7 offset Cf,
// 8 offset out
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> G: array<{{T}}>;
@group(0) @binding(2) var<storage, read> St: array<{{C}}>;
@group(0) @binding(3) var<storage, read> Cf: array<{{C}}>;
@group(0) @binding(4) var<storage, read_write> Out: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(2u)) { return; }
  let C = pw(0u);
  let c = (i / pw(1u)) % C;
  let so = pw(6u);
  let d = {{C}}(X[pw(4u) + i]) - St[so + c];
  var v: {{C}};
  if (pw(3u) == 0u) {
    v = d * St[so + 3u * C + c] + St[so + 4u * C + c];
  } else {
    v = {{C}}(G[pw(5u) + i]) * St[so + 3u * C + c] - d * Cf[pw(7u) + c] - Cf[pw(7u) + C + c];
  }
  Out[pw(8u) + i] = wrap_{{D}}({{T}}(v));
}
