// float64 elementary functions. GLSL.std.450 (and so WGSL on Vulkan) defines exp/log/trig only
// for 16/32-bit floats, so these are evaluated here with double arithmetic: range reduction
// plus polynomials, as in fdlibm. Relative error a few ulp for ordinary arguments; sin/cos/tan
// reduce with a three-part pi/2 (Cody-Waite) for |x| < 2^19 and beyond with the bits of 2/pi in
// 32-bit integer arithmetic (Payne-Hanek, as wgsl/math32.wgsl, whose integer helpers it uses).
const M64_LN2_HI: f64 = 6.93147180369123816490e-01;
const M64_LN2_LO: f64 = 1.90821492927058770002e-10;
const M64_INV_LN2: f64 = 1.44269504088896338700e+00;
const M64_LN2: f64 = 0.6931471805599453094;
const M64_LN10: f64 = 2.302585092994045684;
const M64_PI: f64 = 3.14159265358979311600e+00;
const M64_PI_2: f64 = 1.57079632679489655800e+00;
const M64_PI_4: f64 = 7.85398163397448278999e-01;
const M64_2_PI: f64 = 6.36619772367581382433e-01;
const M64_PIO2_1: f64 = 1.57079632673412561417e+00;
const M64_PIO2_2: f64 = 6.07710050630396597660e-11;
const M64_PIO2_3: f64 = 2.02226624871116645580e-21;

// x - k ln2 (Cody-Waite, two parts). Written with fma: as separate products and differences,
// a driver compiler may reassociate the two parts into one rounded ln2 (NVIDIA does), which
// costs k * 2.3e-17 of absolute error.
fn m64_sub_ln2(x: f64, k: f64) -> f64 { return fma(-k, M64_LN2_LO, fma(-k, M64_LN2_HI, x)); }

fn m64_inf() -> f64 { return f64(f32_inf()); }
fn m64_nan() -> f64 { return f64(f32_nan()); }
fn m64_isnan(x: f64) -> bool { return isnan_float64(x); }
fn m64_isinf(x: f64) -> bool { return abs(x) == m64_inf(); }

// exp(r) for |r| <= ln2/2: Taylor series to degree 13
fn m64_exp_poly(r: f64) -> f64 {
  var p: f64 = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  return p * r;  // expm1(r)
}

fn m64_exp(x: f64) -> f64 {
  if (m64_isnan(x)) { return x; }
  if (x > 709.782712893384) { return m64_inf(); }
  if (x < -745.1332191019412) { return 0.0; }
  let k = round(x * M64_INV_LN2);
  let e = m64_exp_poly(m64_sub_ln2(x, k)) + 1.0;
  let ki = i32(k);
  if (ki < -1020) { return ldexp(ldexp(e, ki + 60), -60); }
  return ldexp(e, ki);
}

fn m64_expm1(x: f64) -> f64 {
  if (x == 0.0 || m64_isnan(x)) { return x; }
  if (abs(x) < 0.34657359027997264) { return m64_exp_poly(x); }
  if (x < -40.0) { return -1.0; }
  if (abs(x) < 2.0) {
    // expm1(x) = 2^k * (1 + expm1(r)) - 1 with a small k keeps precision
    let k = round(x * M64_INV_LN2);
    let s = ldexp(f64(1.0), i32(k));
    return (s - 1.0) + s * m64_exp_poly(m64_sub_ln2(x, k));
  }
  return m64_exp(x) - 1.0;
}

fn m64_log(x: f64) -> f64 {
  if (m64_isnan(x) || x == m64_inf()) { return x; }
  if (x == 0.0) { return -m64_inf(); }
  if (x < 0.0) { return m64_nan(); }
  // subnormals: scale into the normal range first (frexp may flush them)
  let tiny = x < 2.2250738585072014e-308;
  let fr = frexp(select(x, x * 18014398509481984.0, tiny));
  var m = fr.fract;
  var k = f64(fr.exp) - select(f64(0.0), f64(54.0), tiny);
  if (m < 0.7071067811865476) { m = m * 2.0; k = k - 1.0; }
  let f = m - 1.0;
  let s = f / (2.0 + f);
  let z = s * s;
  var p: f64 = 1.0 / 25.0;
  p = p * z + 1.0 / 23.0;
  p = p * z + 1.0 / 21.0;
  p = p * z + 1.0 / 19.0;
  p = p * z + 1.0 / 17.0;
  p = p * z + 1.0 / 15.0;
  p = p * z + 1.0 / 13.0;
  p = p * z + 1.0 / 11.0;
  p = p * z + 1.0 / 9.0;
  p = p * z + 1.0 / 7.0;
  p = p * z + 1.0 / 5.0;
  p = p * z + 1.0 / 3.0;
  let hfsq = 0.5 * f * f;
  // log(1+f) = f - hfsq + s*(hfsq + R) with R = 2 z p (fdlibm's arrangement)
  return k * M64_LN2_HI - ((hfsq - (s * (hfsq + 2.0 * z * p) + k * M64_LN2_LO)) - f);
}

