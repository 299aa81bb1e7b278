// Global compare-exchange steps j, j/2, ..., j/E*2 (log2 E steps, one k) of a bitonic sort
// of (key, id) pairs in segments of P (a power of two) elements: each thread holds the E
// elements base + r * (2j/E) in registers. The id breaks ties, so the sort is stable.
// Words: 0 threads (N / E), 1 P, 2 k, 3 j
@group(0) @binding(0) var<storage, read_write> keys: array<{{KT}}>;
@group(0) @binding(1) var<storage, read_write> ids: array<u32>;

{{KEYFN}}

const E = {{E}}u;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = linear_id(wid, nwg, lid);
  if (t >= pw(0u)) { return; }
  let P = pw(1u);
  let k = pw(2u);
  let j = pw(3u);
  let jmin = (2u * j) / E;
  let base = (t / jmin) * (2u * j) + (t % jmin);
  let up = ((base & (P - 1u)) & k) == 0u;
  var kr: array<{{KT}}, E>;
  var ir: array<u32, E>;
  for (var r = 0u; r < E; r++) {
    kr[r] = keys[base + r * jmin];
    ir[r] = ids[base + r * jmin];
  }
  for (var s = E / 2u; s > 0u; s >>= 1u) {
    for (var r = 0u; r < E; r++) {
      if ((r & s) == 0u) {
        let ka = kr[r];
        let kb = kr[r + s];
        let ia = ir[r];
        let ib = ir[r + s];
        if (pair_gt(ka, ia, kb, ib) == up) {
          kr[r] = kb; kr[r + s] = ka; ir[r] = ib; ir[r + s] = ia;
        }
      }
    }
  }
  for (var r = 0u; r < E; r++) {
    keys[base + r * jmin] = kr[r];
    ids[base + r * jmin] = ir[r];
  }
}
