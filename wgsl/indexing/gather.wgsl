// out[q, j, p] = src[q, idx[j], p] for src viewed as contiguous (pre, A, post);
// negative indices count from the end; an index outside the axis gives {{FILL}} (its error is
// recorded by the kernel that checked the indices: index_check.wgsl). Words: 0 n, 1 nidx, 2 post, 3 A,
// 4 src offset, 5 idx offset, 6 out offset
@group(0) @binding(0) var<storage, read> src: array<{{T}}>;
@group(0) @binding(1) var<storage, read> idx: array<{{I}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(0u)) { return; }
  let post = pw(2u);
  let A = pw(3u);
  let p = i % post;
  let t = i / post;
  let j = t % pw(1u);
  let q = t / pw(1u);
  var k = i32(idx[pw(5u) + j]);
  if (k < 0) { k += i32(A); }
  if (k < 0 || u32(k) >= A) {
    dst[pw(6u) + i] = {{FILL}};
    return;
  }
  dst[pw(6u) + i] = src[pw(4u) + (q * A + u32(k)) * post + p];
}
