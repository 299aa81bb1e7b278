// Layer normalisation of the rows of contiguous (M, N) data (vtl/backends/wgpu/nn.py): one
// workgroup per row; the mean, then the biased variance of the deviations (two passes);
// rstd = 1 / sqrt(var + eps); y = (x - mean) * rstd * w + b. S[2m] = mean, S[2m+1] = rstd.
// With flag 4 (rms_norm) the mean is taken as 0: rstd = 1 / sqrt(mean(x^2) + eps).
// Words: 0 M, 1 N, 2 offset x, 3 offset w, 4 offset b, 5 offset y, 6 offset S,
//        7 flags (1: w, 2: b, 4: no centring), 8.. eps
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> Wt: array<{{T}}>;
@group(0) @binding(2) var<storage, read> Bs: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> Y: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> S: array<{{T}}>;
var<workgroup> red: array<{{T}}, 256>;

fn wsum(lid: u32, v: {{T}}) -> {{T}} {
  red[lid] = v;
  workgroupBarrier();
  for (var h = 128u; h > 0u; h >>= 1u) {
    if (lid < h) { red[lid] += red[lid + h]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= pw(0u)) { return; }
  let N = pw(1u);
  let xb = pw(2u) + row * N;
  let fl = pw(7u);
  var mu = {{T}}(0);
  if ((fl & 4u) == 0u) {
    var s = {{T}}(0);
    for (var j = lid; j < N; j += 256u) { s += X[xb + j]; }
    mu = wsum(lid, s) / {{T}}(N);
  }
  var q = {{T}}(0);
  for (var j = lid; j < N; j += 256u) {
    let d = X[xb + j] - mu;
    q += d * d;
  }
  let r = {{T}}(1) / sqrt(wsum(lid, q) / {{T}}(N) + scal_{{D}}(8u));
  let yb = pw(5u) + row * N;
  for (var j = lid; j < N; j += 256u) {
    var v = (X[xb + j] - mu) * r;
    if ((fl & 1u) != 0u) { v *= Wt[pw(3u) + j]; }
    if ((fl & 2u) != 0u) { v += Bs[pw(4u) + j]; }
    Y[yb + j] = v;
  }
  if (lid == 0u) {
    S[pw(6u) + 2u * row] = mu;
    S[pw(6u) + 2u * row + 1u] = r;
  }
}
