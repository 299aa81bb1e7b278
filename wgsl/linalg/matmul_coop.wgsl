// Batched C[b] = A[b] @ B[b] of float16 operands on the device's matrix units (cooperative
// matrices: wgpu's `cooperative-matrix` feature, VK_KHR_cooperative_matrix on Vulkan), with
// the layout, words, loaders and epilogue placeholders of matmul.wgsl (read its header); the
// loaders' widened values are rounded back to float16, which they were.
//
// A 64x64 output tile per workgroup of 128 invocations: four subgroups of 32 (the kernel is
// used only where the subgroup size is 32, vtl/backends/wgpu/_coop.py), each accumulating a
// 32x32 quarter in four 16x16 float32 matrices. Tiles of depth 32 of A (64x32) and B (32x64)
// are staged in workgroup memory as float16 rows padded to a multiple of 8 elements; at the
// end each subgroup stores its accumulators to a float32 tile in workgroup memory, from which
// every invocation writes 32 results through the epilogue {{EPI}} (v[c]: the product, at
// `row`, `col + c`). {{LD}}/{{ST}} are the row-major cooperative load and store.
@group(0) @binding(0) var<storage, read> A: array<{{T}}>;
@group(0) @binding(1) var<storage, read> B: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> C: array<{{O}}>;
const AS = 40u;  // row stride of As (32 + 8)
const BS = 72u;  // row stride of Bs (64 + 8)
var<workgroup> As: array<f16, 2560>;  // 64 rows of A's tile
var<workgroup> Bs: array<f16, 2304>;  // 32 rows of B's tile
var<workgroup> Cs: array<f32, 4096>;  // the 64x64 results, rows of 64
const TILE = 64u;  // rows and columns of an output tile
const ACOLS = {{ACOLS}};
const BCOLS = {{BCOLS}};
{{DECL}}

{{LOAD}}

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
{{ARGS}}
  let sg = lid / 32u;
  let wm = (sg / 2u) * 32u;  // the subgroup's quarter: rows wm.., columns wn..
  let wn = (sg % 2u) * 32u;
  var c00 = coop_mat16x16<f32, C>();
  var c01 = coop_mat16x16<f32, C>();
  var c10 = coop_mat16x16<f32, C>();
  var c11 = coop_mat16x16<f32, C>();
  for (var k0 = 0u; k0 < K; k0 += 32u) {
    // 2048 elements of each operand, 16 per invocation; neighbouring invocations read
    // neighbouring addresses down the operand's contiguous axis
    for (var i = 0u; i < 16u; i++) {
      let e = lid + i * 128u;
      let ar = select(e / 32u, e % 64u, ACOLS);
      let ac = select(e % 32u, e / 64u, ACOLS);
      As[ar * AS + ac] = f16(load_a(aBase, sAm, sAk, M, K, m0 + ar, k0 + ac));
      let bk = select(e / 64u, e % 32u, BCOLS);
      let bn = select(e % 64u, e / 32u, BCOLS);
      Bs[bk * BS + bn] = f16(load_b(bBase, sBk, sBn, N, K, k0 + bk, n0 + bn));
    }
    workgroupBarrier();
    for (var kk = 0u; kk < 32u; kk += 16u) {
      let a0 = {{LD}}<coop_mat16x16<f16, A>>(&As[wm * AS + kk], AS);
      let a1 = {{LD}}<coop_mat16x16<f16, A>>(&As[(wm + 16u) * AS + kk], AS);
      let b0 = {{LD}}<coop_mat16x16<f16, B>>(&Bs[kk * BS + wn], BS);
      let b1 = {{LD}}<coop_mat16x16<f16, B>>(&Bs[kk * BS + wn + 16u], BS);
      c00 = coopMultiplyAdd(a0, b0, c00);
      c01 = coopMultiplyAdd(a0, b1, c01);
      c10 = coopMultiplyAdd(a1, b0, c10);
      c11 = coopMultiplyAdd(a1, b1, c11);
    }
    workgroupBarrier();
  }
  {{ST}}(c00, &Cs[wm * 64u + wn], 64u);
  {{ST}}(c01, &Cs[wm * 64u + wn + 16u], 64u);
  {{ST}}(c10, &Cs[(wm + 16u) * 64u + wn], 64u);
  {{ST}}(c11, &Cs[(wm + 16u) * 64u + wn + 16u], 64u);
  workgroupBarrier();
  for (var i = 0u; i < 8u; i++) {
    let g = lid + i * 128u;  // a group of four results: row g / 16, columns (g % 16) * 4..
    let r = g / 16u;
    let q = (g % 16u) * 4u;
    let row = m0 + r;
    let col = n0 + q;
    if (row < M) {
      let v = vec4<f32>(Cs[r * 64u + q], Cs[r * 64u + q + 1u], Cs[r * 64u + q + 2u],
                        Cs[r * 64u + q + 3u]);
      for (var c = 0u; c < 4u; c++) {
        if (col + c < N) { C[out_at(b, row, col + c, M, N)] = wrap_{{OD}}({{O}}({{EPI}})); }
      }
    }
  }
}
