// nonzero of a contiguous array. Mode 0: g[i] = 1 where src[offset + i] is non-zero (NaN
// counts), else 0. Mode 1 (g now its inclusive scan, c = g[n - 1] non-zeros): the row-major
// coordinates of each non-zero element, dst[d * c + g[i] - 1] for each dimension d.
// Words: 0 n, 1 src offset, 2 mode, 3 c, 4 nd, 5.. shape
@group(0) @binding(0) var<storage, read> src: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> g: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{R}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  let n = pw(0u);
  if (i >= n) { return; }
  if (pw(2u) == 0u) {
    let x = src[pw(1u) + i];
    g[i] = select(0u, 1u, {{TRUTHY}});
    return;
  }
  var prev = 0u;
  if (i > 0u) { prev = g[i - 1u]; }
  if (g[i] == prev) { return; }
  let c = pw(3u);
  let nd = pw(4u);
  var rem = i;
  for (var d = i32(nd) - 1; d >= 0; d--) {
    let s = pw(5u + u32(d));
    let q = rem / s;
    dst[u32(d) * c + prev] = {{R}}(rem - q * s);
    rem = q;
  }
}
