// Batched C[b] = A[b] @ B[b]. A element (b, m, k) sits at offA + b*sAb + m*sAm + k*sAk (any
// strides, so transposed views need no copy); B likewise; C is contiguous (batch, M, N).
// Register-blocked: a 64x64 tile per workgroup of 256 threads, each thread owns a 4x4 block in
// four vec4 accumulators; A and B tiles of depth 16 are staged in workgroup memory as vec4.
// Words: 0 M, 1 N, 2 K, 3 offA, 4 offB, 5 offC, 6 sAb, 7 sAm, 8 sAk, 9 sBb, 10 sBk, 11 sBn,
// then those of the epilogue (vtl/backends/wgpu/_nn.py: its placeholders add a bias to each
// column, or also write the row sums of A (batch b's at word 12 + b*M); empty for a plain
// product).
@group(0) @binding(0) var<storage, read> A: array<{{T}}>;
@group(0) @binding(1) var<storage, read> B: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> C: array<{{T}}>;
var<workgroup> As: array<vec4<{{T}}>, 256>;
var<workgroup> Bs: array<vec4<{{T}}>, 256>;
{{DECL}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let M = pw(0u);
  let N = pw(1u);
  let K = pw(2u);
  let b = wid.z;
  let m0 = wid.y * 64u;
  let n0 = wid.x * 64u;
  let tx = lid % 16u;
  let ty = lid / 16u;
  let sAm = pi(7u);
  let sAk = pi(8u);
  let sBk = pi(10u);
  let sBn = pi(11u);
  let aBase = pi(3u) + i32(b) * pi(6u);
  let bBase = pi(4u) + i32(b) * pi(9u);
  var c0 = vec4<{{T}}>();
  var c1 = vec4<{{T}}>();
  var c2 = vec4<{{T}}>();
  var c3 = vec4<{{T}}>();
{{INIT}}
  for (var k0 = 0u; k0 < K; k0 += 16u) {
    for (var j = 0u; j < 4u; j++) {
      let e = lid + j * 256u;
      let kk = e % 16u;
      let mm = e / 16u;
      var av = {{T}}(0);
      if (m0 + mm < M && k0 + kk < K) {
        av = A[u32(aBase + i32(m0 + mm) * sAm + i32(k0 + kk) * sAk)];
      }
      As[kk * 16u + mm / 4u][mm % 4u] = av;
      let nn = e % 64u;
      let kb = e / 64u;
      var bv = {{T}}(0);
      if (n0 + nn < N && k0 + kb < K) {
        bv = B[u32(bBase + i32(k0 + kb) * sBk + i32(n0 + nn) * sBn)];
      }
      Bs[kb * 16u + nn / 4u][nn % 4u] = bv;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < 16u; kk++) {
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
  let cBase = pw(5u) + b * M * N;
  let col = n0 + tx * 4u;
  let rows = array<vec4<{{T}}>, 4>(c0, c1, c2, c3);
  for (var r = 0u; r < 4u; r++) {
    let row = m0 + ty * 4u + r;
    if (row < M) {
      let v = rows[r];
      for (var c = 0u; c < 4u; c++) {
        if (col + c < N) { C[cBase + row * N + col + c] = wrap_{{D}}({{EPI}}); }
      }
    }
  }
{{TAIL}}
}
