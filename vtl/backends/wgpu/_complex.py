"""Complex dtypes: complex64 always (``vec2<f32>``), complex128 with ``shader-f64``.

A complex array is stored as (real, imag) pairs, the layout NumPy uses, so host
transfer, views, copies, gathers, ``where`` and sums work with the generic
kernels. The real and imaginary parts are float views of the same storage
(:func:`part`), which is how ``real``/``imag``, ``full`` and ``linspace`` are
written. The elementwise functions come from ``wgsl/math/complex.wgsl`` (C99/array
API special cases, NumPy's values), compiled into the ``unary``/``binary``
templates.
"""

from __future__ import annotations

import numpy as np

from . import _dtypes as D
from . import _kernels
from ._array import (
    MAX_ND,
    WgpuArray,
    broadcast_shapes,
    broadcast_strides,
    c_strides,
    collapse,
    contiguous,
    copy_into,
    empty,
)
from ._recorder import REC, groups_for

_PREFIX = {D.complex64: "c64", D.complex128: "c128"}
# Real functions of the complex library: complex64 uses the careful float32 exp of
# wgsl/math/complex_f32.wgsl (the builtins are too coarse for large results) and sin/cos/tan of
# wgsl/math/math32.wgsl (exact reduction of any argument), complex128 math64
_REAL_FNS = {
    "f32": {"EXP": "{{P}}_rexp", "LOG": "log", "SIN": "m32_sin", "COS": "m32_cos",
            "TAN": "m32_tan", "EXPM1": "{{P}}_rexpm1", "LOG1P": "log1p_float32",
            "ATAN": "atan_float32", "LOGMAX": "f32(88.0)", "BIG": "f32(8.0e37)",
            "SQBIG": "f32(1.0e18)", "TANHBIG": "f32(9.0)"},
    "f64": {"EXP": "m64_exp", "LOG": "m64_log", "SIN": "m64_sin", "COS": "m64_cos",
            "TAN": "m64_tan", "EXPM1": "m64_expm1", "LOG1P": "m64_log1p", "ATAN": "m64_atan",
            "LOGMAX": "f64(709.0)", "BIG": "f64(4.0e307)", "SQBIG": "f64(1.0e150)",
            "TANHBIG": "f64(22.0)"},
}

# Sign helpers by bits (sign bit, |a| with a sign, negation, isinf): driver compilers may
# ignore zero signs in float arithmetic and do not keep NaN sign bits. float64 needs 64-bit
# integers for that; without them the float forms are the fallback.
_BITS32 = """
fn {{P}}_sb(x: f32) -> bool { return (bitcast<u32>(x) >> 31u) != 0u; }
fn {{P}}_ws(a: f32, s: bool) -> f32 {
  return bitcast<f32>((bitcast<u32>(a) & 0x7fffffffu) | select(0u, 0x80000000u, s));
}
fn {{P}}_ng(a: f32) -> f32 { return bitcast<f32>(bitcast<u32>(a) ^ 0x80000000u); }
fn {{P}}_isinf(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) == 0x7f800000u; }
"""
_BITS64 = """
fn {{P}}_sb(x: f64) -> bool { return (bitcast<u64>(x) >> 63u) != 0lu; }
fn {{P}}_ws(a: f64, s: bool) -> f64 {
  return bitcast<f64>((bitcast<u64>(a) & 0x7ffffffffffffffflu)
                      | select(0lu, 0x8000000000000000lu, s));
}
fn {{P}}_ng(a: f64) -> f64 { return bitcast<f64>(bitcast<u64>(a) ^ 0x8000000000000000lu); }
fn {{P}}_isinf(x: f64) -> bool {
  return (bitcast<u64>(x) & 0x7ffffffffffffffflu) == 0x7ff0000000000000lu;
}
// m * 2^n by adding n to the exponent bits (see complex_f32.wgsl)
fn {{P}}_ldexp(m: f64, n: i32) -> f64 {
  let b = bitcast<u64>(m);
  let ex = i32(u32((b >> 52u) & 0x7fflu));
  if (ex == 0 || ex == 2047 || n < -2200) {
    return m * ldexp(f64(1.0), clamp(n, -1022, 1023));
  }
  let e2 = ex + clamp(n, -2200, 2200);
  if (e2 >= 2047) { return {{P}}_ws(m64_inf(), {{P}}_sb(m)); }
  if (e2 <= 0) {
    let n1 = n / 2;
    return m * ldexp(f64(1.0), n1) * ldexp(f64(1.0), n - n1);
  }
  return bitcast<f64>((b & 0x800ffffffffffffflu) | (u64(u32(e2)) << 52u));
}
"""
_FLOAT64 = """
fn {{P}}_sb(x: f64) -> bool { return m64_signbit(x); }
fn {{P}}_ws(a: f64, s: bool) -> f64 { return select(abs(a), -abs(a), s); }
fn {{P}}_ng(a: f64) -> f64 { return -a; }
fn {{P}}_isinf(x: f64) -> bool { return m64_isinf(x); }
fn {{P}}_ldexp(m: f64, n: i32) -> f64 {
  let n1 = clamp(n, -2100, 2100) / 2;
  return m * ldexp(f64(1.0), n1) * ldexp(f64(1.0), clamp(n, -2100, 2100) - n1);
}
"""


