// The GRU cell's pointwise backward (see gru_fwd.wgsl), a thread per element (n, j) of the
// (N, H) state: the gradients of the stacked (N, 3H) input and hidden projections and, when
// {{NEED_DHP}} is 1, of hprev, from act, hprev and dh.
// Words: 0 N*H, 1 H, 2-7 the element offsets of act, hprev, dh, dx, dhg, dhp
@group(0) @binding(0) var<storage, read> act: array<{{T}}>;
@group(0) @binding(1) var<storage, read> hprev: array<{{T}}>;
@group(0) @binding(2) var<storage, read> dh: array<{{T}}>;
@group(0) @binding(3) var<storage, read_write> dx: array<{{T}}>;
@group(0) @binding(4) var<storage, read_write> dhg: array<{{T}}>;
@group(0) @binding(5) var<storage, read_write> dhp: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = linear_id(wid, nwg, lid);
  if (t >= pw(0u)) { return; }
  let H = pw(1u);
  let a = pw(2u) + (t / H) * 4u * H + t % H;
  let r = act[a];
  let zz = act[a + H];
  let nn = act[a + 2u * H];
  let hn = act[a + 3u * H];
  let one = {{T}}(1);
  let g = dh[pw(4u) + t];
  let dzp = g * (hprev[pw(3u) + t] - nn) * (zz * (one - zz));
  let dnp = (g - g * zz) * (one - nn * nn);
  let drp = dnp * hn * (r * (one - r));
  let b3 = (t / H) * 3u * H + t % H;
  let xo = pw(5u) + b3;
  dx[xo] = drp;
  dx[xo + H] = dzp;
  dx[xo + 2u * H] = dnp;
  let go = pw(6u) + b3;
  dhg[go] = drp;
  dhg[go + H] = dzp;
  dhg[go + 2u * H] = dnp * r;
  if ({{NEED_DHP}}u == 1u) { dhp[pw(7u) + t] = g * zz; }
}
