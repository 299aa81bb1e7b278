// One LSTM time step with the recurrent product inside (vtl/backends/wgpu/rnn.py). A
// workgroup is 16 hidden units x 2 batch rows x 8 slices of the hidden size: each invocation
// sums the four gates of its (row, unit) over its slice of k, reading W_hh^T ((H, 4H), laid
// out once per layer call) and h straight from memory (neighbouring invocations read
// neighbouring units of a row of W_hh^T and the same element of h); the slices' partial sums
// meet in workgroup memory and the first slice's invocations run the cell. Many small
// workgroups keep every multiprocessor busy at the small batches of a recurrent step.
// Words: N, H, then the element offsets of g, hprev, wt, cprev, h, c, tc, act. The previous
// h and c of the same whole-sequence buffers are read through the h and c bindings
// (H_IN_H, C_IN_C): a buffer may not be bound for reading and writing in one dispatch.
// Values are stored as T and computed in C (float32 for float16/bfloat16), each result
// rounded once (wrap_D).
@group(0) @binding(0) var<storage, read> g: array<{{T}}>;
@group(0) @binding(1) var<storage, read> hprev: array<{{T}}>;
@group(0) @binding(2) var<storage, read> wt: array<{{T}}>;
@group(0) @binding(3) var<storage, read> cprev: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> h: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> c: array<{{T}}>;
@group(0) @binding(6) var<storage, read_write> tc: array<{{T}}>;
@group(0) @binding(7) var<storage, read_write> act: array<{{T}}>;
// the partial sums of gate q of invocation (slice s, row r, unit u) at q * 256 + s * 32 +
// r * 16 + u
var<workgroup> part: array<{{C}}, 1024>;

{{ACTIVATIONS}}

fn h_at(i: u32) -> {{C}} {
  if ({{H_IN_H}}u == 1u) { return {{C}}(h[i]); }
  return {{C}}(hprev[i]);
}

fn c_at(i: u32) -> {{C}} {
  if ({{C_IN_C}}u == 1u) { return {{C}}(c[i]); }
  return {{C}}(cprev[i]);
}

@compute @workgroup_size(16, 2, 8)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) l: vec3<u32>,
        @builtin(local_invocation_index) tid: u32) {
  let N = pw(0u);
  let H = pw(1u);
  let j = wid.x * 16u + l.x;
  let n = wid.y * 2u + l.y;
  let len = (H + 7u) / 8u;
  let k0 = min(l.z * len, H);
  let k1 = min(k0 + len, H);
  let h4 = 4u * H;
  let hb = pw(3u) + min(n, N - 1u) * H;
  var wi = pw(4u) + k0 * h4 + min(j, H - 1u);
  var a0 = {{C}}();
  var a1 = {{C}}();
  var a2 = {{C}}();
  var a3 = {{C}}();
  for (var k = k0; k < k1; k++) {
    let hv = h_at(hb + k);
    a0 += hv * {{C}}(wt[wi]);
    a1 += hv * {{C}}(wt[wi + H]);
    a2 += hv * {{C}}(wt[wi + 2u * H]);
    a3 += hv * {{C}}(wt[wi + 3u * H]);
    wi += h4;
  }
  part[tid] = a0;
  part[256u + tid] = a1;
  part[512u + tid] = a2;
  part[768u + tid] = a3;
  workgroupBarrier();
  if (l.z == 0u && n < N && j < H) {
    var z0 = {{C}}();
    var z1 = {{C}}();
    var z2 = {{C}}();
    var z3 = {{C}}();
    for (var s = 0u; s < 8u; s++) {
      let p = s * 32u + tid;
      z0 += part[p];
      z1 += part[256u + p];
      z2 += part[512u + p];
      z3 += part[768u + p];
    }
    let b = n * 4u * H + j;
    let gb = pw(2u) + b;
    let ig = sigmoid_v({{C}}(g[gb]) + z0);
    let fg = sigmoid_v({{C}}(g[gb + H]) + z1);
    let gg = tanh_v({{C}}(g[gb + 2u * H]) + z2);
    let og = sigmoid_v({{C}}(g[gb + 3u * H]) + z3);
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
