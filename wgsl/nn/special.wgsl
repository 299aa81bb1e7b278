// erf and erfc and their gradients over contiguous float32 data (vtl/backends/wgpu/nn.py,
// kernel("special"); erf_f/erfc_f: wgsl/math/erfc32.wgsl).
// mode 0: y = erf(x); 1: y = erfc(x); 2: y = g 2 exp(-x^2) / sqrt(pi); 3: its negative.
// Words: 0 n, 1 mode, 2 offset x, 3 offset g, 4 offset y
@group(0) @binding(0) var<storage, read> X: array<f32>;
@group(0) @binding(1) var<storage, read> G: array<f32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(0u)) { return; }
  let mode = pw(1u);
  let x = X[pw(2u) + i];
  var y: f32;
  if (mode == 0u) {
    y = erf_f(x);
  } else if (mode == 1u) {
    y = erfc_f(x);
  } else {
    // past 30, exp(-x^2) is 0 (and exp_neg_sq's split of x^2 overflows); nan stays nan
    let a = abs(x);
    let d = exp_neg_sq(select(a, 30.0, a > 30.0)) * 1.12837916709551257390;
    y = G[pw(3u) + i] * select(d, -d, mode == 3u);
  }
  Y[pw(4u) + i] = y;
}
