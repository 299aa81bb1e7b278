// Where the matmul kernels store result (row, col) of batch entry b: C is contiguous
// (batch, M, N) from word 5.
fn out_at(b: u32, row: u32, col: u32, M: u32, N: u32) -> u32 {
  return pw(5u) + (b * M + row) * N + col;
}
