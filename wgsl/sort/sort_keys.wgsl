// Sort keys: keys[s * P + r] = key(src[s * K + r]) for r < K (order-preserving unsigned
// integers, see _sorting.py), the largest key for the padding r >= K; ids = r.
// Words: 0 N = segments * P, 1 K, 2 P, 3 src offset
@group(0) @binding(0) var<storage, read> src: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> keys: array<{{KT}}>;
@group(0) @binding(2) var<storage, read_write> ids: array<u32>;

{{KEYFN}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(0u)) { return; }
  let K = pw(1u);
  let P = pw(2u);
  let s = i / P;
  let r = i - s * P;
  if (r < K) {
    keys[i] = key(src[pw(3u) + s * K + r]);
  } else {
    keys[i] = kmax();
  }
  ids[i] = r;
}
