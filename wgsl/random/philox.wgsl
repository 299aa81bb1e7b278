// vtl.random's Philox-4x32-10 stream: one thread per 128-bit block, four words each.
// Words: 0 n (words), 1 nblocks, 2 offset out, 3..6 first block counter (4 limbs, low
//        first), 7 key k0, 8 key k1
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;

{{PHILOX}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(1u)) { return; }
  let c = philox_block(vec4<u32>(pw(3u), pw(4u), pw(5u), pw(6u)), i, pw(7u), pw(8u));
  let n = pw(0u);
  let w = 4u * i;
  let base = pw(2u) + w;
  dst[base] = c.x;
  if (w + 1u < n) { dst[base + 1u] = c.y; }
  if (w + 2u < n) { dst[base + 2u] = c.z; }
  if (w + 3u < n) { dst[base + 3u] = c.w; }
}
