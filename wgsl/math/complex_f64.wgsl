// float64 helpers of the complex128 functions (prefix {{P}}_); math64.wgsl has the rest.

// exp(x) * 2^s without intermediate overflow (as m64_exp, scaled by 2^(k+s) in two exact
// steps)
fn {{P}}_expk(x: f64, s: i32) -> f64 {
  if (m64_isnan(x)) { return x; }
  let xc = min(max(x, f64(-800.0)), f64(1500.0));
  let k = round(xc * M64_INV_LN2);
  let e = m64_exp_poly(m64_sub_ln2(xc, k)) + 1.0;
  return {{P}}_ldexp(e, i32(k) + s);
}
