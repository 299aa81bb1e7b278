// Batch norm's elementwise pass over the (N, C, HW) arrays: mode 0 out = (x - mean) * scale +
// bias, mode 1 out = g * scale - (x - mean) * k - Cf[C + c] (rows of St and Cf as in
// batch_norm_stats.wgsl and batch_norm_coeffs.wgsl), computed in C and rounded once.
// W elements an invocation: 1, or a vec4 (V = vec4<f32>) for float32 arrays whose planes
// and offsets are multiples of 4; V is T and CV is C for W = 1.
// Words: 0 C, 1 HW, 2 invocations (elements / W), 3 mode, 4 offset x, 5 offset g,
// 6 offset St, 7 offset Cf, 8 offset out (offsets in elements)
@group(0) @binding(0) var<storage, read> X: array<{{V}}>;
@group(0) @binding(1) var<storage, read> G: array<{{V}}>;
@group(0) @binding(2) var<storage, read> St: array<{{C}}>;
@group(0) @binding(3) var<storage, read> Cf: array<{{C}}>;
@group(0) @binding(4) var<storage, read_write> Out: array<{{V}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(2u)) { return; }
  let C = pw(0u);
  let c = ({{W}}u * i / pw(1u)) % C;
  let so = pw(6u);
  let d = {{CV}}(X[pw(4u) / {{W}}u + i]) - {{CV}}(St[so + c]);
  var v: {{CV}};
  if (pw(3u) == 0u) {
    v = d * St[so + 3u * C + c] + {{CV}}(St[so + 4u * C + c]);
  } else {
    v = {{CV}}(G[pw(5u) / {{W}}u + i]) * St[so + 3u * C + c] - d * Cf[pw(7u) + c]
        - {{CV}}(Cf[pw(7u) + C + c]);
  }
  Out[pw(8u) / {{W}}u + i] = {{STORE}};
}
