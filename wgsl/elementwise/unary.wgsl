// Elementwise y = op(x) over strided views; also the strided copy and astype. An invocation
// takes PER consecutive elements along the last axis (PER divides its length): the offsets
// of the first come from one walk over the dimensions for both views, the others follow
// by the last axis' strides.
// Words: 0 n, 1 nd, 2 flags (1: input contiguous, 2: output contiguous),
//        3 input offset, 4 output offset, 5.. shape[nd], input strides[nd], output strides[nd]
@group(0) @binding(0) var<storage, read> src: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{R}}>;

fn op(x: {{T}}) -> {{R}} { {{BODY}} }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid) * {{PER}};
  if (i >= pw(0u)) { return; }
  let nd = pw(1u);
  let fl = pw(2u);
  var ix = bitcast<i32>(pw(3u) + i);
  var io = bitcast<i32>(pw(4u) + i);
  var sx = 1;
  var so = 1;
  if (fl != 3u) {  // the row-major index i in each strided view
    var rem = i;
    var ox = pi(3u);
    var oo = pi(4u);
    for (var d = i32(nd) - 1; d >= 0; d--) {
      let s = pw(5u + u32(d));
      let q = rem / s;
      let r = i32(rem - q * s);
      ox += r * pi(5u + nd + u32(d));
      oo += r * pi(5u + 2u * nd + u32(d));
      rem = q;
    }
    if ((fl & 1u) == 0u) {
      ix = ox;
      sx = pi(4u + 2u * nd);
    }
    if ((fl & 2u) == 0u) {
      io = oo;
      so = pi(4u + 3u * nd);
    }
  }
  /* unroll */ for (var k = 0u; k < {{PER}}; k++) {
    dst[u32(io + i32(k) * so)] = wrap_{{DR}}(op(src[u32(ix + i32(k) * sx)]));
  }
}
