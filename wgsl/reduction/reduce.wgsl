// Row reduction of a contiguous (rows, K) block: out[r] = fold(map(x[r, :])).
// Word 4 = 1: one thread per row (short rows). Otherwise each row is split over G workgroups
// (word 5, 0 meaning 1): workgroup w folds row w / G, elements g*256 + lid, stepping by G*256
// (adjacent threads read adjacent elements), then a tree in workgroup memory; it writes
// out[r * G + g] (partial results, folded again by a second dispatch when G > 1).
// The source elements are {{ST}}: T, or vec4<T> (K and the offset then count vectors; FOLD
// folds one source element into `acc`).
// CENTRE declares `centre_at(row)`, called before a row's elements are mapped: nothing, or
// (vtl/backends/wgpu/_reduction.py, var) a third binding and the row's centre for MAP.
// OUTDECL declares what OUT calls (a divisor in word 10: vtl/backends/wgpu/_reduction.py).
// Words: 0 rows, 1 K, 2 input offset, 3 output offset, 4 mode, 5 G (8, 9: CENTRE's)
@group(0) @binding(0) var<storage, read> src: array<{{ST}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{R}}>;
var<workgroup> sh: array<{{A}}, 256>;
{{CENTRE}}
{{OUTDECL}}

fn mapv(x: {{T}}) -> {{A}} { {{MAP}} }
fn comb(a: {{A}}, b: {{A}}) -> {{A}} { {{COMBINE}} }
fn outv(a: {{A}}) -> {{R}} { return {{OUT}}; }
fn fold_at(acc0: {{A}}, base: u32, k: u32) -> {{A}} {
  var acc = acc0;
  {{FOLD}}
  return acc;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let rows = pw(0u);
  let K = pw(1u);
  if (pw(4u) == 1u) {
    let r = linear_id(wid, nwg, lid);
    if (r < rows) {
      centre_at(r);
      var acc: {{A}} = {{INIT}};
      let base = pw(2u) + r * K;
      for (var k = 0u; k < K; k++) { acc = fold_at(acc, base, k); }
      dst[pw(3u) + r] = outv(acc);
    }
    return;
  }
  let G = max(pw(5u), 1u);
  let w = wid.y * nwg.x + wid.x;
  let row = w / G;
  let g = w - row * G;
  var acc: {{A}} = {{INIT}};
  if (row < rows) {
    centre_at(row);
    let base = pw(2u) + row * K;
    let step = G * 256u;
    var k = g * 256u + lid;
    // four elements a trip: their loads are independent of the folds, so all four are in
    // flight at once
    for (; k + 3u * step < K; k += 4u * step) {
      acc = fold_at(acc, base, k);
      acc = fold_at(acc, base, k + step);
      acc = fold_at(acc, base, k + 2u * step);
      acc = fold_at(acc, base, k + 3u * step);
    }
    for (; k < K; k += step) { acc = fold_at(acc, base, k); }
  }
  sh[lid] = acc;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (lid < s) { sh[lid] = comb(sh[lid], sh[lid + s]); }
    workgroupBarrier();
  }
  if (lid == 0u && row < rows) { dst[pw(3u) + w] = outv(sh[0]); }
}
