// Row argmax/argmin of a contiguous (rows, K) block: first index of the extreme value;
// a NaN counts as the extreme (as NumPy). Words: 0 rows, 1 K, 2 input offset, 3 output offset
@group(0) @binding(0) var<storage, read> src: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{R}}>;
var<workgroup> shv: array<{{T}}, 256>;
var<workgroup> shi: array<u32, 256>;

fn better(vb: {{T}}, ib: u32, va: {{T}}, ia: u32) -> bool {
  if (ib == 0xffffffffu) { return false; }
  if (ia == 0xffffffffu) { return true; }
  if (isnan_{{DT}}(va)) { return isnan_{{DT}}(vb) && ib < ia; }
  if (isnan_{{DT}}(vb)) { return true; }
  if (vb {{OP}} va) { return true; }
  return vb == va && ib < ia;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let rows = pw(0u);
  let K = pw(1u);
  let row = wid.y * nwg.x + wid.x;
  var bv: {{T}} = {{T}}(0);
  var bi = 0xffffffffu;
  if (row < rows) {
    let base = pw(2u) + row * K;
    for (var k = lid; k < K; k += 256u) {
      let v = src[base + k];
      if (better(v, k, bv, bi)) { bv = v; bi = k; }
    }
  }
  shv[lid] = bv;
  shi[lid] = bi;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (lid < s && better(shv[lid + s], shi[lid + s], shv[lid], shi[lid])) {
      shv[lid] = shv[lid + s];
      shi[lid] = shi[lid + s];
    }
    workgroupBarrier();
  }
  if (lid == 0u && row < rows) { dst[pw(3u) + row] = {{R}}(shi[0]); }
}
