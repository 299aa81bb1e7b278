// Gradient clipping's scaling (vtl/backends/wgpu/optim.py): every element of the dispatch's
// arrays (bound a0 .. a{{KM1}}) times min(max_norm / (norm + eps), 1), computed here from
// the 0-d norm (a nan norm gives nan); workgroup g scales a chunk of 4096 elements of one
// array (chunks numbered array after array), each thread 16 of them.
// Words: 0 number of arrays m, 1 element offset of the norm, 2..4 max_norm, 5..7 eps,
//        8 + 2j element offset of array j, 9 + 2j its size
{{DECLS}}
@group(0) @binding({{K}}) var<storage, read> nrm: array<{{T}}>;

fn quot(x: {{T}}, y: {{T}}) -> {{T}} { {{DIV}} }

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
  let q = quot(scal_{{DT}}(2u), nrm[pw(1u)] + scal_{{DT}}(5u));
  // minimum(q, 1) as the portable path: nan stays nan
  let c = select(min(q, {{T}}(1)), q, isnan_{{DT}}(q));
  switch j {
{{CASES}}
    default: {}
  }
}
