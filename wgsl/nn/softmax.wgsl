// softmax and log_softmax of the rows of contiguous (M, N) data, and their gradients
// (vtl/backends/wgpu/nn.py, kernel("softmax")). TPR invocations a row, 256 / TPR rows a
// workgroup (vtl/backends/wgpu/_row_lanes.py): a row of up to TPR * SLOTS elements is held
// in registers (one read and one write); a longer row (TPR 256) is read for each pass.
// Stored as T and computed in C (float32 for float16/bfloat16), each output rounded once;
// EXP/LOG are the builtins, or for float64 the m64_ library's (WGSL has no f64 exp and log).
// mode 0: y = exp(x - m) / s; 1: y = (x - m) - log(s), with m the row's maximum (0 where it
// is not finite) and s = sum(exp(x - m)), the portable formulas; 2: dx = y (g - sum(g y))
// from softmax's output y; 3: dx = g - exp(y) sum(g) from log_softmax's.
// Words: 0 M, 1 N, 2 mode, 3 offset x (or y), 4 offset g, 5 offset out
// (wreduce: wgsl/math/workgroup_reduce.wgsl)
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> G: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> Y: array<{{T}}>;

const TPR = {{TPR}};  // invocations a row
const SLOTS = {{SLOTS}}u;  // elements an invocation holds

// the gradient of element (y, g) of a row whose reduction is t
fn grad(mode: u32, y: {{C}}, g: {{C}}, t: {{C}}) -> {{C}} {
  return select(g - {{EXP}}(y) * t, y * (g - t), mode == 2u);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let lane = lid % TPR;
  let row = (wid.y * nwg.x + wid.x) * (256u / TPR) + lid / TPR;
  let N = pw(1u);
  let end = select(0u, N, row < pw(0u));  // a row past the last has no elements
  let mode = pw(2u);
  let xb = pw(3u) + row * N;
  let gb = pw(4u) + row * N;
  let yb = pw(5u) + row * N;
  let held = N <= TPR * SLOTS;
  if (mode >= 2u) {
    var t = {{C}}(0);
    if (held) {
      var ys: array<{{C}}, SLOTS>;
      var gs: array<{{C}}, SLOTS>;
      /* unroll */ for (var k = 0u; k < {{SLOTS}}u; k++) {
        let j = lane + k * TPR;
        if (j < end) {
          let y = {{C}}(X[xb + j]);
          let g = {{C}}(G[gb + j]);
          ys[k] = y;
          gs[k] = g;
          t += select(g, g * y, mode == 2u);
        }
      }
      t = wreduce(lid, lane, t, TPR, false);
      /* unroll */ for (var k = 0u; k < {{SLOTS}}u; k++) {
        let j = lane + k * TPR;
        if (j < end) { Y[yb + j] = wrap_{{D}}({{T}}(grad(mode, ys[k], gs[k], t))); }
      }
    } else {
      for (var j = lane; j < end; j += TPR) {
        let g = {{C}}(G[gb + j]);
        t += select(g, g * {{C}}(X[xb + j]), mode == 2u);
      }
      t = wreduce(lid, lane, t, TPR, false);
      for (var j = lane; j < end; j += TPR) {
        Y[yb + j] = wrap_{{D}}({{T}}(grad(mode, {{C}}(X[xb + j]), {{C}}(G[gb + j]), t)));
      }
    }
    return;
  }
  var m = -inf_{{CD}}();
  var s = {{C}}(0);
  if (held) {
    var xs: array<{{C}}, SLOTS>;
    var es: array<{{C}}, SLOTS>;
    /* unroll */ for (var k = 0u; k < {{SLOTS}}u; k++) {
      let j = lane + k * TPR;
      if (j < end) {
        xs[k] = {{C}}(X[xb + j]);
        m = max(m, xs[k]);
      }
    }
    m = wreduce(lid, lane, m, TPR, true);
    if (isnan_{{CD}}(m) || isinf_{{CD}}(m)) { m = {{C}}(0); }
    /* unroll */ for (var k = 0u; k < {{SLOTS}}u; k++) {
      if (lane + k * TPR < end) {
        xs[k] -= m;
        es[k] = {{EXP}}(xs[k]);
        s += es[k];
      }
    }
    s = wreduce(lid, lane, s, TPR, false);
    let ls = {{LOG}}(s);
    /* unroll */ for (var k = 0u; k < {{SLOTS}}u; k++) {
      let j = lane + k * TPR;
      if (j < end) {
        Y[yb + j] = wrap_{{D}}({{T}}(select(es[k] / s, xs[k] - ls, mode == 1u)));
      }
    }
    return;
  }
  for (var j = lane; j < end; j += TPR) { m = max(m, {{C}}(X[xb + j])); }
  m = wreduce(lid, lane, m, TPR, true);
  if (isnan_{{CD}}(m) || isinf_{{CD}}(m)) { m = {{C}}(0); }
  for (var j = lane; j < end; j += TPR) { s += {{EXP}}({{C}}(X[xb + j]) - m); }
  s = wreduce(lid, lane, s, TPR, false);
  let ls = {{LOG}}(s);
  for (var j = lane; j < end; j += TPR) {
    let z = {{C}}(X[xb + j]) - m;
    Y[yb + j] = wrap_{{D}}({{T}}(select({{EXP}}(z) / s, z - ls, mode == 1u)));
  }
}
