// The LSTM cell's pointwise forward (vtl/nn/functional/_rnn_fused.py), a thread per element
// (n, j) of the (N, H) state: z (+ z2 when {{HIDDEN}} is 1) holds the stacked (N, 4H)
// gates i, f, g, o; writes h, c, tc = tanh(c) and act (the activated gates, stacked).
// tanh_v and sigmoid_v: vtl/backends/wgpu/_rnn.py (ACTIVATIONS).
// With {{CPREV_IN_C}} 1, cprev is read from the buffer of c (another region of it: the
// previous step of a whole-sequence buffer), which cannot also be bound for reading.
// Words: 0 N*H, 1 H, 2-8 the element offsets of z, z2, cprev, h, c, tc, act
@group(0) @binding(0) var<storage, read> z: array<{{T}}>;
@group(0) @binding(1) var<storage, read> z2: array<{{T}}>;
@group(0) @binding(2) var<storage, read> cprev: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> h: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> c: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> tc: array<{{T}}>;
@group(0) @binding(6) var<storage, read_write> act: array<{{T}}>;

{{ACTIVATIONS}}

fn gate(k: u32, b: u32, H: u32) -> {{T}} {
  var v = z[pw(2u) + b + k * H];
  if ({{HIDDEN}}u == 1u) { v = v + z2[pw(3u) + b + k * H]; }
  return v;
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = linear_id(wid, nwg, lid);
  if (t >= pw(0u)) { return; }
  let H = pw(1u);
  let b = (t / H) * 4u * H + t % H;
  let ig = sigmoid_v(gate(0u, b, H));
  let fg = sigmoid_v(gate(1u, b, H));
  let gg = tanh_v(gate(2u, b, H));
  let og = sigmoid_v(gate(3u, b, H));
  var cp: {{T}};
  if ({{CPREV_IN_C}}u == 1u) { cp = c[pw(4u) + t]; } else { cp = cprev[pw(4u) + t]; }
  let cn = fg * cp + ig * gg;
  let tt = tanh_v(cn);
  h[pw(5u) + t] = og * tt;
  c[pw(6u) + t] = cn;
  tc[pw(7u) + t] = tt;
  let a = pw(8u) + b;
  act[a] = ig;
  act[a + H] = fg;
  act[a + 2u * H] = gg;
  act[a + 3u * H] = og;
}
