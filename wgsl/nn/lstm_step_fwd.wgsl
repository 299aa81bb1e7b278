// One LSTM time step with the recurrent product inside (vtl/backends/wgpu/rnn.py):
// a 16 x 16 workgroup owns 16 batch rows x 16 hidden units; each invocation sums the four
// gates of its (row, unit) over tiles of h and W_hh in workgroup memory, then runs the cell.
// Words: N, H, then the element offsets of g, hprev, w, cprev, h, c, tc, act. The previous
// h and c of the same whole-sequence buffers are read through the h and c bindings
// (H_IN_H, C_IN_C): a buffer may not be bound for reading and writing in one dispatch.
@group(0) @binding(0) var<storage, read> g: array<{{T}}>;
@group(0) @binding(1) var<storage, read> hprev: array<{{T}}>;
@group(0) @binding(2) var<storage, read> w: array<{{T}}>;
@group(0) @binding(3) var<storage, read> cprev: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> h: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> c: array<{{T}}>;
@group(0) @binding(6) var<storage, read_write> tc: array<{{T}}>;
@group(0) @binding(7) var<storage, read_write> act: array<{{T}}>;
var<workgroup> hs: array<{{T}}, 512>;
var<workgroup> ws: array<{{T}}, 2048>;

{{ACTIVATIONS}}

fn h_at(i: u32) -> {{T}} {
  if ({{H_IN_H}}u == 1u) { return h[i]; }
  return hprev[i];
}

fn c_at(i: u32) -> {{T}} {
  if ({{C_IN_C}}u == 1u) { return c[i]; }
  return cprev[i];
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
  var a0 = {{T}}();
  var a1 = {{T}}();
  var a2 = {{T}}();
  var a3 = {{T}}();
  for (var k0 = 0u; k0 < H; k0 += 32u) {
    for (var e = tid; e < 512u; e += 256u) {
      let nn = wid.y * 16u + e / 32u;
      let k = k0 + e % 32u;
      var v = {{T}}();
      if (nn < N && k < H) { v = h_at(pw(3u) + nn * H + k); }
      hs[e] = v;
    }
    for (var e = tid; e < 2048u; e += 256u) {
      let q = e / 512u;
      let jj = wid.x * 16u + (e / 32u) % 16u;
      let k = k0 + e % 32u;
      var v = {{T}}();
      if (jj < H && k < H) { v = w[pw(4u) + (q * H + jj) * H + k]; }
      ws[e] = v;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < 32u; kk++) {
      let hv = hs[ty * 32u + kk];
      let u = tx * 32u + kk;
      a0 += hv * ws[u];
      a1 += hv * ws[512u + u];
      a2 += hv * ws[1024u + u];
      a3 += hv * ws[1536u + u];
    }
    workgroupBarrier();
  }
  if (n < N && j < H) {
    let b = n * 4u * H + j;
    let gb = pw(2u) + b;
    let ig = sigmoid_v(g[gb] + a0);
    let fg = sigmoid_v(g[gb + H] + a1);
    let gg = tanh_v(g[gb + 2u * H] + a2);
    let og = sigmoid_v(g[gb + 3u * H] + a3);
    let s = n * H + j;
    let cn = fg * c_at(pw(5u) + s) + ig * gg;
    let tt = tanh_v(cn);
    h[pw(6u) + s] = og * tt;
    c[pw(7u) + s] = cn;
    tc[pw(8u) + s] = tt;
    let a = pw(9u) + b;
    act[a] = ig;
    act[a + H] = fg;
    act[a + 2u * H] = gg;
    act[a + 3u * H] = og;
  }
}
