// Fused dropout with vtl.random's bits (vtl/backends/wgpu/random.py): one thread per
// Philox block, whose four words decide four consecutive elements; no mask in memory.
// Element f of the draw is kept when (word f >> 8) >= the threshold, and then scaled
// (computed in {{A}}, stored as {{T}} rounded once).
// Words: 0 n (elements of this dispatch), 1 its blocks, 2 offset x, 3 offset y,
//        4 first block of this dispatch in the draw, 5..8 the draw's counter (4 limbs, low
//        first), 9 key k0, 10 key k1, 11 keep threshold, 12.. scale
@group(0) @binding(0) var<storage, read> src: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{T}}>;

{{PHILOX}}

fn drop1(v: {{T}}, w: u32, s: {{A}}) -> {{T}} {
  let x = {{A}}(v) * select({{A}}(0), s, (w >> 8u) >= pw(11u));
  return {{STORE}};
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(1u)) { return; }
  let c = philox_block(vec4<u32>(pw(5u), pw(6u), pw(7u), pw(8u)), pw(4u) + i, pw(9u),
                       pw(10u));
  let s = {{SCALE}};
  let n = pw(0u);
  let e = 4u * i;
  let xo = pw(2u) + e;
  let yo = pw(3u) + e;
  dst[yo] = drop1(src[xo], c.x, s);
  if (e + 1u < n) { dst[yo + 1u] = drop1(src[xo + 1u], c.y, s); }
  if (e + 2u < n) { dst[yo + 2u] = drop1(src[xo + 2u], c.z, s); }
  if (e + 3u < n) { dst[yo + 3u] = drop1(src[xo + 3u], c.w, s); }
}
