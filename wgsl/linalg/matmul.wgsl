// Batched C[b] = A[b] @ B[b]. A element (b, m, k) sits at offA + b*sAb + m*sAm + k*sAk (any
// strides, so transposed views need no copy); B likewise; C is contiguous (batch, M, N).
// Register-blocked: a 64x64 tile per workgroup of 256 threads, each thread owns a 4x4 block in
// four vec4 accumulators; A and B tiles of depth 16 are staged in workgroup memory as vec4.
// Words: 0 M, 1 N, 2 K, 3 offA, 4 offB, 5 offC, 6 sAb, 7 sAm, 8 sAk, 9 sBb, 10 sBk, 11 sBn,
// then those of the epilogue (vtl/backends/wgpu/_nn.py: its placeholders add a bias to each
// column, or also write the row sums of A (batch b's at word 12 + b*M); empty for a plain
// product). KEND, the depth a tile sums over, is K unless the epilogue bounds it (causal
// attention's products skip the terms it knows to be zero). Products compute in {{C}}:
// float32 for float16 operands (the tiles are widened on load, the result rounded once on
// store), else the operands' type.
@group(0) @binding(0) var<storage, read> A: array<{{T}}>;
@group(0) @binding(1) var<storage, read> B: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> C: array<{{O}}>;
var<workgroup> As: array<vec4<{{C}}>, 256>;
var<workgroup> Bs: array<vec4<{{C}}>, 256>;
const TILE = 64u;  // rows and columns of an output tile
// whether A's columns (B's columns) are its contiguous axis: a transposed view
const ACOLS = {{ACOLS}};
const BCOLS = {{BCOLS}};
{{DECL}}

{{LOAD}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
{{ARGS}}
  // the thread's 4x4 block of the tile: a subgroup of 32 covers 4 x 8 blocks (ty, tx), so
  // its reads of the A and B tiles touch 4 and 8 vec4, a workgroup-memory wavefront each
  let tx = (lid / 32u) % 2u * 8u + lid % 8u;
  let ty = lid / 64u * 4u + (lid % 32u) / 8u;
  // the loads' layout: neighbouring threads on neighbouring elements
  let lx = lid % 16u;
  let ly = lid / 16u;
  var c0 = vec4<{{C}}>();
  var c1 = vec4<{{C}}>();
  var c2 = vec4<{{C}}>();
  var c3 = vec4<{{C}}>();
{{INIT}}
  // Thread lid loads four elements of A at (m0 + am + j*dam, k0 + ak + j*dak), j = 0..3, and
  // four of B likewise; neighbouring threads read neighbouring addresses whether an operand's
  // rows or columns are contiguous (ACOLS/BCOLS). The next tile's loads are issued before the
  // current tile's products, so their latency is hidden even when a product has too few
  // tiles to fill the device.
  let am = select(ly, lid % 64u, ACOLS);
  let ak = select(lx, lid / 64u, ACOLS);
  let dam = select(16u, 0u, ACOLS);
  let dak = select(0u, 4u, ACOLS);
  let bk = select(lid / 64u, lx, BCOLS);
  let bn = select(lid % 64u, ly, BCOLS);
  let dbk = select(4u, 0u, BCOLS);
  let dbn = select(0u, 16u, BCOLS);
  let ra0 = m0 + am;
  let cb0 = n0 + bn;
  var ra = vec4<{{C}}>(load_a(aBase, sAm, sAk, M, K, ra0, ak),
                       load_a(aBase, sAm, sAk, M, K, ra0 + dam, ak + dak),
                       load_a(aBase, sAm, sAk, M, K, ra0 + 2u * dam, ak + 2u * dak),
                       load_a(aBase, sAm, sAk, M, K, ra0 + 3u * dam, ak + 3u * dak));
  var rb = vec4<{{C}}>(load_b(bBase, sBk, sBn, N, K, bk, cb0),
                       load_b(bBase, sBk, sBn, N, K, bk + dbk, cb0 + dbn),
                       load_b(bBase, sBk, sBn, N, K, bk + 2u * dbk, cb0 + 2u * dbn),
                       load_b(bBase, sBk, sBn, N, K, bk + 3u * dbk, cb0 + 3u * dbn));
  let ai = ak * 16u + am / 4u;
  let aj = am % 4u;
  let astep = dak * 16u + dam / 4u;
  let bi = bk * 16u + bn / 4u;
  let bj = bn % 4u;
  let bstep = dbk * 16u + dbn / 4u;
  for (var k0 = 0u; k0 < {{KEND}}; k0 += 16u) {
    As[ai][aj] = ra.x;
    As[ai + astep][aj] = ra.y;
    As[ai + 2u * astep][aj] = ra.z;
    As[ai + 3u * astep][aj] = ra.w;
    Bs[bi][bj] = rb.x;
    Bs[bi + bstep][bj] = rb.y;
    Bs[bi + 2u * bstep][bj] = rb.z;
    Bs[bi + 3u * bstep][bj] = rb.w;
    workgroupBarrier();
    let k1 = k0 + 16u;
    if (k1 < K) {
      let ka = k1 + ak;
      let kb1 = k1 + bk;
      ra = vec4<{{C}}>(load_a(aBase, sAm, sAk, M, K, ra0, ka),
                       load_a(aBase, sAm, sAk, M, K, ra0 + dam, ka + dak),
                       load_a(aBase, sAm, sAk, M, K, ra0 + 2u * dam, ka + 2u * dak),
                       load_a(aBase, sAm, sAk, M, K, ra0 + 3u * dam, ka + 3u * dak));
      rb = vec4<{{C}}>(load_b(bBase, sBk, sBn, N, K, kb1, cb0),
                       load_b(bBase, sBk, sBn, N, K, kb1 + dbk, cb0 + dbn),
                       load_b(bBase, sBk, sBn, N, K, kb1 + 2u * dbk, cb0 + 2u * dbn),
                       load_b(bBase, sBk, sBn, N, K, kb1 + 3u * dbk, cb0 + 3u * dbn));
    }
    /* unroll */ for (var kk = 0u; kk < 16u; kk++) {
      let a = As[kk * 16u + ty];
      let bb = Bs[kk * 16u + tx];
      c0 += a.x * bb;
      c1 += a.y * bb;
      c2 += a.z * bb;
      c3 += a.w * bb;
{{ACC}}
    }
    workgroupBarrier();
  }
  let col = n0 + tx * 4u;
  let rows = array<vec4<{{C}}>, 4>(c0, c1, c2, c3);
  /* unroll */ for (var r = 0u; r < 4u; r++) {
    let row = m0 + ty * 4u + r;
    if (row < M) {
      let v = rows[r];
      /* unroll */ for (var c = 0u; c < 4u; c++) {
        if (col + c < N) { C[out_at(b, row, col + c, M, N)] = wrap_{{OD}}({{O}}({{EPI}})); }
      }
    }
  }
{{TAIL}}
}
