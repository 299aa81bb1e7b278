// dst[i] = idx[i] wrapped from [-n, n) to [0, n); an index outside [-n, n) gives `bad` (an
// out-of-range value the gather and scatter kernels skip) and records itself as the first
// error in err (see vtl/backends/wgpu/_errors.py) unless one is recorded. With an empty
// WRAP (check_indices(negative=False)) the valid range is [0, n): negative indices fail.
// Words: 0 count, 1 n, 2 idx offset, 3 dst offset, 4 axis, 5 operation code, 6 bad
@group(0) @binding(0) var<storage, read> idx: array<{{I}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{O}}>;
@group(0) @binding(2) var<storage, read_write> err: array<atomic<u32>>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(0u)) { return; }
  let v = idx[pw(2u) + i];
  let n = {{I}}(pw(1u));
  var w = v;
  {{WRAP}}
  if (w < n{{NONNEG}}) {
    dst[pw(3u) + i] = {{O}}(w);
    return;
  }
  dst[pw(3u) + i] = {{O}}(pw(6u));
  loop {
    let r = atomicCompareExchangeWeak(&err[0], 0u, 1u);
    if (r.exchanged) {
      atomicStore(&err[1], {{LO}});
      atomicStore(&err[2], {{HI}});
      atomicStore(&err[3], pw(1u));
      atomicStore(&err[4], pw(4u));
      atomicStore(&err[5], pw(5u));
      break;
    }
    if (r.old_value != 0u) { break; }
  }
}
