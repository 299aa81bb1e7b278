// Complex arithmetic and elementary functions on vec2<{{F}}> = (real, imag).
// Included as the helpers of a complex dtype; every name carries the prefix {{P}}_ so the
// complex64 and complex128 versions can share a kernel. Real functions come in as
// placeholders (the builtins or the float helpers for f32, wgsl/math64.wgsl for f64).
// Special values follow C99 Annex G and the array API standard; the formulas are the
// numerically careful ones (scaled hypot, log1p near |z| = 1, Kahan's ctanh, log1p forms
// of asinh/atanh).
// Signs are handled with bit operations: {{P}}_sb (sign bit), {{P}}_ws (|a| with a given
// sign), {{P}}_cs (copysign) and {{P}}_ng (negation) come from the dtype's helpers. Driver
// compilers may ignore the sign of zero in float arithmetic (Vulkan allows it without
// SignedZeroInfNanPreserve), fold `select(0.0, -0.0, c)`, and do not keep the sign bit of a
// NaN, so no signed zero is built by arithmetic and no decision reads the sign of a NaN.
alias {{P}}_t = vec2<{{F}}>;

fn {{P}}_isfin(x: {{F}}) -> bool { return !isnan_{{DT}}(x) && !{{P}}_isinf(x); }
fn {{P}}_cs(a: {{F}}, b: {{F}}) -> {{F}} { return {{P}}_ws(a, {{P}}_sb(b)); }
fn {{P}}_neg(z: {{P}}_t) -> {{P}}_t { return {{P}}_t({{P}}_ng(z.x), {{P}}_ng(z.y)); }
// iz (the argument of the identities sin(z) = -i sinh(iz) etc.) and -iz
fn {{P}}_mi(z: {{P}}_t) -> {{P}}_t { return {{P}}_t({{P}}_ng(z.y), z.x); }
fn {{P}}_rmi(r: {{P}}_t) -> {{P}}_t { return {{P}}_t(r.y, {{P}}_ng(r.x)); }
fn {{P}}_nan2() -> {{P}}_t { return {{P}}_t(nan_{{DT}}(), nan_{{DT}}()); }

