// Gradient clipping's scaling (vtl/backends/wgpu/optim.py): every element of the dispatch's
// arrays (bound a0 .. a{{KM1}}) times min(max_norm / (norm + eps), 1), computed here from
// the 0-d norm (a nan norm gives nan); workgroup g scales a chunk of 4096 elements of one
// array (chunks numbered array after array), each thread 16 of them.
// Words: 0 number of arrays m, 1 element offset of the norm, 2..4 max_norm, 5..7 eps,
//        8 + 2j element offset of array j, 9 + 2j its size (grad_chunks.wgsl)
{{DECLS}}
{{CHUNKS}}
@group(0) @binding({{K}}) var<storage, read> nrm: array<{{T}}>;

fn quot(x: {{T}}, y: {{T}}) -> {{T}} { {{DIV}} }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let ch = chunk_of(wid.y * nwg.x + wid.x);
  let j = ch.x;
  if (j >= arrays_n()) { return; }
  let off = array_offset(j);
  let size = array_size(j);
  let base = ch.y + lid;
  let q = quot(scal_{{DT}}(2u), nrm[pw(1u)] + scal_{{DT}}(5u));
  // minimum(q, 1) as the portable path: nan stays nan
  let c = select(min(q, {{T}}(1)), q, isnan_{{DT}}(q));
  switch j {
{{CASES}}
    default: {}
  }
}
