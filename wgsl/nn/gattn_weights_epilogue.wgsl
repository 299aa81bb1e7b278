// Attention by products, backward (vtl/backends/wgpu/_gemm_attention.py): the epilogue of the
// product S = Q K^T (linalg/matmul*.wgsl) that stores the weights P of gattn_dsoftmax.wgsl in
// place of the scores: exp(s * scale + mask - lse), 0 where masked or the row has no key.
// The product's batch entry b is the attention's b0 + b, its row the query i0 + row and its
// column the key.
// Words (after the product's 14): 14 b0, 15 B2, 16 L, 17-20 the mask's element strides
//        (b / B2, b % B2, query, key), 21 has mask, 22 causal, 23 scale (float32 bits),
//        24 offset of lse, 25 offset of the mask, 26 i0
@group(0) @binding(3) var<storage, read> Lse: array<f32>;
@group(0) @binding(4) var<storage, read> Mk: array<f32>;

fn attn_weight(pb: u32, row: u32, j: u32, s: f32) -> f32 {
  let b = pw(14u) + pb;
  let i = pw(26u) + row;
  let li = Lse[pw(24u) + b * pw(16u) + i];
  if (li == f32_inf() || (pw(22u) != 0u && j > i)) { return 0.0; }
  var x = s * bitcast<f32>(pw(23u));
  if (pw(21u) != 0u) {
    let b1 = b / pw(15u);
    let mv = Mk[pw(25u) + b1 * pw(17u) + (b - b1 * pw(15u)) * pw(18u) + i * pw(19u) + j * pw(20u)];
    if (mv == -f32_inf()) { return 0.0; }
    x += mv;
  }
  return exp(x - li);
}
