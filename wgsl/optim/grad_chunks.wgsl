// The chunk of a multi-array dispatch (gradient clipping, GradScaler's unscale;
// vtl/backends/wgpu/optim.py) that workgroup g takes: 4096 elements of one array, chunks
// numbered array after array. Words: 0 number of arrays m, 8 + 2j element offset of array
// j, 9 + 2j its size. Returns (j, the chunk's first element in array j); j = m when g is
// past the last chunk.
fn chunk_of(g: u32) -> vec2<u32> {
  var first = 0u;
  for (var k = 0u; k < pw(0u); k++) {
    let nc = (pw(9u + 2u * k) + 4095u) / 4096u;
    if (g < first + nc) { return vec2<u32>(k, (g - first) * 4096u); }
    first += nc;
  }
  return vec2<u32>(pw(0u), 0u);
}
