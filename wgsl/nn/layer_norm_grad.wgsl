// The input gradient of layer_norm.wgsl, TPR invocations a row, 256 / TPR rows a workgroup
// (vtl/backends/wgpu/_row_lanes.py; a row of up to TPR * SLOTS loads held in registers,
// a longer one read twice): with xhat = (x - mean) rstd and gw = g w,
// dx = rstd (gw - mean(gw) - xhat mean(gw xhat)). With flag 4 (rms_norm, whose mean is 0)
// the mean(gw) term is left out. Stored as T, computed in C (float32 for float16/bfloat16:
// S is float32, dx is rounded once). A load is W elements (V, VC, HSUM and STORE as in
// layer_norm.wgsl). The weight's and bias's gradients: layer_norm_params.wgsl.
// Words: 0 M, 1 N, 2 offset x, 3 offset w, 4 offset g, 5 offset S (mean, rstd pairs),
//        6 offset dx, 7 flags (1: w, 4: no centring)
// (wreduce: wgsl/math/workgroup_reduce.wgsl)
@group(0) @binding(0) var<storage, read> X: array<{{V}}>;
@group(0) @binding(1) var<storage, read> Wt: array<{{V}}>;
@group(0) @binding(2) var<storage, read> G: array<{{V}}>;
@group(0) @binding(3) var<storage, read> S: array<{{C}}>;
@group(0) @binding(4) var<storage, read_write> DX: array<{{V}}>;

const W = {{W}}u;  // elements a load
const TPR = {{TPR}};  // invocations a row
const SLOTS = {{SLOTS}}u;  // loads an invocation holds

fn hsum(v: {{VC}}) -> {{C}} { return {{HSUM}}; }

// xhat and g w of load j of the row at xb, gb
struct XG { xh: {{VC}}, gw: {{VC}} }
fn xhat_gw(xb: u32, gb: u32, j: u32, mu: {{C}}, r: {{C}}) -> XG {
  var gw = {{VC}}(G[gb + j]);
  if ((pw(7u) & 1u) != 0u) { gw *= {{VC}}(Wt[pw(3u) / W + j]); }
  return XG(({{VC}}(X[xb + j]) - {{VC}}(mu)) * r, gw);
}

fn dx_of(h: XG, r: {{C}}, m1: {{C}}, m2: {{C}}) -> {{V}} {
  let v = r * (h.gw - {{VC}}(m1) - h.xh * m2);
  return {{STORE}};
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
  let gb = pw(4u) / W + row * NV;
  let db = pw(6u) / W + row * NV;
  let sr = select(0u, row, valid);
  let mu = S[pw(5u) + 2u * sr];
  let r = S[pw(5u) + 2u * sr + 1u];
  let centre = (pw(7u) & 4u) == 0u;
  var c1 = {{C}}(0);
  var c2 = {{C}}(0);
  if (NV <= TPR * SLOTS) {
    var hv: array<XG, SLOTS>;
    /* unroll */ for (var k = 0u; k < {{SLOTS}}u; k++) {
      let j = lane + k * TPR;
      if (j < end) {
        let h = xhat_gw(xb, gb, j, mu, r);
        hv[k] = h;
        c1 += hsum(h.gw);
        c2 += hsum(h.gw * h.xh);
      }
    }
    let m1 = select({{C}}(0), wreduce(lid, lane, c1, TPR, false) / {{C}}(N), centre);
    let m2 = wreduce(lid, lane, c2, TPR, false) / {{C}}(N);
    /* unroll */ for (var k = 0u; k < {{SLOTS}}u; k++) {
      let j = lane + k * TPR;
      if (j < end) { DX[db + j] = dx_of(hv[k], r, m1, m2); }
    }
    return;
  }
  for (var j = lane; j < end; j += TPR) {
    let h = xhat_gw(xb, gb, j, mu, r);
    c1 += hsum(h.gw);
    c2 += hsum(h.gw * h.xh);
  }
  let m1 = select({{C}}(0), wreduce(lid, lane, c1, TPR, false) / {{C}}(N), centre);
  let m2 = wreduce(lid, lane, c2, TPR, false) / {{C}}(N);
  for (var j = lane; j < end; j += TPR) { DX[db + j] = dx_of(xhat_gw(xb, gb, j, mu, r), r, m1, m2); }
}
