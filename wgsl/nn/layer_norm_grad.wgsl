// The input gradient of layer_norm.wgsl, TPR invocations a row, 256 / TPR rows a workgroup
// (vtl/backends/wgpu/_row_lanes.py; a row of up to TPR * SLOTS elements held in registers,
// a longer one read twice): with xhat = (x - mean) rstd and gw = g w,
// dx = rstd (gw - mean(gw) - xhat mean(gw xhat)). With flag 4 (rms_norm, whose mean is 0)
// the mean(gw) term is left out. Stored as T, computed in C (float32 for float16/bfloat16:
// S is float32, dx is rounded once). The weight's and bias's gradients:
// layer_norm_params.wgsl.
// Words: 0 M, 1 N, 2 offset x, 3 offset w, 4 offset g, 5 offset S (mean, rstd pairs),
//        6 offset dx, 7 flags (1: w, 4: no centring)
// (wreduce: wgsl/math/workgroup_reduce.wgsl)
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> Wt: array<{{T}}>;
@group(0) @binding(2) var<storage, read> G: array<{{T}}>;
@group(0) @binding(3) var<storage, read> S: array<{{C}}>;
@group(0) @binding(4) var<storage, read_write> DX: array<{{T}}>;

const TPR = {{TPR}};  // invocations a row
const SLOTS = {{SLOTS}}u;  // elements an invocation holds

// (xhat, g w) of element j of the row at xb, gb
fn xhat_gw(xb: u32, gb: u32, j: u32, mu: {{C}}, r: {{C}}) -> vec2<{{C}}> {
  var gw = {{C}}(G[gb + j]);
  if ((pw(7u) & 1u) != 0u) { gw *= {{C}}(Wt[pw(3u) + j]); }
  return vec2<{{C}}>(({{C}}(X[xb + j]) - mu) * r, gw);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let lane = lid % TPR;
  let row = (wid.y * nwg.x + wid.x) * (256u / TPR) + lid / TPR;
  let valid = row < pw(0u);
  let N = pw(1u);
  let end = select(0u, N, valid);  // a row past the last has no elements
  let xb = pw(2u) + row * N;
  let gb = pw(4u) + row * N;
  let db = pw(6u) + row * N;
  let sr = select(0u, row, valid);
  let mu = S[pw(5u) + 2u * sr];
  let r = S[pw(5u) + 2u * sr + 1u];
  let centre = (pw(7u) & 4u) == 0u;
  var c1 = {{C}}(0);
  var c2 = {{C}}(0);
  if (N <= TPR * SLOTS) {
    var hv: array<vec2<{{C}}>, SLOTS>;
    /* unroll */ for (var k = 0u; k < {{SLOTS}}u; k++) {
      let j = lane + k * TPR;
      if (j < end) {
        let h = xhat_gw(xb, gb, j, mu, r);
        hv[k] = h;
        c1 += h.y;
        c2 += h.y * h.x;
      }
    }
    let m1 = select({{C}}(0), wreduce(lid, lane, c1, TPR, false) / {{C}}(N), centre);
    let m2 = wreduce(lid, lane, c2, TPR, false) / {{C}}(N);
    /* unroll */ for (var k = 0u; k < {{SLOTS}}u; k++) {
      let j = lane + k * TPR;
      if (j < end) { DX[db + j] = wrap_{{D}}({{T}}(r * (hv[k].y - m1 - hv[k].x * m2))); }
    }
    return;
  }
  for (var j = lane; j < end; j += TPR) {
    let h = xhat_gw(xb, gb, j, mu, r);
    c1 += h.y;
    c2 += h.y * h.x;
  }
  let m1 = select({{C}}(0), wreduce(lid, lane, c1, TPR, false) / {{C}}(N), centre);
  let m2 = wreduce(lid, lane, c2, TPR, false) / {{C}}(N);
  for (var j = lane; j < end; j += TPR) {
    let h = xhat_gw(xb, gb, j, mu, r);
    DX[db + j] = wrap_{{D}}({{T}}(r * (h.y - m1 - h.x * m2)));
  }
}
