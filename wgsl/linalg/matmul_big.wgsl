// Batched C[b] = A[b] @ B[b] for large products: the layout, words and epilogue placeholders
// of matmul.wgsl (read its header), with a 128x128 tile per workgroup of 256 threads. Each
// thread owns an 8x8 block (rows ty*4.. and 64+ty*4.., columns tx*4.. and 64+tx*4..) in
// sixteen vec4 accumulators. A and B tiles of depth 16 are staged in workgroup memory as
// vec4, in two buffers: the products of one tile run while the next tile's loads are in
// flight and are then stored in the other buffer, one barrier a tile. The depth loop is
// written out (unroll). Four times the multiply-adds of matmul.wgsl per workgroup-memory
// read; it needs enough output tiles to fill the device and 32 KiB of workgroup memory
// (vtl/backends/wgpu/_linalg.py picks it). On an H100, 4096^3 float32: 26 TFLOP/s with
// depth-8 tiles in one buffer and a loop, 30 with the loop written out, 36 in a probe of
// this layout (cuBLAS 51).
@group(0) @binding(0) var<storage, read> A: array<{{T}}>;
@group(0) @binding(1) var<storage, read> B: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> C: array<{{O}}>;
// element (k, m) of buffer q's A tile at As[q * 512 + k * 32 + (m / 4 + k) % 32][m % 4], B's
// alike: rows of 32 vec4 rotated by k, so that the stores of threads with neighbouring k
// fall in different banks without padding (two buffers of two tiles: 32 KiB)
var<workgroup> As: array<vec4<{{C}}>, 1024>;
var<workgroup> Bs: array<vec4<{{C}}>, 1024>;
const TILE = 128u;  // rows and columns of an output tile
const ACOLS = {{ACOLS}};
const BCOLS = {{BCOLS}};
{{DECL}}

