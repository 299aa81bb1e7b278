// layer_norm's weight and bias gradients from the P blocks' partial sums of
// layer_norm_params.wgsl: DW[c] = sum_p PART[2p N + c], DB[c] = sum_p PART[(2p + 1) N + c],
// in loads of W elements (V, VC, STORE as in layer_norm.wgsl).
// Workgroups of CW loads of columns x (256 / CW) slices: slice s sums the blocks s,
// s + 256 / CW, ..., then the slices are added in order (a fixed order: the same sums every
// run), rounded once to T. (A grid over the dispatch limit is folded into x and y.)
// Words: 0 N, 1 P, 2 offset PART, 3 offset DW, 4 offset DB
@group(0) @binding(0) var<storage, read> PART: array<{{VC}}>;
@group(0) @binding(1) var<storage, read_write> DW: array<{{V}}>;
@group(0) @binding(2) var<storage, read_write> DB: array<{{V}}>;
const W = {{W}}u;  // elements a load
const CW = {{CW}}u;  // loads of columns a workgroup
const SL = 256u / CW;  // slices
var<workgroup> aw: array<{{VC}}, 256>;
var<workgroup> ab: array<{{VC}}, 256>;

fn rounded(v: {{VC}}) -> {{V}} { return {{STORE}}; }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let NV = pw(0u) / W;
  let P = pw(1u);
  let x = lid % CW;
  let y = lid / CW;
  let c = (wid.y * nwg.x + wid.x) * CW + x;
  let pb = pw(2u) / W;
  var sw = {{VC}}(0);
  var sb = {{VC}}(0);
  if (c < NV) {
    for (var p = y; p < P; p += SL) {
      sw += PART[pb + 2u * p * NV + c];
      sb += PART[pb + (2u * p + 1u) * NV + c];
    }
  }
  aw[lid] = sw;
  ab[lid] = sb;
  workgroupBarrier();
  if (y == 0u && c < NV) {
    for (var k = 1u; k < SL; k += 1u) {
      sw += aw[k * CW + x];
      sb += ab[k * CW + x];
    }
    DW[pw(3u) / W + c] = rounded(sw);
    DB[pw(4u) / W + c] = rounded(sb);
  }
}
