// Results of a sort: for row s and rank r < K, id = ids[s * P + r] and
// dst[s * K + r] = {{EXPR}} (the value src[s * K + id], or the id itself).
// Words: 0 n = segments * K, 1 K, 2 P, 3 src offset
@group(0) @binding(0) var<storage, read> src: array<{{T}}>;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{R}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(0u)) { return; }
  let K = pw(1u);
  let s = i / K;
  let r = i - s * K;
  let id = ids[s * pw(2u) + r];
  dst[i] = {{EXPR}};
}