def _bits(f: str) -> str:
    if f == "f32":
        return _BITS32
    from . import _runtime

    return _BITS64 if "shader-int64" in _runtime.get().features else _FLOAT64


def helpers(dt: np.dtype) -> str:
    """WGSL helpers of a complex dtype: wrap_/scal_/isnan_ for the generic kernels, and the
    complex math library (needs the helpers of its real dtype, which the kernel includes)."""
    n = dt.name
    rdt = D.REAL_OF[dt]
    f = D.wgsl(rdt)
    t = D.wgsl(dt)
    p = _PREFIX[dt]
    lib = (_bits(f) + _kernels.source("complex_" + f) + "\n"
           + _kernels.source("complex"))
    for k, v in _REAL_FNS[f].items():
        lib = lib.replace("{{" + k + "}}", v)
    lib = lib.replace("{{P}}", p).replace("{{F}}", f).replace("{{DT}}", rdt.name)
    return (
        f"fn wrap_{n}(v: {t}) -> {t} {{ return v; }}\n"
        f"fn scal_{n}(k: u32) -> {t} {{ return {t}({f}(bitcast<f32>(pw(k))), "
        f"{f}(bitcast<f32>(pw(k + 1u)))); }}\n"
        f"fn isnan_{n}(x: {t}) -> bool {{ return isnan_{rdt.name}(x.x) || "
        f"isnan_{rdt.name}(x.y); }}\n" + lib
    )


def kernel_dtypes(dtypes) -> tuple:
    """``dtypes`` with the real dtype of each complex one added (its helpers are needed)."""
    out = dict.fromkeys(dtypes)
    for d in list(out):
        if D.kind(d) == "c":
            out.setdefault(D.REAL_OF[d])
    return tuple(out)


def cast_body(dt_in: np.dtype, dt_out: np.dtype) -> str:
    """The WGSL body of ``astype`` when either side is complex."""
    if D.kind(dt_in) == "c" and D.kind(dt_out) == "c":
        return "return {{R}}(x);"
    if D.kind(dt_out) == "c":
        f = D.wgsl(D.REAL_OF[dt_out])
        return f"return {{{{R}}}}({f}(x), {f}(0));"
    if dt_out == D.bool_:
        return (f"return select(0u, 1u, x.x != {D.wgsl(D.REAL_OF[dt_in])}(0) || "
                f"x.y != {D.wgsl(D.REAL_OF[dt_in])}(0) || isnan_{dt_in.name}(x));")
    return "return {{R}}(x.x);"  # internal use only: astype() refuses complex -> real


def part(x: WgpuArray, imag: bool) -> WgpuArray:
    """The real (or imaginary) part of complex ``x`` as a float view of its storage."""
    return WgpuArray(x._st, x._shape, tuple(2 * s for s in x._strides),
                     2 * x._offset + (1 if imag else 0), D.REAL_OF[x._dtype],
                     x if x._base is None else x._base)


