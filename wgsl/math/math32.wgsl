// float32 pow, sin, cos and tan, exact or within a few ulp on any conforming implementation.
//
// Vulkan lets a driver compiler contract and rewrite floating-point expressions (only SPIR-V's
// NoContraction opts out, and WGSL cannot ask for it), and WGSL's builtins are loose (pow, exp2
// and log2 within several ulp, sin and cos only to an absolute 2^-11). Float tricks that rely
// on exact rounding (pi/2 or ln2 split in parts, double-float sums) are therefore not reliable
// on every driver. Every step here whose accuracy depends on exact arithmetic uses 32-bit
// integers instead, which are exact everywhere:
// * sin/cos/tan: a Payne-Hanek reduction of |x| > pi/4 with the bits of 2/pi (M32_2OPI) gives
//   the quadrant and the remainder r in [-pi/4, pi/4] correctly rounded; then polynomials in r.
// * pow: log2|x| and exp2 in fixed point with 64-bit fractions (vec2<u32> = (low, high) words),
//   to about 2^-30 relative, and the result rounded once from its bits, so results that are
//   floats (7 ** 3, 4 ** 0.5, 2 ** -3) come out exact and the others within 1 ulp.
// Floats only evaluate short polynomials of small terms, whose rounding errors stay far below
// the result's ulp in whatever order a compiler evaluates them. Signed zeros, infinities, NaN
// and subnormal results are built from bits (drivers may flush subnormals and ignore zero signs).

// -- 64-bit integer helpers on vec2<u32> (low, high) -----------------------------------------

// the full product a * b
fn m32_mul(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xffffu;
  let a1 = a >> 16u;
  let b0 = b & 0xffffu;
  let b1 = b >> 16u;
  let p00 = a0 * b0;
  let p01 = a0 * b1;
  let p10 = a1 * b0;
  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return vec2<u32>((p00 & 0xffffu) | (mid << 16u),
                   a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}

fn m32_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

fn m32_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}

fn m32_neg(a: vec2<u32>) -> vec2<u32> { return m32_sub(vec2<u32>(0u, 0u), a); }
fn m32_isneg(a: vec2<u32>) -> bool { return (a.y >> 31u) != 0u; }
fn m32_abs(a: vec2<u32>) -> vec2<u32> { return select(a, m32_neg(a), m32_isneg(a)); }

// a << s and a >> s (logical) for s < 64 (WGSL shifts take the amount modulo 32)
fn m32_shl(a: vec2<u32>, s: u32) -> vec2<u32> {
  if (s == 0u) { return a; }
  if (s >= 32u) { return vec2<u32>(0u, a.x << (s - 32u)); }
  return vec2<u32>(a.x << s, (a.y << s) | (a.x >> (32u - s)));
}

fn m32_shr(a: vec2<u32>, s: u32) -> vec2<u32> {
  if (s == 0u) { return a; }
  if (s >= 32u) { return vec2<u32>(a.y >> (s - 32u), 0u); }
  return vec2<u32>((a.x >> s) | (a.y << (32u - s)), a.y >> s);
}

// the 32 bits of hi:lo starting s < 32 bits below the top of hi, and s bits above the bottom
fn m32_funnel(hi: u32, lo: u32, s: u32) -> u32 {
  if (s == 0u) { return hi; }
  return (hi << s) | (lo >> (32u - s));
}

fn m32_fsr(hi: u32, lo: u32, s: u32) -> u32 {
  if (s == 0u) { return lo; }
  return (lo >> s) | (hi << (32u - s));
}

// the high 64 bits of the 128-bit product a * b, less at most 2 (the low words' product is
// left out): a * b for fractions with 64 bits
fn m32_qmul(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let hl = m32_mul(a.y, b.x);
  let lh = m32_mul(a.x, b.y);
  let mid = hl.x + lh.x;
  var r = m32_add(m32_mul(a.y, b.y), vec2<u32>(hl.y, 0u));
  r = m32_add(r, vec2<u32>(lh.y, 0u));
  return m32_add(r, vec2<u32>(select(0u, 1u, mid < hl.x), 0u));
}

// -- sin, cos, tan -----------------------------------------------------------------------------

// bits of 2/pi after the point, after one word of zeros
var<private> M32_2OPI: array<u32, 8> = array<u32, 8>(0u, 0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u, 0xF534DDC0u,
                               0xDB629599u, 0x3C439041u, 0xFE5163ABu);
const M32_PIO4 = vec2<u32>(0x2168C235u, 0xC90FDAA2u);  // pi/4 * 2^64

struct M32Red { r: f32, lo: f32, q: u32 }

