// Fused scaled dot-product attention, backward 2 of 2 (vtl/backends/wgpu/attention.py):
// dV = sum_i P_ij dO_i and dK = scale * sum_i dS_ij q_i, with P = exp(score - lse) and
// dS = P (dO v^T - delta) recomputed per tile (delta from attention_bwd_dq): no (L, S) matrix
// in memory. With dropout (factors Z: 0 or 1 / (1 - p)), P Z in place of P and
// dS = P (dP Z - delta).
// A workgroup of 128 threads owns 64 keys of one batch entry and walks the queries in tiles of
// 32. Thread (rg, cg) = (lid / 8, lid % 8) owns keys 4rg .. 4rg+3, the scores and dP of queries
// 4cg + e (e < 4) of each tile, and the dK / dV columns 4cg + 32h + e (h < {{DH}} / {{DVH}}),
// in vec4 registers. Per tile: scores and dP by depth chunks of {{DC}} (k, q, v, dO chunks
// staged in workgroup memory), P and dS into workgroup memory, then their products with the
// tile's dO and q rows, staged {{RC}} rows at a time. Words: attention_common.wgsl.
@group(0) @binding(0) var<storage, read> Q: array<{{T}}>;
@group(0) @binding(1) var<storage, read> K: array<{{T}}>;
@group(0) @binding(2) var<storage, read> V: array<{{T}}>;
@group(0) @binding(3) var<storage, read> Mk: array<{{T}}>;
@group(0) @binding(4) var<storage, read> G: array<{{T}}>;
@group(0) @binding(5) var<storage, read> Lse: array<f32>;
@group(0) @binding(6) var<storage, read> Delta: array<f32>;
@group(0) @binding(7) var<storage, read_write> DK: array<{{T}}>;
@group(0) @binding(8) var<storage, read_write> DVo: array<{{T}}>;

const D = {{D}}u;
const DV = {{DV}}u;
const DM = {{DM}}u;       // max(D, DV)
const DC = {{DC}}u;       // depth of the staged chunks
// chunks in sa (vec4s; rows of 64 values padded to 17 vec4, of 32 to 9): k [DC][64] at 0,
// q [DC][32] at QOFF, v [DC][64] at VOFF, dO [DC][32] at GOFF; after the scores,
// P [64 keys][32 queries] (rows of 8 vec4 + 1) at 0 and dS likewise at 576
const QOFF = {{QOFF}}u;
const VOFF = {{VOFF}}u;
const GOFF = {{GOFF}}u;
const DP = {{DP}}u;       // D and DV rounded up to the 32 columns of a row of 8 threads
const DVP = {{DVP}}u;
const RC = {{RC}}u;       // query rows staged at a time for the dK / dV products
const RG = RC * DP / 4u;  // their dO rows' place in sr
var<workgroup> sa: array<vec4<f32>, {{SA}}>;
var<workgroup> sr: array<vec4<f32>, {{SR}}>;  // q rows [RC][DP], then dO rows [RC][DVP]
var<workgroup> st: array<f32, 64>;            // lse and delta of the tile's 32 queries

