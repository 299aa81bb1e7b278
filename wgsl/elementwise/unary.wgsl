// Elementwise y = op(x) over strided views; also the strided copy and astype.
// Words: 0 n, 1 nd, 2 flags (1: input contiguous, 2: output contiguous),
//        3 input offset, 4 output offset, 5.. shape[nd], input strides[nd], output strides[nd]
@group(0) @binding(0) var<storage, read> src: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{R}}>;

fn op(x: {{T}}) -> {{R}} { {{BODY}} }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(0u)) { return; }
  let nd = pw(1u);
  let fl = pw(2u);
  var ix = pw(3u) + i;
  if ((fl & 1u) == 0u) { ix = strided(i, nd, 5u, 5u + nd, pw(3u)); }
  var io = pw(4u) + i;
  if ((fl & 2u) == 0u) { io = strided(i, nd, 5u, 5u + 2u * nd, pw(4u)); }
  dst[io] = wrap_{{DR}}(op(src[ix]));
}
