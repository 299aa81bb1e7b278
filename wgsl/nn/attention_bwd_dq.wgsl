// Fused scaled dot-product attention, backward 1 of 2 (vtl/backends/wgpu/attention.py):
// delta = rowsum(dO * O) of each query row, and dQ = scale * sum_j dS_ij k_j with
// dS = P (dP - delta), P = exp(score - lse) recomputed from the saved log-sum-exp and
// dP = dO v^T: no (L, S) matrix in memory. With dropout (factors Z: 0 or 1 / (1 - p)),
// dS = P (dP Z - delta).
// A workgroup of 128 threads owns 64 query rows of one batch entry and walks the keys in tiles
// of 32. Thread (rg, cg) = (lid / 8, lid % 8) owns rows 4rg .. 4rg+3, the scores and dP of keys
// 4cg + e (e < 4) of each tile, and dQ columns 4cg + 32h + e (h < {{DH}}), in vec4 registers.
// Per tile: scores and dP by depth chunks of {{DC}} (q, k, dO, v chunks staged in workgroup
// memory), dS into workgroup memory, then dS k against the tile's key rows (staged whole).
// Words: attention_common.wgsl.
@group(0) @binding(0) var<storage, read> Q: array<{{T}}>;
@group(0) @binding(1) var<storage, read> K: array<{{T}}>;
@group(0) @binding(2) var<storage, read> V: array<{{T}}>;
@group(0) @binding(3) var<storage, read> Mk: array<{{T}}>;
@group(0) @binding(4) var<storage, read> G: array<{{T}}>;
@group(0) @binding(5) var<storage, read> O: array<{{T}}>;
@group(0) @binding(6) var<storage, read> Lse: array<f32>;
@group(0) @binding(7) var<storage, read_write> Delta: array<f32>;
@group(0) @binding(8) var<storage, read_write> DQ: array<{{T}}>;

const D = {{D}}u;
const DV = {{DV}}u;
const DM = {{DM}}u;       // max(D, DV)
const DC = {{DC}}u;       // depth of the staged chunks
// chunks in sa (vec4s; rows of 64 values padded to 17 vec4, of 32 to 9): q [DC][64] at 0,
// k [DC][32] at KOFF, dO [DC][64] at GOFF, v [DC][32] at VOFF; after the scores,
// dS [64 rows][32 keys] (rows of 8 vec4 + 1) at 0
const KOFF = {{KOFF}}u;
const GOFF = {{GOFF}}u;
const VOFF = {{VOFF}}u;
const DP = {{DP}}u;       // D rounded up to the 32 columns of a row of 8 threads
var<workgroup> sa: array<vec4<f32>, {{SA}}>;
var<workgroup> sk: array<vec4<f32>, {{SK}}>;  // the tile's key rows [32][DP]
var<workgroup> red: array<vec4<f32>, 128>;    // [64 rows][8 threads]: delta

