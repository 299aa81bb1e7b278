// The attention weight of score s (key j of query i of batch entry b, the row's log-sum-exp
// li): exp(s * scale + mask - li), 0 where masked or the row has no key (li = +inf). The
// geometry words from W on as gattn_softmax.wgsl's from 0 (W + 1 B2, W + 4-7 the mask's
// strides, W + 8 has mask, W + 9 causal, W + 10 scale, W + 13 offset of the mask); Mk is
// the including kernel's mask binding.
fn attn_weight_of(W: u32, b: u32, i: u32, j: u32, s: f32, li: f32) -> f32 {
  if (li == f32_inf() || (pw(W + 9u) != 0u && j > i)) { return 0.0; }
  var x = s * bitcast<f32>(pw(W + 10u));
  if (pw(W + 8u) != 0u) {
    let b1 = b / pw(W + 1u);
    let mv = Mk[pw(W + 13u) + b1 * pw(W + 4u) + (b - b1 * pw(W + 1u)) * pw(W + 5u)
                + i * pw(W + 6u) + j * pw(W + 7u)];
    if (mv == -f32_inf()) { return 0.0; }
    x += mv;
  }
  return exp(x - li);
}
