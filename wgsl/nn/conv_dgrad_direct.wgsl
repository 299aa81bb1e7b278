// The input gradient of a convolution with few input channels (an image's colour planes),
// directly: a thread per input pixel (img, ih, iw) and group of four channels c0.., summing
// W[o, c, i, j] * g[img, o, oh, ow] over the output channels o and the taps (i, j) that read
// the pixel from an output pixel (tap_out: oh * STRIDE_H = ih + PAD_T - i * DIL_H),
// in the compute type, rounded once. The implicit-GEMM product would give these few
// channels a tile of 64 or 128 rows. The weights of OC output channels at a time (four
// channels, every tap) are staged in workgroup memory; the geometry is compiled in
// (conv_taps.wgsl).
// Words: 0 N*H*W, 1 C, 2 O, 3 weight offset (contiguous (O, C, KH, KW)), 4 g offset,
// 5..8 g's strides (image, channel, row, column); dx is contiguous (N, C, H, W).
{{TAPS}}
const PLANE = u32(IN_H * IN_W);
const OC = {{OC}}u;
@group(0) @binding(0) var<storage, read> w: array<{{T}}>;
@group(0) @binding(1) var<storage, read> g: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> dx: array<{{T}}>;
var<workgroup> ws: array<vec4<{{C}}>, OC * KHW>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let P = pw(0u);
  let C = pw(1u);
  let O = pw(2u);
  let t = linear_id(wid, nwg, lid);
  // a workgroup's threads share one channel group: the groups are the slowest index of
  // pixel blocks of whole workgroups
  let blocks = (P + 255u) / 256u;
  let wg = t / 256u;
  let c0 = (wg / blocks) * 4u;
  let px = (wg % blocks) * 256u + lid;
  let live = px < P && c0 < C;
  let img = px / PLANE;
  let q = px - img * PLANE;
  let ih = q / u32(IN_W);
  let iw = q - ih * u32(IN_W);
  let gbase = i32(pw(4u)) + i32(img) * pi(5u);
  let sgc = pi(6u);
  var acc = vec4<{{C}}>();
  for (var ob = 0u; ob < O; ob += OC) {
    workgroupBarrier();
    for (var e = lid; e < OC * KHW; e += 256u) {  // (o, tap) of the chunk: four channels
      let o = ob + e / KHW;
      let tap = e % KHW;
      var v = vec4<{{C}}>();
      if (o < O) {
        let wb = pw(3u) + (o * C + c0) * KHW + tap;
        for (var cc = 0u; cc < 4u; cc++) {
          if (c0 + cc < C) { v[cc] = {{C}}(w[wb + cc * KHW]); }
        }
      }
      ws[e] = v;
    }
    workgroupBarrier();
    if (live) {
      let n = min(OC, O - ob);
      for (var tap = 0u; tap < KHW; tap++) {
        let i = tap / KW;
        let to = tap_out(i, tap - i * KW, ih, iw);
        if (to.ok) {
          var e = gbase + i32(ob) * sgc + to.oh * pi(7u) + to.ow * pi(8u);
          for (var o = 0u; o < n; o++) {
            acc += {{C}}(g[u32(e)]) * ws[o * KHW + tap];
            e += sgc;
          }
        }
      }
    }
  }
  if (live) {
    let out = (img * C + c0) * PLANE + q;
    for (var cc = 0u; cc < 4u; cc++) {
      if (c0 + cc < C) { dx[out + cc * PLANE] = wrap_{{D}}({{T}}(acc[cc])); }
    }
  }
}
