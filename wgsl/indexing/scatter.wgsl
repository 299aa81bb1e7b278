// dst[off + idx[i]] = val[i] (flat element offsets; the last write wins on repeats); a
// negative offset (an index that failed its check) writes nothing, and nothing at all is
// written while the thread's error buffer `err` records an error (see index_check.wgsl).
// Words: 0 n, 1 dst offset, 2 idx offset, 3 val offset
@group(0) @binding(0) var<storage, read> idx: array<i32>;
@group(0) @binding(1) var<storage, read> val: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{T}}>;
@group(0) @binding(3) var<storage, read> err: array<u32>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(0u) || err[0] != 0u) { return; }
  let j = idx[pw(2u) + i];
  if (j < 0) { return; }
  dst[pw(1u) + u32(j)] = val[pw(3u) + i];
}