fn {{P}}_mul(a: {{P}}_t, b: {{P}}_t) -> {{P}}_t {
  return {{P}}_t(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}

// Smith's algorithm, as NumPy
fn {{P}}_div(a: {{P}}_t, b: {{P}}_t) -> {{P}}_t {
  let abr = abs(b.x);
  let abi = abs(b.y);
  if (abr >= abi) {
    if (abr == {{F}}(0) && abi == {{F}}(0)) { return {{P}}_t(a.x / abr, a.y / abr); }
    let rat = b.y / b.x;
    let scl = {{F}}(1) / (b.x + b.y * rat);
    return {{P}}_t((a.x + a.y * rat) * scl, (a.y - a.x * rat) * scl);
  }
  let rat = b.x / b.y;
  let scl = {{F}}(1) / (b.y + b.x * rat);
  return {{P}}_t((a.x * rat + a.y) * scl, (a.y * rat - a.x) * scl);
}

fn {{P}}_abs(z: {{P}}_t) -> {{F}} {
  let a = abs(z.x);
  let b = abs(z.y);
  if ({{P}}_isinf(a) || {{P}}_isinf(b)) { return inf_{{DT}}(); }
  if (isnan_{{DT}}(a) || isnan_{{DT}}(b)) { return nan_{{DT}}(); }
  let m = max(a, b);
  if (m == {{F}}(0)) { return {{F}}(0); }
  let n = min(a, b) / m;
  return m * sqrt({{F}}(1) + n * n);
}

fn {{P}}_atan2(y: {{F}}, x: {{F}}) -> {{F}} {
  if (isnan_{{DT}}(x) || isnan_{{DT}}(y)) { return x + y; }
  let sy = {{P}}_sb(y);
  let sx = {{P}}_sb(x);
  let pi = {{F}}(3.141592653589793);
  let h = {{F}}(1.5707963267948966);
  if (y == {{F}}(0)) {
    if (sx) { return select(pi, -pi, sy); }
    return y;
  }
  if (x == {{F}}(0)) { return select(h, -h, sy); }
  if ({{P}}_isinf(x)) {
    if ({{P}}_isinf(y)) {
      var r = {{F}}(0.7853981633974483);
      if (sx) { r = {{F}}(2.356194490192345); }
      return select(r, -r, sy);
    }
    if (sx) { return select(pi, -pi, sy); }
    return {{P}}_ws({{F}}(0), sy);
  }
  if ({{P}}_isinf(y)) { return select(h, -h, sy); }
  var r = {{ATAN}}(abs(y / x));
  if (sx) { r = pi - r; }
  return {{P}}_ws(r, sy);
}

fn {{P}}_rsinh(x: {{F}}) -> {{F}} {
  let a = abs(x);
  if (a == {{F}}(0) || isnan_{{DT}}(x)) { return x; }
  var r: {{F}};
  if (a < {{F}}(1)) {
    let e = {{EXPM1}}(a);
    r = {{F}}(0.5) * (e + e / (e + {{F}}(1)));
  } else if (a > {{LOGMAX}}) {
    r = {{P}}_expk(a, -1);
  } else {
    let e = {{EXP}}(a);
    r = {{F}}(0.5) * (e - {{F}}(1) / e);
  }
  return {{P}}_cs(r, x);
}

fn {{P}}_rcosh(x: {{F}}) -> {{F}} {
  let a = abs(x);
  if (!(a <= {{LOGMAX}})) { return {{P}}_expk(a, -1); }  // also NaN
  let e = {{EXP}}(a);
  return {{F}}(0.5) * (e + {{F}}(1) / e);
}

fn {{P}}_sqrt(z: {{P}}_t) -> {{P}}_t {
  let x = z.x;
  let y = z.y;
  if (x == {{F}}(0) && y == {{F}}(0)) { return {{P}}_t({{F}}(0), y); }
  if ({{P}}_isinf(y)) { return {{P}}_t(inf_{{DT}}(), y); }
  if (isnan_{{DT}}(x)) { return {{P}}_nan2(); }
  if ({{P}}_isinf(x)) {
    if (!{{P}}_sb(x)) {
      if (isnan_{{DT}}(y)) { return {{P}}_t(x, y); }
      return {{P}}_t(x, {{P}}_cs({{F}}(0), y));
    }
    if (isnan_{{DT}}(y)) { return {{P}}_t(nan_{{DT}}(), inf_{{DT}}()); }
    return {{P}}_t({{F}}(0), {{P}}_cs(inf_{{DT}}(), y));
  }
  if (isnan_{{DT}}(y)) { return {{P}}_nan2(); }
  var ax = abs(x);
  var ay = abs(y);
  var s = {{F}}(1);
  if (max(ax, ay) > {{BIG}}) { ax = ax * {{F}}(0.25); ay = ay * {{F}}(0.25); s = {{F}}(2); }
  let t = s * sqrt({{F}}(0.5) * (ax + {{P}}_abs({{P}}_t(ax, ay))));
  if (x >= {{F}}(0)) { return {{P}}_t(t, {{P}}_cs(abs(y) / (t + t), y)); }
  return {{P}}_t(abs(y) / (t + t), {{P}}_cs(t, y));
}

fn {{P}}_exp(z: {{P}}_t) -> {{P}}_t {
  let x = z.x;
  let y = z.y;
  if (y == {{F}}(0)) { return {{P}}_t({{EXP}}(x), y); }
  if ({{P}}_isinf(x)) {
    if (!{{P}}_sb(x)) {
      if (!{{P}}_isfin(y)) { return {{P}}_t(x, nan_{{DT}}()); }
      return {{P}}_t({{P}}_cs(x, {{COS}}(y)), {{P}}_cs(x, {{SIN}}(y)));
    }
    if (!{{P}}_isfin(y)) {  // NumPy: +0 + 0i signed as y (+0 for a NaN y)
      return {{P}}_t({{F}}(0), {{P}}_ws({{F}}(0), !isnan_{{DT}}(y) && {{P}}_sb(y)));
    }
    return {{P}}_t({{P}}_cs({{F}}(0), {{COS}}(y)), {{P}}_cs({{F}}(0), {{SIN}}(y)));
  }
  if (isnan_{{DT}}(x) || !{{P}}_isfin(y)) { return {{P}}_nan2(); }
  if (x > {{LOGMAX}}) {  // exp(x) may overflow where exp(x) cos(y) does not: scale by 2^-64
    let e = {{P}}_expk(x, -64);
    return {{P}}_t({{P}}_ldexp(e * {{COS}}(y), 64), {{P}}_ldexp(e * {{SIN}}(y), 64));
  }
  let e = {{EXP}}(x);
  return {{P}}_t(e * {{COS}}(y), e * {{SIN}}(y));
}

fn {{P}}_expm1(z: {{P}}_t) -> {{P}}_t {
  let x = z.x;
  let y = z.y;
  if (y == {{F}}(0)) {  // expm1(-0 + 0j) = +0 + 0j, as vtl's other backends
    let r = {{EXPM1}}(x);
    return {{P}}_t({{P}}_ws(r, {{P}}_sb(r) && r != {{F}}(0)), y);
  }
  if ({{P}}_isinf(x)) {
    if (!{{P}}_sb(x)) {
      if (!{{P}}_isfin(y)) { return {{P}}_t(x, nan_{{DT}}()); }
      return {{P}}_t({{P}}_cs(x, {{COS}}(y)), {{P}}_cs(x, {{SIN}}(y)));
    }
    if (!{{P}}_isfin(y)) { return {{P}}_t({{F}}(-1), {{F}}(0)); }
    return {{P}}_t({{F}}(-1), {{P}}_cs({{F}}(0), {{SIN}}(y)));
  }
  if (isnan_{{DT}}(x) || !{{P}}_isfin(y)) { return {{P}}_nan2(); }
  if (x > {{LOGMAX}}) { return {{P}}_exp(z); }
  let em1 = {{EXPM1}}(x);
  let s = {{SIN}}({{F}}(0.5) * y);
  return {{P}}_t(em1 * {{COS}}(y) - {{F}}(2) * s * s, {{EXP}}(x) * {{SIN}}(y));
}

fn {{P}}_log(z: {{P}}_t) -> {{P}}_t {
  let ax = abs(z.x);
  let ay = abs(z.y);
  let im = {{P}}_atan2(z.y, z.x);
  if ({{P}}_isinf(ax) || {{P}}_isinf(ay)) { return {{P}}_t(inf_{{DT}}(), im); }
  if (isnan_{{DT}}(ax) || isnan_{{DT}}(ay)) { return {{P}}_nan2(); }
  let m = max(ax, ay);
  let n = min(ax, ay);
  if (m == {{F}}(0)) { return {{P}}_t(-inf_{{DT}}(), im); }
  if (m > {{F}}(0.5) && m < {{F}}(2)) {
    return {{P}}_t({{F}}(0.5) * {{LOG1P}}((m - {{F}}(1)) * (m + {{F}}(1)) + n * n), im);
  }
  let q = n / m;
  return {{P}}_t({{LOG}}(m) + {{F}}(0.5) * {{LOG1P}}(q * q), im);
}

fn {{P}}_log1p(z: {{P}}_t) -> {{P}}_t {
  let x = z.x;
  let y = z.y;
  if (!{{P}}_isfin(x) || !{{P}}_isfin(y) || max(abs(x), abs(y)) > {{F}}(0.5)) {
    return {{P}}_log({{P}}_t({{F}}(1) + x, y));
  }
  return {{P}}_t({{F}}(0.5) * {{LOG1P}}(x * ({{F}}(2) + x) + y * y),
                 {{P}}_atan2(y, {{F}}(1) + x));
}

fn {{P}}_sinh(z: {{P}}_t) -> {{P}}_t {
  let x = z.x;
  let y = z.y;
  if (y == {{F}}(0)) { return {{P}}_t({{P}}_rsinh(x), y); }
  if ({{P}}_isfin(x) && {{P}}_isfin(y)) {
    if (x == {{F}}(0)) {  // real part sinh(x) cos(y): a zero, signed as x cos(y)
      return {{P}}_t({{P}}_ws(x, {{P}}_sb(x) != {{P}}_sb({{COS}}(y))), {{SIN}}(y));
    }
    if (abs(x) > {{LOGMAX}}) {  // cosh x, |sinh x| = e^|x| / 2 may overflow where the product does not
      let e = {{P}}_expk(abs(x), -65);
      return {{P}}_t({{P}}_ldexp({{P}}_cs(e, x) * {{COS}}(y), 64), {{P}}_ldexp(e * {{SIN}}(y), 64));
    }
    return {{P}}_t({{P}}_rsinh(x) * {{COS}}(y), {{P}}_rcosh(x) * {{SIN}}(y));
  }
  if (x == {{F}}(0)) { return {{P}}_t(x, nan_{{DT}}()); }
  if ({{P}}_isinf(x)) {
    if ({{P}}_isfin(y)) {
      let c = {{COS}}(y);
      return {{P}}_t({{P}}_ws(x, {{P}}_sb(x) != {{P}}_sb(c)), {{P}}_cs(x, {{SIN}}(y)));
    }
    return {{P}}_t(x, nan_{{DT}}());
  }
  return {{P}}_nan2();
}

fn {{P}}_cosh(z: {{P}}_t) -> {{P}}_t {
  let x = z.x;
  let y = z.y;
  if (y == {{F}}(0)) {  // imaginary part sinh(x) sin(y): a zero, signed as x y (+ for NaN x)
    let neg = !isnan_{{DT}}(x) && {{P}}_sb(x);
    return {{P}}_t({{P}}_rcosh(x), {{P}}_ws(y, neg != {{P}}_sb(y)));
  }
  if ({{P}}_isfin(x) && {{P}}_isfin(y)) {
    if (x == {{F}}(0)) {
      let s = {{SIN}}(y);
      return {{P}}_t({{COS}}(y), {{P}}_ws(x, {{P}}_sb(x) != {{P}}_sb(s)));
    }
    if (abs(x) > {{LOGMAX}}) {  // as in sinh
      let e = {{P}}_expk(abs(x), -65);
      return {{P}}_t({{P}}_ldexp(e * {{COS}}(y), 64), {{P}}_ldexp({{P}}_cs(e, x) * {{SIN}}(y), 64));
    }
    return {{P}}_t({{P}}_rcosh(x) * {{COS}}(y), {{P}}_rsinh(x) * {{SIN}}(y));
  }
  if (x == {{F}}(0)) { return {{P}}_t(nan_{{DT}}(), {{F}}(0)); }
  if ({{P}}_isinf(x)) {
    if ({{P}}_isfin(y)) {
      let s = {{SIN}}(y);
      return {{P}}_t({{P}}_cs(inf_{{DT}}(), {{COS}}(y)), {{P}}_ws(x, {{P}}_sb(x) != {{P}}_sb(s)));
    }
    return {{P}}_t(inf_{{DT}}(), nan_{{DT}}());
  }
  return {{P}}_nan2();
}

// Kahan's algorithm (as FreeBSD's ctanh)
fn {{P}}_tanh(z: {{P}}_t) -> {{P}}_t {
  let x = z.x;
  let y = z.y;
  if ({{P}}_isinf(x)) { return {{P}}_t({{P}}_cs({{F}}(1), x), {{P}}_cs({{F}}(0), y)); }
  if (isnan_{{DT}}(x)) {
    if (y == {{F}}(0)) { return {{P}}_t(x, y); }
    return {{P}}_nan2();
  }
  if (!{{P}}_isfin(y)) {
    if (x == {{F}}(0)) { return {{P}}_t(x, nan_{{DT}}()); }
    return {{P}}_nan2();
  }
  if (abs(x) > {{TANHBIG}}) {
    let e = {{EXP}}({{F}}(-2) * abs(x));
    let sy = {{SIN}}(y);
    let cy = {{COS}}(y);
    let im = {{F}}(4) * abs(sy * cy) * e;
    return {{P}}_t({{P}}_cs({{F}}(1), x), {{P}}_ws(im, {{P}}_sb(sy) != {{P}}_sb(cy)));
  }
  if (x == {{F}}(0)) { return {{P}}_t(x, {{TAN}}(y)); }
  let t = {{TAN}}(y);
  let b = {{F}}(1) + t * t;
  let s = {{P}}_rsinh(x);
  let r = sqrt({{F}}(1) + s * s);
  let d = {{F}}(1) + b * s * s;
  if (y == {{F}}(0)) { return {{P}}_t(b * r * s / d, y); }
  return {{P}}_t(b * r * s / d, t / d);
}

// asinh(z) = log1p(z + z^2 / (1 + sqrt(1 + z^2))) in the first quadrant, then by symmetry
fn {{P}}_asinh(z: {{P}}_t) -> {{P}}_t {
  let x = z.x;
  let y = z.y;
  let ax = abs(x);
  let ay = abs(y);
  var r: {{P}}_t;
  if (isnan_{{DT}}(x) || isnan_{{DT}}(y)) {
    if ({{P}}_isinf(ax) || {{P}}_isinf(ay)) {
      r = {{P}}_t(inf_{{DT}}(), nan_{{DT}}());
    } else if (y == {{F}}(0)) {
      r = {{P}}_t(nan_{{DT}}(), {{F}}(0));
    } else {
      return {{P}}_nan2();
    }
  } else if ({{P}}_isinf(ax) || {{P}}_isinf(ay)) {
    if ({{P}}_isinf(ax) && {{P}}_isinf(ay)) {
      r = {{P}}_t(inf_{{DT}}(), {{F}}(0.7853981633974483));
    } else if ({{P}}_isinf(ax)) {
      r = {{P}}_t(inf_{{DT}}(), {{F}}(0));
    } else {
      r = {{P}}_t(inf_{{DT}}(), {{F}}(1.5707963267948966));
    }
  } else if (max(ax, ay) > {{SQBIG}}) {
    let l = {{P}}_log({{P}}_t(ax, ay));
    r = {{P}}_t(l.x + {{F}}(0.6931471805599453), l.y);
  } else {
    let w = {{P}}_t(ax, ay);
    let z2 = {{P}}_mul(w, w);
    // 1 + z^2 without cancellation near z = i
    let u = {{P}}_t(({{F}}(1) - ay) * ({{F}}(1) + ay) + ax * ax, {{F}}(2) * ax * ay);
    let s = {{P}}_sqrt(u);
    r = {{P}}_log1p(w + {{P}}_div(z2, s + {{P}}_t({{F}}(1), {{F}}(0))));
    if (ax == {{F}}(0) && ay <= {{F}}(1)) { r.x = {{F}}(0); }  // asinh(iy) = i asin(y)
  }
  return {{P}}_t({{P}}_cs(r.x, x), {{P}}_cs(r.y, y));
}

// asin(z) = -i asinh(iz)
fn {{P}}_asin(z: {{P}}_t) -> {{P}}_t {
  return {{P}}_rmi({{P}}_asinh({{P}}_mi(z)));
}

// Kahan: acos(z) = 2 atan2(Re sqrt(1 - z), Re sqrt(1 + z))
//                  + i asinh(Im(conj(sqrt(1 + z)) sqrt(1 - z))); special values through asin
fn {{P}}_acos(z: {{P}}_t) -> {{P}}_t {
  if (!{{P}}_isfin(z.x) || !{{P}}_isfin(z.y) || max(abs(z.x), abs(z.y)) > {{SQBIG}}) {
    let a = {{P}}_asin(z);
    return {{P}}_t({{F}}(1.5707963267948966) - a.x, {{P}}_ng(a.y));
  }
  let sm = {{P}}_sqrt({{P}}_t({{F}}(1) - z.x, {{P}}_ng(z.y)));
  let sp = {{P}}_sqrt({{P}}_t({{F}}(1) + z.x, z.y));
  let im = sp.x * sm.y - sp.y * sm.x;
  // the imaginary part has the sign opposite to Im z (conj symmetry), also when it is 0
  return {{P}}_t({{F}}(2) * {{P}}_atan2(sm.x, sp.x),
                 {{P}}_ws({{P}}_rasinh(im), !{{P}}_sb(z.y)));
}

fn {{P}}_rasinh(x: {{F}}) -> {{F}} {
  let r = {{P}}_asinh({{P}}_t(x, {{F}}(0)));
  return r.x;
}

// acosh(z) = +-i acos(z), the sign that makes the real part non-negative
fn {{P}}_acosh(z: {{P}}_t) -> {{P}}_t {
  let a = {{P}}_acos(z);
  // acos(+-0 + NaN i) = pi/2 + NaN i: NumPy's acosh is NaN + pi/2 i (the sign of a NaN is
  // not kept by every driver, so it decides nothing)
  if (isnan_{{DT}}(a.y)) { return {{P}}_t(a.y, a.x); }
  if ({{P}}_sb(a.y)) { return {{P}}_t({{P}}_ng(a.y), a.x); }
  return {{P}}_t(a.y, {{P}}_ng(a.x));
}

fn {{P}}_atanh(z: {{P}}_t) -> {{P}}_t {
  let x = z.x;
  let y = z.y;
  let ax = abs(x);
  let ay = abs(y);
  let h = {{F}}(1.5707963267948966);
  // infinite parts first, tested on x and y themselves (NVIDIA's compiler gave NaN for
  // inf + inf*i when this test came after the NaN cases and read |x|, |y|)
  if ({{P}}_isinf(x) || {{P}}_isinf(y)) {
    if (isnan_{{DT}}(y)) { return {{P}}_t({{P}}_cs({{F}}(0), x), nan_{{DT}}()); }
    return {{P}}_t({{P}}_cs({{F}}(0), x), {{P}}_cs(h, y));
  }
  if (isnan_{{DT}}(x) || isnan_{{DT}}(y)) {
    if (x == {{F}}(0)) { return {{P}}_t(x, nan_{{DT}}()); }
    return {{P}}_nan2();
  }
  if (ax == {{F}}(1) && y == {{F}}(0)) { return {{P}}_t({{P}}_cs(inf_{{DT}}(), x), y); }
  if (max(ax, ay) > {{SQBIG}}) {
    let r = {{P}}_div({{P}}_t({{F}}(1), {{F}}(0)), z);
    return {{P}}_t({{P}}_cs(r.x, x), {{P}}_cs(h, y));
  }
  // in the first quadrant (no cancellation in 1 + 4|x| / ...), then by symmetry
  let omx = {{F}}(1) - ax;
  let re = {{F}}(0.25) * {{LOG1P}}({{F}}(4) * ax / (omx * omx + ay * ay));
  let im = {{F}}(0.5) * {{P}}_atan2({{F}}(2) * ay, omx * ({{F}}(1) + ax) - ay * ay);
  return {{P}}_t({{P}}_cs(re, x), {{P}}_cs(im, y));
}

// atan(z) = -i atanh(iz)
fn {{P}}_atan(z: {{P}}_t) -> {{P}}_t {
  return {{P}}_rmi({{P}}_atanh({{P}}_mi(z)));
}

// sin(z) = -i sinh(iz), cos(z) = cosh(iz), tan(z) = -i tanh(iz)
fn {{P}}_sin(z: {{P}}_t) -> {{P}}_t {
  return {{P}}_rmi({{P}}_sinh({{P}}_mi(z)));
}

fn {{P}}_cos(z: {{P}}_t) -> {{P}}_t { return {{P}}_cosh({{P}}_mi(z)); }

fn {{P}}_tan(z: {{P}}_t) -> {{P}}_t {
  return {{P}}_rmi({{P}}_tanh({{P}}_mi(z)));
}

// NumPy's sign: z / |z|, 0 at 0, the unit of the infinite axis when one part is infinite
fn {{P}}_sign(z: {{P}}_t) -> {{P}}_t {
  if (isnan_{{DT}}(z.x) || isnan_{{DT}}(z.y)) { return {{P}}_nan2(); }
  let ix = {{P}}_isinf(z.x);
  let iy = {{P}}_isinf(z.y);
  if (ix && iy) { return {{P}}_nan2(); }
  if (ix) { return {{P}}_t({{P}}_cs({{F}}(1), z.x), {{F}}(0)); }
  if (iy) { return {{P}}_t({{F}}(0), {{P}}_cs({{F}}(1), z.y)); }
  let m = {{P}}_abs(z);
  if (m == {{F}}(0)) { return {{P}}_t({{F}}(0), {{F}}(0)); }
  return {{P}}_t(z.x / m, z.y / m);
}

// NumPy's power: 1 for a zero exponent, exact products for small integer exponents,
// otherwise exp(y log x)
fn {{P}}_pow(a: {{P}}_t, b: {{P}}_t) -> {{P}}_t {
  if (b.x == {{F}}(0) && b.y == {{F}}(0)) { return {{P}}_t({{F}}(1), {{F}}(0)); }
  if (a.x == {{F}}(0) && a.y == {{F}}(0)) {
    if (b.x > {{F}}(0)) { return {{P}}_t({{F}}(0), {{F}}(0)); }
    return {{P}}_nan2();
  }
  if (b.y == {{F}}(0) && b.x == floor(b.x) && abs(b.x) < {{F}}(100)) {
    var n = i32(abs(b.x));
    var base = a;
    var r = {{P}}_t({{F}}(1), {{F}}(0));
    loop {
      if (n == 0) { break; }
      if ((n & 1) != 0) { r = {{P}}_mul(r, base); }
      base = {{P}}_mul(base, base);
      n = n >> 1u;
    }
    if (b.x < {{F}}(0)) { return {{P}}_div({{P}}_t({{F}}(1), {{F}}(0)), r); }
    return r;
  }
  return {{P}}_exp({{P}}_mul(b, {{P}}_log(a)));
}
