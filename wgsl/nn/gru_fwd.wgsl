// The GRU cell's pointwise forward (vtl/nn/functional/_rnn_fused.py), a thread per element
// (n, j) of the (N, H) state: xin and hg hold the stacked (N, 3H) input and hidden projections
// r, z, n; writes h and act (N, 4H): r, z, n and the hidden part h_n.
// tanh_v and sigmoid_v: vtl/backends/wgpu/_rnn.py (ACTIVATIONS).
// Words: 0 N*H, 1 H, 2-6 the element offsets of xin, hg, hprev, h, act
@group(0) @binding(0) var<storage, read> xin: array<{{T}}>;
@group(0) @binding(1) var<storage, read> hg: array<{{T}}>;
@group(0) @binding(2) var<storage, read> hprev: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> h: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> act: array<{{T}}>;

{{ACTIVATIONS}}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = linear_id(wid, nwg, lid);
  if (t >= pw(0u)) { return; }
  let H = pw(1u);
  let b3 = (t / H) * 3u * H + t % H;
  let xo = pw(2u) + b3;
  let ho = pw(3u) + b3;
  let r = sigmoid_v(xin[xo] + hg[ho]);
  let zz = sigmoid_v(xin[xo + H] + hg[ho + H]);
  let hn = hg[ho + 2u * H];
  let nn = tanh_v(xin[xo + 2u * H] + r * hn);
  h[pw(5u) + t] = nn + zz * (hprev[pw(4u) + t] - nn);
  let a = pw(6u) + (t / H) * 4u * H + t % H;
  act[a] = r;
  act[a + H] = zz;
  act[a + 2u * H] = nn;
  act[a + 3u * H] = hn;
}
