// Where the matmul kernels store result (row, col) of batch entry b into a view: from
// word 5, batch entries word 12 apart, rows word 13 apart, columns adjacent (a slice of a
// larger array, written in place).
fn out_at(b: u32, row: u32, col: u32, M: u32, N: u32) -> u32 {
  return pw(5u) + b * pw(12u) + row * pw(13u) + col;
}