{{COMMON}}

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let bt = wg_tile(wid, nwg);
  let b = bt.x;
  if (b >= pw(0u)) { return; }
  let L = pw(2u);
  let S = pw(3u);
  let k0 = bt.y * 64u;
  let rg = lid / 8u;
  let cg = lid % 8u;
  let j0 = k0 + rg * 4u;
  let op = operands(b);
  let ub = row0(pw(19u), b, S, D, 31u);
  let wb = row0(pw(20u), b, S, DV, 31u);
  let urs = rstride(D, 31u);
  let wrs = rstride(DV, 31u);
  let mb = mask_base(b);
  let pr = rg * 36u;  // P and dS of this thread's key a: sa[pr + 9a ..], sa[576 + pr + 9a ..]
{{ACC_DECL}}
  // queries before k0 see none of these keys under the causal mask
  var qstart = 0u;
  if ((pw(4u) & 2u) != 0u) { qstart = (k0 / 32u) * 32u; }
  for (var q0 = qstart; q0 < L; q0 += 32u) {
    var s0 = vec4<f32>();
    var s1 = vec4<f32>();
    var s2 = vec4<f32>();
    var s3 = vec4<f32>();
    var p0 = vec4<f32>();
    var p1 = vec4<f32>();
    var p2 = vec4<f32>();
    var p3 = vec4<f32>();
    if (lid < 32u) {
      let i = q0 + lid;
      var x = f32_inf();
      var y = 0.0;
      if (i < L) {
        x = Lse[pw(17u) + b * L + i];
        y = Delta[pw(18u) + b * L + i];
      }
      st[lid] = x;
      st[32u + lid] = y;
    }
    for (var d0 = 0u; d0 < DM; d0 += DC) {
      for (var t = lid; t < 64u * DC; t += 128u) {
        let r = t / DC;
        let dd = t % DC;
        let d = d0 + dd;
        let j = k0 + r;
        var x = 0.0;
        var y = 0.0;
        if (j < S && d < D) { x = f32(K[op.k + j * op.qs + d]); }
        if (j < S && d < DV) { y = f32(V[op.v + j * op.vs + d]); }
        sa[dd * 17u + r / 4u][r % 4u] = x;
        sa[VOFF + dd * 17u + r / 4u][r % 4u] = y;
        if (r < 32u) {
          let i = q0 + r;
          var u = 0.0;
          var w = 0.0;
          if (i < L && d < D) { u = f32(Q[op.q + i * op.qs + d]); }
          if (i < L && d < DV) { w = f32(G[op.g + i * op.gs + d]); }
          sa[QOFF + dd * 9u + r / 4u][r % 4u] = u;
          sa[GOFF + dd * 9u + r / 4u][r % 4u] = w;
        }
      }
      workgroupBarrier();
      for (var dd = 0u; dd < DC; dd++) {
        let kv = sa[dd * 17u + rg];
        let qv = sa[QOFF + dd * 9u + cg];
        let vv = sa[VOFF + dd * 17u + rg];
        let gv = sa[GOFF + dd * 9u + cg];
        s0 += kv.x * qv;
        s1 += kv.y * qv;
        s2 += kv.z * qv;
        s3 += kv.w * qv;
        p0 += vv.x * gv;
        p1 += vv.y * gv;
        p2 += vv.z * gv;
        p3 += vv.w * gv;
      }
      workgroupBarrier();
    }
    let i0 = q0 + cg * 4u;
    let lq = vec4<f32>(st[cg * 4u], st[cg * 4u + 1u], st[cg * 4u + 2u], st[cg * 4u + 3u]);
    let dq = vec4<f32>(st[32u + cg * 4u], st[33u + cg * 4u], st[34u + cg * 4u],
                       st[35u + cg * 4u]);
    let dead = lq == vec4<f32>(f32_inf());
    let lr = select(lq, vec4<f32>(0.0), dead);
    let ni = vec4<f32>(ninf());
    let z = vec4<f32>(0.0);
    s0 = score_queries(s0, i0, j0, mb);
    s1 = score_queries(s1, i0, j0 + 1u, mb);
    s2 = score_queries(s2, i0, j0 + 2u, mb);
    s3 = score_queries(s3, i0, j0 + 3u, mb);
    s0 = select(exp(s0 - lr), z, dead | (s0 == ni));
    s1 = select(exp(s1 - lr), z, dead | (s1 == ni));
    s2 = select(exp(s2 - lr), z, dead | (s2 == ni));
    s3 = select(exp(s3 - lr), z, dead | (s3 == ni));
{{PDS}}
    for (var r0 = 0u; r0 < 32u; r0 += RC) {
      if (q0 + r0 >= L) { break; }
      for (var t = lid; t < RC * DP; t += 128u) {
        let i = q0 + r0 + t / DP;
        let c = t % DP;
        var x = 0.0;
        if (i < L && c < D) { x = f32(Q[op.q + i * op.qs + c]); }
        sr[t / 4u][t % 4u] = x;
      }
      for (var t = lid; t < RC * DVP; t += 128u) {
        let i = q0 + r0 + t / DVP;
        let c = t % DVP;
        var x = 0.0;
        if (i < L && c < DV) { x = f32(G[op.g + i * op.gs + c]); }
        sr[RG + t / 4u][t % 4u] = x;
      }
      workgroupBarrier();
      for (var r = 0u; r < RC; r += 4u) {
        let pj = pr + (r0 + r) / 4u;
{{KV_ACC}}
      }
      workgroupBarrier();
    }
  }
  let c0 = cg * 4u;
  let sc = bitcast<f32>(pw(5u));
{{STORE}}
}