// |x| = M 2^(ex - 150) (a: its bits, finite, |x| > pi/4) = (4k + q) pi/2 + r + lo with
// |r| <= pi/4 and |lo| <= ulp(r) / 2. x 2/pi mod 4 = M W 2^-94 mod 4 with W the 96 bits of
// 2/pi from the bit of weight 2^(150 - ex) on: the bits before W add multiples of 4 and those
// after it less than 2^-70.
fn m32_reduce(a: u32) -> M32Red {
  let ex = a >> 23u;
  let m = (a & 0x7fffffu) | 0x800000u;
  let q0 = ex - 120u;  // position of W in M32_2OPI, in bits
  let wi = q0 >> 5u;
  let sh = q0 & 31u;
  let t0 = M32_2OPI[wi];
  let t1 = M32_2OPI[wi + 1u];
  let t2 = M32_2OPI[wi + 2u];
  let t3 = M32_2OPI[wi + 3u];
  let pa = m32_mul(m, m32_funnel(t2, t3, sh));
  let pb = m32_mul(m, m32_funnel(t1, t2, sh));
  let pc = m32_mul(m, m32_funnel(t0, t1, sh));
  // M W = (p2 p1 p0) mod 2^96, the point between bits 30 and 29 of p2
  let p1 = pa.y + pb.x;
  let p2 = pb.y + pc.x + select(0u, 1u, p1 < pa.y);
  var q = p2 >> 30u;
  var f2 = p2 & 0x3fffffffu;
  var f1 = p1;
  var f0 = pa.x;
  var neg = false;
  if ((f2 & 0x20000000u) != 0u) {  // fraction >= 1/2: the next quadrant, r = -(1 - fraction)
    q = q + 1u;
    neg = true;
    f0 = ~f0 + 1u;
    let c0 = select(0u, 1u, f0 == 0u);
    f1 = ~f1 + c0;
    let c1 = select(0u, 1u, c0 == 1u && f1 == 0u);
    f2 = (~f2 + c1) & 0x3fffffffu;
  }
  // normalize the fraction f = (f2 f1 f0) 2^-94 to N 2^(-62-s), N with 64 bits
  var s = 0u;
  if (f2 == 0u) { f2 = f1; f1 = f0; f0 = 0u; s = 32u; }
  if (f2 == 0u) { f2 = f1; f1 = f0; f0 = 0u; s = s + 32u; }
  if (f2 == 0u) { return M32Red(0.0, 0.0, q & 3u); }
  let lz = countLeadingZeros(f2);
  s = s + lz;
  let n = vec2<u32>(m32_funnel(f1, f0, lz), m32_funnel(f2, f1, lz));
  // r + lo = f pi/2 = (N pi/4) 2^(-61-s) = T 2^(-61-s): r rounded to 24 bits from T's 64
  var r = m32_qmul(n, M32_PIO4);
  if (r.y < 0x80000000u) { r = m32_shl(r, 1u); s = s + 1u; }
  let mr = m32_round(r, 40u);
  let sg = select(0u, 0x80000000u, neg);
  let d = m32_sub(r, vec2<u32>(0u, mr << 8u));  // T - (rounded T), |d| <= 2^39
  var lo = ldexp(f32(bitcast<i32>((d.x >> 8u) | (d.y << 24u))), -53 - i32(s));
  if (neg) { lo = -lo; }
  return M32Red(bitcast<f32>((((128u - s) << 23u) + mr) | sg), lo, q & 3u);
}

// x = (4k + q) pi/2 + r + lo for finite x, |r| <= pi/4 (x itself when |x| <= pi/4)
fn m32_red(x: f32) -> M32Red {
  let b = bitcast<u32>(x);
  let a = b & 0x7fffffffu;
  if (a <= 0x3f490fdau) { return M32Red(x, 0.0, 0u); }
  let t = m32_reduce(a);
  if ((b >> 31u) == 0u) { return t; }
  return M32Red(-t.r, -t.lo, (4u - t.q) & 3u);
}

// sin, cos and tan of r + lo on [-pi/4, pi/4]: Taylor polynomials for sin and cos (truncation
// below 2^-28 relative), a least-squares fit of tan(r)/r in r^2 (below 2^-29), plus the first
// order term in lo
fn m32_sinp(t: M32Red) -> f32 {
  let r = t.r;
  let z = r * r;
  var p = f32(1.0 / 362880.0);
  p = p * z - f32(1.0 / 5040.0);
  p = p * z + f32(1.0 / 120.0);
  p = p * z - f32(1.0 / 6.0);
  return r + (r * z * p + t.lo * (1.0 - 0.5 * z));
}

