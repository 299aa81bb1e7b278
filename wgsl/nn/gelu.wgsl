// GELU and its gradient over contiguous data (vtl/backends/wgpu/nn.py): stored as T
// (float32, float16 or bfloat16), computed in float32, each result rounded once.
// mode 0: y = x Phi(x) (Phi through erfc_f, wgsl/math/erfc32.wgsl); 1: PyTorch's tanh form; 2 and 3: y = g times the
// derivative of form 0 and 1.
// Words: 0 n, 1 mode, 2 offset x, 3 offset g, 4 offset y
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> G: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> Y: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(0u)) { return; }
  let mode = pw(1u);
  let x = f32(X[pw(2u) + i]);
  var y: f32;
  if (mode == 0u) {
    y = x * (0.5 * erfc_f(x * -0.70710678118654752440));
  } else if (mode == 1u) {
    y = 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
  } else if (mode == 2u) {
    let d = 0.5 * erfc_f(x * -0.70710678118654752440)
            + x * exp(-0.5 * x * x) * 0.39894228040143267794;
    y = f32(G[pw(3u) + i]) * d;
  } else {
    let t = tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x));
    let du = 0.79788456080286535588 * (1.0 + 3.0 * 0.044715 * x * x);
    y = f32(G[pw(3u) + i]) * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du);
  }
  Y[pw(4u) + i] = wrap_{{D}}({{T}}(y));
}
