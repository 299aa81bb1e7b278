// GradScaler.update (vtl/backends/wgpu/optim.py): the values of
// vtl.amp.grad_scaler._update_scale (float32 products, each rounded once; a grown scale
// only below the threshold), one invocation.
// Words: 0 element offset of the 0-d float32 scale, 1 of the 0-d int32 tracker, 2 of the
//        0-d float32 found flag, 3 growth factor (float32 bits), 4 backoff factor,
//        5 threshold, 6 growth interval (int32)
@group(0) @binding(0) var<storage, read_write> scale: array<f32>;
@group(0) @binding(1) var<storage, read_write> tracker: array<i32>;
@group(0) @binding(2) var<storage, read> found: array<f32>;

@compute @workgroup_size(1)
fn main() {
  let s = scale[pw(0u)];
  let succ = bitcast<i32>(bitcast<u32>(tracker[pw(1u)]) + 1u);
  let grow = succ == pi(6u);
  if (found[pw(2u)] > 0.0) {
    scale[pw(0u)] = s * bitcast<f32>(pw(4u));
    tracker[pw(1u)] = 0;
  } else {
    if (grow && s < bitcast<f32>(pw(5u))) { scale[pw(0u)] = s * bitcast<f32>(pw(3u)); }
    tracker[pw(1u)] = select(succ, 0, grow);
  }
}
