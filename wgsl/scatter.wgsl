// dst[off + idx[i]] = val[i] (flat element offsets; the last write wins on repeats).
// Words: 0 n, 1 dst offset, 2 idx offset, 3 val offset
@group(0) @binding(0) var<storage, read> idx: array<i32>;
@group(0) @binding(1) var<storage, read> val: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(0u)) { return; }
  dst[pw(1u) + u32(idx[pw(2u) + i])] = val[pw(3u) + i];
}