fn m32_cosp(t: M32Red) -> f32 {
  let r = t.r;
  let z = r * r;
  var p = f32(-1.0 / 3628800.0);
  p = p * z + f32(1.0 / 40320.0);
  p = p * z - f32(1.0 / 720.0);
  p = p * z + f32(1.0 / 24.0);
  let hz = 0.5 * z;
  let w = 1.0 - hz;
  return w + (((1.0 - w) - hz) + (z * z * p - r * t.lo));
}

fn m32_tanp(t: M32Red) -> f32 {
  let r = t.r;
  let z = r * r;
  var p = f32(0.004375537908613254);
  p = p * z + f32(9.102896620219372e-05);
  p = p * z + f32(0.010834652569396756);
  p = p * z + f32(0.021282617605141406);
  p = p * z + f32(0.05405983967067187);
  p = p * z + f32(0.13332663933752043);
  p = p * z + f32(0.33333349738970847);
  let rp = r * z * p;
  let tn = r + (rp + t.lo * (1.0 + (r + rp) * (r + rp)));
  return tn;
}

fn m32_sin(x: f32) -> f32 {
  let a = bitcast<u32>(x) & 0x7fffffffu;
  if (a >= 0x7f800000u) { return f32_nan(); }
  if (a < 0x39800000u) { return x; }  // |x| < 2^-12: sin x rounds to x (also -0, subnormals)
  let t = m32_red(x);
  switch t.q {
    case 0u: { return m32_sinp(t); }
    case 1u: { return m32_cosp(t); }
    case 2u: { return -m32_sinp(t); }
    default: { return -m32_cosp(t); }
  }
}

fn m32_cos(x: f32) -> f32 {
  let a = bitcast<u32>(x) & 0x7fffffffu;
  if (a >= 0x7f800000u) { return f32_nan(); }
  if (a < 0x39800000u) { return 1.0; }  // |x| < 2^-12: cos x rounds to 1
  let t = m32_red(x);
  switch t.q {
    case 0u: { return m32_cosp(t); }
    case 1u: { return -m32_sinp(t); }
    case 2u: { return -m32_cosp(t); }
    default: { return m32_sinp(t); }
  }
}

fn m32_tan(x: f32) -> f32 {
  let a = bitcast<u32>(x) & 0x7fffffffu;
  if (a >= 0x7f800000u) { return f32_nan(); }
  if (a < 0x39800000u) { return x; }  // |x| < 2^-12: tan x rounds to x
  let t = m32_red(x);
  if ((t.q & 1u) == 0u) { return m32_tanp(t); }
  return -1.0 / m32_tanp(t);  // tan(r + pi/2) = -1 / tan r
}

// -- pow ---------------------------------------------------------------------------------------

// round-half-even of m / 2^sa, 40 <= sa (the result has at most 25 bits)
fn m32_round(m: vec2<u32>, sa: u32) -> u32 {
  if (sa >= 65u) { return 0u; }
  if (sa == 64u) { return select(0u, 1u, m.y > 0x80000000u || (m.y == 0x80000000u && m.x != 0u)); }
  let s = sa - 32u;
  let q = m.y >> s;
  let rb = (m.y >> (s - 1u)) & 1u;
  let sticky = (m.y & ((1u << (s - 1u)) - 1u)) | m.x;
  return q + select(0u, 1u, rb == 1u && (sticky != 0u || (q & 1u) == 1u));
}

// a fraction with 64 bits as f32, and |c| < 1 to 64 bits (truncated, two's complement)
fn m32_tof(v: vec2<u32>) -> f32 {
  return f32(v.y) * 2.3283064365386963e-10 + f32(v.x) * 5.421010862427522e-20;
}

fn m32_fix(c: f32) -> vec2<u32> {
  let b = bitcast<u32>(c);
  let ex = i32((b >> 23u) & 0xffu);
  let m = (b & 0x7fffffu) | 0x800000u;
  let s = ex - 86;
  var v = vec2<u32>(0u, 0u);
  if (ex != 0 && s >= 0) {
    v = m32_shl(vec2<u32>(m, 0u), u32(s));
  } else if (ex != 0 && s > -24) {
    v.x = m >> u32(-s);
  }
  if ((b >> 31u) != 0u) { v = m32_neg(v); }
  return v;
}

// 96-bit two's complement (low, middle, high) words
fn m32_sx(a: vec2<u32>) -> vec3<u32> {
  return vec3<u32>(a.x, a.y, select(0u, 0xffffffffu, m32_isneg(a)));
}

fn m32_add3(a: vec3<u32>, b: vec3<u32>) -> vec3<u32> {
  let lo = a.x + b.x;
  let m0 = a.y + b.y;
  let mid = m0 + select(0u, 1u, lo < a.x);
  return vec3<u32>(lo, mid, a.z + b.z + select(0u, 1u, m0 < a.y) + select(0u, 1u, mid < m0));
}

