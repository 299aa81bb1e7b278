// Batch norm backward, stage 2: an invocation per channel adds the slabs of sum(g) and
// sum(g (x - mean)) in order; Wb rows: dw = sum(g (x - mean)) * rstd, db = sum(g); Cf rows:
// k = scale * rstd^2 * sum(g (x - mean)) / n and scale * sum(g) / n.
// Words: 0 C, 1 NHW, 2 S, 3 offset St, 4 offset Wb, 5 offset Cf, 6 offset Part
@group(0) @binding(0) var<storage, read> Part: array<{{C}}>;
@group(0) @binding(1) var<storage, read> St: array<{{C}}>;
@group(0) @binding(2) var<storage, read_write> Wb: array<{{C}}>;
@group(0) @binding(3) var<storage, read_write> Cf: array<{{C}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let c = linear_id(wid, nwg, lid);
  let C = pw(0u);
  if (c >= C) { return; }
  let S = pw(2u);
  var sg = {{C}}(0);
  var sgd = {{C}}(0);
  for (var s = 0u; s < S; s++) {
    sg += Part[pw(6u) + (c * S + s) * 2u];
    sgd += Part[pw(6u) + (c * S + s) * 2u + 1u];
  }
  let n = {{C}}(pw(1u));
  let rstd = St[pw(3u) + 2u * C + c];
  let scale = St[pw(3u) + 3u * C + c];
  Wb[pw(4u) + c] = sgd * rstd;
  Wb[pw(4u) + C + c] = sg;
  Cf[pw(5u) + c] = scale * rstd * rstd * sgd / n;
  Cf[pw(5u) + C + c] = scale * sg / n;
}
