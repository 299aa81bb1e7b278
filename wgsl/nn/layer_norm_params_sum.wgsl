// layer_norm's weight and bias gradients from the P blocks' partial sums of
// layer_norm_params.wgsl: DW[c] = sum_p PART[2p N + c], DB[c] = sum_p PART[(2p + 1) N + c].
// Workgroups of 8 columns x 32 slices (a workgroup for every 8 columns: enough of them to
// fill the device for a model's widths): slice s sums the blocks s, s + 32, ..., then the
// slices are added in order (a fixed order: the same sums every run), rounded once to T.
// (A grid over the dispatch limit is folded into x and y.)
// Words: 0 N, 1 P, 2 offset PART, 3 offset DW, 4 offset DB
@group(0) @binding(0) var<storage, read> PART: array<{{C}}>;
@group(0) @binding(1) var<storage, read_write> DW: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> DB: array<{{T}}>;
var<workgroup> aw: array<{{C}}, 256>;
var<workgroup> ab: array<{{C}}, 256>;

@compute @workgroup_size(8, 32)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) li: vec3<u32>) {
  let N = pw(0u);
  let P = pw(1u);
  let c = (wid.y * nwg.x + wid.x) * 8u + li.x;
  var sw = {{C}}(0);
  var sb = {{C}}(0);
  if (c < N) {
    for (var p = li.y; p < P; p += 32u) {
      sw += PART[pw(2u) + 2u * p * N + c];
      sb += PART[pw(2u) + (2u * p + 1u) * N + c];
    }
  }
  aw[li.y * 8u + li.x] = sw;
  ab[li.y * 8u + li.x] = sb;
  workgroupBarrier();
  if (li.y == 0u && c < N) {
    for (var k = 1u; k < 32u; k += 1u) {
      sw += aw[k * 8u + li.x];
      sb += ab[k * 8u + li.x];
    }
    DW[pw(3u) + c] = wrap_{{D}}({{T}}(sw));
    DB[pw(4u) + c] = wrap_{{D}}({{T}}(sb));
  }
}