fn m32_neg3(a: vec3<u32>) -> vec3<u32> { return m32_add3(~a, vec3<u32>(1u, 0u, 0u)); }

// log2 of the positive finite x (bits ax, x != 1), about 2^-44 absolute, as a 96-bit fixed-point
// number with 64 fraction bits. x = 2^e m, m in [1, 2) (M = m 2^23); with r_i = R_i 2^-11 from
// the 7 bits of m after the point (r_i m or r_i m / 2 near 1), log2 x = e (+ 1) - log2 r_i
// + log2(1 + t), |t| <= 2^-7 exact in 64 bits, log(1 + t) = t - t^2/2 + t^3 (1/3 - t/4 ...).
// Near x = 1 (r_i = 1, t = x - 1) it is accurate relative to log2 x itself.
fn m32_log2x(ax: u32) -> vec3<u32> {
  var m: u32;
  var e: i32;
  if (ax < 0x800000u) {
    let s = countLeadingZeros(ax) - 8u;
    m = ax << s;
    e = -126 - i32(s);
  } else {
    m = (ax & 0x7fffffu) | 0x800000u;
    e = i32(ax >> 23u) - 127;
  }
  let i = (m >> 16u) & 127u;
  let z = m32_mul(m, M32_LOGR[i]);
  var t: vec2<u32>;
  if (i < 53u) {
    t = m32_shl(m32_sub(z, vec2<u32>(0u, 4u)), 30u);  // m r_i - 1 = z 2^-34 - 1
  } else {
    t = m32_shl(m32_sub(z, vec2<u32>(0u, 8u)), 29u);  // m r_i / 2 - 1 = z 2^-35 - 1
    e = e + 1;
  }
  let ta = m32_abs(t);
  var tf = m32_tof(ta);
  if (m32_isneg(t)) { tf = -tf; }
  let c = tf * tf * tf * (f32(1.0 / 3.0) - tf * (0.25 - tf * (0.2 - tf * f32(1.0 / 6.0))));
  let lnp = m32_add(m32_sub(t, m32_shr(m32_qmul(ta, ta), 1u)), m32_fix(c));
  let la = m32_abs(lnp);
  var l2 = m32_add(la, m32_qmul(la, M32_INVLN2M1));  // log(1 + t) / ln2
  if (m32_isneg(lnp)) { l2 = m32_neg(l2); }
  let lg = m32_add3(vec3<u32>(0u, 0u, bitcast<u32>(e)), m32_sx(M32_LOGT[i]));
  return m32_add3(lg, m32_sx(l2));
}

// bits of 2^(n + g) for an integer n in [-151, 127] and a fraction g with 64 bits: 2^g =
// 2^(j/16) 2^h with j the top 4 bits of g, 2^h = exp(u) = 1 + u + u^2/2 + ... (u = h ln2 < 0.044),
// the result rounded once (to a subnormal or infinity where it lies there)
fn m32_exp2i(n0: i32, g: vec2<u32>) -> u32 {
  var n = n0;
  let u = m32_qmul(vec2<u32>(g.x, g.y & 0x0fffffffu), M32_LN2);
  let uf = m32_tof(u);
  let d = uf * uf * (0.5 + uf * (f32(1.0 / 6.0) + uf * (f32(1.0 / 24.0)
          + uf * (f32(1.0 / 120.0) + uf * f32(1.0 / 720.0)))));
  let tj = M32_EXPT[g.y >> 28u];  // 2^(j/16) with 63 fraction bits
  var mt = m32_add(tj, m32_qmul(tj, m32_add(u, m32_fix(d))));
  if (mt.y < tj.y) {  // rounded up to 2
    mt = vec2<u32>(0u, 0x80000000u);
    n = n + 1;
  }
  return m32_pack(n, mt);
}

// bits of (mt 2^-63) 2^n for mt in [2^63, 2^64) (any integer n), rounded once: to 24 bits, a
// subnormal, zero or infinity
fn m32_pack(n: i32, mt: vec2<u32>) -> u32 {
  if (n >= 128) { return 0x7f800000u; }
  if (n < -151) { return 0u; }
  if (n < -126) { return m32_round(mt, u32(-86 - n)); }
  return min((u32(n + 126) << 23u) + m32_round(mt, 40u), 0x7f800000u);
}

// the low 64 bits of a * b
fn m32_mul64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = m32_mul(a.x, b.x);
  return vec2<u32>(lo.x, lo.y + a.x * b.y + a.y * b.x);
}

