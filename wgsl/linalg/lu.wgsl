// Batched LU with partial pivoting, one workgroup per n x n matrix (n <= NMAX) held in
// workgroup memory. Word 5 mode 0: x = a^-1 b for b (n, k); 1: x = a^-1 (k = n);
// 2: x[batch] = det(a); 3: x[batch] = (sign, log|det|). A zero pivot eliminates nothing
// (det 0, slogdet (0, -inf)); solve and inv of a singular matrix give non-finite values
// (no error is raised).
// Words: 0 batch, 1 n, 2 k, 3 a offset, 4 b offset, 5 mode
@group(0) @binding(0) var<storage, read> a: array<{{T}}>;
@group(0) @binding(1) var<storage, read> b: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> x: array<{{T}}>;

const NMAX = {{NMAX}}u;
var<workgroup> sa: array<{{T}}, NMAX * NMAX>;
var<workgroup> piv: array<u32, NMAX>;
var<workgroup> lc: array<{{T}}, NMAX>;
var<workgroup> cv: array<{{T}}, 8>;
var<workgroup> ci: array<u32, 8>;
var<workgroup> prow: u32;
var<workgroup> nswap: u32;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let m = wid.y * nwg.x + wid.x;
  let n = pw(1u);
  let k = pw(2u);
  let mode = pw(5u);
  let nb = pw(0u);
  // every thread runs the same barriers; a workgroup past the batch does no memory work
  let live = m < nb;
  let ao = pw(3u) + m * n * n;
  if (live) {
    for (var e = lid; e < n * n; e += 256u) { sa[e] = a[ao + e]; }
  }
  if (lid < n) { piv[lid] = lid; }
  if (lid == 0u) { nswap = 0u; }
  workgroupBarrier();
  for (var c = 0u; c < n; c++) {
    // pivot: the first row of largest |a[r, c]|, r >= c; 8 threads scan every 8th row,
    // then thread 0 picks among their candidates
    if (lid < 8u) {
      var p = c + lid;
      var best = {{T}}(-1);
      for (var r = c + lid; r < n; r += 8u) {
        let v = abs(sa[r * n + c]);
        if (v > best) { best = v; p = r; }
      }
      cv[lid] = best;
      ci[lid] = p;
    }
    workgroupBarrier();
    if (lid == 0u) {
      var p = ci[0];
      var best = cv[0];
      for (var t = 1u; t < 8u; t++) {
        if (cv[t] > best || (cv[t] == best && ci[t] < p)) { best = cv[t]; p = ci[t]; }
      }
      if (best < {{T}}(0)) { p = c; }  // NaN column: no swap
      prow = p;
      if (p != c) {
        nswap += 1u;
        let t = piv[c]; piv[c] = piv[p]; piv[p] = t;
      }
    }
    workgroupBarrier();
    let p = prow;
    if (p != c && lid < n) {
      let t = sa[c * n + lid]; sa[c * n + lid] = sa[p * n + lid]; sa[p * n + lid] = t;
    }
    workgroupBarrier();
    if (lid > c && lid < n) {
      // a zero pivot (its whole column below is 0) eliminates nothing, as LAPACK's getrf:
      // 0 / 0 would spread nan into the rest (det of a zero matrix is 0, not nan)
      let pv = sa[c * n + c];
      var l = sa[lid * n + c];
      if (pv != {{T}}(0)) { l = l / pv; }
      lc[lid] = l;
      sa[lid * n + c] = l;
    }
    workgroupBarrier();
    let w = n - c - 1u;
    for (var e = lid; e < w * w; e += 256u) {
      let r = c + 1u + e / w;
      let q = c + 1u + e % w;
      sa[r * n + q] -= lc[r] * sa[c * n + q];
    }
    workgroupBarrier();
  }
  if (mode == 2u) {
    if (lid == 0u && live) {
      var d = {{T}}(1);
      for (var i = 0u; i < n; i++) { d *= sa[i * n + i]; }
      if ((nswap & 1u) == 1u) { d = -d; }
      if (d == {{T}}(0)) { d = abs(d); }  // a singular matrix's det is +0, as NumPy's
      x[m] = d;
    }
    return;
  }
  if (mode == 3u) {  // slogdet: x[2m] = sign, x[2m + 1] = log|det|
    if (lid == 0u && live) {
      var sg = {{T}}(1);
      var la = {{T}}(0);
      for (var i = 0u; i < n; i++) {
        let u = sa[i * n + i];
        sg *= select(select({{T}}(0), {{T}}(-1), u < {{T}}(0)), {{T}}(1), u > {{T}}(0));
        la += {{LOG}}(abs(u));
      }
      if ((nswap & 1u) == 1u) { sg = -sg; }
      if (sg == {{T}}(0)) { sg = abs(sg); }
      x[2u * m] = sg;
      x[2u * m + 1u] = la;
    }
    return;
  }
  // x = P b, then L y = x (unit diagonal), then U x = y; rows of x in global memory
  let xo = m * n * k;
  if (live) {
    for (var e = lid; e < n * k; e += 256u) {
      let r = e / k;
      let q = e % k;
      if (mode == 0u) {
        x[xo + e] = b[pw(4u) + m * n * k + piv[r] * k + q];
      } else {
        x[xo + e] = select({{T}}(0), {{T}}(1), piv[r] == q);
      }
    }
  }
  storageBarrier();
  workgroupBarrier();
  for (var i = 0u; i + 1u < n; i++) {
    let w = (n - i - 1u) * k;
    if (live) {
      for (var e = lid; e < w; e += 256u) {
        let r = i + 1u + e / k;
        let q = e % k;
        x[xo + r * k + q] -= sa[r * n + i] * x[xo + i * k + q];
      }
    }
    storageBarrier();
    workgroupBarrier();
  }
  for (var ii = 0u; ii < n; ii++) {
    let i = n - 1u - ii;
    if (live) {
      for (var q = lid; q < k; q += 256u) { x[xo + i * k + q] /= sa[i * n + i]; }
    }
    storageBarrier();
    workgroupBarrier();
    if (live) {
      for (var e = lid; e < i * k; e += 256u) {
        let r = e / k;
        let q = e % k;
        x[xo + r * k + q] -= sa[r * n + i] * x[xo + i * k + q];
      }
    }
    storageBarrier();
    workgroupBarrier();
  }
}
