"""WGSL kernels: templates specialised by dtype/op, compiled once per process.

Sources live in ``wgsl/<family>/<name>.wgsl`` (next to the package in a wheel, at the
repository root in a checkout); :func:`source` finds them by name. A template names its
specialisations as ``{{KEY}}``; :func:`kernel` fills them, prepends the shared prelude
(params through ``immediates``, strided indexing, per-dtype helpers) and caches the compute
pipeline under the template name and the substitutions.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import numpy as np

from . import _dtypes as D
from . import _runtime, _shaders, _subgroups
from ._row_lanes import SLOTS

_HERE = Path(__file__).resolve().parent


def _wgsl_dir() -> Path:
    for cand in (_HERE.parent.parent / "wgsl", _HERE.parents[2] / "wgsl"):
        if cand.is_dir():
            return cand
    raise RuntimeError(f"wgpu backend: WGSL sources not found near {_HERE}")


_sources: dict[str, str] = {}
_paths: dict[str, Path] | None = None  # kernel name -> its file, made once
_pipelines: dict[tuple, Kernel] = {}
#: compute_kernel's kernels by its own arguments (the dtype names it derives cost more than
#: the lookup)
_compute_kernels: dict[tuple, Kernel] = {}
_layouts: dict[tuple, tuple] = {}
_bind_groups: dict[tuple, object] = {}
#: name -> [count, seconds] of pipeline compilations
compile_stats: dict[str, list] = {}


#: a workgroup's work in units of an elementwise one's, for the recorder's rule that submits
#: once the idle device has enough waiting (``_recorder.IDLE_WORK``): a product's workgroup
#: computes a 64x64 or 128x128 tile (over a depth of 64; see :data:`DEPTH_WEIGHTED`), an
#: attention kernel's a block
WORKGROUP_WEIGHTS = {"matmul": 4, "matmul_coop": 4, "matmul_big": 16, "attention_fwd": 16,
                     "attention_bwd_dq": 16, "attention_bwd_dkv": 16}
#: kernels whose workgroups' work grows with the depth in their immediates' word 2 (the
#: products' ``K``, a depth slice's for split products, the convolutions' ``C * KH * KW``):
#: their weight is for a depth of 64 and scales with it, so that a deep product (a 3x3
#: convolution over 256 channels: depth 2304) counts as the hundreds of microseconds it runs
DEPTH_WEIGHTED = frozenset({"matmul", "matmul_big"})
#: the weight of a row-wise kernel's workgroup (its subs name ``TPR``: ``_row_lanes``): 256 /
#: TPR rows held by TPR invocations of up to SLOTS elements each, more than half of the
#: slots filled (but for rows of 32 invocations) or rows longer than a workgroup's slots
ROW_WEIGHT = SLOTS // 2
#: the row-wise kernels weighed so: attention's softmax, whose blocks then reach
#: ``_recorder.HEAVY_WORK`` sooner (H100: causal attention at 512 keys 5% faster). The
#: others count 1 a workgroup: weighed fully, a 4096 x 1024 layer_norm or softmax forward
#: alone held ``IDLE_WORK`` after a wait and went in a submit of its own, whose host cost
#: exceeded the forward's few microseconds (their synchronized forward and backward 6-28%
#: slower)
ROW_WEIGHTED = frozenset({"gattn_softmax"})


def dispatch_work(kernel: Kernel, words, groups: int) -> int:
    """The weighted workgroups of a dispatch of ``kernel`` over ``groups`` workgroups (all
    three dimensions multiplied) with the immediates ``words``."""
    work = groups * kernel.weight
    if kernel.deep and len(words) > 2 and words[2] > 64:
        work = work * words[2] >> 6
    return work


class Kernel:
    __slots__ = ("deep", "layout", "name", "pipeline", "weight")

    def __init__(self, pipeline, layout, name: str, weight: int = 1, deep: bool = False
                 ) -> None:
        self.pipeline = pipeline
        self.layout = layout
        self.name = name
        self.weight = weight
        self.deep = deep  # weight scaled by the depth (DEPTH_WEIGHTED)


def source(name: str) -> str:
    """The text of ``wgsl/<family>/<name>.wgsl`` (kernel names are unique across the
    family folders)."""
    global _paths
    src = _sources.get(name)
    if src is None:
        paths = _paths
        if paths is None:  # built whole, then published: threads never see half of it
            paths = {}
            for path in _wgsl_dir().rglob("*.wgsl"):
                if path.stem in paths:
                    raise RuntimeError(f"wgpu backend: two WGSL sources named {path.stem!r}: "
                                       f"{paths[path.stem]} and {path}")
                paths[path.stem] = path
            _paths = paths
        path = paths.get(name)
        if path is None:
            raise RuntimeError(f"wgpu backend: no WGSL source {name}.wgsl under {_wgsl_dir()}")
        src = _sources[name] = path.read_text()
    return src


_PRELUDE = """
struct Params { v: array<vec4<u32>, 8> }
var<immediate> prm: Params;
fn pw(i: u32) -> u32 { return prm.v[i >> 2u][i & 3u]; }
fn pi(i: u32) -> i32 { return bitcast<i32>(pw(i)); }
fn linear_id(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
  return (wid.y * nwg.x + wid.x) * 256u + lid;
}
// element offset of row-major index i in a view: shape at words [sh, sh+nd),
// strides (elements, signed) at [st, st+nd), base offset `base`
fn strided(i: u32, nd: u32, sh: u32, st: u32, base: u32) -> u32 {
  var rem = i;
  var off = bitcast<i32>(base);
  for (var d = i32(nd) - 1; d >= 0; d--) {
    let s = pw(sh + u32(d));
    let q = rem / s;
    off += i32(rem - q * s) * pi(st + u32(d));
    rem = q;
  }
  return u32(off);
}
fn f32_inf() -> f32 { return bitcast<f32>(0x7f800000u); }
fn f32_nan() -> f32 { return bitcast<f32>(0x7fc00000u); }
"""

_F16 = "enable f16;\n"


def _helpers(dt: np.dtype) -> str:
    """Per-dtype WGSL helpers: wrap_<d>, scal_<d> (decode a scalar at word k), and for
    floats isnan_<d>, inf_<d>, nan_<d>."""
    if D.kind(dt) == "c":  # complex: (real, imag) pairs, see _complex
        from ._complex import helpers

        return helpers(dt)
    n = dt.name
    t = D.wgsl(dt)
    wrap = D.WRAP.get(dt, "v")
    out = [f"fn wrap_{n}(v: {t}) -> {t} {{ return {wrap}; }}"]
    if t in ("f32",):
        dec = "bitcast<f32>(pw(k))"
    elif t == "f16":
        dec = "f16(bitcast<f32>(pw(k)))"
    elif t == "i32":
        dec = "pi(k)"
    elif t == "u32":
        dec = "pw(k)"
    elif t in ("i64", "u64"):
        dec = f"({t}(pw(k + 1u)) << 32u) | {t}(u64(pw(k)))"  # zero-extend the low word
    else:  # f64: |mantissa| in words k (low 32) / k+1 (high 21, sign bit 31, special bit 30)
        dec = None
        out.append(
            "fn scal_float64(k: u32) -> f64 {\n"
            "  let hi = pw(k + 1u);\n"
            "  var v: f64;\n"
            "  if ((hi & 0x40000000u) != 0u) {\n"
            "    if (pw(k) != 0u) { v = f64(f32_nan()); } else { v = f64(f32_inf()); }\n"
            "  } else {\n"
            "    v = ldexp(f64(hi & 0x1fffffu) * 4294967296.0lf + f64(pw(k)), pi(k + 2u));\n"
            "  }\n"
            "  if ((hi & 0x80000000u) != 0u) { v = -v; }\n"
            "  return v;\n}"
        )
    if dec is not None:
        out.append(f"fn scal_{n}(k: u32) -> {t} {{ return {dec}; }}")
    if D.kind(dt) == "f":
        # bit test: `x != x` may be folded away by driver compilers
        nan = ("(bitcast<u32>(f32(x)) & 0x7fffffffu) > 0x7f800000u" if t != "f32"
               else "(bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u")
        out.append(f"fn isnan_{n}(x: {t}) -> bool {{ return {nan}; }}")
        out.append(f"fn inf_{n}() -> {t} {{ return {t}(f32_inf()); }}")
        out.append(f"fn nan_{n}() -> {t} {{ return {t}(f32_nan()); }}")
        out.append(f"fn isinf_{n}(x: {t}) -> bool {{ return abs(x) == inf_{n}(); }}")
        sgn = ("m64_signbit(x)" if t == "f64" else
               "(bitcast<u32>(f32(x)) >> 31u) != 0u" if t == "f16" else
               "(bitcast<u32>(x) >> 31u) != 0u")
        out.append(f"fn sgn_{n}(x: {t}) -> bool {{ return {sgn}; }}")
        # trunc and round (half to even) from floor: lavapipe (Mesa 22.3.6-1+deb12u2) loses
        # the sign of float64 zeros in trunc and round, rounds 1.5 to 1, and its trunc
        # gave wrong values inside a loop (float32 remainder through float64)
        out.append(f"fn trunc_{n}(x: {t}) -> {t} {{ let a = floor(abs(x)); "
                   f"return select(a, -a, sgn_{n}(x)); }}")
        out.append(
            f"fn rint_{n}(x: {t}) -> {t} {{\n  let a = abs(x);\n  var r = floor(a);\n"
            f"  let d = a - r;\n  if (d > {t}(0.5) || (d == {t}(0.5) && "
            f"r - {t}(2) * floor(r * {t}(0.5)) == {t}(1))) {{ r = r + {t}(1); }}\n"
            f"  return select(r, -r, sgn_{n}(x));\n}}")
        if t != "f64":
            # expm1 (Taylor series below 0.5) and log1p, accurate near 0
            out.append(
                f"fn expm1_{n}(x: {t}) -> {t} {{\n"
                f"  if (x == {t}(0) || isnan_{n}(x)) {{ return x; }}\n"
                f"  if (abs(x) < {t}(0.5)) {{\n"
                f"    var p = {t}(1.0 / 362880.0);\n"
                f"    p = p * x + {t}(1.0 / 40320.0); p = p * x + {t}(1.0 / 5040.0);\n"
                f"    p = p * x + {t}(1.0 / 720.0); p = p * x + {t}(1.0 / 120.0);\n"
                f"    p = p * x + {t}(1.0 / 24.0); p = p * x + {t}(1.0 / 6.0);\n"
                f"    p = p * x + {t}(0.5); p = p * x + {t}(1);\n"
                f"    return p * x;\n  }}\n"
                f"  return exp(x) - {t}(1);\n}}")
            # log1p: 2 atanh(x / (2 + x)) as a series near 0 (the builtin log is only
            # absolutely accurate near 1 on some drivers), x itself below 2**-24 (its
            # correctly rounded value there; the series lost the subnormals' last bits,
            # log1p(1e-45) gave 0); atan: reduced to |t| <= tan(pi/8)
            out.append(
                f"fn log1p_{n}(x: {t}) -> {t} {{\n"
                f"  if (abs(x) < {t}(5.9604644775390625e-8) || isnan_{n}(x)) {{ return x; }}\n"
                f"  if (isinf_{n}(x)) {{ return select(nan_{n}(), x, x > {t}(0)); }}\n"
                f"  if (abs(x) < {t}(0.5)) {{\n"
                f"    let s = x / ({t}(2) + x); let z = s * s;\n"
                f"    var p = {t}(1.0 / 13.0);\n"
                f"    p = p * z + {t}(1.0 / 11.0); p = p * z + {t}(1.0 / 9.0);\n"
                f"    p = p * z + {t}(1.0 / 7.0); p = p * z + {t}(1.0 / 5.0);\n"
                f"    p = p * z + {t}(1.0 / 3.0);\n"
                f"    return {t}(2) * (s + s * z * p);\n  }}\n"
                f"  return log({t}(1) + x);\n}}")
            out.append(
                f"fn atan_{n}(x: {t}) -> {t} {{\n"
                f"  if (x == {t}(0) || isnan_{n}(x)) {{ return x; }}\n"
                f"  var a = abs(x); let flip = a > {t}(1);\n"
                f"  if (flip) {{ a = {t}(1) / a; }}\n"
                f"  var base = {t}(0);\n"
                f"  if (a > {t}(0.41421356)) {{ a = (a - {t}(1)) / (a + {t}(1));"
                f" base = {t}(0.7853981633974483); }}\n"
                f"  let z = a * a;\n"
                f"  var p = {t}(1.0 / 19.0);\n"
                f"  p = -p * z + {t}(1.0 / 17.0); p = -p * z + {t}(1.0 / 15.0);\n"
                f"  p = -p * z + {t}(1.0 / 13.0); p = -p * z + {t}(1.0 / 11.0);\n"
                f"  p = -p * z + {t}(1.0 / 9.0); p = -p * z + {t}(1.0 / 7.0);\n"
                f"  p = -p * z + {t}(1.0 / 5.0); p = -p * z + {t}(1.0 / 3.0);\n"
                f"  var r = base + (a - a * z * p);\n"
                f"  if (flip) {{ r = {t}(1.5707963267948966) - r; }}\n"
                f"  return select(r, -r, x < {t}(0));\n}}")
    else:
        out.append(f"fn isnan_{n}(x: {t}) -> bool {{ return false; }}")
    return "\n".join(out) + "\n"


_CALLS_WG_REDUCE = re.compile(r"\bw(?:sum|max|reduce)\(")
_CALLS_ERF = re.compile(r"\b(?:erfc?_f|exp_neg_sq)\(")


#: ``/* unroll */ for (var k = 0u; k < 8u; k++) {`` : a loop :func:`unroll` writes out
_UNROLL = re.compile(r"/\* unroll \*/ for \(var (\w+) = 0u; \1 < (\d+)u; \1\+\+\) \{")


def unroll(src: str) -> str:
    """Every loop marked ``/* unroll */`` (a constant count from 0, the counter never
    assigned in the body) written out as that many blocks, each binding the counter with
    ``let``. The Vulkan driver does not unroll the loops of the SPIR-V that naga emits:
    the 128x128 matmul's depth loop written out ran 4096^3 at 32 TFLOP/s instead of 26 on
    an H100."""
    while (m := _UNROLL.search(src)) is not None:
        var, count = m.group(1), int(m.group(2))
        depth, end = 1, m.end()
        while depth:
            if end >= len(src):
                raise RuntimeError(f"wgsl: an unrolled loop over {var} is not closed")
            depth += {"{": 1, "}": -1}.get(src[end], 0)
            end += 1
        body = src[m.end():end - 1]
        copies = "".join(f"{{\n    let {var} = {k}u;{body}}}\n" for k in range(count))
        src = src[:m.start()] + copies + src[end:]
    return src


def render(name: str, dtypes: tuple, subs: dict) -> str:
    rt = _runtime.get()
    head = _F16 if "shader-f16" in rt.features else ""
    src = source(name)
    if "coop_mat" in src:  # cooperative matrices (_coop): an experimental extension
        head += "enable wgpu_cooperative_matrix;\n"
    if _CALLS_WG_REDUCE.search(src):  # workgroup reductions (norms, softmax, attention)
        sg = _subgroups.size() if subs.get("C") == "f32" else None
        src += source("workgroup_reduce") if sg is None else \
            source("subgroup_reduce").replace("{{SG}}", str(sg))
    # substitutions may contain placeholders themselves (op bodies use {{T}})
    for _ in range(3):
        for k, v in subs.items():
            src = src.replace("{{" + k + "}}", str(v))
    if "{{" in src:
        raise RuntimeError(f"wgsl template {name}: unfilled placeholder in\n{src}")
    src = unroll(src)
    if any(D.kind(dt) == "c" for dt in dtypes):  # complex helpers use their real dtype's
        from ._complex import kernel_dtypes

        dtypes = kernel_dtypes(dtypes)
    helpers = "".join(_helpers(dt) for dt in dict.fromkeys(dtypes))
    if D.float64 in dtypes:
        helpers += math64()
    if "m32_" in src or "m32_" in helpers:  # the float32 pow/sin/cos/tan library
        helpers += source("math32")
    if _CALLS_ERF.search(src):  # float32 erf/erfc (gelu, special)
        helpers += source("erfc32")
    return head + _PRELUDE + helpers + src


def math64() -> str:
    """The float64 elementary functions (``wgsl/math/math64.wgsl``), sign tests by bits when the
    adapter has 64-bit integers."""
    if "shader-int64" in _runtime.get().features:
        sb = "(bitcast<u64>(x) >> 63u) != 0lu"
    else:
        sb = "x < 0.0 || (x == 0.0 && 1.0 / x < 0.0)"
    return source("math64").replace("{{SIGNBIT64}}", sb)


def _layout(sig: tuple) -> tuple:
    lay = _layouts.get(sig)
    if lay is None:
        rt = _runtime.get()
        wgpu = rt.wgpu
        entries = [
            {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE,
             "buffer": {"type": "read-only-storage" if s == "r" else "storage"}}
            for i, s in enumerate(sig)
        ]
        bgl = rt.device.create_bind_group_layout(entries=entries)
        pl = rt.device.create_pipeline_layout(
            bind_group_layouts=[bgl], immediate_size=_runtime.PARAM_BYTES
        )
        lay = _layouts[sig] = (bgl, pl, sig)
    return lay


def kernel(name: str, sig: str, dtypes: tuple, *, label: str | None = None,
           **subs) -> Kernel:
    """The compiled kernel for template ``name`` with bindings ``sig`` ('r'/'w' each).

    ``dtypes`` are the dtypes whose helpers the kernel uses; ``subs`` fill the
    template's ``{{KEY}}`` placeholders. ``label``: the kernel's name in dispatch logs and
    profiles (default ``name``), for a template that serves several operations.
    """
    key = (name, sig, dtypes, tuple(sorted(subs.items())), label)
    k = _pipelines.get(key)
    if k is None:
        k = _compile(key, name, sig, dtypes, subs, label or name)
    return k


def compute_kernel(name: str, sig: str, dtype: np.dtype, **subs) -> Kernel:
    """:func:`kernel` ``name`` for arrays of ``dtype`` that computes in its compute dtype
    (float32 for float16 and bfloat16): the template's ``{{T}}``/``{{D}}`` are the array
    type and dtype name, ``{{C}}``/``{{CD}}`` the compute type and dtype name."""
    key = (name, sig, dtype, *subs.items())  # a call site passes its subs in one order
    k = _compute_kernels.get(key)
    if k is None:
        cdt = D.compute_dtype(dtype)
        k = _compute_kernels[key] = kernel(
            name, sig, (dtype,) if cdt == dtype else (dtype, cdt), T=D.wgsl(dtype),
            C=D.wgsl(cdt), D=dtype.name, CD=cdt.name, **subs)
    return k


def _compile(key, name, sig, dtypes, subs, label) -> Kernel:
    rt = _runtime.get()
    code = render(name, dtypes, subs)
    t0 = time.perf_counter()
    try:
        module = _shaders.create_module(rt.device, code, name)
        bgl, pl, _ = _layout(tuple(sig))
        pipe = rt.device.create_compute_pipeline(
            layout=pl, compute={"module": module, "entry_point": "main"}, label=label
        )
    except Exception as exc:
        if os.environ.get("VTL_WGPU_DEBUG"):
            print(code)
        raise RuntimeError(
            f"wgpu: compiling kernel {name} {dict(subs)} failed: {exc}"
        ) from None
    st = compile_stats.setdefault(label, [0, 0.0])
    st[0] += 1
    st[1] += time.perf_counter() - t0
    weight = WORKGROUP_WEIGHTS.get(name, ROW_WEIGHT if name in ROW_WEIGHTED and "TPR" in subs
                                   else 1)
    k = _pipelines[key] = Kernel(pipe, _layout(tuple(sig)), label, weight,
                                 name in DEPTH_WEIGHTED)
    return k


def bind_group(layout: tuple, bufs) -> object:
    """The (cached) bind group of ``bufs``, each bound whole, for ``layout``."""
    key = (layout[2], *bufs)
    bg = _bind_groups.get(key)
    if bg is None:
        rt = _runtime.get()
        for b in bufs:
            if b.cap > rt.max_binding:
                raise ValueError(
                    f"wgpu: this operation cannot use an array of {b.cap} bytes: one binding "
                    f"may hold at most {rt.max_binding} bytes (the adapter's max storage "
                    f"binding size); only contiguous elementwise operations are chunked"
                )
        bg = rt.device.create_bind_group(
            layout=layout[0],
            entries=[
                {"binding": i, "resource": {"buffer": b.gpu, "offset": 0, "size": b.cap}}
                for i, b in enumerate(bufs)
            ],
        )
        if len(_bind_groups) > 65536:
            clear_bind_groups()
        _bind_groups[key] = bg
    return bg


def window_bind_group(layout: tuple, wins) -> object:
    """A bind group of buffer windows ``(buf, byte_offset, byte_size)`` (cached)."""
    key = (layout[2], *wins)
    bg = _bind_groups.get(key)
    if bg is None:
        rt = _runtime.get()
        bg = rt.device.create_bind_group(
            layout=layout[0],
            entries=[
                {"binding": i, "resource": {"buffer": b.gpu, "offset": o, "size": n}}
                for i, (b, o, n) in enumerate(wins)
            ],
        )
        if len(_bind_groups) > 65536:
            clear_bind_groups()
        _bind_groups[key] = bg
    return bg


def clear_bind_groups() -> None:
    from ._recorder import REC

    for bg in _bind_groups.values():
        REC.keep(bg)
    _bind_groups.clear()


def stats() -> dict[str, object]:
    """Pipeline compile counts/seconds per template and cache sizes."""
    return {
        "pipelines": len(_pipelines),
        "bind_groups": len(_bind_groups),
        "compile": {k: {"count": v[0], "seconds": round(v[1], 4)}
                    for k, v in compile_stats.items()},
    }
