// dropout.wgsl for float32 arrays whose offsets and length are multiples of 4: an
// invocation's Philox block decides one vec4 of elements, loaded and stored whole (the
// same values as dropout.wgsl). Words as in dropout.wgsl (offsets in elements).
@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;

{{PHILOX}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(1u)) { return; }
  let v = src[pw(2u) / 4u + i];
  let c = philox_block(vec4<u32>(pw(5u), pw(6u), pw(7u), pw(8u)), pw(4u) + i, pw(9u),
                       pw(10u));
  let s = scal_float32(12u);
  let keep = (c >> vec4<u32>(8u)) >= vec4<u32>(pw(11u));
  dst[pw(3u) / 4u + i] = v * select(vec4<f32>(0.0), vec4<f32>(s), keep);
}
