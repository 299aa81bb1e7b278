// One 4-bit digit pass of a stable LSD radix sort of u32 keys with u32 ids, in tiles of
// 1024 (256 threads x 4 consecutive elements). Mode 0: hist[d * tiles + t] = how many
// keys of tile t have digit d. Mode 2 (16 workgroups, one per digit d): inclusive scan
// of hist[d * tiles ..] over the tiles, the digit's total to hist[16 * tiles + d].
// Mode 1: scatter each (key, id) to its stable rank. Word 4 = 1: the ids are the
// positions (first pass). Words: 0 n, 1 tiles, 2 shift, 3 mode, 4 first
@group(0) @binding(0) var<storage, read> kin: array<u32>;
@group(0) @binding(1) var<storage, read> iin: array<u32>;
@group(0) @binding(2) var<storage, read_write> kout: array<u32>;
@group(0) @binding(3) var<storage, read_write> iout: array<u32>;
@group(0) @binding(4) var<storage, read_write> hist: array<u32>;
var<workgroup> cnt: array<atomic<u32>, 16>;
var<workgroup> sc: array<vec4<u32>, 512>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let n = pw(0u);
  let tiles = pw(1u);
  let shift = pw(2u);
  let t = wid.y * nwg.x + wid.x;
  let live = t < tiles;
  let base = t * 1024u + lid * 4u;
  if (pw(3u) == 0u) {
    if (lid < 16u) { atomicStore(&cnt[lid], 0u); }
    workgroupBarrier();
    for (var e = 0u; e < 4u; e++) {
      if (live && base + e < n) { atomicAdd(&cnt[(kin[base + e] >> shift) & 15u], 1u); }
    }
    workgroupBarrier();
    if (live && lid < 16u) { hist[lid * tiles + t] = atomicLoad(&cnt[lid]); }
    return;
  }
  if (pw(3u) == 2u) {
    let d = t;
    let chunk = (tiles + 255u) / 256u;
    let lo = min(lid * chunk, tiles);
    let hi = min(lo + chunk, tiles);
    var acc = 0u;
    for (var i = lo; i < hi; i++) { acc += hist[d * tiles + i]; }
    sc[lid] = vec4<u32>(acc, 0u, 0u, 0u);
    workgroupBarrier();
    for (var s = 1u; s < 256u; s <<= 1u) {
      var a = 0u;
      if (lid >= s) { a = sc[lid - s].x; }
      workgroupBarrier();
      sc[lid].x += a;
      workgroupBarrier();
    }
    var run = sc[lid].x - acc;
    if (d < 16u) {
      for (var i = lo; i < hi; i++) {
        run += hist[d * tiles + i];
        hist[d * tiles + i] = run;
      }
      if (lid == 255u) { hist[16u * tiles + d] = sc[255u].x; }
    }
    return;
  }
  // per-thread digit counts, 16-bit lanes: digit d in word d / 2 (lo/hi half)
  var c0 = vec4<u32>(0u);
  var c1 = vec4<u32>(0u);
  var kv: array<u32, 4>;
  var rk: array<u32, 4>;
  for (var e = 0u; e < 4u; e++) {
    var k = 0u;
    var r = 0u;
    if (live && base + e < n) {
      k = kin[base + e];
      let d = (k >> shift) & 15u;
      let w = (d >> 1u) & 3u;
      let h = (d & 1u) * 16u;
      let one = vec4<u32>(select(0u, 1u << h, w == 0u), select(0u, 1u << h, w == 1u),
                          select(0u, 1u << h, w == 2u), select(0u, 1u << h, w == 3u));
      if (d < 8u) { r = (c0[w] >> h) & 0xffffu; c0 += one; }
      else { r = (c1[w] >> h) & 0xffffu; c1 += one; }
    }
    kv[e] = k;
    rk[e] = r;
  }
  let own0 = c0;
  let own1 = c1;
  sc[2u * lid] = c0;
  sc[2u * lid + 1u] = c1;
  workgroupBarrier();
  for (var s = 1u; s < 256u; s <<= 1u) {
    var a0 = vec4<u32>(0u);
    var a1 = vec4<u32>(0u);
    if (lid >= s) { a0 = sc[2u * (lid - s)]; a1 = sc[2u * (lid - s) + 1u]; }
    workgroupBarrier();
    sc[2u * lid] += a0;
    sc[2u * lid + 1u] += a1;
    workgroupBarrier();
  }
  if (!live) { return; }
  // where each digit's run starts: the totals of the smaller digits
  var dbase: array<u32, 16>;
  var run = 0u;
  for (var d = 0u; d < 16u; d++) {
    dbase[d] = run;
    run += hist[16u * tiles + d];
  }
  let ex0 = sc[2u * lid] - own0;
  let ex1 = sc[2u * lid + 1u] - own1;
  let tot0 = sc[510u];
  let tot1 = sc[511u];
  for (var e = 0u; e < 4u; e++) {
    if (base + e < n) {
      let k = kv[e];
      let d = (k >> shift) & 15u;
      let w = (d >> 1u) & 3u;
      let h = (d & 1u) * 16u;
      var pre: u32;
      var tot: u32;
      if (d < 8u) { pre = (ex0[w] >> h) & 0xffffu; tot = (tot0[w] >> h) & 0xffffu; }
      else { pre = (ex1[w] >> h) & 0xffffu; tot = (tot1[w] >> h) & 0xffffu; }
      let pos = dbase[d] + hist[d * tiles + t] - tot + pre + rk[e];
      kout[pos] = k;
      var id = base + e;
      if (pw(4u) == 0u) { id = iin[base + e]; }
      iout[pos] = id;
    }
  }
}
