// out = select(b, a, cond) with broadcasting through strides; contiguous output.
// Words: 0 n, 1 nd, 2 flags (1 c, 2 a, 4 b contiguous), 3 off c, 4 off a, 5 off b, 6 off out,
//        7.. shape[nd], strides c[nd], strides a[nd], strides b[nd]
@group(0) @binding(0) var<storage, read> C: array<u32>;
@group(0) @binding(1) var<storage, read> A: array<{{T}}>;
@group(0) @binding(2) var<storage, read> B: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> O: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(0u)) { return; }
  let nd = pw(1u);
  let fl = pw(2u);
  var ic = pw(3u) + i;
  if ((fl & 1u) == 0u) { ic = strided(i, nd, 7u, 7u + nd, pw(3u)); }
  var ia = pw(4u) + i;
  if ((fl & 2u) == 0u) { ia = strided(i, nd, 7u, 7u + 2u * nd, pw(4u)); }
  var ib = pw(5u) + i;
  if ((fl & 4u) == 0u) { ib = strided(i, nd, 7u, 7u + 3u * nd, pw(5u)); }
  O[pw(6u) + i] = select(B[ib], A[ia], C[ic] != 0u);
}
