// Inclusive prefix sum of u32 in blocks of 1024 (256 threads x 4 items).
// Word 1 mode 0: scan each block in place, sums[b] = block total;
// mode 1: add sums[b - 1] to every element of block b > 0. Words: 0 n, 1 mode
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@group(0) @binding(1) var<storage, read_write> sums: array<u32>;
var<workgroup> sh: array<u32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let n = pw(0u);
  let b = wid.y * nwg.x + wid.x;
  let base = b * 1024u + lid * 4u;
  if (pw(1u) == 1u) {
    if (b == 0u) { return; }
    let add = sums[b - 1u];
    for (var e = 0u; e < 4u; e++) {
      if (base + e < n) { data[base + e] += add; }
    }
    return;
  }
  var v: array<u32, 4>;
  var acc = 0u;
  for (var e = 0u; e < 4u; e++) {
    if (base + e < n) { acc += data[base + e]; }
    v[e] = acc;
  }
  sh[lid] = acc;
  workgroupBarrier();
  for (var s = 1u; s < 256u; s <<= 1u) {
    var t = 0u;
    if (lid >= s) { t = sh[lid - s]; }
    workgroupBarrier();
    sh[lid] += t;
    workgroupBarrier();
  }
  let prefix = sh[lid] - acc;
  for (var e = 0u; e < 4u; e++) {
    if (base + e < n) { data[base + e] = v[e] + prefix; }
  }
  if (lid == 255u) { sums[b] = sh[255u]; }
}
