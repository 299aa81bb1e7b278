// Attention by products, backward (see gattn_softmax.wgsl): delta[r] = the sum over the n
// entries of row r of g * out, rows of contiguous (rows, n) float32 arrays. Sixteen
// invocations a row, sixteen rows a workgroup.
// Words: 0 rows, 1 n, 2 offset of g, 3 offset of out, 4 offset of delta
// (wreduce: wgsl/math/workgroup_reduce.wgsl)
@group(0) @binding(0) var<storage, read> G: array<f32>;
@group(0) @binding(1) var<storage, read> O: array<f32>;
@group(0) @binding(2) var<storage, read_write> Dl: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let r = (wid.y * nwg.x + wid.x) * 16u + lid / 16u;
  let lane = lid % 16u;
  let n = pw(1u);
  var acc = 0.0;
  if (r < pw(0u)) {
    let gb = pw(2u) + r * n;
    let ob = pw(3u) + r * n;
    for (var j = lane; j < n; j += 16u) { acc += G[gb + j] * O[ob + j]; }
  }
  acc = wreduce(lid, lane, acc, 16u, false);
  if (lane == 0u && r < pw(0u)) { Dl[pw(4u) + r] = acc; }
}
