// vtl.random's Philox-4x32-10 stream: one thread per 128-bit block, four words each.
// Words: 0 n (words), 1 nblocks, 2 offset out, 3..6 first block counter (4 limbs, low
//        first), 7 key k0, 8 key k1
@group(0) @binding(0) var<storage, read_write> dst: array<u32>;

// high and low words of a * m through 16-bit halves (no partial sum reaches 2**32)
fn mulhilo(a: u32, m: u32) -> vec2<u32> {
  let al = a & 0xFFFFu;
  let ah = a >> 16u;
  let ml = m & 0xFFFFu;
  let mh = m >> 16u;
  let ll = al * ml;
  let lh = al * mh;
  let hl = ah * ml;
  let mid = (ll >> 16u) + (lh & 0xFFFFu) + (hl & 0xFFFFu);
  let lo = (ll & 0xFFFFu) | ((mid & 0xFFFFu) << 16u);
  let hi = ah * mh + (lh >> 16u) + (hl >> 16u) + (mid >> 16u);
  return vec2<u32>(hi, lo);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(1u)) { return; }
  // the 128-bit counter + i, limb by limb with the carries
  var c0 = pw(3u) + i;
  var carry = select(0u, 1u, c0 < i);
  var c1 = pw(4u) + carry;
  carry = select(0u, 1u, c1 < carry);
  var c2 = pw(5u) + carry;
  carry = select(0u, 1u, c2 < carry);
  var c3 = pw(6u) + carry;
  var k0 = pw(7u);
  var k1 = pw(8u);
  for (var r = 0u; r < 10u; r++) {
    if (r > 0u) {
      k0 = k0 + 0x9E3779B9u;
      k1 = k1 + 0xBB67AE85u;
    }
    let p0 = mulhilo(c0, 0xD2511F53u);
    let p1 = mulhilo(c2, 0xCD9E8D57u);
    c0 = p1.x ^ c1 ^ k0;
    c1 = p1.y;
    c2 = p0.x ^ c3 ^ k1;
    c3 = p0.y;
  }
  let n = pw(0u);
  let w = 4u * i;
  let base = pw(2u) + w;
  dst[base] = c0;
  if (w + 1u < n) { dst[base + 1u] = c1; }
  if (w + 2u < n) { dst[base + 2u] = c2; }
  if (w + 3u < n) { dst[base + 3u] = c3; }
}
