// Attention by products (vtl/backends/_common/gemm_attention.py; the wgpu side:
// vtl/backends/wgpu/_gemm_attention.py): the softmax of a chunk's scores ((entries, R, C)
// row-major, in place: the queries i0 .. i0 + R - 1 of L, the first C of the S keys) of
// scores * scale + mask, keys after the query's position masked when causal; each row's
// log-sum-exp into lse ((B, L)), +inf and zeros for a row with no key. The dropout variant
// writes the weights times their dropout factors (attention_dropout.wgsl; the log-sum-exp
// is the undropped one's). A workgroup per row; a row of up to 2048 keys is held in
// registers, eight keys a thread (one read and one write of the scores), a longer one read
// three times.
// Words: 0 the chunk's first batch entry b0, 1 B2, 2 L, 3 S, 4-7 the mask's element strides
//        (b / B2, b % B2, query, key), 8 has mask, 9 causal, 10 scale (float32 bits),
//        11 offset of the scores, 12 offset of lse, 13 offset of the mask, 14 rows, 15 R,
//        16 i0, 17 C; the dropout variant: 20..27 (DROP_AT)
// (wsum/wmax: wgsl/math/workgroup_reduce.wgsl)
@group(0) @binding(0) var<storage, read_write> Sc: array<f32>;
@group(0) @binding(1) var<storage, read_write> Lse: array<f32>;
@group(0) @binding(2) var<storage, read> Mk: array<f32>;

const DROPOUT = {{DROPOUT}};
const DROP_AT = 20u;
{{DROP}}

// the key of slot t (0..7) of invocation lid in a row held in registers
fn key_of(lid: u32, t: u32) -> u32 {
  if (DROPOUT) { return 4u * (lid + (t / 4u) * 256u) + t % 4u; }
  return lid + t * 256u;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= pw(14u)) { return; }
  let L = pw(2u);
  let C = pw(17u);
  let bl = row / pw(15u);
  let i = pw(16u) + row - bl * pw(15u);
  let b = pw(0u) + bl;
  let b1 = b / pw(1u);
  let mrow = pw(13u) + b1 * pw(4u) + (b - b1 * pw(1u)) * pw(5u) + i * pw(6u);
  let base = pw(11u) + row * C;
  var end = C;
  if (pw(9u) != 0u) { end = min(C, i + 1u); }
  let scale = bitcast<f32>(pw(10u));
  let has_mask = pw(8u) != 0u;
  var m = -f32_inf();
  var l = 0.0;
  if (C <= 2048u) {
    // key slots: keys lid + t * 256, or with dropout four adjacent keys a Philox block,
    // keys 4 * (lid + (t / 4) * 256) + t % 4
    var xs: array<f32, 8>;
    /* unroll */ for (var t = 0u; t < 8u; t++) {
      let j = key_of(lid, t);
      var x = -f32_inf();
      if (j < end) {
        x = Sc[base + j] * scale;
        if (has_mask) {
          let mv = Mk[mrow + j * pw(7u)];
          x = select(x + mv, -f32_inf(), mv == -f32_inf());
        }
      }
      xs[t] = x;
      m = max(m, x);
    }
    m = wmax(lid, m);
    let dead = m == -f32_inf();
    /* unroll */ for (var t = 0u; t < 8u; t++) {
      let e = select(exp(xs[t] - m), 0.0, dead || xs[t] == -f32_inf());
      xs[t] = e;
      l += e;
    }
    l = wsum(lid, l);
    if (DROPOUT) {
      /* unroll */ for (var q = 0u; q < 2u; q++) {
        let j = key_of(lid, 4u * q);
        let p = select(vec4<f32>(xs[4u * q], xs[4u * q + 1u], xs[4u * q + 2u], xs[4u * q + 3u]) / l,
                       vec4<f32>(0.0), dead);
        if (j < C) {
          let z = drop4(p, b * L + i, j);
          for (var t = 0u; t < 4u; t++) {
            if (j + t < C) { Sc[base + j + t] = p[t] * z[t]; }
          }
        }
      }
    } else {
      /* unroll */ for (var t = 0u; t < 8u; t++) {
        let j = key_of(lid, t);
        if (j < C) { Sc[base + j] = select(xs[t] / l, 0.0, dead); }
      }
    }
  } else {
    for (var j = lid; j < end; j += 256u) {
      var x = Sc[base + j] * scale;
      if (has_mask) {
        let mv = Mk[mrow + j * pw(7u)];
        x = select(x + mv, -f32_inf(), mv == -f32_inf());
      }
      Sc[base + j] = x;
      m = max(m, x);
    }
    m = wmax(lid, m);
    let dead = m == -f32_inf();
    for (var j = lid; j < end; j += 256u) {
      let x = Sc[base + j];
      l += select(exp(x - m), 0.0, dead || x == -f32_inf());
    }
    l = wsum(lid, l);
    if (DROPOUT) {  // four adjacent keys an invocation: one Philox block for their factors
      for (var j = lid * 4u; j < C; j += 1024u) {
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
      for (var j = lid; j < C; j += 256u) {
        var p = 0.0;
        if (!dead && j < end) {
          let x = Sc[base + j];
          p = select(exp(x - m) / l, 0.0, x == -f32_inf());
        }
        Sc[base + j] = p;
      }
    }
  }
  if (lid == 0u) { Lse[pw(12u) + b * L + i] = select(m + log(l), f32_inf(), m == -f32_inf()); }
}
