// Layer normalisation of the rows of contiguous (M, N) data (vtl/backends/wgpu/nn.py): TPR
// invocations a row, 256 / TPR rows a workgroup (vtl/backends/wgpu/_row_lanes.py); the
// mean, then the biased variance of the deviations (two passes over the row, held in
// registers up to TPR * SLOTS loads, else read again);
// rstd = 1 / sqrt(var + eps); y = (x - mean) * rstd * w + b. S[2m] = mean, S[2m+1] = rstd.
// Arrays are stored as T and computed in C (float32 for float16/bfloat16, whose statistics
// S stay float32), each output rounded once.
// A load is W elements: V is T or vec4<T> (and VC is C or vec4<C>), HSUM adds the W
// components of v, STORE(v) rounds a VC to V; with W = 4 the offsets are multiples of 4.
// With flag 4 (rms_norm) the mean is taken as 0: rstd = 1 / sqrt(mean(x^2) + eps).
// Words: 0 M, 1 N, 2 offset x, 3 offset w, 4 offset b, 5 offset y, 6 offset S,
//        7 flags (1: w, 2: b, 4: no centring), 8.. eps
// (wreduce: wgsl/math/workgroup_reduce.wgsl)
@group(0) @binding(0) var<storage, read> X: array<{{V}}>;
@group(0) @binding(1) var<storage, read> Wt: array<{{V}}>;
@group(0) @binding(2) var<storage, read> Bs: array<{{V}}>;
@group(0) @binding(3) var<storage, read_write> Y: array<{{V}}>;
@group(0) @binding(4) var<storage, read_write> S: array<{{C}}>;

const W = {{W}}u;  // elements a load
const TPR = {{TPR}};  // invocations a row
const SLOTS = {{SLOTS}}u;  // loads an invocation holds

fn hsum(v: {{VC}}) -> {{C}} { return {{HSUM}}; }

// load j of the row at yb of y from its normalised value
fn put(yb: u32, j: u32, xhat: {{VC}}) {
  var v = xhat;
  if ((pw(7u) & 1u) != 0u) { v *= {{VC}}(Wt[pw(3u) / W + j]); }
  if ((pw(7u) & 2u) != 0u) { v += {{VC}}(Bs[pw(4u) / W + j]); }
  Y[yb + j] = {{STORE}};
}

// 1 / sqrt(var + eps) of a row from each invocation's share q of its squared deviations
fn rstd(lid: u32, lane: u32, q: {{C}}, N: u32) -> {{C}} {
  return {{C}}(1) / sqrt(wreduce(lid, lane, q, TPR, false) / {{C}}(N) + {{C}}(scal_{{CD}}(8u)));
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let lane = lid % TPR;
  let row = (wid.y * nwg.x + wid.x) * (256u / TPR) + lid / TPR;
  let valid = row < pw(0u);
  let N = pw(1u);
  let NV = N / W;  // loads a row
  let end = select(0u, NV, valid);  // a row past the last has no elements
  let xb = pw(2u) / W + row * NV;
  let centre = (pw(7u) & 4u) == 0u;
  var mu = {{C}}(0);
  var q = {{C}}(0);
  var r = {{C}}(0);
  let yb = pw(5u) / W + row * NV;
  if (NV <= TPR * SLOTS) {  // the row in registers: one read of x
    var xv: array<{{VC}}, SLOTS>;
    var s = {{C}}(0);
    /* unroll */ for (var k = 0u; k < {{SLOTS}}u; k++) {
      let j = lane + k * TPR;
      var v = {{VC}}(0);
      if (j < end) { v = {{VC}}(X[xb + j]); }
      xv[k] = v;
      s += hsum(v);
    }
    if (centre) { mu = wreduce(lid, lane, s, TPR, false) / {{C}}(N); }
    /* unroll */ for (var k = 0u; k < {{SLOTS}}u; k++) {
      if (lane + k * TPR < end) {
        let d = xv[k] - {{VC}}(mu);
        q += hsum(d * d);
      }
    }
    r = rstd(lid, lane, q, N);
    /* unroll */ for (var k = 0u; k < {{SLOTS}}u; k++) {
      let j = lane + k * TPR;
      if (j < end) { put(yb, j, (xv[k] - {{VC}}(mu)) * r); }
    }
  } else {
    if (centre) {
      var s = {{C}}(0);
      for (var j = lane; j < end; j += TPR) { s += hsum({{VC}}(X[xb + j])); }
      mu = wreduce(lid, lane, s, TPR, false) / {{C}}(N);
    }
    for (var j = lane; j < end; j += TPR) {
      let d = {{VC}}(X[xb + j]) - {{VC}}(mu);
      q += hsum(d * d);
    }
    r = rstd(lid, lane, q, N);
    for (var j = lane; j < end; j += TPR) { put(yb, j, ({{VC}}(X[xb + j]) - {{VC}}(mu)) * r); }
  }
  if (valid && lane == 0u) {
    S[pw(6u) + 2u * row] = mu;
    S[pw(6u) + 2u * row + 1u] = r;
  }
}
