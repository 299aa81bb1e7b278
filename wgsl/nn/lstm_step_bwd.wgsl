// The backward of one fused LSTM time step (vtl/backends/wgpu/rnn.py): dh of (row, unit) =
// dznext @ W_hh + dh + dh2, then the cell's backward. A workgroup is 16 hidden units x 2
// batch rows x 8 slices of the 4H gate gradients: each invocation sums its slice, reading
// W_hh and dznext straight from memory (neighbouring invocations read neighbouring units of
// a row of W_hh and the same element of dznext), the partial sums meet in workgroup memory
// and the first slice's invocations run the cell. Words: N, H, then the element offsets of
// act, cprev, tc, w, dh, dh2, dc, dznext, dz, dcp, and the row stride of dh2 (a step of a
// batch-first output's gradient is a strided view). The next step's gate gradient lives in the same
// whole-sequence buffer as dz and is read through dz's binding (DZ_IN_DZ). Stored as T,
// computed in C, each result rounded once.
@group(0) @binding(0) var<storage, read> act: array<{{T}}>;
@group(0) @binding(1) var<storage, read> cprev: array<{{T}}>;
@group(0) @binding(2) var<storage, read> tc: array<{{T}}>;
@group(0) @binding(3) var<storage, read> w: array<{{T}}>;
@group(0) @binding(4) var<storage, read> dh: array<{{T}}>;
@group(0) @binding(5) var<storage, read> dh2: array<{{T}}>;
@group(0) @binding(6) var<storage, read> dc: array<{{T}}>;
@group(0) @binding(7) var<storage, read> dznext: array<{{T}}>;
@group(0) @binding(8) var<storage, read_write> dz: array<{{T}}>;
@group(0) @binding(9) var<storage, read_write> dcp: array<{{T}}>;
// the partial sum of invocation (slice s, row r, unit u) at s * 32 + r * 16 + u
var<workgroup> part: array<{{C}}, 256>;

fn dz_at(i: u32) -> {{C}} {
  if ({{DZ_IN_DZ}}u == 1u) { return {{C}}(dz[i]); }
  return {{C}}(dznext[i]);
}

@compute @workgroup_size(16, 2, 8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>,
        @builtin(local_invocation_index) tid: u32) {
  let N = pw(0u);
  let H = pw(1u);
  let j = wid.x * 16u + l.x;
  let n = wid.y * 2u + l.y;
  var a0 = {{C}}();
  var a1 = {{C}}();
  var a2 = {{C}}();
  var a3 = {{C}}();
  if ({{HAS_DZ}}u == 1u) {
    let K = 4u * H;
    let len = (K + 7u) / 8u;
    let k1 = min(min(l.z * len, K) + len, K);
    var k = min(l.z * len, K);
    let zb = pw(9u) + min(n, N - 1u) * K;
    var wi = pw(5u) + k * H + min(j, H - 1u);
    for (; k + 4u <= k1; k += 4u) {
      a0 += dz_at(zb + k) * {{C}}(w[wi]);
      a1 += dz_at(zb + k + 1u) * {{C}}(w[wi + H]);
      a2 += dz_at(zb + k + 2u) * {{C}}(w[wi + 2u * H]);
      a3 += dz_at(zb + k + 3u) * {{C}}(w[wi + 3u * H]);
      wi += 4u * H;
    }
    for (; k < k1; k++) {
      a0 += dz_at(zb + k) * {{C}}(w[wi]);
      wi += H;
    }
  }
  part[tid] = (a0 + a1) + (a2 + a3);
  workgroupBarrier();
  if (l.z == 0u && n < N && j < H) {
    var acc = {{C}}();
    for (var s = 0u; s < 8u; s++) { acc += part[s * 32u + tid]; }
    let s = n * H + j;
    let b = n * 4u * H + j;
    let one = {{C}}(1);
    var dhs = acc;
    if ({{HAS_DH}}u == 1u) { dhs += {{C}}(dh[pw(6u) + s]); }
    if ({{HAS_DH2}}u == 1u) { dhs += {{C}}(dh2[pw(7u) + n * pw(12u) + j]); }
    let a = pw(2u) + b;
    let ig = {{C}}(act[a]);
    let fg = {{C}}(act[a + H]);
    let gg = {{C}}(act[a + 2u * H]);
    let og = {{C}}(act[a + 3u * H]);
    let tt = {{C}}(tc[pw(4u) + s]);
    var dct = dhs * og * (one - tt * tt);
    if ({{HAS_DC}}u == 1u) { dct += {{C}}(dc[pw(8u) + s]); }
    let d = pw(10u) + b;
    dz[d] = wrap_{{D}}({{T}}(dct * gg * (ig * (one - ig))));
    dz[d + H] = wrap_{{D}}({{T}}(dct * {{C}}(cprev[pw(3u) + s]) * (fg * (one - fg))));
    dz[d + 2u * H] = wrap_{{D}}({{T}}(dct * ig * (one - gg * gg)));
    dz[d + 3u * H] = wrap_{{D}}({{T}}(dhs * tt * (og * (one - og))));
    if ({{NEED_DCP}}u == 1u) { dcp[pw(11u) + s] = wrap_{{D}}({{T}}(dct * fg)); }
  }
}
