// GELU and its gradient over contiguous data (vtl/backends/wgpu/nn.py): stored as T
// (float32, float16 or bfloat16), computed in float32, each result rounded once.
// mode 0: y = x Phi(x) (Phi through erfc, Cephes' rational approximations as in the
// portable vtl.nn.functional._utils.erfc); 1: PyTorch's tanh form; 2 and 3: y = g times the
// derivative of form 0 and 1.
// Words: 0 n, 1 mode, 2 offset x, 3 offset g, 4 offset y
@group(0) @binding(0) var<storage, read> X: array<{{T}}>;
@group(0) @binding(1) var<storage, read> G: array<{{T}}>;
@group(0) @binding(2) var<storage, read_write> Y: array<{{T}}>;

fn p5(x: f32, c0: f32, c1: f32, c2: f32, c3: f32, c4: f32) -> f32 {
  return (((c0 * x + c1) * x + c2) * x + c3) * x + c4;
}

fn erfc_f(x: f32) -> f32 {
  let a = abs(x);
  if (a < 1.0) {
    let z = x * x;
    let t = p5(z, 9.60497373987051638749e0, 9.00260197203842689217e1,
               2.23200534594684319226e3, 7.00332514112805075473e3, 5.55923013010394962768e4);
    let u = ((((z + 3.35617141647503099647e1) * z + 5.21357949780152679795e2) * z
              + 4.59432382970980127987e3) * z + 2.26290000613890934246e4) * z
            + 4.92673942608635921086e4;
    return 1.0 - x * t / u;
  }
  let b = min(a, 30.0);
  var tail: f32;
  if (b < 8.0) {
    let p = ((((((((2.46196981473530512524e-10 * b + 5.64189564831068821977e-1) * b
              + 7.46321056442269912687e0) * b + 4.86371970985681366614e1) * b
              + 1.96520832956077098242e2) * b + 5.26445194995477358631e2) * b
              + 9.34528527171957607540e2) * b + 1.02755188689515710272e3) * b
              + 5.57535335369399327526e2);
    let q = ((((((((b + 1.32281951154744992508e1) * b + 8.67072140885989742329e1) * b
              + 3.54937778887819891062e2) * b + 9.75708501743205489753e2) * b
              + 1.82390916687909736289e3) * b + 2.24633760818710981792e3) * b
              + 1.65666309194161350182e3) * b + 5.57535340817727675546e2);
    tail = p / q;
  } else {
    let p = ((((5.64189583547755073984e-1 * b + 1.27536670759978104416e0) * b
              + 5.01905042251180477414e0) * b + 6.16021097993053585195e0) * b
              + 7.40974269950448939160e0) * b + 2.97886665372100240670e0;
    let q = (((((b + 2.26052863220117276590e0) * b + 9.39603524938001434673e0) * b
              + 1.20489539808096656605e1) * b + 1.70814450747565897222e1) * b
              + 9.60896809063285878198e0) * b + 3.36907645100081516050e0;
    tail = p / q;
  }
  let e = exp(-b * b) * tail;
  return select(e, 2.0 - e, x < 0.0);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(0u)) { return; }
  let mode = pw(1u);
  let x = f32(X[pw(2u) + i]);
  var y: f32;
  if (mode == 0u) {
    y = x * (0.5 * erfc_f(x * -0.70710678118654752440));
  } else if (mode == 1u) {
    y = 0.5 * x * (1.0 + tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
  } else if (mode == 2u) {
    let d = 0.5 * erfc_f(x * -0.70710678118654752440)
            + x * exp(-0.5 * x * x) * 0.39894228040143267794;
    y = f32(G[pw(3u) + i]) * d;
  } else {
    let t = tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x));
    let du = 0.79788456080286535588 * (1.0 + 3.0 * 0.044715 * x * x);
    y = f32(G[pw(3u) + i]) * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du);
  }
  Y[pw(4u) + i] = wrap_{{D}}({{T}}(y));
}
