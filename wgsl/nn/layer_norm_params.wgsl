// The partial sums of layer_norm's weight and bias gradients over a block of rows
// (vtl/backends/wgpu/nn.py): invocation (load c of W columns, block p) sums g xhat and g over
// the rows [p R, min((p + 1) R, M)), xhat = (x - mean) rstd, in C (float32 for
// float16/bfloat16) into PART[2p N + c] and PART[(2p + 1) N + c] (in loads of W);
// layer_norm_params_sum.wgsl adds the blocks. With one block, PART is the (2, N) result
// itself: P is V and put() rounds once. V, VC as in layer_norm.wgsl.
// Reads along a row are adjacent invocations: no (M, N) temporary, and x and g read once.
// Words: 0 M, 1 N, 2 offset x, 3 offset g, 4 offset S (mean, rstd pairs), 5 offset PART,
//        6 R (rows per block)
@group(0) @binding(0) var<storage, read> X: array<{{V}}>;
@group(0) @binding(1) var<storage, read> G: array<{{V}}>;
@group(0) @binding(2) var<storage, read> S: array<{{C}}>;
@group(0) @binding(3) var<storage, read_write> PART: array<{{P}}>;

const W = {{W}}u;  // elements a load

fn put(v: {{VC}}) -> {{P}} { return {{PUT}}; }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let NV = pw(1u) / W;
  let c = wid.x * 256u + lid;
  if (c >= NV) { return; }
  let p = wid.y;
  let r0 = p * pw(6u);
  let r1 = min(r0 + pw(6u), pw(0u));
  let xb = pw(2u) / W + c;
  let gb = pw(3u) / W + c;
  var sw = {{VC}}(0);
  var sb = {{VC}}(0);
  var row = r0;
  for (; row + 3u < r1; row += 4u) {  // four rows' loads in flight, then their sums
    var gv: array<{{VC}}, 4>;
    var xv: array<{{VC}}, 4>;
    /* unroll */ for (var k = 0u; k < 4u; k++) {
      let q = row + k;
      gv[k] = {{VC}}(G[gb + q * NV]);
      xv[k] = ({{VC}}(X[xb + q * NV]) - {{VC}}(S[pw(4u) + 2u * q])) * S[pw(4u) + 2u * q + 1u];
    }
    /* unroll */ for (var k = 0u; k < 4u; k++) {
      sw += gv[k] * xv[k];
      sb += gv[k];
    }
  }
  for (; row < r1; row += 1u) {
    let g = {{VC}}(G[gb + row * NV]);
    let xh = ({{VC}}(X[xb + row * NV]) - {{VC}}(S[pw(4u) + 2u * row])) * S[pw(4u) + 2u * row + 1u];
    sw += g * xh;
    sb += g;
  }
  PART[pw(5u) / W + 2u * p * NV + c] = put(sw);
  PART[pw(5u) / W + (2u * p + 1u) * NV + c] = put(sb);
}
