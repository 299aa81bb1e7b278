// The backward of one fused LSTM time step (vtl/backends/wgpu/rnn.py): each invocation of a
// 16 x 16 workgroup forms dh of its (row, unit) = dznext @ W_hh (tiles in workgroup memory)
// + dh + dh2, then the cell's backward. Words: N, H, then the element offsets of act, cprev,
// tc, w, dh, dh2, dc, dznext, dz, dcp, and the row stride of dh2 (a step of a batch-first
// output's gradient is a strided view). The next step's gate gradient lives in the same
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
var<workgroup> zs: array<{{C}}, 512>;
var<workgroup> ws: array<{{C}}, 512>;

fn dz_at(i: u32) -> {{C}} {
  if ({{DZ_IN_DZ}}u == 1u) { return {{C}}(dz[i]); }
  return {{C}}(dznext[i]);
}

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>) {
  let N = pw(0u);
  let H = pw(1u);
  let tx = l.x;
  let ty = l.y;
  let tid = ty * 16u + tx;
  let j = wid.x * 16u + tx;
  let n = wid.y * 16u + ty;
  var acc = {{C}}();
  if ({{HAS_DZ}}u == 1u) {
    let K = 4u * H;
    for (var k0 = 0u; k0 < K; k0 += 32u) {
      for (var e = tid; e < 512u; e += 256u) {
        let nn = wid.y * 16u + e / 32u;
        let k = k0 + e % 32u;
        var v = {{C}}();
        if (nn < N && k < K) { v = dz_at(pw(9u) + nn * K + k); }
        zs[e] = v;
      }
      for (var e = tid; e < 512u; e += 256u) {
        let k = k0 + e / 16u;
        let jj = wid.x * 16u + e % 16u;
        var v = {{C}}();
        if (jj < H && k < K) { v = {{C}}(w[pw(5u) + k * H + jj]); }
        ws[e] = v;
      }
      workgroupBarrier();
      for (var kk = 0u; kk < 32u; kk++) { acc += zs[ty * 32u + kk] * ws[kk * 16u + tx]; }
      workgroupBarrier();
    }
  }
  if (n < N && j < H) {
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
