// The input gradient of layer_norm.wgsl for one row per workgroup: with xhat = (x - mean)
// rstd and gw = g w, dx = rstd (gw - mean(gw) - xhat mean(gw xhat)). With flag 4 (rms_norm,
// whose mean is 0) the mean(gw) term is left out. Stored as T, computed in C (float32 for
// float16/bfloat16: S is float32, dx is rounded once). The weight's and bias's gradients:
// layer_norm_params.wgsl.
// Words: 0 M, 1 N, 2 offset x, 3 offset w, 4 offset g, 5 offset S (mean, rstd pairs),
//        6 offset dx, 7 flags (1: w, 4: no centring)
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> Wt: array<{{T}}>;
@group(0) @binding(2) var<storage, read> G: array<{{T}}>;
@group(0) @binding(3) var<storage, read> S: array<{{C}}>;
@group(0) @binding(4) var<storage, read_write> DX: array<{{T}}>;
var<workgroup> r1: array<{{C}}, 256>;
var<workgroup> r2: array<{{C}}, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let row = wid.y * nwg.x + wid.x;
  if (row >= pw(0u)) { return; }
  let N = pw(1u);
  let xb = pw(2u) + row * N;
  let gb = pw(4u) + row * N;
  let mu = S[pw(5u) + 2u * row];
  let r = S[pw(5u) + 2u * row + 1u];
  let hasw = (pw(7u) & 1u) != 0u;
  var c1 = {{C}}(0);
  var c2 = {{C}}(0);
  for (var j = lid; j < N; j += 256u) {
    let xh = ({{C}}(X[xb + j]) - mu) * r;
    var gw = {{C}}(G[gb + j]);
    if (hasw) { gw *= {{C}}(Wt[pw(3u) + j]); }
    c1 += gw;
    c2 += gw * xh;
  }
  r1[lid] = c1;
  r2[lid] = c2;
  workgroupBarrier();
  for (var h = 128u; h > 0u; h >>= 1u) {
    if (lid < h) {
      r1[lid] += r1[lid + h];
      r2[lid] += r2[lid + h];
    }
    workgroupBarrier();
  }
  let m1 = select(r1[0] / {{C}}(N), {{C}}(0), (pw(7u) & 4u) != 0u);
  let m2 = r2[0] / {{C}}(N);
  let db = pw(6u) + row * N;
  for (var j = lid; j < N; j += 256u) {
    let xh = ({{C}}(X[xb + j]) - mu) * r;
    var gw = {{C}}(G[gb + j]);
    if (hasw) { gw *= {{C}}(Wt[pw(3u) + j]); }
    DX[db + j] = wrap_{{D}}({{T}}(r * (gw - m1 - xh * m2)));
  }
}
