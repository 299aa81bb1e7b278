// Unique values from a sorted flat array: keys are the sorted keys (see sort_keys), ids
// the sorting permutation. Word 2 mode 0: flags[i] = 1 where a new value starts (every
// NaN is new). Mode 1: with g = inclusive scan of the flags (group g[i] - 1):
// values/indices at each start, inverse[ids[i]] = group, ends/starts of each group.
// Words: 0 n, 1 src offset, 2 mode, 3 number of unique values U
@group(0) @binding(0) var<storage, read> src: array<{{T}}>;
@group(0) @binding(1) var<storage, read> keys: array<{{KT}}>;
@group(0) @binding(2) var<storage, read> ids: array<u32>;
@group(0) @binding(3) var<storage, read_write> g: array<u32>;
@group(0) @binding(4) var<storage, read_write> values: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> idx: array<{{R}}>;
@group(0) @binding(6) var<storage, read_write> se: array<u32>;

{{KEYFN}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  let n = pw(0u);
  if (i >= n) { return; }
  if (pw(2u) == 0u) {
    let k = keys[i];
    var fresh = i == 0u || ({{NANKEY}} && keq(k, kmax()));
    if (!fresh) { fresh = !keq(k, keys[i - 1u]); }
    g[i] = select(0u, 1u, fresh);
    return;
  }
  let U = pw(3u);
  let grp = g[i] - 1u;
  let id = ids[i];
  idx[U + id] = {{R}}(grp);
  if (i == 0u || g[i - 1u] != g[i]) {
    values[grp] = src[pw(1u) + id];
    idx[grp] = {{R}}(id);
    se[grp] = i;
  }
  if (i == n - 1u || g[i + 1u] != g[i]) { se[U + grp] = i + 1u; }
}
