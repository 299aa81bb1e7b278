// out[i] = start + i * step over a strided view (full, arange, linspace, x[...] = scalar).
// Words: 0 n, 1 nd, 2 flags (2: output contiguous), 3 (unused), 4 offset out,
//        5..7 start, 8..10 step, 11.. shape[nd], strides out[nd]
@group(0) @binding(0) var<storage, read_write> dst: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(0u)) { return; }
  let nd = pw(1u);
  var io = pw(4u) + i;
  if ((pw(2u) & 2u) == 0u) { io = strided(i, nd, 11u, 11u + nd, pw(4u)); }
  let step = scal_{{D}}(8u);
  // a zero step stores start itself (start + 0 would turn -0.0 into +0.0)
  let v = select(scal_{{D}}(5u) + {{T}}(i) * step, scal_{{D}}(5u), step == {{T}}(0));
  dst[io] = wrap_{{D}}(v);
}
