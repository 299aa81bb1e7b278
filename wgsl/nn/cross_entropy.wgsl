// Cross-entropy of logit rows against class indices (vtl/backends/wgpu/nn.py).
// Row m: x[c] = X[offX + m*sXm + c*sXc], target t = Tg[offT + m*sT]. As the portable
// log_softmax/nll_loss: sh = max(x) (0 when not finite), s = sum(exp(x - sh)),
// loss = -((x[t] - sh) - log(s)), 0 where t == ignore_index (weight 0, else 1); a target
// outside [0, C) gives nan and records itself as the first error in err (see
// vtl/backends/wgpu/_errors.py) unless one is recorded. S[2m] = sh, S[2m+1] = s for the
// gradient; S[2M] = total weight. Pass 0: one thread per row over nwg workgroups: per-row
// losses into L (mode 0) or the sum (mode 1) / weighted mean (mode 2) into L[offL] (one
// workgroup) or partial sums into S[2M+1+2w], S[2M+2+2w]; pass 1 (one workgroup) folds
// `parts` of those into L[offL] and S[2M].
// EXP/LOG: the builtins, or for float64 the m64_ library's (WGSL has no f64 exp and log).
// Words: 0 M, 1 C, 2 offX, 3 sXm, 4 sXc, 5 offT, 6 sT, 7 mode, 8 pass, 9 parts, 10 offL,
// 11 has_ignore, 12.. ignore_index (in the target's dtype: 12 and 13), 14 error code
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> Tg: array<{{TI}}>;
@group(0) @binding(2) var<storage, read_write> L: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> S: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> err: array<atomic<u32>>;
var<workgroup> wl: array<{{T}}, 256>;
var<workgroup> ww: array<{{T}}, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let M = pw(0u);
  let C = pw(1u);
  let mode = pw(7u);
  var ls = {{T}}(0);
  var lw = {{T}}(0);
  if (pw(8u) == 0u) {
    let sc = pi(4u);
    for (var m = wid.x * 256u + lid; m < M; m += nwg.x * 256u) {
      let base = pi(2u) + i32(m) * pi(3u);
      var mx = -inf_{{D}}();
      for (var c = 0u; c < C; c++) {
        let v = X[u32(base + i32(c) * sc)];
        if (isnan_{{D}}(v) || v > mx) { mx = v; }
      }
      var sh = mx;
      if (isnan_{{D}}(mx) || isinf_{{D}}(mx)) { sh = {{T}}(0); }
      var s = {{T}}(0);
      for (var c = 0u; c < C; c++) {
        s += {{EXP}}(X[u32(base + i32(c) * sc)] - sh);
      }
      S[2u * m] = sh;
      S[2u * m + 1u] = s;
      let tv = Tg[pw(5u) + m * pw(6u)];
      var loss = {{T}}(0);
      var w = {{T}}(0);
      if (!(pw(11u) != 0u && tv == scal_{{DTI}}(12u))) {
        w = {{T}}(1);
        if ({{INRANGE}}) {
          loss = -((X[u32(base + i32(tv) * sc)] - sh) - {{LOG}}(s));
        } else {
          loss = nan_{{D}}();
          let v = tv;
          loop {
            let r = atomicCompareExchangeWeak(&err[0], 0u, 1u);
            if (r.exchanged) {
              atomicStore(&err[1], {{LO}});
              atomicStore(&err[2], {{HI}});
              atomicStore(&err[3], C);
              atomicStore(&err[4], 1u);
              atomicStore(&err[5], pw(14u));
              break;
            }
            if (r.old_value != 0u) { break; }
          }
        }
      }
      if (mode == 0u) {
        L[pw(10u) + m] = loss;
      }
      ls += loss;
      lw += w;
    }
  } else {
    let P = pw(9u);
    for (var p = lid; p < P; p += 256u) {
      ls += S[2u * M + 1u + 2u * p];
      lw += S[2u * M + 2u + 2u * p];
    }
  }
  if (mode == 0u) { return; }
  wl[lid] = ls;
  ww[lid] = lw;
  workgroupBarrier();
  for (var h = 128u; h > 0u; h >>= 1u) {
    if (lid < h) {
      wl[lid] += wl[lid + h];
      ww[lid] += ww[lid + h];
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    if (pw(8u) == 0u && nwg.x > 1u) {
      S[2u * M + 1u + 2u * wid.x] = wl[0];
      S[2u * M + 2u + 2u * wid.x] = ww[0];
    } else {
      L[pw(10u)] = select(wl[0], wl[0] / ww[0], mode == 2u);
      S[2u * M] = ww[0];
    }
  }
}
