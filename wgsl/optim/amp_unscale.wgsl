// GradScaler's unscale (vtl/backends/wgpu/optim.py): every element of the dispatch's arrays
// (bound a0 .. a{{KM1}}) times the 0-d float32 inv; the 0-d float32 flag set to 1 where a
// product is not finite (every such invocation stores the same value; never cleared).
// Workgroup g takes a chunk of 4096 elements of one array (chunks numbered array after
// array), each thread 16 of them.
// Words: 0 number of arrays m, 1 element offset of inv, 2 element offset of the flag,
//        8 + 2j element offset of array j, 9 + 2j its size
{{DECLS}}
@group(0) @binding({{K}}) var<storage, read> inv: array<f32>;
@group(0) @binding({{K1}}) var<storage, read_write> flag: array<f32>;

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
  let c = {{T}}(inv[pw(1u)]);
  switch j {
{{CASES}}
    default: {}
  }
}
