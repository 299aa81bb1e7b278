// Sums and maxima over the 256 threads of a workgroup, in the compute type {{C}}; every
// thread gets the result. Added to the kernels that call wsum or wmax
// (vtl/backends/wgpu/_kernels.py render); all the workgroup's threads must call them.
var<workgroup> red: array<{{C}}, 256>;

fn wsum(lid: u32, v: {{C}}) -> {{C}} {
  red[lid] = v;
  workgroupBarrier();
  for (var h = 128u; h > 0u; h >>= 1u) {
    if (lid < h) { red[lid] += red[lid + h]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

fn wmax(lid: u32, v: {{C}}) -> {{C}} {
  red[lid] = v;
  workgroupBarrier();
  for (var h = 128u; h > 0u; h >>= 1u) {
    if (lid < h) { red[lid] = max(red[lid], red[lid + h]); }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}
