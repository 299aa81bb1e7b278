// Sums and maxima in the compute type {{C}} over segments of `width` adjacent invocations of
// a workgroup (wreduce: `lane` is the invocation's place in its segment, `width` a power of
// two up to 256), or over all 256 (wsum, wmax); every invocation of a segment gets its
// result. Added to the kernels that call them (vtl/backends/wgpu/_kernels.py render); all
// the workgroup's invocations must call them.
var<workgroup> red: array<{{C}}, 256>;

fn wreduce(lid: u32, lane: u32, v: {{C}}, width: u32, max_op: bool) -> {{C}} {
  red[lid] = v;
  workgroupBarrier();
  for (var h = width / 2u; h > 0u; h >>= 1u) {
    if (lane < h) {
      let o = red[lid + h];
      red[lid] = select(red[lid] + o, max(red[lid], o), max_op);
    }
    workgroupBarrier();
  }
  let r = red[lid - lane];
  workgroupBarrier();
  return r;
}

fn wsum(lid: u32, v: {{C}}) -> {{C}} { return wreduce(lid, lid, v, 256u, false); }

fn wmax(lid: u32, v: {{C}}) -> {{C}} { return wreduce(lid, lid, v, 256u, true); }
