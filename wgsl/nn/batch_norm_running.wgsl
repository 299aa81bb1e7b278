// Batch norm's running statistics: rm = a * rm + b * mean, rv = a * rv + bv * var, an
// invocation per channel. Words: 0 C, 1 offset mean, 2 offset var, 3 offset rm, 4 offset rv,
// 5.. a, 8.. b, 11.. bv
@group(0) @binding(0) var<storage, read> St: array<{{C}}>;
@group(0) @binding(1) var<storage, read_write> Rm: array<{{C}}>;
@group(0) @binding(2) var<storage, read_write> Rv: array<{{C}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let c = linear_id(wid, nwg, lid);
  if (c >= pw(0u)) { return; }
  let a = scal_{{CD}}(5u);
  Rm[pw(3u) + c] = a * Rm[pw(3u) + c] + scal_{{CD}}(8u) * St[pw(1u) + c];
  Rv[pw(4u) + c] = a * Rv[pw(4u) + c] + scal_{{CD}}(11u) * St[pw(2u) + c];
}