// bits of |x|^n for an integer n >= 1, exact then rounded once (ties to even, as NumPy), when
// x = m 2^k (m odd) has m^n < 2^64; 0xffffffff otherwise
fn m32_ipow(ax: u32, n: u32) -> u32 {
  var m = ax & 0x7fffffu;
  var k = -149;
  if (ax >= 0x800000u) {
    m = m | 0x800000u;
    k = i32(ax >> 23u) - 150;
  }
  let tz = countTrailingZeros(m);
  m = m >> tz;
  k = k + i32(tz);
  if ((32u - countLeadingZeros(m)) * n > 64u) { return 0xffffffffu; }
  var r = vec2<u32>(1u, 0u);
  var b = vec2<u32>(m, 0u);
  var e = n;
  loop {
    if ((e & 1u) != 0u) { r = m32_mul64(r, b); }
    e = e >> 1u;
    if (e == 0u) { break; }
    b = m32_mul64(b, b);
  }
  let lz = select(countLeadingZeros(r.y), 32u + countLeadingZeros(r.x), r.y == 0u);
  return m32_pack(63 - i32(lz) + i32(n) * k, m32_shl(r, lz));
}

// bits of |x|^y for finite x > 0, x != 1, and finite y != 0 (ay: bits of |y|)
fn m32_powpos(ax: u32, ay: u32, yneg: bool) -> u32 {
  let big = ax > 0x3f800000u;  // log2 x > 0
  let ey = i32(ay >> 23u) - 127;
  if (ey < -40) { return 0x3f800000u; }  // |y log2 x| < 2^-32: rounds to 1
  if (ey > 32) { return select(0u, 0x7f800000u, big != yneg); }  // |y log2 x| > 2^9
  var lg = m32_log2x(ax);
  let lneg = (lg.z >> 31u) != 0u;
  if (lneg) { lg = m32_neg3(lg); }
  // |y log2 x| = my |log2 x| 2^(ey-23): the product S (4 words, point after word 1) shifted
  // left by 9, then the 64 fraction bits and the integer part read at bit 32 - ey
  let my = (ay & 0x7fffffu) | 0x800000u;
  let pa = m32_mul(my, lg.x);
  let pb = m32_mul(my, lg.y);
  let pc = my * lg.z;  // |log2 x| < 256
  let s1 = pa.y + pb.x;
  let s2a = pb.y + pc;
  let s2 = s2a + select(0u, 1u, s1 < pa.y);
  let s3 = select(0u, 1u, s2a < pb.y) + select(0u, 1u, s2 < s2a);
  let w0 = pa.x << 9u;
  let w1 = (s1 << 9u) | (pa.x >> 23u);
  let w2 = (s2 << 9u) | (s1 >> 23u);
  let w3 = (s3 << 9u) | (s2 >> 23u);
  let p = u32(32 - ey);
  let k = p >> 5u;  // 0, 1 or 2: the words from k on (selects, not an indexed array)
  let sh = p & 31u;
  let a0 = select(select(w0, w1, k == 1u), w2, k == 2u);
  let a1 = select(select(w1, w2, k == 1u), w3, k == 2u);
  let a2 = select(select(w2, w3, k == 1u), 0u, k == 2u);
  let a3 = select(w3, 0u, k >= 1u);
  let fr = vec2<u32>(m32_fsr(a1, a0, sh), m32_fsr(a2, a1, sh));
  let ip = m32_fsr(a3, a2, sh);
  if (ip >= 512u || m32_fsr(0u, a3, sh) != 0u) {
    return select(0x7f800000u, 0u, lneg != yneg);
  }
  let pneg = lneg != yneg;
  var n = i32(ip);
  var g = fr;
  if (pneg) {
    n = -n;
    if (fr.x != 0u || fr.y != 0u) { n = n - 1; g = m32_neg(fr); }
  }
  if (n >= 128) { return 0x7f800000u; }
  if (n < -151) { return 0u; }
  return m32_exp2i(n, g);
}

