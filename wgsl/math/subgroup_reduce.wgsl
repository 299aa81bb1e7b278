// workgroup_reduce.wgsl's wreduce, wsum and wmax on subgroups of SG invocations (SG a
// constant: vtl/backends/wgpu/_subgroups.py compiles it in where the adapter's subgroups
// have one size and invocation i of a workgroup is invocation i % SG of its subgroup). A
// segment's invocations exchange values by subgroupShuffleXor, no barrier; a segment wider
// than a subgroup adds its subgroups' results through workgroup memory. Every invocation of
// a segment computes the same value in the same order. All the workgroup's invocations must
// call them.
const SG = {{SG}}u;
var<workgroup> red: array<{{C}}, 256>;

fn sg_combine(a: {{C}}, b: {{C}}, max_op: bool) -> {{C}} {
  return select(a + b, max(a, b), max_op);
}

fn wreduce(lid: u32, lane: u32, v: {{C}}, width: u32, max_op: bool) -> {{C}} {
  var r = v;
  for (var h = min(width, SG) / 2u; h > 0u; h >>= 1u) {
    r = sg_combine(r, subgroupShuffleXor(r, h), max_op);
  }
  if (width <= SG) { return r; }
  if (lid % SG == 0u) { red[lid / SG] = r; }
  workgroupBarrier();
  let first = (lid - lane) / SG;
  var t = red[first];
  for (var i = 1u; i < width / SG; i++) { t = sg_combine(t, red[first + i], max_op); }
  workgroupBarrier();
  return t;
}

fn wsum(lid: u32, v: {{C}}) -> {{C}} { return wreduce(lid, lid, v, 256u, false); }

fn wmax(lid: u32, v: {{C}}) -> {{C}} { return wreduce(lid, lid, v, 256u, true); }
