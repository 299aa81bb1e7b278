// One radix-2 Stockham pass over contiguous rows of N complex values, batched over rows:
//   a = src[j], b = w * src[j + N/2], w = tw[(j % Ns) * (N / (2 Ns))] (conjugated when inverse)
//   dst[(j / Ns) * 2 Ns + j % Ns] = a + b, dst[(j / Ns) * 2 Ns + j % Ns + Ns] = a - b
// log2(N) passes (Ns = 1, 2, 4, ..., N/2) ping-pong between two buffers and leave the
// transform in natural order. tw holds exp(-2 pi i m / N) for m < N/2, computed on the host.
// Words: 0 butterflies (rows * N/2), 1 N/2, 2 Ns, 3 twiddle step N/(2 Ns), 4 inverse (0/1),
//        5 src offset, 6 dst offset, 7 twiddle offset
@group(0) @binding(0) var<storage, read> src: array<{{T}}>;
@group(0) @binding(1) var<storage, read> tw: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> dst: array<{{T}}>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let t = linear_id(wid, nwg, lid);
  if (t >= pw(0u)) { return; }
  let half = pw(1u);
  let ns = pw(2u);
  let row = t / half;
  let j = t - row * half;
  let base = row * 2u * half;
  let k = j & (ns - 1u);
  var w = tw[pw(7u) + k * pw(3u)];
  if (pw(4u) != 0u) { w.y = -w.y; }
  let a = src[pw(5u) + base + j];
  let c = src[pw(5u) + base + j + half];
  let b = {{T}}(c.x * w.x - c.y * w.y, c.x * w.y + c.y * w.x);
  let d = pw(6u) + base + ((j - k) << 1u) + k;
  dst[d] = a + b;
  dst[d + ns] = a - b;
}
