// Batch norm statistics, stage 1 (vtl/backends/wgpu/nn.py, BatchNorm): workgroup g = c * S + s
// sums slab s of channel c's N*HW elements of the (N, C, HW) arrays in a fixed order: mode 0
// the deviations from the channel's first element and their squares, mode 1 g and
// g * (x - mean[c]). Words: 0 C, 1 HW, 2 NHW, 3 S, 4 mode, 5 offset x, 6 offset g,
// 7 offset of the means in St, 8 offset of Part.
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> G: array<{{T}}>;
@group(0) @binding(2) var<storage, read> St: array<{{C}}>;
@group(0) @binding(3) var<storage, read_write> Part: array<{{C}}>;
var<workgroup> r0: array<{{C}}, 256>;
var<workgroup> r1: array<{{C}}, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let grp = wid.y * nwg.x + wid.x;
  let C = pw(0u);
  let S = pw(3u);
  if (grp >= C * S) { return; }
  let HW = pw(1u);
  let NHW = pw(2u);
  let c = grp / S;
  let s = grp - c * S;
  let rows = (NHW + S - 1u) / S;
  let j1 = min((s + 1u) * rows, NHW);
  let mode = pw(4u);
  var pivot = {{C}}(0);
  if (mode == 0u) { pivot = {{C}}(X[pw(5u) + c * HW]); } else { pivot = St[pw(7u) + c]; }
  var a0 = {{C}}(0);
  var a1 = {{C}}(0);
  // four elements an invocation at a time, loaded before they are added (the driver does
  // not pipeline a loop's loads on its own), then the rest one at a time
  var j = s * rows + lid;
  for (; j + 3u * 256u < j1; j += 4u * 256u) {
    var xv: array<{{C}}, 4>;
    var gv: array<{{C}}, 4>;
    /* unroll */ for (var k = 0u; k < 4u; k++) {
      let e = j + k * 256u;
      let n = e / HW;
      let i = (n * C + c) * HW + (e - n * HW);
      xv[k] = {{C}}(X[pw(5u) + i]) - pivot;
      if (mode != 0u) { gv[k] = {{C}}(G[pw(6u) + i]); }
    }
    /* unroll */ for (var k = 0u; k < 4u; k++) {
      if (mode == 0u) {
        a0 += xv[k];
        a1 += xv[k] * xv[k];
      } else {
        a0 += gv[k];
        a1 += gv[k] * xv[k];
      }
    }
  }
  for (; j < j1; j += 256u) {
    let n = j / HW;
    let i = (n * C + c) * HW + (j - n * HW);
    let d = {{C}}(X[pw(5u) + i]) - pivot;
    if (mode == 0u) {
      a0 += d;
      a1 += d * d;
    } else {
      let gv = {{C}}(G[pw(6u) + i]);
      a0 += gv;
      a1 += gv * d;
    }
  }
  r0[lid] = a0;
  r1[lid] = a1;
  workgroupBarrier();
  for (var h = 128u; h > 0u; h >>= 1u) {
    if (lid < h) {
      r0[lid] += r0[lid + h];
      r1[lid] += r1[lid + h];
    }
    workgroupBarrier();
  }
  if (lid == 0u) {
    Part[pw(8u) + grp * 2u] = r0[0];
    Part[pw(8u) + grp * 2u + 1u] = r1[0];
  }
}
