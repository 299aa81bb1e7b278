// Attention by products, backward (vtl/backends/wgpu/_gemm_attention.py): the epilogue of the
// product S = Q K^T (linalg/matmul*.wgsl) that stores the weights P of gattn_dsoftmax.wgsl in
// place of the scores (gattn_weight.wgsl, included after this). The product's batch entry b
// is the attention's b0 + b, its row the query i0 + row and its column the key.
// Words (after the product's 14): 14 + the words 0-13 of gattn_dsoftmax.wgsl (14 b0, 15 B2,
//        16 L, 18-21 the mask's strides, 22 has mask, 23 causal, 24 scale, 26 offset of lse,
//        27 offset of the mask), 31 i0 (the block's first query row)
@group(0) @binding(3) var<storage, read> Lse: array<f32>;
@group(0) @binding(4) var<storage, read> Mk: array<f32>;

fn attn_weight(pb: u32, row: u32, j: u32, s: f32) -> f32 {
  let b = pw(14u) + pb;
  let i = pw(31u) + row;
  return attn_weight_of(14u, b, i, j, s, Lse[pw(26u) + b * pw(16u) + i]);
}
