// Attention by products, backward (see gattn_softmax.wgsl): for each of a chunk's n scores,
// p = exp(scores * scale + mask - lse) (0 where masked or the row has no key) in place of the
// scores and p (dp - delta) * scale in place of dp. An invocation per score.
// Words: 0-10 as gattn_softmax.wgsl, 11 offset of the scores, 12 offset of lse,
//        13 offset of the mask, 14 n, 15 offset of dp, 16 offset of delta, 17 R, 18 i0
@group(0) @binding(0) var<storage, read_write> Sc: array<f32>;
@group(0) @binding(1) var<storage, read_write> Dp: array<f32>;
@group(0) @binding(2) var<storage, read> Lse: array<f32>;
@group(0) @binding(3) var<storage, read> Delta: array<f32>;
@group(0) @binding(4) var<storage, read> Mk: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let e = linear_id(wid, nwg, lid);
  if (e >= pw(14u)) { return; }
  let L = pw(2u);
  let S = pw(3u);
  let row = e / S;
  let j = e - row * S;
  let bl = row / pw(17u);
  let i = pw(18u) + row - bl * pw(17u);
  let b = pw(0u) + bl;
  let at = b * L + i;
  let li = Lse[pw(12u) + at];
  var p = 0.0;
  if (li != f32_inf() && !(pw(9u) != 0u && j > i)) {
    var x = Sc[pw(11u) + e] * bitcast<f32>(pw(10u));
    var masked = false;
    if (pw(8u) != 0u) {
      let b1 = b / pw(1u);
      let mv = Mk[pw(13u) + b1 * pw(4u) + (b - b1 * pw(1u)) * pw(5u) + i * pw(6u)
                  + j * pw(7u)];
      masked = mv == -f32_inf();
      x += mv;
    }
    p = select(exp(x - li), 0.0, masked);
  }
  Sc[pw(11u) + e] = p;
  let o = pw(15u) + e;
  Dp[o] = p * (Dp[o] - Delta[pw(16u) + at]) * bitcast<f32>(pw(10u));
}
