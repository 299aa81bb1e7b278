// The partial sums of layer_norm's weight and bias gradients over a block of rows
// (vtl/backends/wgpu/nn.py): invocation (column c, block p) sums g xhat and g over the rows
// [p R, min((p + 1) R, M)), xhat = (x - mean) rstd, in C (float32 for float16/bfloat16)
// into PART[2p N + c] and PART[(2p + 1) N + c]; layer_norm_params_sum.wgsl adds the blocks.
// With one block, PART is the (2, N) result itself: P is T and put() rounds once.
// Reads along a row are adjacent invocations: no (M, N) temporary, and x and g read once.
// Words: 0 M, 1 N, 2 offset x, 3 offset g, 4 offset S (mean, rstd pairs), 5 offset PART,
//        6 R (rows per block)
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> G: array<{{T}}>;
@group(0) @binding(2) var<storage, read> S: array<{{C}}>;
@group(0) @binding(3) var<storage, read_write> PART: array<{{P}}>;

fn put(v: {{C}}) -> {{P}} { return {{PUT}}; }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let N = pw(1u);
  let c = wid.x * 256u + lid;
  if (c >= N) { return; }
  let p = wid.y;
  let r0 = p * pw(6u);
  let r1 = min(r0 + pw(6u), pw(0u));
  var sw = {{C}}(0);
  var sb = {{C}}(0);
  var row = r0;
  for (; row + 3u < r1; row += 4u) {  // four rows' loads in flight, then their sums
    var gv: array<{{C}}, 4>;
    var xv: array<{{C}}, 4>;
    /* unroll */ for (var k = 0u; k < 4u; k++) {
      let q = row + k;
      gv[k] = {{C}}(G[pw(3u) + q * N + c]);
      xv[k] = ({{C}}(X[pw(2u) + q * N + c]) - S[pw(4u) + 2u * q]) * S[pw(4u) + 2u * q + 1u];
    }
    /* unroll */ for (var k = 0u; k < 4u; k++) {
      sw += gv[k] * xv[k];
      sb += gv[k];
    }
  }
  for (; row < r1; row += 1u) {
    let g = {{C}}(G[pw(3u) + row * N + c]);
    let xh = ({{C}}(X[pw(2u) + row * N + c]) - S[pw(4u) + 2u * row]) * S[pw(4u) + 2u * row + 1u];
    sw += g * xh;
    sb += g;
  }
  PART[pw(5u) + 2u * p * N + c] = put(sw);
  PART[pw(5u) + (2u * p + 1u) * N + c] = put(sb);
}
