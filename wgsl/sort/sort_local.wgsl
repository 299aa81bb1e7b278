// Bitonic stages inside tiles of TILE (key, id) pairs in workgroup memory: for k from
// k0 to k1 (powers of two), j from (k == k0 ? j0 : k / 2) down to 1 (j <= TILE / 2).
// Words: 0 N, 1 P, 2 k0, 3 k1, 4 j0
@group(0) @binding(0) var<storage, read_write> keys: array<{{KT}}>;
@group(0) @binding(1) var<storage, read_write> ids: array<u32>;
const TILE = {{TILE}}u;
var<workgroup> sk: array<{{KT}}, TILE>;
var<workgroup> si: array<u32, TILE>;

{{KEYFN}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let N = pw(0u);
  let P = pw(1u);
  let base = (wid.y * nwg.x + wid.x) * TILE;
  for (var e = 0u; e < TILE / 256u; e++) {
    let li = lid + e * 256u;
    if (base + li < N) { sk[li] = keys[base + li]; si[li] = ids[base + li]; }
  }
  workgroupBarrier();
  var k = pw(2u);
  var j = pw(4u);
  let k1 = pw(3u);
  loop {
    if (k > k1) { break; }
    loop {
      if (j == 0u) { break; }
      for (var p = 0u; p < TILE / 512u; p++) {
        let t = lid + p * 256u;
        let i = ((t & ~(j - 1u)) << 1u) | (t & (j - 1u));
        let l = i + j;
        if (base + l < N) {
          let up = (((base + i) & (P - 1u)) & k) == 0u;
          let ka = sk[i];
          let kb = sk[l];
          let ia = si[i];
          let ib = si[l];
          if (pair_gt(ka, ia, kb, ib) == up) {
            sk[i] = kb; sk[l] = ka; si[i] = ib; si[l] = ia;
          }
        }
      }
      workgroupBarrier();
      j = j >> 1u;
    }
    k = k << 1u;
    j = k >> 1u;
  }
  for (var e = 0u; e < TILE / 256u; e++) {
    let li = lid + e * 256u;
    if (base + li < N) { keys[base + li] = sk[li]; ids[base + li] = si[li]; }
  }
}
