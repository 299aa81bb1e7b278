// Parallel inclusive scan (OP: + or *) along contiguous rows, in blocks of 1024 elements
// (256 threads x 4), one workgroup per (row, block). Mode 0: scan each block of src into
// dst (row pitch K + init, the first element `INIT` when init = 1) and write the block
// total to sums[row * nbk + block]; mode 1: combine block b > 0 of dst with the scanned
// sums[row * nbk + b - 1]. Words: 0 rows, 1 K, 2 src offset, 3 init (0/1), 4 mode, 5 nbk
@group(0) @binding(0) var<storage, read> src: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> sums: array<{{T}}>;
var<workgroup> sh: array<{{T}}, 256>;

fn comb(a: {{T}}, b: {{T}}) -> {{T}} { return wrap_{{D}}(a {{OP}} b); }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let g = wid.y * nwg.x + wid.x;
  let K = pw(1u);
  let init = pw(3u);
  let nbk = pw(5u);
  let row = g / nbk;
  let blk = g - row * nbk;
  let live = row < pw(0u);
  let i0 = blk * 1024u + lid * 4u;
  let ob = row * (K + init) + init;
  if (pw(4u) == 1u) {
    if (!live || blk == 0u) { return; }
    let add = sums[row * nbk + blk - 1u];
    for (var e = 0u; e < 4u; e++) {
      if (i0 + e < K) { dst[ob + i0 + e] = comb(add, dst[ob + i0 + e]); }
    }
    return;
  }
  var v: array<{{T}}, 4>;
  var acc: {{T}} = {{INIT}};
  for (var e = 0u; e < 4u; e++) {
    if (live && i0 + e < K) { acc = comb(acc, src[pw(2u) + row * K + i0 + e]); }
    v[e] = acc;
  }
  sh[lid] = acc;
  workgroupBarrier();
  for (var s = 1u; s < 256u; s <<= 1u) {
    var t: {{T}} = {{INIT}};
    if (lid >= s) { t = sh[lid - s]; }
    workgroupBarrier();
    sh[lid] = comb(t, sh[lid]);
    workgroupBarrier();
  }
  if (!live) { return; }
  var prefix: {{T}} = {{INIT}};
  if (lid > 0u) { prefix = sh[lid - 1u]; }
  for (var e = 0u; e < 4u; e++) {
    if (i0 + e < K) { dst[ob + i0 + e] = comb(prefix, v[e]); }
  }
  if (lid == 255u) { sums[row * nbk + blk] = sh[255u]; }
  if (init == 1u && blk == 0u && lid == 0u) { dst[ob - 1u] = {{INIT}}; }
}
