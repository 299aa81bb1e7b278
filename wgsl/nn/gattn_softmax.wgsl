// Attention by products (vtl/backends/_common/gemm_attention.py; the wgpu side:
// vtl/backends/wgpu/_gemm_attention.py): the softmax of a chunk's scores ((entries, R, C)
// row-major, in place: the queries i0 .. i0 + R - 1 of L, the first C of the S keys) of
// scores * scale + mask, keys after the query's position masked when causal; each row's
// log-sum-exp into lse ((B, L)), +inf and zeros for a row with no key. The dropout variant
// writes the weights times their dropout factors (attention_dropout.wgsl; the log-sum-exp
// is the undropped one's). TPR invocations a row, 256 / TPR rows a workgroup (TPR: the
// fewest of 32, 64, 128, 256 that hold the row in registers, sixteen keys each: one read
// and one write of the scores); a row longer than 4096 keys takes a workgroup and is read
// three times.
// Words: 0 the chunk's first batch entry b0, 1 B2, 2 L, 3 S, 4-7 the mask's element strides
//        (b / B2, b % B2, query, key), 8 has mask, 9 causal, 10 scale (float32 bits),
//        11 offset of the scores, 12 offset of lse, 13 offset of the mask, 14 rows, 15 R,
//        16 i0, 17 C; the dropout variant: 20..27 (DROP_AT)
// (wreduce: wgsl/math/workgroup_reduce.wgsl)
@group(0) @binding(0) var<storage, read_write> Sc: array<f32>;
@group(0) @binding(1) var<storage, read_write> Lse: array<f32>;
@group(0) @binding(2) var<storage, read> Mk: array<f32>;

const DROPOUT = {{DROPOUT}};
const DROP_AT = 20u;
const TPR = {{TPR}};  // invocations a row
const SLOTS = {{SLOTS}}u;  // keys an invocation holds
{{DROP}}

// the key of slot t of lane `lane` of a row held in registers: keys lane + t * TPR, or with
// dropout four adjacent keys a Philox block, 4 * (lane + (t / 4) * TPR) + t % 4
fn key_of(lane: u32, t: u32) -> u32 {
  if (DROPOUT) { return 4u * (lane + (t / 4u) * TPR) + t % 4u; }
  return lane + t * TPR;
}

// the masked, scaled score of key j (-inf where masked)
fn score(at: u32, mrow: u32, j: u32, scale: f32) -> f32 {
  let x = Sc[at + j] * scale;
  if (pw(8u) == 0u) { return x; }
  let mv = Mk[mrow + j * pw(7u)];
  return select(x + mv, -f32_inf(), mv == -f32_inf());
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let lane = lid % TPR;
  let row = (wid.y * nwg.x + wid.x) * (256u / TPR) + lid / TPR;
  let valid = row < pw(14u);
  let L = pw(2u);
  let C = pw(17u);
  let bl = row / pw(15u);
  let i = pw(16u) + row - bl * pw(15u);
  let b = pw(0u) + bl;
  let b1 = b / pw(1u);
  let mrow = pw(13u) + b1 * pw(4u) + (b - b1 * pw(1u)) * pw(5u) + i * pw(6u);
  let base = pw(11u) + row * C;
  var end = select(0u, C, valid);
  if (pw(9u) != 0u) { end = min(end, i + 1u); }
  let scale = bitcast<f32>(pw(10u));
  var m = -f32_inf();
  var l = 0.0;
  if (C <= TPR * SLOTS) {
    var xs: array<f32, SLOTS>;
    /* unroll */ for (var t = 0u; t < {{SLOTS}}u; t++) {
      let j = key_of(lane, t);
      var x = -f32_inf();
      if (j < end) { x = score(base, mrow, j, scale); }
      xs[t] = x;
      m = max(m, x);
    }
    m = wreduce(lid, lane, m, TPR, true);
    let dead = m == -f32_inf();
    /* unroll */ for (var t = 0u; t < {{SLOTS}}u; t++) {
      let e = select(exp(xs[t] - m), 0.0, dead || xs[t] == -f32_inf());
      xs[t] = e;
      l += e;
    }
    l = wreduce(lid, lane, l, TPR, false);
    if (valid) {
      if (DROPOUT) {
        /* unroll */ for (var q = 0u; q < 4u; q++) {
          let j = key_of(lane, 4u * q);
          if (j < C) {
            let p = select(vec4<f32>(xs[4u * q], xs[4u * q + 1u], xs[4u * q + 2u],
                                     xs[4u * q + 3u]) / l, vec4<f32>(0.0), dead);
            let z = drop4(p, b * L + i, j);
            for (var t = 0u; t < 4u; t++) {
              if (j + t < C) { Sc[base + j + t] = p[t] * z[t]; }
            }
          }
        }
      } else {
        /* unroll */ for (var t = 0u; t < {{SLOTS}}u; t++) {
          let j = key_of(lane, t);
          if (j < C) { Sc[base + j] = select(xs[t] / l, 0.0, dead); }
        }
      }
    }
  } else {  // TPR is 256 here: one row a workgroup
    for (var j = lane; j < end; j += TPR) {
      let x = score(base, mrow, j, scale);
      Sc[base + j] = x;
      m = max(m, x);
    }
    m = wreduce(lid, lane, m, TPR, true);
    let dead = m == -f32_inf();
    for (var j = lane; j < end; j += TPR) {
      let x = Sc[base + j];
      l += select(exp(x - m), 0.0, dead || x == -f32_inf());
    }
    l = wreduce(lid, lane, l, TPR, false);
    if (valid) {
      if (DROPOUT) {  // four adjacent keys an invocation: one Philox block for their factors
        for (var j = lane * 4u; j < C; j += 4u * TPR) {
          var p = vec4<f32>(0.0);
          for (var t = 0u; t < 4u; t++) {
            if (!dead && j + t < end) {
              let x = Sc[base + j + t];
              p[t] = select(exp(x - m) / l, 0.0, x == -f32_inf());
            }
          }
          let z = drop4(p, b * L + i, j);
          for (var t = 0u; t < 4u; t++) {
            if (j + t < C) { Sc[base + j + t] = p[t] * z[t]; }
          }
        }
      } else {
        for (var j = lane; j < C; j += TPR) {
          var p = 0.0;
          if (!dead && j < end) {
            let x = Sc[base + j];
            p = select(exp(x - m) / l, 0.0, x == -f32_inf());
          }
          Sc[base + j] = p;
        }
      }
    }
  }
  if (valid && lane == 0u) {
    Lse[pw(12u) + b * L + i] = select(m + log(l), f32_inf(), m == -f32_inf());
  }
}
