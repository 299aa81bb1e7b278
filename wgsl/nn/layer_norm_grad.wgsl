// The input gradient of layer_norm.wgsl, TPR invocations a row, 256 / TPR rows at a time
// (vtl/backends/wgpu/_row_lanes.py; a row of up to TPR * SLOTS elements held in registers,
// a longer one read twice): with xhat = (x - mean) rstd and gw = g w,
// dx = rstd (gw - mean(gw) - xhat mean(gw xhat)). With flag 4 (rms_norm, whose mean is 0)
// the mean(gw) term is left out. Stored as T, computed in C (float32 for float16/bfloat16:
// S is float32, dx is rounded once).
// With PARAMS (rows held in registers only) a workgroup takes a block of R rows (word 9, a
// multiple of 256 / TPR), 256 / TPR at a time, and also sums g xhat and g over them for
// each column, as layer_norm_params.wgsl does from a second read of x and g: the rows'
// groups of invocations add theirs in order through workgroup memory and the block's sums
// go to PART[2p N + c] and PART[(2p + 1) N + c] (offset: word 8), added up by
// layer_norm_params_sum.wgsl. Without it, layer_norm_params.wgsl gives the weight's and
// bias's gradients.
// Words: 0 M, 1 N, 2 offset x, 3 offset w, 4 offset g, 5 offset S (mean, rstd pairs),
//        6 offset dx, 7 flags (1: w, 4: no centring), 8 offset PART, 9 R
// (wreduce: wgsl/math/workgroup_reduce.wgsl)
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> Wt: array<{{T}}>;
@group(0) @binding(2) var<storage, read> G: array<{{T}}>;
@group(0) @binding(3) var<storage, read> S: array<{{C}}>;
@group(0) @binding(4) var<storage, read_write> DX: array<{{T}}>;
{{PARAMS_DECL}}

const TPR = {{TPR}};  // invocations a row
const SLOTS = {{SLOTS}}u;  // elements an invocation holds
const RPW = 256u / TPR;  // rows at a time
const PARAMS = {{PARAMS}};

// (xhat, g w, g) of element j of the row at xb, gb
fn xhat_gw(xb: u32, gb: u32, j: u32, mu: {{C}}, r: {{C}}) -> vec3<{{C}}> {
  let g = {{C}}(G[gb + j]);
  var gw = g;
  if ((pw(7u) & 1u) != 0u) { gw *= {{C}}(Wt[pw(3u) + j]); }
  return vec3<{{C}}>(({{C}}(X[xb + j]) - mu) * r, gw, g);
}

// where row `row` of width N starts in x and g, its mean and rstd, and its end (0 for a
// row past the last: no elements)
struct RowAt { end: u32, xb: u32, gb: u32, mu: {{C}}, r: {{C}} }

fn row_at(row: u32, N: u32) -> RowAt {
  let valid = row < pw(0u);
  let sr = select(0u, row, valid);
  return RowAt(select(0u, N, valid), pw(2u) + row * N, pw(4u) + row * N, S[pw(5u) + 2u * sr],
               S[pw(5u) + 2u * sr + 1u]);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let lane = lid % TPR;
  let N = pw(1u);
  let centre = (pw(7u) & 4u) == 0u;
  let blk = wid.y * nwg.x + wid.x;
  if (N <= TPR * SLOTS) {
    var sw: array<{{C}}, SLOTS>;  // the block's sums of g xhat and g (PARAMS)
    var sb: array<{{C}}, SLOTS>;
    let rows = select(RPW, pw(9u), PARAMS);
    for (var r0 = blk * rows; r0 < blk * rows + rows; r0 += RPW) {
      let row = r0 + lid / TPR;
      let at = row_at(row, N);
      let r = at.r;
      var c1 = {{C}}(0);
      var c2 = {{C}}(0);
      var hv: array<vec3<{{C}}>, SLOTS>;
      /* unroll */ for (var k = 0u; k < {{SLOTS}}u; k++) {
        let j = lane + k * TPR;
        if (j < at.end) {
          let h = xhat_gw(at.xb, at.gb, j, at.mu, r);
          hv[k] = h;
          c1 += h.y;
          c2 += h.y * h.x;
          if (PARAMS) {
            sw[k] += h.z * h.x;
            sb[k] += h.z;
          }
        }
      }
      let m1 = select({{C}}(0), wreduce(lid, lane, c1, TPR, false) / {{C}}(N), centre);
      let m2 = wreduce(lid, lane, c2, TPR, false) / {{C}}(N);
      /* unroll */ for (var k = 0u; k < {{SLOTS}}u; k++) {
        let j = lane + k * TPR;
        if (j < at.end) {
          DX[pw(6u) + row * N + j] = wrap_{{D}}({{T}}(r * (hv[k].y - m1 - hv[k].x * m2)));
        }
      }
    }
    if (PARAMS && blk * rows < pw(0u)) {  // (not a spare group of a folded grid)
      {{PARAMS_STORE}}
    }
    return;
  }
  let row = blk * RPW + lid / TPR;
  let at = row_at(row, N);
  let r = at.r;
  var c1 = {{C}}(0);
  var c2 = {{C}}(0);
  for (var j = lane; j < at.end; j += TPR) {
    let h = xhat_gw(at.xb, at.gb, j, at.mu, r);
    c1 += h.y;
    c2 += h.y * h.x;
  }
  let m1 = select({{C}}(0), wreduce(lid, lane, c1, TPR, false) / {{C}}(N), centre);
  let m2 = wreduce(lid, lane, c2, TPR, false) / {{C}}(N);
  for (var j = lane; j < at.end; j += TPR) {
    let h = xhat_gw(at.xb, at.gb, j, at.mu, r);
    DX[pw(6u) + row * N + j] = wrap_{{D}}({{T}}(r * (h.y - m1 - h.x * m2)));
  }
}