fn m64_log1p(x: f64) -> f64 {
  if (x == 0.0 || m64_isnan(x) || x == m64_inf()) { return x; }
  if (x == -1.0) { return -m64_inf(); }
  if (x < -1.0) { return m64_nan(); }
  let u = 1.0 + x;
  if (u == 1.0) { return x; }
  return m64_log(u) * (x / (u - 1.0));
}

// sin and cos of r + lo, |r| <= pi/4, |lo| <= ulp(r) (first order in lo)
fn m64_sin_poly(r: f64, lo: f64) -> f64 {
  let z = r * r;
  var p: f64 = 1.0 / 355687428096000.0;
  p = p * z - 1.0 / 1307674368000.0;
  p = p * z + 1.0 / 6227020800.0;
  p = p * z - 1.0 / 39916800.0;
  p = p * z + 1.0 / 362880.0;
  p = p * z - 1.0 / 5040.0;
  p = p * z + 1.0 / 120.0;
  p = p * z - 1.0 / 6.0;
  return r + (r * z * p + lo * (1.0 - 0.5 * z));
}

fn m64_cos_poly(r: f64, lo: f64) -> f64 {
  let z = r * r;
  var p: f64 = -1.0 / 6402373705728000.0;
  p = p * z + 1.0 / 20922789888000.0;
  p = p * z - 1.0 / 87178291200.0;
  p = p * z + 1.0 / 479001600.0;
  p = p * z - 1.0 / 3628800.0;
  p = p * z + 1.0 / 40320.0;
  p = p * z - 1.0 / 720.0;
  p = p * z + 1.0 / 24.0;
  let hz = 0.5 * z;
  let w = 1.0 - hz;
  return w + (((1.0 - w) - hz) + (z * z * p - r * lo));
}

// x = (4k + q) pi/2 + r + lo, |r| <= pi/4
struct M64Red { r: f64, lo: f64, q: i32 }

fn m64_reduce(x: f64) -> M64Red {
  if (abs(x) >= 524288.0) { return m64_reduce_big(x); }
  let k = round(x * M64_2_PI);
  // three-part pi/2 with fma, which compilers do not merge (see m64_sub_ln2); k M64_PIO2_1
  // and k M64_PIO2_2 are exact (33-bit parts, |k| < 2^19)
  let r = fma(-k, M64_PIO2_3, fma(-k, M64_PIO2_2, fma(-k, M64_PIO2_1, x)));
  let kk = k - 4.0 * floor(k * 0.25);
  return M64Red(r, 0.0, i32(kk));
}

// bits of 2/pi after the point, after two words of zeros
var<private> M64_2OPI: array<u32, 39> = array<u32, 39>(
  0u, 0u, 0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u, 0xF534DDC0u,
  0xDB629599u, 0x3C439041u, 0xFE5163ABu, 0xDEBBC561u, 0xB7246E3Au, 0x424DD2E0u,
  0x06492EEAu, 0x09D1921Cu, 0xFE1DEB1Cu, 0xB129A73Eu, 0xE88235F5u, 0x2EBB4484u,
  0xE99C7026u, 0xB45F7E41u, 0x3991D639u, 0x835339F4u, 0x9C845F8Bu, 0xBDF9283Bu,
  0x1FF897FFu, 0xDE05980Fu, 0xEF2F118Bu, 0x5A0A6D1Fu, 0x6D367ECFu, 0x27CB09B7u,
  0x4F463F66u, 0x9E5FEA2Du, 0x7527BAC7u, 0xEBE5F17Bu, 0x3D0739F7u, 0x8A5292EAu,
  0x6BFB5FB1u, 0x1F8D5D08u, 0x56033046u);
var<private> M64_PIO4: array<u32, 3> = array<u32, 3>(0xC4C6628Bu, 0x2168C234u, 0xC90FDAA2u);

