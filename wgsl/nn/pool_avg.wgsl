// Average pooling: {{GRAD}} 0: forward, a thread per output element (n, c, ho, wo), the
// window sum (zero padding) over PyTorch's divisor; 1: backward, a thread per input
// element (n, c, r, q), the sum of g / divisor over the windows that hold it (a gather).
// Inputs contiguous; src is x (forward) or g (backward), dst is y or dx. Sums and
// divisions in the compute type (float32 for 16-bit arrays), each result rounded once.
// Words: 0 number of threads, 1 C, 2 H, 3 W, 4 KH, 5 KW, 6 HO, 7 WO, 8 SH, 9 SW, 10 PH,
// 11 PW, 12 count_include_pad, 13 divisor_override (0: none), 14 src offset
@group(0) @binding(0) var<storage, read> src: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{T}}>;

// PyTorch's divisor of window (ho, wo): its size clipped to the padded input, and to the
// input without count_include_pad
fn divisor(ho: u32, wo: u32) -> {{C}} {
  let H = i32(pw(2u));
  let W = i32(pw(3u));
  var h0 = i32(ho * pw(8u)) - i32(pw(10u));
  var h1 = min(h0 + i32(pw(4u)), H + i32(pw(10u)));
  var w0 = i32(wo * pw(9u)) - i32(pw(11u));
  var w1 = min(w0 + i32(pw(5u)), W + i32(pw(11u)));
  var div = (h1 - h0) * (w1 - w0);
  if (pw(12u) == 0u) {
    h0 = max(h0, 0);
    h1 = min(h1, H);
    w0 = max(w0, 0);
    w1 = min(w1, W);
    div = max(h1 - h0, 1) * max(w1 - w0, 1);
  }
  if (pw(13u) != 0u) { div = pi(13u); }
  return {{C}}(div);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = linear_id(wid, nwg, lid);
  if (t >= pw(0u)) { return; }
  let H = pw(2u);
  let W = pw(3u);
  let KH = pw(4u);
  let KW = pw(5u);
  let HO = pw(6u);
  let WO = pw(7u);
  let SH = pw(8u);
  let SW = pw(9u);
  let off = pw(14u);
  var acc = {{C}}();
  if ({{GRAD}}u == 0u) {
    let wo = t % WO;
    let ho = (t / WO) % HO;
    let base = off + (t / (WO * HO)) * H * W;
    for (var a = 0u; a < KH; a++) {
      let r = i32(ho * SH + a) - i32(pw(10u));
      for (var b = 0u; b < KW; b++) {
        let q = i32(wo * SW + b) - i32(pw(11u));
        var v = {{C}}();
        if (r >= 0 && r < i32(H) && q >= 0 && q < i32(W)) {
          v = {{C}}(src[base + u32(r) * W + u32(q)]);
        }
        if (a == 0u && b == 0u) { acc = v; } else { acc = acc + v; }
      }
    }
    dst[t] = wrap_{{D}}({{T}}(acc / divisor(ho, wo)));
    return;
  }
  let q = t % W;
  let r = (t / W) % H;
  let obase = off + (t / (W * H)) * HO * WO;
  for (var a = 0u; a < KH; a++) {
    let u = i32(r + pw(10u)) - i32(a);
    if (u < 0) { break; }
    let uu = u32(u);
    if (uu % SH != 0u || uu / SH >= HO) { continue; }
    for (var b = 0u; b < KW; b++) {
      let v = i32(q + pw(11u)) - i32(b);
      if (v < 0) { break; }
      let vv = u32(v);
      if (vv % SW != 0u || vv / SW >= WO) { continue; }
      let ho = uu / SH;
      let wo = vv / SW;
      acc += {{C}}(src[obase + ho * WO + wo]) / divisor(ho, wo);
    }
  }
  dst[t] = wrap_{{D}}({{T}}(acc));
}
