// One global compare-exchange step (k, j) of a bitonic sort of (key, id) pairs in
// segments of P (a power of two) elements; the id breaks ties, so the sort is stable.
// Words: 0 pairs (N / 2), 1 P, 2 k, 3 j
@group(0) @binding(0) var<storage, read_write> keys: array<{{KT}}>;
@group(0) @binding(1) var<storage, read_write> ids: array<u32>;

{{KEYFN}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = linear_id(wid, nwg, lid);
  if (t >= pw(0u)) { return; }
  let P = pw(1u);
  let k = pw(2u);
  let j = pw(3u);
  let i = ((t & ~(j - 1u)) << 1u) | (t & (j - 1u));
  let l = i + j;
  let up = ((i & (P - 1u)) & k) == 0u;
  let ka = keys[i];
  let kb = keys[l];
  let ia = ids[i];
  let ib = ids[l];
  if (pair_gt(ka, ia, kb, ib) == up) {
    keys[i] = kb; keys[l] = ka; ids[i] = ib; ids[l] = ia;
  }
}