// Payne-Hanek for finite |x| >= 2^19: |x| = M 2^E with M of 53 bits, x 2/pi mod 4 = M W 2^-190
// mod 4 with W the 192 bits of 2/pi from the bit of weight 2^(1-E) on (the bits before add
// multiples of 4, those after less than 2^-130); the fraction then times pi/2 in 96 bits
fn m64_reduce_big(x: f64) -> M64Red {
  let fr = frexp(abs(x));
  let m = fr.fract * 9007199254740992.0;  // 2^53 fract: an integer, exact
  let mh = u32(floor(m * (1.0 / 4294967296.0)));
  let mw = vec2<u32>(u32(m - f64(mh) * 4294967296.0), mh);
  // E - 1 + 64 (two words of zeros), E = exp - 53; converted through f64 (lavapipe's LLVM
  // failed to compile frexp's integer exponent used in an index)
  let q0 = u32(f64(fr.exp) + 9.0);
  let wi = q0 >> 5u;
  let sh = q0 & 31u;
  var w: array<u32, 6>;
  for (var k = 0u; k < 6u; k++) {
    w[5u - k] = m32_funnel(M64_2OPI[wi + k], M64_2OPI[wi + k + 1u], sh);
  }
  var p: array<u32, 8>;  // M W
  for (var i = 0u; i < 6u; i++) {
    let lo = m32_mul(mw[0], w[i]);
    let hi = m32_mul(mw[1], w[i]);
    let s0 = m32_add(vec2<u32>(p[i], 0u), vec2<u32>(lo.x, 0u));
    let s1 = m32_add(m32_add(vec2<u32>(p[i + 1u], 0u), vec2<u32>(lo.y, 0u)),
                     vec2<u32>(hi.x + s0.y, select(0u, 1u, hi.x + s0.y < hi.x)));
    p[i] = s0.x;
    p[i + 1u] = s1.x;
    p[i + 2u] = hi.y + s1.y;
  }
  var q = p[5] >> 30u;
  p[5] = p[5] & 0x3fffffffu;
  var neg = false;
  if ((p[5] & 0x20000000u) != 0u) {  // fraction >= 1/2: the next quadrant, r = -(1 - fraction)
    q = q + 1u;
    neg = true;
    var c = 1u;
    for (var k = 0u; k < 6u; k++) {
      let v = ~p[k] + c;
      c = select(0u, 1u, c == 1u && v == 0u);
      p[k] = v;
    }
    p[5] = p[5] & 0x3fffffffu;
  }
  // the top 96 bits N of the fraction f = (p5 .. p0) 2^-190 = N 2^(-94-s)
  var top = 5u;
  while (top > 2u && p[top] == 0u) { top = top - 1u; }
  let lz = countLeadingZeros(p[top]);
  let s = (5u - top) * 32u + lz;
  var n: array<u32, 3>;
  n[2] = m32_funnel(p[top], p[top - 1u], lz);
  n[1] = m32_funnel(p[top - 1u], p[top - 2u], lz);
  n[0] = m32_funnel(p[top - 2u], select(0u, p[max(top, 3u) - 3u], top >= 3u), lz);
  // r + lo = f pi/2 = (N pi/4) 2^(-93-s) = T 2^(-93-s), T the top 96 bits of N pi/4
  var pr: array<u32, 6>;
  for (var i = 0u; i < 3u; i++) {
    var c = 0u;
    for (var j = 0u; j < 3u; j++) {
      let ab = m32_add(m32_add(m32_mul(n[i], M64_PIO4[j]), vec2<u32>(pr[i + j], 0u)),
                       vec2<u32>(c, 0u));
      pr[i + j] = ab.x;
      c = ab.y;
    }
    pr[i + 3u] = c;
  }
  var t2 = pr[5];
  var t1 = pr[4];
  var t0 = pr[3];
  var e = 2 - i32(s) - 95;  // T 2^e
  if (t2 < 0x80000000u) {
    t2 = (t2 << 1u) | (t1 >> 31u);
    t1 = (t1 << 1u) | (t0 >> 31u);
    t0 = t0 << 1u;
    e = e - 1;
  }
  // r: T's top 53 bits rounded; lo: the rest, exactly (both are integers below 2^53 times 2^e)
  let up = ((t1 >> 10u) & 1u) == 1u;
  let hi = f64(t2) * 2097152.0 + f64(t1 >> 11u) + select(f64(0.0), f64(1.0), up);
  let rest = f64(t1 & 0x7ffu) * 4294967296.0 + f64(t0) - select(f64(0.0), f64(8796093022208.0), up);
  var r = ldexp(hi, e + 43);
  var lo = ldexp(rest, e);
  if (neg != (x < 0.0)) { r = -r; lo = -lo; }
  var qq = q & 3u;
  if (x < 0.0) { qq = (4u - qq) & 3u; }
  return M64Red(r, lo, i32(qq));
}

