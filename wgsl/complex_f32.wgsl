// float32 exp/expm1/sin/cos/tan for the complex64 functions (prefix {{P}}_). The WGSL builtins
// are only required to be accurate to 3 + 2|x| ulp (exp) or to an absolute 2^-11 (sin/cos),
// and some drivers use approximations that reach those bounds (exp(50) off by 1e-5), so
// these are evaluated with range reduction plus polynomials: exp to < 1 ulp, sin/cos to about
// 1 ulp for |x| < 1e5 (Cody-Waite reduction by pi/2 in three parts), the builtins beyond.

fn {{P}}_pow2(j: i32) -> f32 { return bitcast<f32>(u32(j + 127) << 23u); }  // -126..127

// exp(x) * 2^s without intermediate overflow: x = k ln2 + r (ln2 in two parts, k ln2_hi
// exact), exp(r) by its Taylor series on |r| <= ln2/2, scaled by 2^(k+s) in two exact steps
fn {{P}}_expk(x: f32, s: i32) -> f32 {
  if (isnan_float32(x)) { return x; }
  let xc = clamp(x, f32(-104.0), f32(192.0));
  let k = round(xc * f32(1.4426950408889634));
  let r = (xc - k * f32(0.693359375)) - k * f32(-2.12194440e-4);
  var p = f32(1.0 / 40320.0);
  p = p * r + f32(1.0 / 5040.0);
  p = p * r + f32(1.0 / 720.0);
  p = p * r + f32(1.0 / 120.0);
  p = p * r + f32(1.0 / 24.0);
  p = p * r + f32(1.0 / 6.0);
  p = p * r + f32(0.5);
  let e = f32(1) + (r + r * r * p);
  return {{P}}_ldexp(e, i32(k) + s);
}

// m * 2^n, exact (to inf beyond the range) by adding n to the exponent bits: a product of
// float powers of two may be reassociated by the driver compiler and overflow on the way
fn {{P}}_ldexp(m: f32, n: i32) -> f32 {
  let b = bitcast<u32>(m);
  let ex = i32((b >> 23u) & 0xffu);
  if (ex == 0 || ex == 255 || n < -300) { return m * {{P}}_pow2(clamp(n, -126, 127)); }
  let e2 = ex + clamp(n, -300, 300);
  if (e2 >= 255) { return {{P}}_ws(f32_inf(), {{P}}_sb(m)); }
  if (e2 <= 0) {  // subnormal result (or 0 where the device flushes them)
    let n1 = n / 2;
    return m * {{P}}_pow2(n1) * {{P}}_pow2(n - n1);
  }
  return bitcast<f32>((b & 0x807fffffu) | (u32(e2) << 23u));
}

fn {{P}}_rexp(x: f32) -> f32 { return {{P}}_expk(x, 0); }

fn {{P}}_rexpm1(x: f32) -> f32 {
  if (!(abs(x) >= f32(0.5))) { return expm1_float32(x); }  // also NaN and +-0
  return {{P}}_expk(x, 0) - f32(1);
}

// x = k pi/2 + r, |r| <= pi/4: pi/2 = 1.5703125 + 0x1.fcp-12 + P3, the first two parts
// with 8 significant bits (k times them exact for |k| < 2^16, and the differences exact)
struct {{P}}_red { r: f32, q: i32 }

fn {{P}}_reduce(x: f32) -> {{P}}_red {
  let k = round(x * f32(0.6366197723675814));
  let r = ((x - k * f32(1.5703125)) - k * f32(4.84466552734375e-4))
          - k * f32(-6.3975783775576868e-7);
  return {{P}}_red(r, i32(k) & 3);
}

fn {{P}}_sinp(r: f32) -> f32 {
  let z = r * r;
  var p = f32(1.0 / 362880.0);
  p = p * z - f32(1.0 / 5040.0);
  p = p * z + f32(1.0 / 120.0);
  p = p * z - f32(1.0 / 6.0);
  return r + r * z * p;
}

fn {{P}}_cosp(r: f32) -> f32 {
  let z = r * r;
  var p = f32(-1.0 / 3628800.0);
  p = p * z + f32(1.0 / 40320.0);
  p = p * z - f32(1.0 / 720.0);
  p = p * z + f32(1.0 / 24.0);
  let hz = f32(0.5) * z;
  let w = f32(1) - hz;
  return w + (((f32(1) - w) - hz) + z * z * p);
}

const {{P}}_RED_MAX: f32 = 100000.0;  // |k| < 2^16

fn {{P}}_rsin(x: f32) -> f32 {
  if (x == f32(0)) { return x; }
  if (!{{P}}_isfin(x)) { return nan_float32(); }
  if (abs(x) >= {{P}}_RED_MAX) { return sin(x); }
  let t = {{P}}_reduce(x);
  switch t.q {
    case 0: { return {{P}}_sinp(t.r); }
    case 1: { return {{P}}_cosp(t.r); }
    case 2: { return -{{P}}_sinp(t.r); }
    default: { return -{{P}}_cosp(t.r); }
  }
}

fn {{P}}_rcos(x: f32) -> f32 {
  if (!{{P}}_isfin(x)) { return nan_float32(); }
  if (abs(x) >= {{P}}_RED_MAX) { return cos(x); }
  let t = {{P}}_reduce(x);
  switch t.q {
    case 0: { return {{P}}_cosp(t.r); }
    case 1: { return -{{P}}_sinp(t.r); }
    case 2: { return -{{P}}_cosp(t.r); }
    default: { return {{P}}_sinp(t.r); }
  }
}

fn {{P}}_rtan(x: f32) -> f32 {
  if (x == f32(0)) { return x; }
  if (!{{P}}_isfin(x)) { return nan_float32(); }
  if (abs(x) >= {{P}}_RED_MAX) { return tan(x); }
  let t = {{P}}_reduce(x);
  let s = {{P}}_sinp(t.r);
  let c = {{P}}_cosp(t.r);
  if ((t.q & 1) == 0) { return s / c; }
  return -c / s;
}
