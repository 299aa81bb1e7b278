// Reduction over the middle axis of a contiguous (P, K, C) block without a transpose:
// out[p, c] = fold_k map(x[p, k, c]). One thread per column c (adjacent threads read adjacent
// elements); the K axis is cut into S slices of consecutive rows, one workgroup per
// (column block, slice, p), writing out[(p * S + s) * C + c] (partial results when S > 1).
// CENTRE declares `centre_at(p * C + c)`, called before a column's elements are mapped
// (reduce.wgsl's); OUTDECL declares what OUT calls (reduce.wgsl's).
// Words: 0 P, 1 K, 2 C, 3 input offset, 4 output offset, 5 S, 6 column blocks (8, 9: CENTRE's)
@group(0) @binding(0) var<storage, read> src: array<{{T}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{R}}>;
{{CENTRE}}
{{OUTDECL}}

fn mapv(x: {{T}}) -> {{A}} { {{MAP}} }
fn comb(a: {{A}}, b: {{A}}) -> {{A}} { {{COMBINE}} }
fn outv(a: {{A}}) -> {{R}} { return {{OUT}}; }

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let P = pw(0u);
  let K = pw(1u);
  let C = pw(2u);
  let S = pw(5u);
  let CB = pw(6u);
  let w = wid.y * nwg.x + wid.x;
  let cb = w % CB;
  let t = w / CB;
  let s = t % S;
  let p = t / S;
  let c = cb * 256u + lid;
  if (p >= P || c >= C) { return; }
  centre_at(p * C + c);
  let L = (K + S - 1u) / S;
  let k0 = min(s * L, K);
  let k1 = min(k0 + L, K);
  var acc: {{A}} = {{INIT}};
  var i = pw(3u) + (p * K + k0) * C + c;
  var k = k0;
  for (; k + 3u < k1; k += 4u) {  // four loads in flight a trip
    let v0 = src[i];
    let v1 = src[i + C];
    let v2 = src[i + 2u * C];
    let v3 = src[i + 3u * C];
    acc = comb(acc, mapv(v0));
    acc = comb(acc, mapv(v1));
    acc = comb(acc, mapv(v2));
    acc = comb(acc, mapv(v3));
    i += 4u * C;
  }
  for (; k < k1; k++) {
    acc = comb(acc, mapv(src[i]));
    i += C;
  }
  dst[pw(4u) + (p * S + s) * C + c] = outv(acc);
}
