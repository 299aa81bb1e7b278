// Row reduction of a contiguous (rows, K) block: out[r] = fold(map(x[r, :])).
// One workgroup per row (tree in workgroup memory), or one thread per row when
// word 4 is 1 (short rows). Words: 0 rows, 1 K, 2 input offset, 3 output offset, 4 mode
@group(0) @binding(0) var<storage, read> src: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{R}}>;
var<workgroup> sh: array<{{A}}, 256>;

fn mapv(x: {{T}}) -> {{A}} { {{MAP}} }
fn comb(a: {{A}}, b: {{A}}) -> {{A}} { {{COMBINE}} }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let rows = pw(0u);
  let K = pw(1u);
  if (pw(4u) == 1u) {
    let r = linear_id(wid, nwg, lid);
    if (r < rows) {
      var a: {{A}} = {{INIT}};
      let base = pw(2u) + r * K;
      for (var k = 0u; k < K; k++) { a = comb(a, mapv(src[base + k])); }
      dst[pw(3u) + r] = wrap_{{DR}}({{R}}(a));
    }
    return;
  }
  let row = wid.y * nwg.x + wid.x;
  var acc: {{A}} = {{INIT}};
  if (row < rows) {
    let base = pw(2u) + row * K;
    for (var k = lid; k < K; k += 256u) { acc = comb(acc, mapv(src[base + k])); }
  }
  sh[lid] = acc;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (lid < s) { sh[lid] = comb(sh[lid], sh[lid + s]); }
    workgroupBarrier();
  }
  if (lid == 0u && row < rows) { dst[pw(3u) + row] = wrap_{{DR}}({{R}}(sh[0])); }
}