{{LOAD}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
{{ARGS}}
  let tx = lid % 16u;
  let ty = lid / 16u;
  var c00 = vec4<{{C}}>();
  var c01 = vec4<{{C}}>();
  var c10 = vec4<{{C}}>();
  var c11 = vec4<{{C}}>();
  var c20 = vec4<{{C}}>();
  var c21 = vec4<{{C}}>();
  var c30 = vec4<{{C}}>();
  var c31 = vec4<{{C}}>();
  var c40 = vec4<{{C}}>();
  var c41 = vec4<{{C}}>();
  var c50 = vec4<{{C}}>();
  var c51 = vec4<{{C}}>();
  var c60 = vec4<{{C}}>();
  var c61 = vec4<{{C}}>();
  var c70 = vec4<{{C}}>();
  var c71 = vec4<{{C}}>();
{{INIT}}
  // Thread lid loads A at (m0 + am + j*dam, k0 + ak + j*dak), j = 0..7 (ra: j 0..3, ra2:
  // j 4..7), and B likewise: neighbouring threads read neighbouring addresses down the
  // operand's contiguous axis.
  let am = select(lid / 16u, lid % 128u, ACOLS);
  let ak = select(lid % 16u, lid / 128u, ACOLS);
  let dam = select(16u, 0u, ACOLS);
  let dak = select(0u, 2u, ACOLS);
  let bk = select(lid / 128u, lid % 16u, BCOLS);
  let bn = select(lid % 128u, lid / 16u, BCOLS);
  let dbk = select(2u, 0u, BCOLS);
  let dbn = select(0u, 16u, BCOLS);
  let ra0 = m0 + am;
  let cb0 = n0 + bn;
  var ra = vec4<{{C}}>();
  var ra2 = vec4<{{C}}>();
  var rb = vec4<{{C}}>();
  var rb2 = vec4<{{C}}>();
  /* unroll */ for (var j = 0u; j < 4u; j++) {
    ra[j] = load_a(aBase, sAm, sAk, M, K, ra0 + j * dam, ak + j * dak);
    ra2[j] = load_a(aBase, sAm, sAk, M, K, ra0 + (j + 4u) * dam, ak + (j + 4u) * dak);
    rb[j] = load_b(bBase, sBk, sBn, N, K, bk + j * dbk, cb0 + j * dbn);
    rb2[j] = load_b(bBase, sBk, sBn, N, K, bk + (j + 4u) * dbk, cb0 + (j + 4u) * dbn);
  }
  // the first tile into buffer 0; the products read buffer q
  /* unroll */ for (var j = 0u; j < 4u; j++) {
    let ka = ak + j * dak;
    let ka2 = ak + (j + 4u) * dak;
    let ma = am + j * dam;
    let ma2 = am + (j + 4u) * dam;
    As[ka * 32u + (ma / 4u + ka) % 32u][ma % 4u] = ra[j];
    As[ka2 * 32u + (ma2 / 4u + ka2) % 32u][ma2 % 4u] = ra2[j];
    let kb = bk + j * dbk;
    let kb2 = bk + (j + 4u) * dbk;
    let nb = bn + j * dbn;
    let nb2 = bn + (j + 4u) * dbn;
    Bs[kb * 32u + (nb / 4u + kb) % 32u][nb % 4u] = rb[j];
    Bs[kb2 * 32u + (nb2 / 4u + kb2) % 32u][nb2 % 4u] = rb2[j];
  }
  workgroupBarrier();
  var q = 0u;
  for (var k0 = 0u; k0 < K; k0 += 16u) {
    let k1 = k0 + 16u;
    let more = k1 < K;
    if (more) {
      /* unroll */ for (var j = 0u; j < 4u; j++) {
        ra[j] = load_a(aBase, sAm, sAk, M, K, ra0 + j * dam, k1 + ak + j * dak);
        ra2[j] = load_a(aBase, sAm, sAk, M, K, ra0 + (j + 4u) * dam, k1 + ak + (j + 4u) * dak);
        rb[j] = load_b(bBase, sBk, sBn, N, K, k1 + bk + j * dbk, cb0 + j * dbn);
        rb2[j] = load_b(bBase, sBk, sBn, N, K, k1 + bk + (j + 4u) * dbk, cb0 + (j + 4u) * dbn);
      }
    }
    let base = q * 512u;
    /* unroll */ for (var kk = 0u; kk < 16u; kk++) {
      let row = base + kk * 32u;
      let a0 = As[row + (ty + kk) % 32u];
      let a1 = As[row + (16u + ty + kk) % 32u];
      let b0 = Bs[row + (tx + kk) % 32u];
      let b1 = Bs[row + (16u + tx + kk) % 32u];
      c00 += a0.x * b0;
      c01 += a0.x * b1;
      c10 += a0.y * b0;
      c11 += a0.y * b1;
      c20 += a0.z * b0;
      c21 += a0.z * b1;
      c30 += a0.w * b0;
      c31 += a0.w * b1;
      c40 += a1.x * b0;
      c41 += a1.x * b1;
      c50 += a1.y * b0;
      c51 += a1.y * b1;
      c60 += a1.z * b0;
      c61 += a1.z * b1;
      c70 += a1.w * b0;
      c71 += a1.w * b1;
{{ACC}}
    }
    if (more) {
      q = 1u - q;
      let nbase = q * 512u;
      /* unroll */ for (var j = 0u; j < 4u; j++) {
        let ka = ak + j * dak;
        let ka2 = ak + (j + 4u) * dak;
        let ma = am + j * dam;
        let ma2 = am + (j + 4u) * dam;
        As[nbase + ka * 32u + (ma / 4u + ka) % 32u][ma % 4u] = ra[j];
        As[nbase + ka2 * 32u + (ma2 / 4u + ka2) % 32u][ma2 % 4u] = ra2[j];
        let kb = bk + j * dbk;
        let kb2 = bk + (j + 4u) * dbk;
        let nb = bn + j * dbn;
        let nb2 = bn + (j + 4u) * dbn;
        Bs[nbase + kb * 32u + (nb / 4u + kb) % 32u][nb % 4u] = rb[j];
        Bs[nbase + kb2 * 32u + (nb2 / 4u + kb2) % 32u][nb2 % 4u] = rb2[j];
      }
    }
    workgroupBarrier();
  }
  let cBase = pw(5u) + b * M * N;
  let acc = array<vec4<{{C}}>, 16>(c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61, c70, c71);
  /* unroll */ for (var r = 0u; r < 8u; r++) {
    let row = m0 + (r / 4u) * 64u + ty * 4u + r % 4u;
    if (row < M) {
      /* unroll */ for (var h = 0u; h < 2u; h++) {
        let v = acc[r * 2u + h];
        let col = n0 + h * 64u + tx * 4u;
        /* unroll */ for (var c = 0u; c < 4u; c++) {
          if (col + c < N) { C[cBase + row * N + col + c] = wrap_{{OD}}({{O}}({{EPI}})); }
        }
      }
    }
  }
{{TAIL}}
}
