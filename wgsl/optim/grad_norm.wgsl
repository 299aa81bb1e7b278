// The joint norm of many arrays (gradient clipping; vtl/backends/wgpu/optim.py), first
// pass: workgroup g folds a chunk of 4096 elements of one of the dispatch's arrays (bound
// a0 .. a{{KM1}}; chunks numbered array after array) into partial g, in a fixed order:
// each thread its 16 elements, then a tree.
// Words: 0 number of arrays m, 1 element offset of the dispatch's first partial,
//        8 + 2j element offset of array j, 9 + 2j its size
{{DECLS}}
@group(0) @binding({{K}}) var<storage, read_write> part: array<{{T}}>;
var<workgroup> red: array<{{T}}, 256>;

fn term(v: {{T}}) -> {{T}} { return {{TERM}}; }
fn comb(a: {{T}}, b: {{T}}) -> {{T}} { {{COMB}} }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let g = wid.y * nwg.x + wid.x;
  var j = 0u;
  var first = 0u;
  var found = false;
  for (var k = 0u; k < pw(0u); k++) {
    let nc = (pw(9u + 2u * k) + 4095u) / 4096u;
    if (g < first + nc) { j = k; found = true; break; }
    first += nc;
  }
  if (!found) { return; }
  let off = pw(8u + 2u * j);
  let size = pw(9u + 2u * j);
  let base = (g - first) * 4096u + lid;
  var acc = {{T}}(0);
  switch j {
{{CASES}}
    default: {}
  }
  red[lid] = acc;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s = s >> 1u) {
    if (lid < s) { red[lid] = comb(red[lid], red[lid + s]); }
    workgroupBarrier();
  }
  if (lid == 0u) { part[pw(1u) + g] = red[0]; }
}
