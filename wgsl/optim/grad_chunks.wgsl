// The chunk of a multi-array dispatch (gradient clipping, GradScaler's unscale;
// vtl/backends/wgpu/optim.py) that workgroup g takes: 4096 elements of one array, chunks
// numbered array after array. Words: 0 number of arrays m, 8 + 2j element offset of array
// j, 9 + 2j its size; or, with bit 31 of word 0 set (every array starts its buffer), 8 + j
// the size of array j. chunk_of returns (j, the chunk's first element in array j); j = m
// when g is past the last chunk.
fn arrays_n() -> u32 { return pw(0u) & 0x7fffffffu; }

fn array_size(j: u32) -> u32 {
  if ((pw(0u) >> 31u) != 0u) { return pw(8u + j); }
  return pw(9u + 2u * j);
}

fn array_offset(j: u32) -> u32 {
  if ((pw(0u) >> 31u) != 0u) { return 0u; }
  return pw(8u + 2u * j);
}

fn chunk_of(g: u32) -> vec2<u32> {
  var first = 0u;
  for (var k = 0u; k < arrays_n(); k++) {
    let nc = (array_size(k) + 4095u) / 4096u;
    if (g < first + nc) { return vec2<u32>(k, (g - first) * 4096u); }
    first += nc;
  }
  return vec2<u32>(arrays_n(), 0u);
}