fn m64_sin(x: f64) -> f64 {
  if (x == 0.0) { return x; }
  if (m64_isnan(x) || m64_isinf(x)) { return m64_nan(); }
  let t = m64_reduce(x);
  switch t.q {
    case 0: { return m64_sin_poly(t.r, t.lo); }
    case 1: { return m64_cos_poly(t.r, t.lo); }
    case 2: { return -m64_sin_poly(t.r, t.lo); }
    default: { return -m64_cos_poly(t.r, t.lo); }
  }
}

fn m64_cos(x: f64) -> f64 {
  if (m64_isnan(x) || m64_isinf(x)) { return m64_nan(); }
  let t = m64_reduce(x);
  switch t.q {
    case 0: { return m64_cos_poly(t.r, t.lo); }
    case 1: { return -m64_sin_poly(t.r, t.lo); }
    case 2: { return -m64_cos_poly(t.r, t.lo); }
    default: { return m64_sin_poly(t.r, t.lo); }
  }
}

fn m64_tan(x: f64) -> f64 {
  if (x == 0.0) { return x; }
  if (m64_isnan(x) || m64_isinf(x)) { return m64_nan(); }
  let t = m64_reduce(x);
  let s = m64_sin_poly(t.r, t.lo);
  let c = m64_cos_poly(t.r, t.lo);
  if ((t.q & 1) == 0) { return s / c; }
  return -c / s;
}

// atan of 0 <= t <= tan(pi/8): odd Taylor series
fn m64_atan_poly(t: f64) -> f64 {
  let z = t * t;
  var p: f64 = 0.0;
  for (var n = 27; n >= 1; n--) {
    let c = 1.0 / f64(2 * n + 1);
    if ((n & 1) == 1) { p = p * z - c; } else { p = p * z + c; }
  }
  return t + t * z * p;
}

fn m64_atan(x: f64) -> f64 {
  if (x == 0.0 || m64_isnan(x)) { return x; }
  var a = abs(x);
  var flip = false;
  if (a > 1.0) { a = 1.0 / a; flip = true; }
  var r: f64;
  if (a > 0.41421356237309503) {
    r = M64_PI_4 + m64_atan_poly((a - 1.0) / (a + 1.0));
  } else {
    r = m64_atan_poly(a);
  }
  if (flip) { r = M64_PI_2 - r; }
  if (x < 0.0) { return -r; }
  return r;
}

fn m64_signbit(x: f64) -> bool { return {{SIGNBIT64}}; }

fn m64_atan2(y: f64, x: f64) -> f64 {
  if (m64_isnan(x) || m64_isnan(y)) { return x + y; }
  let sy = m64_signbit(y);
  let sx = m64_signbit(x);
  if (y == 0.0) {
    if (sx) { return select(M64_PI, -M64_PI, sy); }
    return y;
  }
  if (x == 0.0) { return select(M64_PI_2, -M64_PI_2, sy); }
  if (m64_isinf(x)) {
    if (m64_isinf(y)) {
      var r = M64_PI_4;
      if (sx) { r = 3.0 * M64_PI_4; }
      return select(r, -r, sy);
    }
    if (sx) { return select(M64_PI, -M64_PI, sy); }
    return select(f64(0.0), f64(-0.0), sy);
  }
  if (m64_isinf(y)) { return select(M64_PI_2, -M64_PI_2, sy); }
  let r = m64_atan(abs(y / x));
  var out: f64;
  if (sx) { out = M64_PI - r; } else { out = r; }
  return select(out, -out, sy);
}

fn m64_asin(x: f64) -> f64 {
  if (x == 0.0 || m64_isnan(x)) { return x; }
  if (abs(x) > 1.0) { return m64_nan(); }
  return m64_atan2(x, sqrt((1.0 - x) * (1.0 + x)));
}

fn m64_acos(x: f64) -> f64 {
  if (m64_isnan(x)) { return x; }
  if (abs(x) > 1.0) { return m64_nan(); }
  if (x == 1.0) { return 0.0; }
  return m64_atan2(sqrt((1.0 - x) * (1.0 + x)), x);
}

