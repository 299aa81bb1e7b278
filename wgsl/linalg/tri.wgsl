// tril/triu of contiguous stacks of matrices: keep x where the diagonal test holds, else 0.
// Words: 0 n, 1 rows, 2 cols, 3 k (i32), 4 upper (0/1), 5 offset in, 6 offset out
@group(0) @binding(0) var<storage, read> src: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(0u)) { return; }
  let cols = pw(2u);
  let c = i32(i % cols);
  let r = i32((i / cols) % pw(1u));
  let d = c - r;
  var keep = d <= pi(3u);
  if (pw(4u) != 0u) { keep = d >= pi(3u); }
  dst[pw(6u) + i] = select({{T}}(0), src[pw(5u) + i], keep);
}
