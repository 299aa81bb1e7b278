// The joint norm of many arrays (gradient clipping; vtl/backends/wgpu/optim.py), first
// pass: workgroup g folds a chunk of 4096 elements of one of the dispatch's arrays (bound
// a0 .. a{{KM1}}; chunks numbered array after array) into partial g, in a fixed order:
// each thread its 16 elements, then a tree.
// Words: 0 number of arrays m, 1 element offset of the dispatch's first partial,
//        8 + 2j element offset of array j, 9 + 2j its size (grad_chunks.wgsl)
{{DECLS}}
{{CHUNKS}}
@group(0) @binding({{K}}) var<storage, read_write> part: array<{{T}}>;
var<workgroup> red: array<{{T}}, 256>;

fn term(v: {{T}}) -> {{T}} { return {{TERM}}; }
fn comb(a: {{T}}, b: {{T}}) -> {{T}} { {{COMB}} }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let g = wid.y * nwg.x + wid.x;
  let ch = chunk_of(g);
  let j = ch.x;
  if (j >= arrays_n()) { return; }
  let off = array_offset(j);
  let size = array_size(j);
  let base = ch.y + lid;
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
