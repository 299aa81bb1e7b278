// dst[off + (idx[r] (+ n0 when negative)) * rowsize + c] += val[voff + r * rowsize + c]
// atomically, so repeated indices accumulate; one thread per (r, c). 32-bit types: integers
// use atomicAdd, float32 a compare-exchange loop on the bit pattern.
// Words: 0 n (rows * rowsize), 1 dst offset, 2 idx offset, 3 val offset, 4 rowsize,
// 5 idx stride, 6 n0 (rows of dst); rows outside [-n0, n0) add nothing
@group(0) @binding(0) var<storage, read> idx: array<{{I}}>;
@group(0) @binding(1) var<storage, read> val: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<atomic<{{AT}}>>;
{{HELPERS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(0u)) { return; }
  let rs = pw(4u);
  let r = i / rs;
  var row = i32(idx[pw(2u) + r * pw(5u)]);
  if (row < 0) { row += i32(pw(6u)); }
  if (row < 0 || u32(row) >= pw(6u)) { return; }  // a failed index check: nothing added
  let j = pw(1u) + u32(row) * rs + (i - r * rs);
  let v = val[pw(3u) + i];
  {{ADD}}
}
