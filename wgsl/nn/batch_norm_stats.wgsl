// Batch norm statistics, stage 2: an invocation per channel adds the slabs in order and writes
// the rows of St: mean, biased variance, rstd = 1 / sqrt(var + eps), scale = rstd * w, bias
// (b or 0). Words: 0 C, 1 HW, 2 NHW, 3 S, 4 flags (1 w, 2 b), 5 offset x, 6 offset w,
// 7 offset b, 8 offset St, 9 offset Part, 10.. eps
@group(0) @binding(0) var<storage, read> Part: array<{{C}}>;
@group(0) @binding(1) var<storage, read> X: array<{{T}}>;
@group(0) @binding(2) var<storage, read> Wt: array<{{C}}>;
@group(0) @binding(3) var<storage, read> Bs: array<{{C}}>;
@group(0) @binding(4) var<storage, read_write> St: array<{{C}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let c = linear_id(wid, nwg, lid);
  let C = pw(0u);
  if (c >= C) { return; }
  let S = pw(3u);
  let n = {{C}}(pw(2u));
  var s0 = {{C}}(0);
  var s1 = {{C}}(0);
  for (var s = 0u; s < S; s++) {
    s0 += Part[pw(9u) + (c * S + s) * 2u];
    s1 += Part[pw(9u) + (c * S + s) * 2u + 1u];
  }
  let m = s0 / n;
  var var_ = s1 / n - m * m;
  if (var_ < {{C}}(0)) { var_ = {{C}}(0); }  // not max(): a nan variance stays nan
  let rstd = {{C}}(1) / sqrt(var_ + scal_{{CD}}(10u));
  let fl = pw(4u);
  var scale = rstd;
  if ((fl & 1u) != 0u) { scale = rstd * Wt[pw(6u) + c]; }
  var bias = {{C}}(0);
  if ((fl & 2u) != 0u) { bias = Bs[pw(7u) + c]; }
  let o = pw(8u);
  St[o + c] = {{C}}(X[pw(5u) + c * pw(1u)]) + m;
  St[o + C + c] = var_;
  St[o + 2u * C + c] = rstd;
  St[o + 3u * C + c] = scale;
  St[o + 4u * C + c] = bias;
}
