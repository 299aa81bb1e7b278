// Dropout of the attention weights: the dropout variant of the attention kernels
// (vtl/backends/wgpu/attention.py) takes it as part of attention_common (its DROP
// placeholder), the plain variant nothing; the kernels of attention by products
// (gattn_softmax.wgsl, gattn_dsoftmax.wgsl) include it too. The bits are vtl.random's:
// weight (b, i, j), flat index f = (b L + i) S + j, uses word f % 4 of Philox-4x32-10 block
// counter + f / 4; it is kept when (word >> 8) >= the threshold and then scaled by
// 1 / (1 - p).
// Words: 3 S; from the kernel's const DROP_AT (attention_common: 21): the draw's counter (4
// limbs, low first), its key (2), the keep threshold, the scale (f32 bits).

{{PHILOX}}

// the dropout factors (0 or the scale) of the weights of row `row` (b L + i) and keys
// j .. j + 3 whose probabilities are `p`: one Philox block, two where the four straddle a
// block's end; zeros, with nothing drawn, when every p is 0
fn drop4(p: vec4<f32>, row: u32, j: u32) -> vec4<f32> {
  if (all(p == vec4<f32>(0.0))) { return vec4<f32>(0.0); }
  let rs = mulhilo(row, pw(3u));  // row * S, 64 bits
  let lo = rs.y + j;
  let blk = ((rs.x + select(0u, 1u, lo < j)) << 30u) | (lo >> 2u);
  let ctr = vec4<u32>(pw(DROP_AT), pw(DROP_AT + 1u), pw(DROP_AT + 2u), pw(DROP_AT + 3u));
  let w0 = philox_block(ctr, blk, pw(DROP_AT + 4u), pw(DROP_AT + 5u));
  var w = w0;
  let o = lo & 3u;
  if (o != 0u) {
    let w1 = philox_block(ctr, blk + 1u, pw(DROP_AT + 4u), pw(DROP_AT + 5u));
    w = select(select(vec4<u32>(w0.w, w1.xyz), vec4<u32>(w0.zw, w1.xy), o == 2u),
               vec4<u32>(w0.yzw, w1.x), o == 1u);
  }
  return select(vec4<f32>(0.0), vec4<f32>(bitcast<f32>(pw(DROP_AT + 7u))),
                (w >> vec4<u32>(8u)) >= vec4<u32>(pw(DROP_AT + 6u)));
}