def fill_view(out: WgpuArray, start, step=0) -> None:
    """out[...] = start + i * step for a complex view (each part filled on its own)."""
    from ._creation import fill_view as fill

    start, step = complex(start), complex(step)
    fill(part(out, False), start.real, step.real)
    fill(part(out, True), start.imag, step.imag)


def scalar_dtype(value: complex, arr_dt: np.dtype) -> np.dtype:
    """Dtype of ``array op complex_scalar`` (weak scalar: the array's precision)."""
    if D.kind(arr_dt) == "c":
        return arr_dt
    if arr_dt == D.float64:
        return D.complex128
    return D.complex64


def linspace(start, stop, num: int, dt: np.dtype, endpoint: bool) -> WgpuArray:
    from ._creation import linspace as real_linspace

    start, stop = complex(start), complex(stop)
    rdt = D.REAL_OF[dt]
    out = empty((num,), dt)
    for imag, a, b in ((False, start.real, stop.real), (True, start.imag, stop.imag)):
        copy_into(real_linspace(a, b, num, dtype=rdt, endpoint=endpoint), part(out, imag))
    return out


# -- elementwise ---------------------------------------------------------------------------
# name -> (result: "same" | "real" | "bool", body with {{P}} for the prefix)
UNARY: dict[str, tuple[str, str]] = {
    "abs": ("real", "return {{P}}_abs(x);"),
    "negative": ("same", "return {{P}}_neg(x);"),
    "positive": ("same", "return x;"),
    "conj": ("same", "return {{T}}(x.x, {{P}}_ng(x.y));"),
    "real": ("real", "return x.x;"),
    "imag": ("real", "return x.y;"),
    "square": ("same", "return {{P}}_mul(x, x);"),
    "reciprocal": ("same", "return {{P}}_div({{T}}(1.0, 0.0), x);"),
    "sqrt": ("same", "return {{P}}_sqrt(x);"),
    "exp": ("same", "return {{P}}_exp(x);"),
    "expm1": ("same", "return {{P}}_expm1(x);"),
    "log": ("same", "return {{P}}_log(x);"),
    "log1p": ("same", "return {{P}}_log1p(x);"),
    "log2": ("same", "return {{P}}_log(x) * 1.4426950408889634;"),
    "log10": ("same", "return {{P}}_log(x) * 0.4342944819032518;"),
    "sin": ("same", "return {{P}}_sin(x);"),
    "cos": ("same", "return {{P}}_cos(x);"),
    "tan": ("same", "return {{P}}_tan(x);"),
    "sinh": ("same", "return {{P}}_sinh(x);"),
    "cosh": ("same", "return {{P}}_cosh(x);"),
    "tanh": ("same", "return {{P}}_tanh(x);"),
    "asin": ("same", "return {{P}}_asin(x);"),
    "acos": ("same", "return {{P}}_acos(x);"),
    "atan": ("same", "return {{P}}_atan(x);"),
    "asinh": ("same", "return {{P}}_asinh(x);"),
    "acosh": ("same", "return {{P}}_acosh(x);"),
    "atanh": ("same", "return {{P}}_atanh(x);"),
    "sign": ("same", "return {{P}}_sign(x);"),
    "round": ("same", "return {{T}}(rint_{{RDT}}(x.x), rint_{{RDT}}(x.y));"),
    "isnan": ("bool", "return select(0u, 1u, isnan_{{DT}}(x));"),
    "isinf": ("bool", "return select(0u, 1u, {{P}}_isinf(x.x) || {{P}}_isinf(x.y));"),
    "isfinite": ("bool", "return select(0u, 1u, {{P}}_isfin(x.x) && {{P}}_isfin(x.y));"),
}

BINARY: dict[str, tuple[str, str]] = {
    "add": ("same", "return x + y;"),
    "subtract": ("same", "return x - y;"),
    "multiply": ("same", "return {{P}}_mul(x, y);"),
    "divide": ("same", "return {{P}}_div(x, y);"),
    "pow": ("same", "return {{P}}_pow(x, y);"),
    "equal": ("bool", "return select(0u, 1u, x.x == y.x && x.y == y.y);"),
    "not_equal": ("bool", "return select(1u, 0u, x.x == y.x && x.y == y.y);"),
}


