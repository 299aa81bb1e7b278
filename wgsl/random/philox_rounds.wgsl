// Philox-4x32-10, the rounds of vtl.random's generator: substituted into the kernels that
// compute its words (the stream itself, fused dropout) as their PHILOX placeholder.

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

// the four words of block `ctr + i` (a 128-bit counter, low limb first, plus a 32-bit
// increment with the carries) of the key (k0, k1)
fn philox_block(ctr: vec4<u32>, i: u32, k0_: u32, k1_: u32) -> vec4<u32> {
  var c0 = ctr.x + i;
  var carry = select(0u, 1u, c0 < i);
  var c1 = ctr.y + carry;
  carry = select(0u, 1u, c1 < carry);
  var c2 = ctr.z + carry;
  carry = select(0u, 1u, c2 < carry);
  var c3 = ctr.w + carry;
  var k0 = k0_;
  var k1 = k1_;
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
  return vec4<u32>(c0, c1, c2, c3);
}
