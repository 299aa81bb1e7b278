// Where the matmul kernels store result (row, col) of batch entry b (base: its first
// element): C is contiguous (batch, M, N).
fn out_at(base: u32, row: u32, col: u32, M: u32, N: u32) -> u32 {
  return base + row * N + col;
}
