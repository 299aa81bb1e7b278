// Attention by products, backward (see gattn_softmax.wgsl): for each of a chunk's scores,
// p = exp(scores * scale + mask - lse) (0 where masked or the row has no key) in place of the
// scores and p (dp - delta) * scale in place of dp; the dropout variant p z and
// p (dp z - delta) * scale, z the weight's dropout factor (attention_dropout.wgsl: dp is
// then the gradient of the dropped weights). An invocation per score, four adjacent keys of
// a row with dropout.
// Words: 0-10 as gattn_softmax.wgsl, 11 offset of the scores, 12 offset of lse,
//        13 offset of the mask, 14 invocations, 15 R, 16 i0, 17 C, 18 offset of dp,
//        19 offset of delta; the dropout variant: 20..27 (DROP_AT)
@group(0) @binding(0) var<storage, read_write> Sc: array<f32>;
@group(0) @binding(1) var<storage, read_write> Dp: array<f32>;
@group(0) @binding(2) var<storage, read> Lse: array<f32>;
@group(0) @binding(3) var<storage, read> Delta: array<f32>;
@group(0) @binding(4) var<storage, read> Mk: array<f32>;

const DROPOUT = {{DROPOUT}};
const DROP_AT = 20u;
{{DROP}}

{{WEIGHT}}

// the weight of key j of row i of batch entry b (0 where masked or the row has no key)
fn weight(b: u32, i: u32, j: u32, e: u32, li: f32) -> f32 {
  return attn_weight_of(0u, b, i, j, Sc[pw(11u) + e], li);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let e = linear_id(wid, nwg, lid);
  if (e >= pw(14u)) { return; }
  let L = pw(2u);
  let C = pw(17u);
  let scale = bitcast<f32>(pw(10u));
  let per = select(C, (C + 3u) / 4u, DROPOUT);  // invocations per row
  let row = e / per;
  let j0 = (e - row * per) * select(1u, 4u, DROPOUT);
  let bl = row / pw(15u);
  let i = pw(16u) + row - bl * pw(15u);
  let b = pw(0u) + bl;
  let at = b * L + i;
  let li = Lse[pw(12u) + at];
  if (DROPOUT) {
    var p = vec4<f32>(0.0);
    for (var t = 0u; t < 4u; t++) {
      if (j0 + t < C) { p[t] = weight(b, i, j0 + t, row * C + j0 + t, li); }
    }
    let z = drop4(p, at, j0);
    let dl = Delta[pw(19u) + at];
    for (var t = 0u; t < 4u; t++) {
      if (j0 + t < C) {
        let f = row * C + j0 + t;
        Sc[pw(11u) + f] = p[t] * z[t];
        let o = pw(18u) + f;
        Dp[o] = p[t] * (Dp[o] * z[t] - dl) * scale;
      }
    }
  } else {
    let p = weight(b, i, j0, e, li);
    Sc[pw(11u) + e] = p;
    let o = pw(18u) + e;
    Dp[o] = p * (Dp[o] - Delta[pw(19u) + at]) * scale;
  }
}
