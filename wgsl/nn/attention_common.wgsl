// What the attention kernels (attention_fwd, attention_bwd_dq, attention_bwd_dkv;
// vtl/backends/wgpu/attention.py) share. They compute in float32 whatever the storage type.
// Words: 0 B (batch entries: batch * heads), 1 B2 (heads), 2 L, 3 S, 4 flags (1: additive mask,
// 2: causal), 5 scale (f32 bits), 6 workgroups per batch entry, 7 offset of q, 8 of k, 9 of v,
// 10 of the mask, 11..14 the mask's strides (elements, signed, 0 where it broadcasts) over
// (batch[0], batch[1], L, S), 15 offset of dO, 16 of O, 17 of the log-sum-exp, 18 of delta,
// 19 and 20 of the outputs (O; dQ; dK and dV); the dropout variant: 21..28
// (attention_dropout.wgsl, its DROP placeholder below; empty in the plain variant).
// Operand layout: with flag 4 clear, batch entry b's rows are contiguous (b * rows + r) * width.
// With flag 4 (token layout: multi-head self-attention's packed projection), each operand is a
// column block of an (N, T, C) array ((T, N, C) with flag 8): entry b = n * heads + h, row r is
// token r of batch n at columns h * width; C is word 29 for q, k and v, 30 for O and dO and 31
// for the gradients dQ, dK and dV.

const DROP_AT = 21u;  // the dropout variant's first word (attention_dropout.wgsl)

// the element offset of row 0 of batch entry b of an operand at `off` (rows of `width`
// elements, `rows` of them; C at word c in the token layout)
fn row0(off: u32, b: u32, rows: u32, width: u32, c: u32) -> u32 {
  let fl = pw(4u);
  if ((fl & 4u) == 0u) { return off + b * rows * width; }
  let n = b / pw(1u);
  let h = b - n * pw(1u);
  if ((fl & 8u) == 0u) { return off + n * rows * pw(c) + h * width; }
  return off + n * pw(c) + h * width;
}

// the distance between an operand's consecutive rows (see row0)
fn rstride(width: u32, c: u32) -> u32 {
  let fl = pw(4u);
  if ((fl & 4u) == 0u) { return width; }
  if ((fl & 8u) == 0u) { return pw(c); }
  return (pw(0u) / pw(1u)) * pw(c);
}

fn ninf() -> f32 { return -f32_inf(); }

fn max4(v: vec4<f32>) -> f32 { return max(max(v.x, v.y), max(v.z, v.w)); }

fn sum4(v: vec4<f32>) -> f32 { return (v.x + v.y) + (v.z + v.w); }

// the mask's element offset of query 0, key 0 of batch entry b
fn mask_base(b: u32) -> i32 {
  let b1 = b / pw(1u);
  return pi(10u) + i32(b1) * pi(11u) + i32(b - b1 * pw(1u)) * pi(12u);
}

// the score of query i and key j from their product: -inf out of range, above the causal
// diagonal or where the mask is -inf
fn score(acc: f32, i: u32, j: u32, mb: i32) -> f32 {
  let fl = pw(4u);
  if (i >= pw(2u) || j >= pw(3u) || ((fl & 2u) != 0u && j > i)) { return ninf(); }
  var x = acc * bitcast<f32>(pw(5u));
  if ((fl & 1u) != 0u) {
    let m = f32(Mk[u32(mb + i32(i) * pi(13u) + i32(j) * pi(14u))]);
    if (m == ninf()) { return ninf(); }
    x += m;
  }
  return x;
}

// where batch entry b's q, k, v and dO rows start, and their row strides (see row0)
struct Operands { q: u32, k: u32, v: u32, g: u32, qs: u32, vs: u32, gs: u32 }

fn operands(b: u32) -> Operands {
  return Operands(row0(pw(7u), b, pw(2u), D, 29u), row0(pw(8u), b, pw(3u), D, 29u),
                  row0(pw(9u), b, pw(3u), DV, 29u), row0(pw(15u), b, pw(2u), DV, 30u),
                  rstride(D, 29u), rstride(DV, 29u), rstride(DV, 30u));
}

// the scores of query i and keys j .. j + 3
fn score_keys(acc: vec4<f32>, i: u32, j: u32, mb: i32) -> vec4<f32> {
  return vec4<f32>(score(acc.x, i, j, mb), score(acc.y, i, j + 1u, mb),
                   score(acc.z, i, j + 2u, mb), score(acc.w, i, j + 3u, mb));
}

// the scores of queries i .. i + 3 and key j
fn score_queries(acc: vec4<f32>, i: u32, j: u32, mb: i32) -> vec4<f32> {
  return vec4<f32>(score(acc.x, i, j, mb), score(acc.y, i + 1u, j, mb),
                   score(acc.z, i + 2u, j, mb), score(acc.w, i + 3u, j, mb));
}

// exp(x - r) for the scores x that are not -inf, 0 for those that are (r finite)
fn pexp(x: vec4<f32>, r: f32) -> vec4<f32> {
  return select(exp(x - r), vec4<f32>(0.0), x == vec4<f32>(ninf()));
}

// the workgroup's batch entry and tile: (b, tile), b >= B for the grid's spare groups
fn wg_tile(wid: vec3<u32>, nwg: vec3<u32>) -> vec2<u32> {
  let g = wid.y * nwg.x + wid.x;
  let b = g / pw(6u);
  return vec2<u32>(b, g - b * pw(6u));
}

{{DROP}}