{{COMMON}}

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let bt = wg_tile(wid, nwg);
  let b = bt.x;
  if (b >= pw(0u)) { return; }
  let L = pw(2u);
  let S = pw(3u);
  let q0 = bt.y * 64u;
  let rg = lid / 8u;
  let cg = lid % 8u;
  let r0 = q0 + rg * 4u;
  let op = operands(b);
  let ob = row0(pw(16u), b, L, DV, 30u);
  let ub = row0(pw(19u), b, L, D, 31u);
  let urs = rstride(D, 31u);
  let mb = mask_base(b);
  let rb = rg * 8u;
  let rw = rb + cg / 4u;
  let rc = cg % 4u;
  let pr = rg * 36u;  // dS of this thread's row a: sa[pr + 9a ..]
  // delta of the rows: each thread sums the columns cg, cg + 8, ... of its four rows
  var part = vec4<f32>();
  for (var a = 0u; a < 4u; a++) {
    let i = r0 + a;
    if (i < L) {
      var acc = 0.0;
      for (var c = cg; c < DV; c += 8u) {
        acc += f32(G[op.g + i * op.gs + c]) * f32(O[ob + i * op.gs + c]);
      }
      part[a] = acc;
    }
  }
  red[rw][rc] = part.x;
  red[rw + 2u][rc] = part.y;
  red[rw + 4u][rc] = part.z;
  red[rw + 6u][rc] = part.w;
  workgroupBarrier();
  let dl = vec4<f32>(sum4(red[rb] + red[rb + 1u]), sum4(red[rb + 2u] + red[rb + 3u]),
                     sum4(red[rb + 4u] + red[rb + 5u]), sum4(red[rb + 6u] + red[rb + 7u]));
  var ls = vec4<f32>(f32_inf());
  for (var a = 0u; a < 4u; a++) {
    let i = r0 + a;
    if (i < L) {
      ls[a] = Lse[pw(17u) + b * L + i];
      if (cg == 0u) { Delta[pw(18u) + b * L + i] = dl[a]; }
    }
  }
  let live = ls != vec4<f32>(f32_inf());
{{DQ_DECL}}
  var kend = S;
  if ((pw(4u) & 2u) != 0u) { kend = min(S, q0 + 64u); }
  for (var k0 = 0u; k0 < kend; k0 += 32u) {
    var s0 = vec4<f32>();
    var s1 = vec4<f32>();
    var s2 = vec4<f32>();
    var s3 = vec4<f32>();
    var p0 = vec4<f32>();
    var p1 = vec4<f32>();
    var p2 = vec4<f32>();
    var p3 = vec4<f32>();
    for (var t = lid; t < 32u * DP; t += 128u) {
      let r = t / DP;
      let c = t % DP;
      var x = 0.0;
      if (k0 + r < S && c < D) { x = f32(K[op.k + (k0 + r) * op.qs + c]); }
      sk[t / 4u][t % 4u] = x;
    }
    for (var d0 = 0u; d0 < DM; d0 += DC) {
      for (var t = lid; t < 64u * DC; t += 128u) {
        let r = t / DC;
        let dd = t % DC;
        let d = d0 + dd;
        let i = q0 + r;
        var x = 0.0;
        var y = 0.0;
        if (i < L && d < D) { x = f32(Q[op.q + i * op.qs + d]); }
        if (i < L && d < DV) { y = f32(G[op.g + i * op.gs + d]); }
        sa[dd * 17u + r / 4u][r % 4u] = x;
        sa[GOFF + dd * 17u + r / 4u][r % 4u] = y;
        if (r < 32u) {
          let j = k0 + r;
          var u = 0.0;
          var w = 0.0;
          if (j < S && d < D) { u = f32(K[op.k + j * op.qs + d]); }
          if (j < S && d < DV) { w = f32(V[op.v + j * op.vs + d]); }
          sa[KOFF + dd * 9u + r / 4u][r % 4u] = u;
          sa[VOFF + dd * 9u + r / 4u][r % 4u] = w;
        }
      }
      workgroupBarrier();
      for (var dd = 0u; dd < DC; dd++) {
        let qv = sa[dd * 17u + rg];
        let kv = sa[KOFF + dd * 9u + cg];
        let gv = sa[GOFF + dd * 17u + rg];
        let vv = sa[VOFF + dd * 9u + cg];
        s0 += qv.x * kv;
        s1 += qv.y * kv;
        s2 += qv.z * kv;
        s3 += qv.w * kv;
        p0 += gv.x * vv;
        p1 += gv.y * vv;
        p2 += gv.z * vv;
        p3 += gv.w * vv;
      }
      workgroupBarrier();
    }
    let j0 = k0 + cg * 4u;
    let z = vec4<f32>(0.0);
{{DS}}
    workgroupBarrier();
    for (var j = 0u; j < 32u; j += 4u) {
      if (k0 + j >= kend) { break; }
      let pj = pr + j / 4u;
{{DQ_ACC}}
    }
    workgroupBarrier();
  }
  let c0 = cg * 4u;
  let sc = bitcast<f32>(pw(5u));
{{STORE}}
}
