// batch_norm_apply.wgsl for float32 arrays whose planes (HW) and offsets are multiples of
// 4: an invocation a vec4 of one channel's plane, loaded and stored whole (the same
// values). Words as in batch_norm_apply.wgsl (2: the vec4s; offsets in elements).
@group(0) @binding(0) var<storage, read> X: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> G: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> St: array<f32>;
@group(0) @binding(3) var<storage, read> Cf: array<f32>;
@group(0) @binding(4) var<storage, read_write> Out: array<vec4<f32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(2u)) { return; }
  let C = pw(0u);
  let c = (4u * i / pw(1u)) % C;
  let so = pw(6u);
  let d = X[pw(4u) / 4u + i] - vec4<f32>(St[so + c]);
  var v: vec4<f32>;
  if (pw(3u) == 0u) {
    v = d * St[so + 3u * C + c] + vec4<f32>(St[so + 4u * C + c]);
  } else {
    v = G[pw(5u) / 4u + i] * St[so + 3u * C + c] - d * Cf[pw(7u) + c]
        - vec4<f32>(Cf[pw(7u) + C + c]);
  }
  Out[pw(8u) / 4u + i] = v;
}
