// Batched C[b] = A[b] @ B[b] for large products: the layout, words and epilogue placeholders
// of matmul.wgsl (read its header), with a 128x128 tile per workgroup of 256 threads. Each
// thread owns an 8x8 block (rows ty*4.. and 64+ty*4.., columns tx*4.. and 64+tx*4..) in
// sixteen vec4 accumulators; A and B tiles of depth 8 are staged in workgroup memory as
// vec4, the next tile's loads issued before the current tile's products, the depth loop and
// the epilogue written out (unroll: 4096^3 float32 on an H100 at 30 TFLOP/s instead of 26;
// depth-16 tiles in two buffers of rotated rows measured slower here, 27). Four times the
// multiply-adds of matmul.wgsl per workgroup-memory read; it needs enough output tiles to
// fill the device (vtl/backends/wgpu/_linalg.py picks it).
@group(0) @binding(0) var<storage, read> A: array<{{TA}}>;
@group(0) @binding(1) var<storage, read> B: array<{{TB}}>;
@group(0) @binding(2) var<storage, read_write> C: array<{{O}}>;
var<workgroup> As: array<vec4<{{C}}>, 264>;
var<workgroup> Bs: array<vec4<{{C}}>, 264>;
const TILE = 128u;  // rows and columns of an output tile
const ACOLS = {{ACOLS}};
const BCOLS = {{BCOLS}};
{{DECL}}

{{LOAD}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
{{ARGS}}
  // a subgroup of 32 threads covers 4 x 8 of the threads' blocks (ty, tx): its reads of
  // the A and B tiles below touch 4 and 8 vec4 instead of 2 and 16 (as tx = lid % 16 did),
  // one workgroup-memory wavefront each (4096^3 on an H100: 4.13 -> 3.92 ms of kernel)
  let tx = (lid / 32u) % 2u * 8u + lid % 8u;
  let ty = lid / 64u * 4u + (lid % 32u) / 8u;
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
  // each thread's share of the A and B tiles: its registers ra and rb, filled for the tile
  // at depth kt (FETCH) and stored into workgroup memory (STORE), element (k, m) of the A
  // tile at As[k * 33 + m / 4][m % 4] and B's alike (rows of 33 vec4: the stores of threads
  // with neighbouring k fall in different banks); vtl/backends/wgpu/_linalg.py writes them,
  // four elements a load where the operand allows (big_reads)
{{A_SETUP}}
{{B_SETUP}}
  {
    let kt = 0u;
{{A_FETCH}}
{{B_FETCH}}
  }
  for (var k0 = 0u; k0 < {{KEND}}; k0 += 8u) {
{{A_STORE}}
{{B_STORE}}
    workgroupBarrier();
    let kt = k0 + 8u;
    if (kt < K) {
{{A_FETCH}}
{{B_FETCH}}
    }
    /* unroll */ for (var kk = 0u; kk < 8u; kk++) {
      let a0 = As[kk * 33u + ty];
      let a1 = As[kk * 33u + 16u + ty];
      let b0 = Bs[kk * 33u + tx];
      let b1 = Bs[kk * 33u + 16u + tx];
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
    workgroupBarrier();
  }
  let acc = array<vec4<{{C}}>, 16>(c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61, c70, c71);
  /* unroll */ for (var r = 0u; r < 8u; r++) {
    let row = m0 + (r / 4u) * 64u + ty * 4u + r % 4u;
    if (row < M) {
      /* unroll */ for (var h = 0u; h < 2u; h++) {
        let v = acc[r * 2u + h];
        let col = n0 + h * 64u + tx * 4u;
        /* unroll */ for (var c = 0u; c < 4u; c++) {
          if (col + c < N) { C[out_at(b, row, col + c, M, N)] = wrap_{{OD}}({{O}}({{EPI}})); }
        }
      }
    }
  }
{{TAIL}}
}
