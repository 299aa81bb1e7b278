// Inclusive scan along contiguous rows (cumulative_sum / cumulative_prod), one thread per
// row. Words: 0 rows, 1 K, 2 input offset, 3 output offset, 4 include_initial (0/1)
@group(0) @binding(0) var<storage, read> src: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let r = linear_id(wid, nwg, lid);
  if (r >= pw(0u)) { return; }
  let K = pw(1u);
  let init = pw(4u);
  let ib = pw(2u) + r * K;
  let ob = pw(3u) + r * (K + init);
  var acc: {{T}} = {{INIT}};
  if (init == 1u) { dst[ob] = acc; }
  for (var k = 0u; k < K; k++) {
    acc = wrap_{{D}}(acc {{OP}} src[ib + k]);
    dst[ob + init + k] = acc;
  }
}
