// Attention by products, backward (vtl/backends/wgpu/_gemm_attention.py): the epilogue of the
// product dP = dO V^T (linalg/matmul*.wgsl) that stores the scores' gradient of
// gattn_dsoftmax.wgsl in its place: P (dp - delta) * scale, P the weights that
// gattn_weights_epilogue.wgsl stored ((entries, M, N) row-major, as this product's results).
// Words (after the product's 14): 14 b0, 15 L, 16 offset of P, 17 offset of delta,
//        18 scale (float32 bits), 31 i0 (the block's first query row)
@group(0) @binding(3) var<storage, read> Pw: array<f32>;
@group(0) @binding(4) var<storage, read> Delta: array<f32>;

fn attn_dscore(pb: u32, row: u32, j: u32, M: u32, N: u32, dp: f32) -> f32 {
  let p = Pw[pw(16u) + (pb * M + row) * N + j];
  let dl = Delta[pw(17u) + (pw(14u) + pb) * pw(15u) + pw(31u) + row];
  return p * (dp - dl) * bitcast<f32>(pw(18u));
}