def _spec(body: str, dt: np.dtype) -> str:
    return (body.replace("{{P}}", _PREFIX[dt]).replace("{{DT}}", dt.name)
            .replace("{{RDT}}", D.REAL_OF[dt].name))


def _out_dtype(rule: str, dt: np.dtype) -> np.dtype:
    return dt if rule == "same" else D.bool_ if rule == "bool" else D.REAL_OF[dt]


def unary(name: str, x: WgpuArray) -> WgpuArray:
    """Elementwise ``name`` of a complex array."""
    entry = UNARY.get(name)
    if entry is None:
        raise TypeError(f"{name}() is not defined for complex dtypes (got {x.dtype})")
    rule, body = entry
    dt = x._dtype
    out = empty(x._shape, _out_dtype(rule, dt))
    if name in ("real", "imag"):
        copy_into(part(x, name == "imag"), out)
    elif name == "positive":
        copy_into(x, out)
    else:
        copy_into(x, out, _spec(body, dt))
    return out


def _operand(v, dt: np.dtype) -> WgpuArray:
    from ._creation import asarray

    if isinstance(v, WgpuArray):
        return v if v._dtype == dt else _astype(v, dt)
    return asarray(np.asarray(v, dtype=dt))


def _astype(x: WgpuArray, dt: np.dtype) -> WgpuArray:
    out = empty(x._shape, dt)
    copy_into(x, out)
    return out


_BIN_CACHE: dict = {}


def binary(name: str, x1, x2, dt: np.dtype) -> WgpuArray:
    """Elementwise ``name`` with broadcasting, computed in the complex dtype ``dt``."""
    entry = BINARY.get(name)
    if entry is None:
        raise TypeError(f"{name}() is not defined for complex dtypes (got {dt})")
    rule, body = entry
    out_dt = _out_dtype(rule, dt)
    a, b = _operand(x1, dt), _operand(x2, dt)
    shape = a._shape if a._shape == b._shape else broadcast_shapes(a._shape, b._shape)
    out = empty(shape, out_dt)
    n = out.size
    if n == 0:
        return out
    cshape, (sa, sb) = collapse(shape, broadcast_strides(a, shape), broadcast_strides(b, shape))
    if len(cshape) > MAX_ND:
        return binary(name, contiguous(a), contiguous(b), dt)
    cs = c_strides(cshape)
    flags = (1 if sa == cs else 0) | (2 if sb == cs else 0)
    kern = _BIN_CACHE.get((name, dt))
    if kern is None:
        kern = _BIN_CACHE[(name, dt)] = _kernels.kernel(
            "binary", "rrw", (dt, out_dt), T=D.wgsl(dt), R=D.wgsl(out_dt), DT=dt.name,
            DR=out_dt.name, BODY=_spec(body, dt), BITS=0, UT="u32")
    words = [n, len(cshape), flags, a._offset, b._offset, 0, 0, 0, 0, *cshape, *sa, *sb]
    REC.dispatch(kern, (a._st.buf, b._st.buf, out._st.buf), words, groups_for(n))
    return out



def matmul(a: WgpuArray, b: WgpuArray, real_matmul) -> WgpuArray:
    """Complex matmul from four real products of the parts (strided float views, no copies):
    (ar + i ai)(br + i bi) = (ar br - ai bi) + i (ar bi + ai br)."""
    from ._elementwise import binary

    ar, ai, br, bi = part(a, False), part(a, True), part(b, False), part(b, True)
    re = binary("subtract", real_matmul(ar, br), real_matmul(ai, bi))
    im = binary("add", real_matmul(ar, bi), real_matmul(ai, br))
    out = empty(re.shape, a._dtype)
    copy_into(re, part(out, False))
    copy_into(im, part(out, True))
    return out


def cumulative_prod(x: WgpuArray, axis, dtype, include_initial: bool) -> WgpuArray:
    """Complex ``cumulative_prod``, computed through host NumPy (a readback and an upload)."""
    import array_api_compat.numpy as hnp

    from ._array import from_numpy, to_numpy

    h = hnp.cumulative_prod(to_numpy(x), axis=axis, dtype=dtype,
                            include_initial=include_initial)
    return from_numpy(h)
