// softmax and log_softmax of the rows of contiguous (M, N) data, and their gradients
// (vtl/backends/wgpu/nn.py, kernel("softmax")): one workgroup per row. Stored as T and
// computed in C (float32 for float16/bfloat16), each output rounded once; EXP/LOG are the
// builtins, or for float64 the m64_ library's (WGSL has no f64 exp and log).
// mode 0: y = exp(x - m) / s; 1: y = (x - m) - log(s), with m the row's maximum (0 where it
// is not finite) and s = sum(exp(x - m)), the portable formulas; 2: dx = y (g - sum(g y))
// from softmax's output y; 3: dx = g - exp(y) sum(g) from log_softmax's.
// Words: 0 M, 1 N, 2 mode, 3 offset x (or y), 4 offset g, 5 offset out
// (wsum/wmax: wgsl/math/workgroup_reduce.wgsl)
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> G: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> Y: array<{{T}}>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= pw(0u)) { return; }
  let N = pw(1u);
  let mode = pw(2u);
  let xb = pw(3u) + row * N;
  let gb = pw(4u) + row * N;
  let yb = pw(5u) + row * N;
  if (mode >= 2u) {
    var t = {{C}}(0);
    for (var j = lid; j < N; j += 256u) {
      let g = {{C}}(G[gb + j]);
      t += select(g, g * {{C}}(X[xb + j]), mode == 2u);
    }
    t = wsum(lid, t);
    for (var j = lid; j < N; j += 256u) {
      let y = {{C}}(X[xb + j]);
      let g = {{C}}(G[gb + j]);
      let d = select(g - {{EXP}}(y) * t, y * (g - t), mode == 2u);
      Y[yb + j] = wrap_{{D}}({{T}}(d));
    }
    return;
  }
  var m = -inf_{{CD}}();
  for (var j = lid; j < N; j += 256u) { m = max(m, {{C}}(X[xb + j])); }
  m = wmax(lid, m);
  if (isnan_{{CD}}(m) || isinf_{{CD}}(m)) { m = {{C}}(0); }
  var s = {{C}}(0);
  for (var j = lid; j < N; j += 256u) { s += {{EXP}}({{C}}(X[xb + j]) - m); }
  s = wsum(lid, s);
  let ls = {{LOG}}(s);
  for (var j = lid; j < N; j += 256u) {
    let z = {{C}}(X[xb + j]) - m;
    let v = select({{EXP}}(z) / s, z - ls, mode == 1u);
    Y[yb + j] = wrap_{{D}}({{T}}(v));
  }
}
