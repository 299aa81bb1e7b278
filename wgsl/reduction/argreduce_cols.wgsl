// argmax/argmin over the middle axis of a contiguous (P, K, C) block without a transpose
// (grid as in reduce_cols.wgsl: one thread per column, the K axis cut into S slices). The
// source holds values (IN; the index is k), or (value, index) pairs of a previous pass; the
// destination gets indices, or pairs when S > 1. First index of the extreme value; a NaN
// counts as the extreme (as NumPy).
// Words: 0 P, 1 K, 2 C, 3 input offset, 4 output offset, 5 S, 6 column blocks
struct Pair { v: {{T}}, i: u32 }
@group(0) @binding(0) var<storage, read> src: array<{{IN}}>;
@group(0) @binding(1) var<storage, read_write> dst: array<{{OUT}}>;

fn better(vb: {{T}}, ib: u32, va: {{T}}, ia: u32) -> bool {
  if (ib == 0xffffffffu) { return false; }
  if (ia == 0xffffffffu) { return true; }
  if (isnan_{{DT}}(va)) { return isnan_{{DT}}(vb) && ib < ia; }
  if (isnan_{{DT}}(vb)) { return true; }
  if (vb {{OP}} va) { return true; }
  return vb == va && ib < ia;
}
fn load(j: u32, k: u32) -> Pair { {{LOAD}} }
fn store(j: u32, p: Pair) { {{STORE}} }

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
  let L = (K + S - 1u) / S;
  let k0 = min(s * L, K);
  let k1 = min(k0 + L, K);
  var bv: {{T}} = {{T}}(0);
  var bi = 0xffffffffu;
  var i = pw(3u) + (p * K + k0) * C + c;
  for (var k = k0; k < k1; k++) {
    let q = load(i, k);
    if (better(q.v, q.i, bv, bi)) { bv = q.v; bi = q.i; }
    i += C;
  }
  store(pw(4u) + (p * S + s) * C + c, Pair(bv, bi));
}
