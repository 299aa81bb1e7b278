// Fused scaled dot-product attention, forward (vtl/backends/wgpu/attention.py):
// O = softmax(q k^T * scale + mask) v and each row's log-sum-exp, with no (L, S) matrix in
// memory (flash-attention style; rows with every key masked: zeros and lse = +inf).
// A workgroup of 128 threads owns 64 query rows of one batch entry and walks the keys in tiles
// of 64. Thread (rg, cg) = (lid / 8, lid % 8) owns rows 4rg .. 4rg+3 and, in vec4 registers,
// the scores of keys 4cg + 32h + e (h < 2, e < 4) of each tile and the output columns
// 4cg + 32h + e (h < {{OH}}). Per tile: the scores by depth chunks of {{DC}} (q and k chunks
// staged in workgroup memory), the tile's row maxima through workgroup memory, the online
// softmax rescale, the probabilities P into workgroup memory, then P v by chunks of 16 value
// rows. With dropout, P times its factors (0 or 1 / (1 - p)) goes to workgroup memory (the
// row sums are of the undropped P). Words: attention_common.wgsl.
@group(0) @binding(0) var<storage, read> Q: array<{{T}}>;
@group(0) @binding(1) var<storage, read> K: array<{{T}}>;
@group(0) @binding(2) var<storage, read> V: array<{{T}}>;
@group(0) @binding(3) var<storage, read> Mk: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> O: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> Lse: array<f32>;

const D = {{D}}u;
const DV = {{DV}}u;
const DC = {{DC}}u;       // depth of the staged q/k chunks
const KOFF = {{KOFF}}u;   // the k chunk's place in sa (vec4s)
const DVP = {{DVP}}u;     // DV rounded up to the 32 columns of a row of 8 threads
// q chunk [DC][64 rows] at 0 and k chunk [DC][64 keys] at KOFF (rows of 16 vec4 + 1 of
// padding); after the scores, P [64 rows][64 keys] (rows of 16 vec4 + 1)
var<workgroup> sa: array<vec4<f32>, 1088>;
var<workgroup> sv: array<vec4<f32>, {{SV}}>;  // 16 value rows [16][DVP]
var<workgroup> red: array<vec4<f32>, 128>;    // [64 rows][8 threads]: row maxima, row sums

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
  let mb = mask_base(b);
  let rb = rg * 8u;         // red's slots of this thread's rows: rb + 2a, rb + 2a + 1
  let rw = rb + cg / 4u;    // and this thread's word in them: red[rw + 2a][rc]
  let rc = cg % 4u;
  let pr = rg * 68u;        // P of this thread's row a: sa[pr + 17a ..]
  var m = vec4<f32>(ninf());  // the rows' running maxima
  var l = vec4<f32>();        // this thread's part of the rows' sums
{{O_DECL}}
  var kend = S;
  if ((pw(4u) & 2u) != 0u) { kend = min(S, q0 + 64u); }
  for (var k0 = 0u; k0 < kend; k0 += 64u) {
{{S_DECL}}
    for (var d0 = 0u; d0 < D; d0 += DC) {
      for (var t = lid; t < 64u * DC; t += 128u) {
        let r = t / DC;
        let d = d0 + t % DC;
        let at = (t % DC) * 17u + r / 4u;
        var x = 0.0;
        if (q0 + r < L && d < D) { x = f32(Q[op.q + (q0 + r) * op.qs + d]); }
        sa[at][r % 4u] = x;
        var y = 0.0;
        if (k0 + r < S && d < D) { y = f32(K[op.k + (k0 + r) * op.qs + d]); }
        sa[KOFF + at][r % 4u] = y;
      }
      workgroupBarrier();
      for (var dd = 0u; dd < DC; dd++) {
        let qv = sa[dd * 17u + rg];
        let k0v = sa[KOFF + dd * 17u + cg];
        let k1v = sa[KOFF + dd * 17u + cg + 8u];
{{S_ACC}}
      }
      workgroupBarrier();
    }
    let j0 = k0 + cg * 4u;
{{SCORES}}
    workgroupBarrier();
    let mt = vec4<f32>(max4(max(red[rb], red[rb + 1u])), max4(max(red[rb + 2u], red[rb + 3u])),
                       max4(max(red[rb + 4u], red[rb + 5u])), max4(max(red[rb + 6u], red[rb + 7u])));
    let mn = max(m, mt);
    let mr = select(mn, vec4<f32>(0.0), mn == vec4<f32>(ninf()));
    let corr = select(exp(m - mr), vec4<f32>(0.0), m == vec4<f32>(ninf()));
    m = mn;
{{SOFTMAX}}
    for (var j = 0u; j < 64u; j += 16u) {
      if (k0 + j >= kend) { break; }
      for (var t = lid; t < 16u * DVP; t += 128u) {
        let r = t / DVP;
        let c = t % DVP;
        var x = 0.0;
        if (k0 + j + r < S && c < DV) { x = f32(V[op.v + (k0 + j + r) * op.vs + c]); }
        sv[t / 4u][t % 4u] = x;
      }
      workgroupBarrier();
      for (var r = 0u; r < 16u; r += 4u) {
        let pj = pr + (j + r) / 4u;
{{PV_ACC}}
      }
      workgroupBarrier();
    }
  }
  red[rw][rc] = l.x;
  red[rw + 2u][rc] = l.y;
  red[rw + 4u][rc] = l.z;
  red[rw + 6u][rc] = l.w;
  workgroupBarrier();
  let lt = vec4<f32>(sum4(red[rb] + red[rb + 1u]), sum4(red[rb + 2u] + red[rb + 3u]),
                     sum4(red[rb + 4u] + red[rb + 5u]), sum4(red[rb + 6u] + red[rb + 7u]));
  let inv = select(vec4<f32>(1.0) / lt, vec4<f32>(0.0), lt == vec4<f32>(0.0));
  let lse = select(m + log(lt), vec4<f32>(f32_inf()), lt == vec4<f32>(0.0));
  let ob = row0(pw(19u), b, L, DV, 30u);
  let ors = rstride(DV, 30u);
  let c0 = cg * 4u;
{{STORE}}
}