// exp(a) / 2 for a >= 0 in one rounding (no overflow of exp(a) itself; inf past 710.47)
fn m64_exp_half(a: f64) -> f64 {
  let x = min(a, 712.0);
  let k = round(x * M64_INV_LN2);
  let e = m64_exp_poly(m64_sub_ln2(x, k)) + 1.0;
  return ldexp(e, i32(k) - 9) * 256.0;
}

fn m64_sinh(x: f64) -> f64 {
  if (x == 0.0 || m64_isnan(x) || m64_isinf(x)) { return x; }
  let a = abs(x);
  if (a < 1e-9) { return x; }
  var r: f64;
  if (a < 22.0) {
    let e = m64_expm1(a);
    r = 0.5 * (e + e / (e + 1.0));
  } else {
    r = m64_exp_half(a);
  }
  return select(r, -r, x < 0.0);
}

fn m64_cosh(x: f64) -> f64 {
  if (m64_isnan(x)) { return x; }
  let a = abs(x);
  if (a < 22.0) {
    let e = m64_exp(a);
    return 0.5 * (e + 1.0 / e);
  }
  return m64_exp_half(a);
}

fn m64_tanh(x: f64) -> f64 {
  if (x == 0.0 || m64_isnan(x)) { return x; }
  let a = abs(x);
  var r: f64 = 1.0;
  if (a < 22.0) {
    let e = m64_expm1(2.0 * a);
    r = e / (e + 2.0);
  }
  return select(r, -r, x < 0.0);
}

fn m64_asinh(x: f64) -> f64 {
  if (x == 0.0 || m64_isnan(x) || m64_isinf(x)) { return x; }
  let a = abs(x);
  var r: f64;
  if (a > 1e8) {
    r = m64_log(a) + M64_LN2;
  } else {
    r = m64_log1p(a + a * a / (1.0 + sqrt(1.0 + a * a)));
  }
  return select(r, -r, x < 0.0);
}

fn m64_acosh(x: f64) -> f64 {
  if (m64_isnan(x)) { return x; }
  if (x < 1.0) { return m64_nan(); }
  if (x > 1e8) { return m64_log(x) + M64_LN2; }
  let t = x - 1.0;
  return m64_log1p(t + sqrt(2.0 * t + t * t));
}

fn m64_atanh(x: f64) -> f64 {
  if (x == 0.0 || m64_isnan(x)) { return x; }
  let a = abs(x);
  if (a > 1.0) { return m64_nan(); }
  var r: f64;
  if (a == 1.0) { r = m64_inf(); } else { r = 0.5 * m64_log1p(2.0 * a / (1.0 - a)); }
  return select(r, -r, x < 0.0);
}

fn m64_exp2(x: f64) -> f64 {
  if (m64_isnan(x)) { return x; }
  if (x > 1024.0) { return m64_inf(); }
  if (x < -1080.0) { return 0.0; }
  let k = round(x);
  let f = x - k;
  let e = m64_exp(f * M64_LN2);
  let ki = i32(k);
  if (ki < -1020) { return ldexp(ldexp(e, ki + 60), -60); }
  return ldexp(e, ki);
}

fn m64_log2(x: f64) -> f64 {
  if (x > 0.0 && x != m64_inf()) {
    let fr = frexp(x);
    if (fr.fract == 0.5) { return f64(fr.exp) - 1.0; }
  }
  return m64_log(x) * M64_INV_LN2;
}

fn m64_log10(x: f64) -> f64 { return m64_log(x) / M64_LN10; }

fn m64_pow_pos(x: f64, y: f64) -> f64 {
  // x > 0: exact for small integer y by repeated squaring, else exp(y log x)
  if (y == floor(y) && abs(y) <= 64.0) {
    var e = i32(abs(y));
    var b = x;
    var r: f64 = 1.0;
    loop {
      if (e == 0) { break; }
      if ((e & 1) == 1) { r = r * b; }
      b = b * b;
      e = e >> 1u;
    }
    if (y < 0.0) { return 1.0 / r; }
    return r;
  }
  return m64_exp(y * m64_log(x));
}

fn m64_logaddexp(x: f64, y: f64) -> f64 {
  if (m64_isnan(x) || m64_isnan(y)) { return x + y; }
  let m = max(x, y);
  if (m64_isinf(m)) { return m; }
  return m + m64_log1p(m64_exp(-abs(x - y)));
}
