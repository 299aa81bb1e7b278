// erf and erfc in float32: Cephes' rational approximations, as the portable
// vtl.nn.functional._utils.erf/erfc (included in a kernel that calls erfc_f or erf_f).
fn p5(x: f32, c0: f32, c1: f32, c2: f32, c3: f32, c4: f32) -> f32 {
  return (((c0 * x + c1) * x + c2) * x + c3) * x + c4;
}

// exp(-b^2) for b >= 0 without the error of rounding b^2 and of exp's own argument
// reduction (both grow with b^2): -b^2 log2(e) = s1 L1 + r, where s1 = -bh^2 and L1 keep 8
// mantissa bits (so s1 L1 is exact) and r is small; then 2^n 2^(s1 L1 - n + r)
fn exp_neg_sq(b: f32) -> f32 {
  let bh = bitcast<f32>(bitcast<u32>(b) & 0xFFFF8000u);
  let s1 = -bh * bh;
  let s2 = -(b - bh) * (b + bh);
  let l1 = 1.4375;  // log2(e) to 8 bits
  let l2 = 0.0051950408889634;  // log2(e) - l1
  let t1 = s1 * l1;
  let n = floor(t1 + 0.5);
  let f = (t1 - n) + (s1 * l2 + s2 * 1.4426950408889634);
  return ldexp(exp2(f), i32(max(n, -200.0)));
}

// a bit test: `x != x` may be folded away by driver compilers
fn nan_bits_f(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }

// erf for |x| < 1: x T(x^2) / U(x^2)
fn erf_small_f(x: f32) -> f32 {
  let z = x * x;
  let t = p5(z, 9.60497373987051638749e0, 9.00260197203842689217e1,
             2.23200534594684319226e3, 7.00332514112805075473e3, 5.55923013010394962768e4);
  let u = ((((z + 3.35617141647503099647e1) * z + 5.21357949780152679795e2) * z
            + 4.59432382970980127987e3) * z + 2.26290000613890934246e4) * z
          + 4.92673942608635921086e4;
  return x * t / u;
}

fn erfc_f(x: f32) -> f32 {
  if (nan_bits_f(x)) { return x; }
  let a = abs(x);
  if (a < 1.0) {
    return 1.0 - erf_small_f(x);
  }
  let b = min(a, 30.0);
  var tail: f32;
  if (b < 8.0) {
    let p = ((((((((2.46196981473530512524e-10 * b + 5.64189564831068821977e-1) * b
              + 7.46321056442269912687e0) * b + 4.86371970985681366614e1) * b
              + 1.96520832956077098242e2) * b + 5.26445194995477358631e2) * b
              + 9.34528527171957607540e2) * b + 1.02755188689515710272e3) * b
              + 5.57535335369399327526e2);
    let q = ((((((((b + 1.32281951154744992508e1) * b + 8.67072140885989742329e1) * b
              + 3.54937778887819891062e2) * b + 9.75708501743205489753e2) * b
              + 1.82390916687909736289e3) * b + 2.24633760818710981792e3) * b
              + 1.65666309194161350182e3) * b + 5.57535340817727675546e2);
    tail = p / q;
  } else {
    let p = ((((5.64189583547755073984e-1 * b + 1.27536670759978104416e0) * b
              + 5.01905042251180477414e0) * b + 6.16021097993053585195e0) * b
              + 7.40974269950448939160e0) * b + 2.97886665372100240670e0;
    let q = (((((b + 2.26052863220117276590e0) * b + 9.39603524938001434673e0) * b
              + 1.20489539808096656605e1) * b + 1.70814450747565897222e1) * b
              + 9.60896809063285878198e0) * b + 3.36907645100081516050e0;
    tail = p / q;
  }
  let e = exp_neg_sq(b) * tail;
  return select(e, 2.0 - e, x < 0.0);
}

fn erf_f(x: f32) -> f32 {
  if (nan_bits_f(x)) { return x; }
  if (abs(x) < 1.0) { return erf_small_f(x); }
  return select(1.0 - erfc_f(x), erfc_f(-x) - 1.0, x < 0.0);
}