// x ** y as C99 (and NumPy): pow(x, +-0) = 1 and pow(1, y) = 1 (also for NaN), pow(-1, +-inf)
// = 1, zeros and infinities by the sign and parity of y, NaN for x < 0 and y not an integer
fn m32_pow(x: f32, y: f32) -> f32 {
  if (y == 2.0) { return x * x; }  // the common square: one correctly rounded product
  let bx = bitcast<u32>(x);
  let by = bitcast<u32>(y);
  let ax = bx & 0x7fffffffu;
  let ay = by & 0x7fffffffu;
  if (ay == 0u || bx == 0x3f800000u) { return 1.0; }
  if (ax > 0x7f800000u || ay > 0x7f800000u) { return f32_nan(); }
  let xneg = (bx >> 31u) != 0u;
  let yneg = (by >> 31u) != 0u;
  if (ay == 0x7f800000u) {
    if (ax == 0x3f800000u) { return 1.0; }
    return bitcast<f32>(select(0u, 0x7f800000u, (ax > 0x3f800000u) != yneg));
  }
  // y an integer (|y| >= 2^24 always; an even one), y odd
  let ey = i32(ay >> 23u) - 127;
  var yint = ey >= 24;
  var yodd = false;
  if (ey >= 0 && ey < 24) {
    let fb = u32(23 - ey);
    let my = (ay & 0x7fffffu) | 0x800000u;
    yint = (my & ((1u << fb) - 1u)) == 0u;
    yodd = yint && ((my >> fb) & 1u) == 1u;
  }
  let sg = select(0u, 0x80000000u, xneg && yodd);
  if (ax == 0u) { return bitcast<f32>(sg | select(0u, 0x7f800000u, yneg)); }
  if (ax == 0x7f800000u) { return bitcast<f32>(sg | select(0x7f800000u, 0u, yneg)); }
  if (xneg && !yint) { return f32_nan(); }
  if (ax == 0x3f800000u) { return bitcast<f32>(sg | 0x3f800000u); }
  if (yint && !yneg && ey < 6) {  // 1 <= y < 64
    let r = m32_ipow(ax, u32(y));
    if (r != 0xffffffffu) { return bitcast<f32>(sg | r); }
  }
  return bitcast<f32>(sg | m32_powpos(ax, ay, yneg));
}

const M32_INVLN2M1 = vec2<u32>(0xB82FE177u, 0x71547652u);  // 1/ln2 - 1
const M32_LN2 = vec2<u32>(0xD1CF79ACu, 0xB17217F7u);
// R_i of m32_log2x, and -log2(R_i 2^-11) with 64 fraction bits (two's complement)
var<private> M32_LOGR: array<u32, 128> = array<u32, 128>(
  2048u, 2024u, 2009u, 1993u, 1978u, 1964u, 1949u, 1935u, 1920u, 1907u, 1893u, 1879u, 1866u, 1853u, 1840u, 1827u,
  1814u, 1802u, 1789u, 1777u, 1765u, 1753u, 1742u, 1730u, 1719u, 1708u, 1697u, 1686u, 1675u, 1664u, 1654u, 1644u,
  1633u, 1623u, 1613u, 1603u, 1594u, 1584u, 1574u, 1565u, 1556u, 1547u, 1538u, 1529u, 1520u, 1511u, 1502u, 1494u,
  1485u, 1477u, 1469u, 1460u, 1452u, 2889u, 2873u, 2857u, 2842u, 2826u, 2811u, 2796u, 2781u, 2767u, 2752u, 2738u,
  2724u, 2709u, 2696u, 2682u, 2668u, 2655u, 2641u, 2628u, 2615u, 2602u, 2589u, 2576u, 2564u, 2551u, 2539u, 2527u,
  2515u, 2503u, 2491u, 2479u, 2467u, 2456u, 2444u, 2433u, 2422u, 2411u, 2399u, 2389u, 2378u, 2367u, 2356u, 2346u,
  2335u, 2325u, 2315u, 2305u, 2294u, 2284u, 2275u, 2265u, 2255u, 2245u, 2236u, 2226u, 2217u, 2208u, 2198u, 2189u,
  2180u, 2171u, 2162u, 2153u, 2144u, 2136u, 2127u, 2118u, 2110u, 2101u, 2093u, 2085u, 2076u, 2068u, 2060u, 2048u);
