// Row argmax/argmin of a contiguous (rows, K) block: first index of the extreme value;
// a NaN counts as the extreme (as NumPy). Each row is split over G workgroups (word 4, 0
// meaning 1; grid-stride as in reduce.wgsl). The source holds values (IN), or (value,
// index) pairs of a first pass; the destination gets indices, or pairs when G > 1.
// Words: 0 rows, 1 K, 2 input offset, 3 output offset, 4 G
struct Pair { v: {{T}}, i: u32 }
@group(0) @binding(0) var<storage, read> src: array<{{IN}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{OUT}}>;
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
fn load(j: u32, k: u32) -> Pair { {{LOAD}} }
fn store(j: u32, p: Pair) { {{STORE}} }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let rows = pw(0u);
  let K = pw(1u);
  let G = max(pw(4u), 1u);
  let w = wid.y * nwg.x + wid.x;
  let row = w / G;
  let g = w - row * G;
  var bv: {{T}} = {{T}}(0);
  var bi = 0xffffffffu;
  if (row < rows) {
    let base = pw(2u) + row * K;
    let step = G * 256u;
    for (var k = g * 256u + lid; k < K; k += step) {
      let p = load(base + k, k);
      if (better(p.v, p.i, bv, bi)) { bv = p.v; bi = p.i; }
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
  if (lid == 0u && row < rows) { store(pw(3u) + w, Pair(shv[0], shi[0])); }
}
