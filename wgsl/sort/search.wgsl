// Binary search of each x2 element in the ascending 1-D x1 (keys order as sort: NaN last,
// -0.0 == 0.0). Word 4 mode: 0 side='left', 1 side='right' (dst = insertion index);
// 2 isin, 3 isin inverted (dst = 0/1; NaN is never found).
// Words: 0 n2, 1 m = len(x1), 2 x1 offset, 3 x2 offset, 4 mode
@group(0) @binding(0) var<storage, read> x1: array<{{T}}>;
@group(0) @binding(1) var<storage, read> x2: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{R}}>;

{{KEYFN}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(0u)) { return; }
  let m = pw(1u);
  let o1 = pw(2u);
  let mode = pw(4u);
  let v = x2[pw(3u) + i];
  let q = key(v);
  var lo = 0u;
  var hi = m;
  loop {
    if (lo >= hi) { break; }
    let mid = (lo + hi) >> 1u;
    let km = key(x1[o1 + mid]);
    var go_right = kless(km, q);
    if (mode == 1u) { go_right = !kless(q, km); }
    if (go_right) { lo = mid + 1u; } else { hi = mid; }
  }
  if (mode < 2u) {
    dst[i] = {{R}}(lo);
  } else {
    var found = lo < m && !isnan_{{D}}(v);
    if (found) { found = keq(key(x1[o1 + lo]), q); }
    dst[i] = {{R}}(select(0u, 1u, found != (mode == 3u)));
  }
}