var<private> M32_LOGT: array<vec2<u32>, 128> = array<vec2<u32>, 128>(
  vec2<u32>(0x00000000u, 0x00000000u), vec2<u32>(0x82829143u, 0x045A8878u), vec2<u32>(0x8AC1503Bu, 0x0719D8F4u),
  vec2<u32>(0xBFCA54E0u, 0x0A0DDC77u), vec2<u32>(0x6C204AACu, 0x0CD8281Cu), vec2<u32>(0x845B4EB1u, 0x0F77BC92u),
  vec2<u32>(0x88454579u, 0x124C9EA8u), vec2<u32>(0xF1DA4237u, 0x14F63A7Fu), vec2<u32>(0xCFBB4C67u, 0x17D60496u),
  vec2<u32>(0x4CB04136u, 0x1A585DECu), vec2<u32>(0xB2A116ABu, 0x1D110AFCu), vec2<u32>(0x285BC67Eu, 0x1FCEE3F8u),
  vec2<u32>(0xA1F12BB1u, 0x225F4DEAu), vec2<u32>(0xFF708F80u, 0x24F44EACu), vec2<u32>(0x19BCA143u, 0x278DF6CAu),
  vec2<u32>(0xDE368333u, 0x2A2C5726u), vec2<u32>(0xE1720A11u, 0x2CCF8104u), vec2<u32>(0xC6B24B4Cu, 0x2F430A52u),
  vec2<u32>(0x37FB7A82u, 0x31EF9ACFu), vec2<u32>(0x0ACF78FFu, 0x346BF0A5u), vec2<u32>(0xB252F002u, 0x36EC9648u),
  vec2<u32>(0xB247A99Du, 0x39719AC9u), vec2<u32>(0x211A06E3u, 0x3BC4C2EEu), vec2<u32>(0x2D51115Au, 0x3E525329u),
  vec2<u32>(0xD9F33095u, 0x40AD6B5Fu), vec2<u32>(0x7FCF01DAu, 0x430C62BBu), vec2<u32>(0xEFA5D74Du, 0x456F460Au),
  vec2<u32>(0xF21D1C62u, 0x47D6225Cu), vec2<u32>(0xF4840D5Au, 0x4A410501u), vec2<u32>(0xC3B9A197u, 0x4CAFFB8Du),
  vec2<u32>(0xF07E3BBFu, 0x4EE9E58Fu), vec2<u32>(0xBDF61DB2u, 0x51274457u), vec2<u32>(0x5CCE98FDu, 0x53A20434u),
  vec2<u32>(0xF3511E5Cu, 0x55E6C862u), vec2<u32>(0x85F5FEC9u, 0x582F2376u), vec2<u32>(0xF138CE42u, 0x5A7B20DCu),
  vec2<u32>(0xD1AD9455u, 0x5C8F76C4u), vec2<u32>(0x3CAAB4C8u, 0x5EE27C0Bu), vec2<u32>(0x1D5123E2u, 0x61394605u),
  vec2<u32>(0xFEF7C67Bu, 0x635771F9u), vec2<u32>(0x47C138BDu, 0x6578BE6Du), vec2<u32>(0x7A20EFE7u, 0x679D34A8u),
  vec2<u32>(0xB65E92E0u, 0x69C4DE1Eu), vec2<u32>(0xB4B211EAu, 0x6BEFC46Du), vec2<u32>(0xC6C1BFC0u, 0x6E1DF15Eu),
  vec2<u32>(0xE0C5C4ACu, 0x704F6EE7u), vec2<u32>(0xAA971510u, 0x7284472Cu), vec2<u32>(0xAFE19FF6u, 0x747D35FFu),
  vec2<u32>(0x0C66012Fu, 0x76B880A2u), vec2<u32>(0xD41685A4u, 0x78B73B3Cu), vec2<u32>(0x52F8AB13u, 0x7AB8BBF1u),
  vec2<u32>(0x6D8A6E0Bu, 0x7CFDC730u), vec2<u32>(0x6CD9006Eu, 0x7F0546C4u), vec2<u32>(0x646548D2u, 0x80EEE988u),
  vec2<u32>(0xBE602CB0u, 0x82FC0020u), vec2<u32>(0xD454C56Du, 0x850C056Du), vec2<u32>(0x555DF73Fu, 0x86FDBBB0u),
  vec2<u32>(0xD1E83304u, 0x8913879Au), vec2<u32>(0x0F16DF15u, 0x8B0AB745u), vec2<u32>(0x11DE57E9u, 0x8D049829u),
  vec2<u32>(0x1C2EF35Bu, 0x8F0131B1u), vec2<u32>(0xA73A9DEAu, 0x90DE5E4Au), vec2<u32>(0x1DF57D70u, 0x92E05023u),
  vec2<u32>(0x2C4DB040u, 0x94C28749u), vec2<u32>(0x8B233A76u, 0x96A73744u), vec2<u32>(0xA5C2D2FDu, 0x98B14BC4u),
  vec2<u32>(0x62FD91CCu, 0x9A781BEBu), vec2<u32>(0x55B7143Fu, 0x9C645DF0u), vec2<u32>(0xA493FAE2u, 0x9E53337Eu),
  vec2<u32>(0xC6E21B2Cu, 0xA0210545u), vec2<u32>(0x7B8A399Cu, 0xA214E67Cu), vec2<u32>(0xAA4B8AC5u, 0xA3E773EBu),
  vec2<u32>(0x8D777D95u, 0xA5BC51A5u), vec2<u32>(0x7AF226DFu, 0xA7938591u), vec2<u32>(0x7E4316D7u, 0xA96D15ADu),
  vec2<u32>(0xCDA53209u, 0xAB49080Eu), vec2<u32>(0x45EA2333u, 0xAD0280F2u), vec2<u32>(0x99012BD9u, 0xAEE31A5Cu),
  vec2<u32>(0x9D7B88A6u, 0xB0A0E970u), vec2<u32>(0x75DA3C3Eu, 0xB260D531u), vec2<u32>(0xD5CFABB1u, 0xB422E2C4u),
  vec2<u32>(0x593E7FB6u, 0xB5E71763u), vec2<u32>(0xE144F2ABu, 0xB7AD7858u), vec2<u32>(0xF3873D6Cu, 0xB9760B04u),
  vec2<u32>(0x1BC9E1AEu, 0xBB40D4DBu), vec2<u32>(0xAF55C56Cu, 0xBCE75A2Au), vec2<u32>(0x15393279u, 0xBEB67299u),
  vec2<u32>(0x68458152u, 0xC060F421u), vec2<u32>(0xE139A220u, 0xC20D646Du), vec2<u32>(0xA141A93Du, 0xC3BBC7FFu),
  vec2<u32>(0xF912088Du, 0xC5938AACu), vec2<u32>(0xDE79BD8Cu, 0xC71E7B46u), vec2<u32>(0xE235B447u, 0xC8D2D44Eu),
  vec2<u32>(0xD425DDB1u, 0xCA893341u), vec2<u32>(0xE7DC5668u, 0xCC419CF2u), vec2<u32>(0x89412F20u, 0xCDD3C6C4u),
  vec2<u32>(0x39E1A778u, 0xCF902411u), vec2<u32>(0x87F98B1Du, 0xD125EDCCu), vec2<u32>(0x4EDEA4D3u, 0xD2BD774Cu),
  vec2<u32>(0x040D81D0u, 0xD456C471u), vec2<u32>(0x82D342CFu, 0xD61B0E09u), vec2<u32>(0x7DA2BB61u, 0xD7B81C7Au),
  vec2<u32>(0xDA57AE71u, 0xD92D6944u), vec2<u32>(0x32E6B2D8u, 0xDACDECC8u), vec2<u32>(0x8BB61EB0u, 0xDC704819u),
  vec2<u32>(0x84472178u, 0xDE147F6Au), vec2<u32>(0xE1AF1F06u, 0xDF904BB0u), vec2<u32>(0x13693EF6u, 0xE1381729u),
  vec2<u32>(0x7493EEE3u, 0xE2B72302u), vec2<u32>(0x5254459Cu, 0xE437BDBFu), vec2<u32>(0x490FA711u, 0xE5E4EC24u),
  vec2<u32>(0x241DFEE0u, 0xE768DBBAu), vec2<u32>(0x94157A03u, 0xE8EE6478u), vec2<u32>(0x40F10B04u, 0xEA7589C2u),
  vec2<u32>(0x9FAA5E1Eu, 0xEBFE4F04u), vec2<u32>(0x205CEA74u, 0xED88B7B8u), vec2<u32>(0x5D60654Cu, 0xEF14C760u),
  vec2<u32>(0x66D6302Fu, 0xF0763B3Eu), vec2<u32>(0x23768267u, 0xF2057390u), vec2<u32>(0xEAEA945Cu, 0xF3965D3Du),
  vec2<u32>(0x202DF4DEu, 0xF4FC29F8u), vec2<u32>(0x05F803DBu, 0xF6905053u), vec2<u32>(0x915ED39Fu, 0xF7F9039Cu),
  vec2<u32>(0x50159A4Au, 0xF9631885u), vec2<u32>(0x65E8B5B3u, 0xFAFC1A1Eu), vec2<u32>(0x85D754E9u, 0xFC69278Au),
  vec2<u32>(0xDB445E41u, 0xFDD79F2Fu), vec2<u32>(0x00000000u, 0x00000000u));
var<private> M32_EXPT: array<vec2<u32>, 16> = array<vec2<u32>, 16>(
  vec2<u32>(0x00000000u, 0x80000000u), vec2<u32>(0xCC487B15u, 0x85AAC367u), vec2<u32>(0xEA8BD6E7u, 0x8B95C1E3u),
  vec2<u32>(0xAB11C336u, 0x91C3D373u), vec2<u32>(0x8DB8A96Fu, 0x9837F051u), vec2<u32>(0x91A111AEu, 0x9EF53260u),
  vec2<u32>(0xB15138EAu, 0xA5FED6A9u), vec2<u32>(0x42A14AC6u, 0xAD583EEAu), vec2<u32>(0xF9DE6484u, 0xB504F333u),
  vec2<u32>(0x580C36BFu, 0xBD08A39Fu), vec2<u32>(0x5506DADDu, 0xC5672A11u), vec2<u32>(0x1F8480E4u, 0xCE248C15u),
  vec2<u32>(0xD69D6AF4u, 0xD744FCCAu), vec2<u32>(0x2A94E111u, 0xE0CCDEECu), vec2<u32>(0xDD24392Fu, 0xEAC0C6E7u),
  vec2<u32>(0x2486CC2Cu, 0xF5257D15u));
