// Elementwise z = op(x, y) with broadcasting through strides; either operand may be a
// scalar passed in the params. The output is contiguous.
// Words: 0 n, 1 nd, 2 flags (1: a contiguous, 2: b contiguous, 4: a scalar, 8: b scalar),
//        3 offset a, 4 offset b, 5 offset out, 6..8 scalar,
//        9.. shape[nd], strides a[nd], strides b[nd]
@group(0) @binding(0) var<storage, read> A: array<{{T}}>;
@group(0) @binding(1) var<storage, read> B: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> O: array<{{R}}>;

fn op(x: {{T}}, y: {{T}}) -> {{R}} { {{BODY}} }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(0u)) { return; }
  let nd = pw(1u);
  let fl = pw(2u);
  var x: {{T}};
  var y: {{T}};
  if ((fl & 4u) != 0u) {
    x = scal_{{DT}}(6u);
  } else {
    var ia = pw(3u) + i;
    if ((fl & 1u) == 0u) { ia = strided(i, nd, 9u, 9u + nd, pw(3u)); }
    x = A[ia];
  }
  if ((fl & 8u) != 0u) {
    y = scal_{{DT}}(6u);
  } else {
    var ib = pw(4u) + i;
    if ((fl & 2u) == 0u) { ib = strided(i, nd, 9u, 9u + 2u * nd, pw(4u)); }
    y = B[ib];
  }
  O[pw(5u) + i] = wrap_{{DR}}(op(x, y));
}
