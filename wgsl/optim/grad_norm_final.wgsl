// The joint norm of many arrays, last pass (vtl/backends/wgpu/optim.py): one workgroup
// folds the partials of the first pass in a fixed order (thread t: partials t, t + 256, ...;
// then a tree) and writes the norm.
// Words: 0 number of partials, 1 offset of the partials, 2 offset of the result
@group(0) @binding(0) var<storage, read> part: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> out: array<{{T}}>;
var<workgroup> red: array<{{T}}, 256>;

fn comb(a: {{T}}, b: {{T}}) -> {{T}} { {{COMB}} }

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
  var acc = {{T}}(0);
  let n = pw(0u);
  let base = pw(1u);
  for (var i = lid; i < n; i += 256u) { acc = comb(acc, part[base + i]); }
  red[lid] = acc;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s = s >> 1u) {
    if (lid < s) { red[lid] = comb(red[lid], red[lid + s]); }
    workgroupBarrier();
  }
  if (lid == 0u) {
    let total = red[0];
    out[pw(2u)] = {{FINAL}};
  }
}
