// GradScaler's unscale (vtl/backends/wgpu/optim.py): every element of the dispatch's arrays
// (bound a0 .. a{{KM1}}) times the 0-d float32 inv; the 0-d float32 flag set to 1 where a
// product is not finite (every such invocation stores the same value; never cleared).
// Workgroup g takes a chunk of 4096 elements of one array (chunks numbered array after
// array), each thread 16 of them.
// Words: 0 number of arrays m, 1 element offset of inv, 2 element offset of the flag,
//        8 + 2j element offset of array j, 9 + 2j its size (grad_chunks.wgsl)
{{DECLS}}
{{CHUNKS}}
@group(0) @binding({{K}}) var<storage, read> inv: array<f32>;
@group(0) @binding({{K1}}) var<storage, read_write> flag: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let ch = chunk_of(wid.y * nwg.x + wid.x);
  let j = ch.x;
  if (j >= arrays_n()) { return; }
  let off = array_offset(j);
  let size = array_size(j);
  let base = ch.y + lid;
  let c = {{T}}(inv[pw(1u)]);
  switch j {
{{CASES}}
    default: {}
  }
}
