// Gradient of cross_entropy (wgsl/cross_entropy.wgsl) with respect to the logits:
// O[m, c] = g_m * (exp(x[c] - S[2m]) / S[2m+1] - [c == t]), divided by the total weight
// S[2M] for the mean, 0 where t == ignore_index, nan for a target outside [0, C).
// g_m = G[offG + m*sG] (sG = 0: one upstream value). O is contiguous (M, C).
// EXP: exp, or m64_exp for float64 (as cross_entropy.wgsl).
// Words: 0 M, 1 C, 2 offX, 3 sXm, 4 sXc, 5 offT, 6 sT, 7 mode, 8 offG, 9 sG,
// 10 has_ignore, 11.. ignore_index
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> Tg: array<{{TI}}>;
@group(0) @binding(2) var<storage, read> S: array<{{T}}>;
@group(0) @binding(3) var<storage, read> G: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> O: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  let M = pw(0u);
  let C = pw(1u);
  if (i >= M * C) { return; }
  let m = i / C;
  let c = i - m * C;
  let tv = Tg[pw(5u) + m * pw(6u)];
  var r = {{T}}(0);
  if (!(pw(10u) != 0u && tv == scal_{{DTI}}(11u))) {
    if ({{INRANGE}}) {
      var g = G[pw(8u) + m * pw(9u)];
      if (pw(7u) == 2u) { g = g / S[2u * M]; }
      let x = X[u32(pi(2u) + i32(m) * pi(3u) + i32(c) * pi(4u))];
      let p = {{EXP}}(x - S[2u * m]) / S[2u * m + 1u];
      r = (p - select({{T}}(0), {{T}}(1), u32(tv) == c)) * g;
    } else {
      r = nan_{{D}}();
    }
  }
  O[i] = r;
}
