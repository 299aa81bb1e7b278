// float32 exp/expm1 for the complex64 functions (prefix {{P}}_); sin/cos/tan come from
// wgsl/math32.wgsl. The WGSL builtin exp is only required to be accurate to 3 + 2|x| ulp, and
// some drivers use approximations that reach that bound (exp(50) off by 1e-5), so it is
// evaluated with range reduction plus a polynomial: < 1 ulp.

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
