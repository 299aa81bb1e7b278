// One LSTM time step with the recurrent product inside (vtl/backends/wgpu/rnn.py):
// a 16 x 16 workgroup owns 16 batch rows x 16 hidden units; each invocation sums the four
// gates of its (row, unit) over tiles of h and W_hh in workgroup memory, then runs the cell.
// Words: N, H, then the element offsets of g, hprev, w, cprev, h, c, tc, act. The previous
// h and c of the same whole-sequence buffers are read through the h and c bindings
// (H_IN_H, C_IN_C): a buffer may not be bound for reading and writing in one dispatch.
// Values are stored as T and computed in C (float32 for float16/bfloat16), each result
// rounded once (wrap_D).
@group(0) @binding(0) var<storage, read> g: array<{{T}}>;
@group(0) @binding(1) var<storage, read> hprev: array<{{T}}>;
@group(0) @binding(2) var<storage, read> w: array<{{T}}>;
@group(0) @binding(3) var<storage, read> cprev: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> h: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> c: array<{{T}}>;
@group(0) @binding(6) var<storage, read_write> tc: array<{{T}}>;
@group(0) @binding(7) var<storage, read_write> act: array<{{T}}>;
// tiles with rows of 33: the products' reads of neighbouring threads (ws: one row per unit,
// hs: one per batch row) fall in different banks, as do the stores of neighbouring k
var<workgroup> hs: array<{{C}}, 528>;
var<workgroup> ws: array<{{C}}, 2112>;

{{ACTIVATIONS}}

fn h_at(i: u32) -> {{C}} {
  if ({{H_IN_H}}u == 1u) { return {{C}}(h[i]); }
  return {{C}}(hprev[i]);
}

fn c_at(i: u32) -> {{C}} {
  if ({{C_IN_C}}u == 1u) { return {{C}}(c[i]); }
  return {{C}}(cprev[i]);
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
  var a0 = {{C}}();
  var a1 = {{C}}();
  var a2 = {{C}}();
  var a3 = {{C}}();
  for (var k0 = 0u; k0 < H; k0 += 32u) {
    for (var e = tid; e < 512u; e += 256u) {
      let nn = wid.y * 16u + e / 32u;
      let k = k0 + e % 32u;
      var v = {{C}}();
      if (nn < N && k < H) { v = h_at(pw(3u) + nn * H + k); }
      hs[(e / 32u) * 33u + e % 32u] = v;
    }
    for (var e = tid; e < 2048u; e += 256u) {
      let q = e / 512u;
      let jj = wid.x * 16u + (e / 32u) % 16u;
      let k = k0 + e % 32u;
      var v = {{C}}();
      if (jj < H && k < H) { v = {{C}}(w[pw(4u) + (q * H + jj) * H + k]); }
      ws[(e / 32u) * 33u + e % 32u] = v;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < 32u; kk++) {
      let hv = hs[ty * 33u + kk];
      let u = tx * 33u + kk;
      a0 += hv * ws[u];
      a1 += hv * ws[528u + u];
      a2 += hv * ws[1056u + u];
      a3 += hv * ws[1584u + u];
    }
    workgroupBarrier();
  }
  if (n < N && j < H) {
    let b = n * 4u * H + j;
    let gb = pw(2u) + b;
    let ig = sigmoid_v({{C}}(g[gb]) + a0);
    let fg = sigmoid_v({{C}}(g[gb + H]) + a1);
    let gg = tanh_v({{C}}(g[gb + 2u * H]) + a2);
    let og = sigmoid_v({{C}}(g[gb + 3u * H]) + a3);
    let s = n * H + j;
    let cn = fg * c_at(pw(5u) + s) + ig * gg;
    let tt = tanh_v(cn);
    h[pw(6u) + s] = wrap_{{D}}({{T}}(og * tt));
    c[pw(7u) + s] = wrap_{{D}}({{T}}(cn));
    tc[pw(8u) + s] = wrap_{{D}}({{T}}(tt));
    let a = pw(9u) + b;
    act[a] = wrap_{{D}}({{T}}(ig));
    act[a + H] = wrap_{{D}}({{T}}(fg));
    act[a + 2u * H] = wrap_{{D}}({{T}}(gg));
    act[a + 3u * H] = wrap_{{D}}({{T}}(og));
  }
}
