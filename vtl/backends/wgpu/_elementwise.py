"""Elementwise functions and operators.

Each function is a WGSL body specialised per dtype kind (f: floating, i: signed,
u: unsigned, b: bool) and compiled into the ``unary``/``binary`` templates.
Integer and bool inputs of floating-only functions (``exp``, ``sqrt``, true
``divide`` ...) are promoted to float32, the default floating dtype. Python
scalars follow the standard's weak-scalar rule: they take the array's dtype
(a float scalar with an integer array gives float32).

float32 ``pow``, ``sin``, ``cos`` and ``tan`` (float16 through them) come from
``wgsl/math/math32.wgsl``: the builtins are loose on real GPUs and drivers may rewrite
float expressions, so the steps that need exact arithmetic (log2/exp2 of pow, the
Payne-Hanek reduction of trigonometric arguments) are done in 32-bit integers.
pow is exact where the result is a float and otherwise within 2^-30 of half an
ulp (integral powers below 64 are correctly rounded); sin/cos are within 2 ulp
and tan 4 ulp for every finite argument. ``x ** 2`` with a Python 2 is a square.

float64 note: GLSL.std.450 defines exp/log/trig only for 16/32-bit floats, so
float64 transcendental functions come from ``wgsl/math/math64.wgsl`` (double
arithmetic, fdlibm-style range reduction and polynomials; sin/cos/tan reduce
exactly for every finite argument); arithmetic, sqrt, comparisons and rounding
are the device's own float64 operations.
"""

from __future__ import annotations

import numpy as np

from . import _complex as _cx
from . import _dtypes as D
from . import _kernels, _runtime
from ._array import (
    MAX_ND,
    WgpuArray,
    astype_raw,
    broadcast_shapes,
    broadcast_strides,
    c_strides,
    check_dtype,
    collapse,
    contiguous,
    copy_into,
    empty,
    fresh,
    prod,
    unary_kernel,
    words_for_scalar,
)
from ._recorder import REC, groups_for

F, I, U, B = "f", "i", "u", "b"


def _kind(dt: np.dtype) -> str:
    return {"f": F, "i": I, "u": U, "b": B}[D.kind(dt)]


def _tr(fn: str) -> dict:
    """A float-only transcendental: the WGSL builtin, float64 through ``wgsl/math/math64.wgsl``."""
    return {F: f"return {fn}(x);", "f64": f"return m64_{fn}(x);"}


def _m32(fn: str) -> dict:
    """A float-only function of ``wgsl/math/math32.wgsl`` (float16 through float32), float64 through
    ``wgsl/math/math64.wgsl``."""
    return {F: f"return {{{{T}}}}(m32_{fn}(f32(x)));", "f64": f"return m64_{fn}(x);"}


def div_body(x: str = "x", y: str = "y", approx=None) -> str:
    """WGSL body of a correctly rounded float32 ``x / y``.

    WGSL's (and Vulkan's) float32 division need only be within 2.5 ulp (NVIDIA: a
    reciprocal and a multiply; 1 ulp off NumPy in about a third of the elements), and a
    residual correction needs a fused ``fma``, which WGSL does not promise (lavapipe
    multiplies and adds). So the quotient is taken in float64 and rounded once to float32:
    a float64 quotient within a few float64 ulp (``approx(a, b)`` builds its expression, the
    device's division by default) never crosses a float32 rounding boundary, because an
    exact quotient of two float32 values lies at least 2**-49 (relative) away from every
    float32 midpoint. Inf/NaN/zero operands give IEEE results. Needs ``shader-f64``.

    Drivers may flush float32 subnormals to zero in conversions (NVIDIA does), so subnormal
    operands are widened and subnormal quotients narrowed through their bits instead: a
    subnormal is its 23-bit mantissa times 2**-149, exactly, in either direction.
    """
    d = approx or (lambda a, b: f"{a} / {b}")
    return f"{_widened_quotient(x, y, d)} {_return_narrowed('q')}"


def _return_narrowed(v: str) -> str:
    """WGSL statements returning the float64 ``v`` rounded to float32; a subnormal result is
    built from its bits (drivers may flush it in the conversion), its mantissa rounded half
    to even from ``floor`` as the kernels' ``rint_`` helpers do (``_kernels._helpers``; the
    float32 kernels that divide through float64 do not carry float64's helpers)."""
    return (f"let nq = abs({v}); if (nq < {2.0 ** -126!r}lf && nq != 0.0lf) {{"
            f" let sv = nq * {2.0 ** 149!r}lf; var nf = floor(sv); let fr = sv - nf;"
            " if (fr > 0.5lf || (fr == 0.5lf && (u32(nf) & 1u) == 1u)) { nf = nf + 1.0lf; }"
            " var nb = u32(nf);"
            f" if ({v} < 0.0lf) {{ nb = nb | 0x80000000u; }} return bitcast<f32>(nb); }}"
            f" return f32({v});")


def _widen(v: str, name: str) -> str:
    """WGSL statements declaring ``name``: the float32 ``v`` as float64, a subnormal through
    its bits (its 23-bit mantissa times 2**-149; drivers may flush it in the conversion)."""
    return (f"let {name}b = bitcast<u32>({v}); var {name} = f64({v});"
            f" if (({name}b & 0x7f800000u) == 0u) {{"
            f" {name} = f64({name}b & 0x7fffffu) * {2.0 ** -149!r}lf;"
            f" if (({name}b >> 31u) != 0u) {{ {name} = -{name}; }} }}")


def _widened_quotient(x: str, y: str, d) -> str:
    """WGSL statements leaving ``d(x, y)`` of the float64 widenings (:func:`_widen`) of
    float32 ``x``, ``y`` in ``q``."""
    return f"{_widen(x, 'wa')} {_widen(y, 'wb')} let q = {d('wa', 'wb')};"


def floor_div_body() -> str:
    """WGSL body of float32 ``floor(x / y)`` as NumPy: the floor of the float64 quotient. An
    exact quotient of two float32 values below 2**25 in magnitude is an integer or at least
    2**-25 away from one, so a float64 quotient within a few ulp has the exact floor (the
    device's float32 division gave floor(x / x) == 0)."""
    return f"{_widened_quotient('x', 'y', lambda a, b: f'{a} / {b}')} return f32(floor(q));"


def rem_body() -> str:
    """WGSL body of float32 ``remainder`` as NumPy: the exact ``fmod`` (float64 holds every
    partial remainder of float32 operands exactly: each step subtracts ``q * s`` with
    ``q < 2**26`` and ``s`` the divisor scaled by a power of two), moved into the divisor's
    sign; zeros take the divisor's sign bit (NVIDIA's compiler turned a choice between the
    constants ``0.0`` and ``-0.0``, even as integer bits, into ``-0.0``). ``x - y * trunc(x /
    y)`` in float32 lost every digit once the quotient passed the mantissa (``1 % 1e-10``
    gave 0)."""
    big = "67108864.0lf"  # 2**26
    return (
        f"{_widen('x', 'wa')} {_widen('y', 'wb')}"
        " if (wb == 0.0lf || isinf_float32(x) || isnan_float32(x) || isnan_float32(y)) {"
        " return nan_float32(); }"
        " if (isinf_float32(y)) { if (wa == 0.0lf) {"
        " return bitcast<f32>(bitcast<u32>(y) & 0x80000000u); }"
        " if ((wa < 0.0lf) == (wb < 0.0lf)) { return x; } return y; }"
        " let a = abs(wb); var r = abs(wa);"
        " loop { if (r < a) { break; } var s = a;"
        f" loop {{ if (s * {big} > r) {{ break; }} s = s * {big}; }}"
        " let k = floor(r / s); r = r - k * s; if (r < 0.0lf) { r = r + s; } }"
        " if (wa < 0.0lf) { r = -r; }"
        " if (r != 0.0lf && ((r < 0.0lf) != (wb < 0.0lf))) { r = r + wb; }"
        " if (r == 0.0lf) { return bitcast<f32>(bitcast<u32>(y) & 0x80000000u); }"
        f" {_return_narrowed('r')}"
    )


_DIV32 = div_body()

# float64 fmod(x, y) of finite x and y != 0, exactly (``m`` in the statements below, with
# x's sign): r = |x| minus the multiples a 2**j of a = |y| from the largest down to a itself;
# each subtraction is exact (Sterbenz: s <= r < 2 s), and so is every s = a 2**j (powers of
# two, no overflow below r). At most twice the exponent difference of x and y in steps.
_FMOD64 = """
let a = abs(y);
var r = abs(x);
if (r >= a) {
  var s = a;
  loop { if (s + s > r) { break; } s = s + s; }
  loop {
    if (r >= s) { r = r - s; }
    if (s == a) { break; }
    s = s * 0.5lf;
  }
}
let m = select(r, -r, x < 0.0lf);"""


def floor_div64_body() -> str:
    """WGSL body of float64 ``floor(x / y)`` as NumPy (``npy_divmod``): the quotient of
    ``x`` minus the exact ``fmod``, moved to the floor and snapped to the nearest integer,
    where the rounded ``x / y`` could cross an integer (``1.0 // 0.1`` is 9). Zero and
    non-finite operands keep the standard's ``floor(x / y)`` (one infinite operand gives
    ``x / y``)."""
    return (
        "if (y == 0.0lf || isnan_float64(x) || isnan_float64(y) || isinf_float64(x)"
        " || isinf_float64(y)) { return floor(x / y); }"
        + _FMOD64 +
        " var d = (x - m) / y;"
        " if (m != 0.0lf && ((y < 0.0lf) != (m < 0.0lf))) { d = d - 1.0lf; }"
        " if (d != 0.0lf) { var f = floor(d); if (d - f > 0.5lf) { f = f + 1.0lf; }"
        " return f; }"
        " if (sgn_float64(x / y)) { return -abs(d); } return abs(d);")


def rem64_body() -> str:
    """WGSL body of float64 ``remainder`` as NumPy: the exact ``fmod`` moved into the
    divisor's sign; a zero takes the divisor's sign; nan for a zero divisor, an infinite
    dividend or a nan; an infinite divisor gives ``x`` where the signs agree, else ``y``
    (a zero ``x``: a zero of ``y``'s sign)."""
    return (
        "if (y == 0.0lf || isinf_float64(x) || isnan_float64(x) || isnan_float64(y)) {"
        " return nan_float64(); }"
        " if (isinf_float64(y)) { if (x == 0.0lf) { if (y < 0.0lf) { return -abs(x); }"
        " return abs(x); } if ((x < 0.0lf) == (y < 0.0lf)) { return x; } return y; }"
        + _FMOD64 +
        " var q = m;"
        " if (q != 0.0lf && ((q < 0.0lf) != (y < 0.0lf))) { q = q + y; }"
        " if (q == 0.0lf) { if (y < 0.0lf) { return -abs(q); } return abs(q); }"
        " return q;")


_EXPM1_F = "return expm1_{{DT}}(x);"


def _log32(f: str, sub: str) -> str:
    """WGSL body of a float32 logarithm: ``f`` (an expression of ``x``) for every input but
    a positive subnormal, ``sub`` (an expression of its mantissa ``m``, an exact float32
    since it is below 2**24) for those. A driver's builtin may mishandle subnormal operands
    (lavapipe read each as about ``2**-127``: ``log(1e-45)`` gave ``-88.03``, not
    ``-103.28``), so such an ``x = m * 2**-149`` is taken from its bits: ``log(x) = log(m) -
    149 ln 2`` (within one ulp for every subnormal on lavapipe)."""
    return (f"let xb = bitcast<u32>(x); if (xb - 1u < 0x7fffffu) {{ let m = f32(xb);"
            f" return {sub}; }} return {f};")


# 149 ln 2 as an exact float32 (149 times ln 2's leading 16 bits) plus the rest
_LOG_SUB = "(log(m) - 2.1286241826601326e-4) - 103.27871704101562"
_LOG10E = "0.4342944819032518"

# name -> (result rule, bodies by kind); rules: same | float (promote ints) | bool
_ident = "return x;"
UNARY: dict[str, tuple[str, dict]] = {
    "abs": ("same", {F: "return abs(x);", I: "return abs(x);", U: _ident}),
    "negative": ("same", {F: "return -x;", I: "return -x;", U: "return {{T}}(0) - x;"}),
    "positive": ("same", {F: _ident, I: _ident, U: _ident}),
    "square": ("same", {F: "return x * x;", I: "return x * x;", U: "return x * x;"}),
    "sqrt": ("float", {F: "return sqrt(x);"}),
    "exp": ("float", _tr("exp")),
    "exp2": ("float", _tr("exp2")),
    "expm1": ("float", {F: _EXPM1_F, "f64": "return m64_expm1(x);"}),
    "log": ("float", {**_tr("log"), "f32": _log32("log(x)", _LOG_SUB)}),
    "log2": ("float", {**_tr("log2"), "f32": _log32("log2(x)", "log2(m) - 149.0")}),
    "log10": ("float", {F: f"return log(x) * {{{{T}}}}({_LOG10E});",
                        "f32": _log32(f"log(x) * {_LOG10E}", f"({_LOG_SUB}) * {_LOG10E}"),
                        "f64": "return m64_log10(x);"}),
    "log1p": ("float", {F: "return log1p_{{DT}}(x);", "f64": "return m64_log1p(x);"}),
    # float32 (and float16 through it) from wgsl/math/math32.wgsl: exact reduction of any argument
    "sin": ("float", _m32("sin")), "cos": ("float", _m32("cos")), "tan": ("float", _m32("tan")),
    # the driver's asin/acos may be coarse (lavapipe: 2e-4): through atan instead
    "asin": ("float", {F: "return atan_{{DT}}(x / sqrt(({{T}}(1) - x) * ({{T}}(1) + x)));",
                       "f64": "return m64_asin(x);"}),
    "acos": ("float", {F: "return {{T}}(2) * atan_{{DT}}(sqrt(({{T}}(1) - x) / ({{T}}(1) + x)));",
                       "f64": "return m64_acos(x);"}),
    # sinh/tanh/asinh/atanh through expm1/log1p: the builtins lose all relative precision
    # near 0 on some drivers (e.g. (exp(x) - exp(-x)) / 2)
    "atan": ("float", {F: "return atan_{{DT}}(x);", "f64": "return m64_atan(x);"}),
    # (zeros and nan returned as they are: sign(-0.0) * ... gave +0.0)
    "sinh": ("float", {F: "if (x == {{T}}(0) || isnan_{{DT}}(x)) { return x; }"
                          " let a = abs(x); if (a < {{T}}(1)) { let e = expm1_{{DT}}(a);"
                          " return sign(x) * {{T}}(0.5) * (e + e / (e + {{T}}(1))); }"
                          " return sinh(x);", "f64": "return m64_sinh(x);"}),
    "cosh": ("float", _tr("cosh")),
    "asinh": ("float", {F: "if (x == {{T}}(0) || isnan_{{DT}}(x)) { return x; }"
                           " let a = abs(x); if (a > {{T}}(1e4)) { return sign(x) * (log(a)"
                           " + {{T}}(0.6931471805599453)); }"
                           " return sign(x) * log1p_{{DT}}(a + a * a / ({{T}}(1)"
                           " + sqrt({{T}}(1) + a * a)));", "f64": "return m64_asinh(x);"}),
    "acosh": ("float", _tr("acosh")),
    "atanh": ("float", {F: "if (x == {{T}}(0) || isnan_{{DT}}(x)) { return x; }"
                           " let a = abs(x); return sign(x) * {{T}}(0.5)"
                           " * log1p_{{DT}}({{T}}(2) * a / ({{T}}(1) - a));",
                        "f64": "return m64_atanh(x);"}),
    "tanh": ("float", {F: "if (x == {{T}}(0) || isnan_{{DT}}(x)) { return x; }"
                          " let a = min(abs(x), {{T}}(10)); let e = expm1_{{DT}}({{T}}(2) * a);"
                          " return sign(x) * (e / (e + {{T}}(2)));",
                       "f64": "return m64_tanh(x);"}),
    "reciprocal": ("float", {F: "return {{T}}(1) / x;", "f32": div_body("f32(1)", "x")}),
    "floor": ("same", {F: "return floor(x);", I: _ident, U: _ident, B: _ident}),
    "ceil": ("same", {F: "return ceil(x);", I: _ident, U: _ident, B: _ident}),
    "trunc": ("same", {F: "return trunc_{{DT}}(x);", I: _ident, U: _ident, B: _ident}),
    "round": ("same", {F: "return rint_{{DT}}(x);", I: _ident, U: _ident}),
    "sign": ("same", {F: "if (isnan_{{DT}}(x)) { return x; } return sign(x);",
                      I: "return select({{T}}(0), {{T}}(1), x > {{T}}(0))"
                         " - select({{T}}(0), {{T}}(1), x < {{T}}(0));",
                      U: "return select({{T}}(0), {{T}}(1), x != {{T}}(0));"}),
    "isnan": ("bool", {F: "return select(0u, 1u, isnan_{{DT}}(x));", I: "return 0u;",
                       U: "return 0u;", B: "return 0u;"}),
    "isinf": ("bool", {F: "return select(0u, 1u, isinf_{{DT}}(x));", I: "return 0u;",
                       U: "return 0u;", B: "return 0u;"}),
    "isfinite": ("bool", {F: "return select(1u, 0u, isnan_{{DT}}(x) || isinf_{{DT}}(x));",
                          I: "return 1u;", U: "return 1u;", B: "return 1u;"}),
    "signbit": ("bool", {F: "return select(0u, 1u, sgn_{{DT}}(x));"}),
    "logical_not": ("bool", {B: "return 1u - x;"}),
    "bitwise_invert": ("same", {I: "return ~x;", U: "return ~x;", B: "return 1u - x;"}),
    "conj": ("same", {F: _ident, I: _ident, U: _ident, B: _ident}),
    "real": ("same", {F: _ident, I: _ident, U: _ident, B: _ident}),
    "imag": ("same", {F: "return {{T}}(0);", I: "return {{T}}(0);", U: "return {{T}}(0);"}),
}

_POW_F = """
if (y == {{T}}(0) || x == {{T}}(1)) { return {{T}}(1); }
if (isnan_{{DT}}(x) || isnan_{{DT}}(y)) { return x + y; }
if (isinf_{{DT}}(y) && abs(x) == {{T}}(1)) { return {{T}}(1); }
let yint = floor(y) == y;
let yodd = yint && !isinf_{{DT}}(y) && floor(y * {{T}}(0.5)) * {{T}}(2) != y;
if (x == {{T}}(0)) {
  if (y > {{T}}(0)) { return select({{T}}(0), x, yodd); }
  if (yodd && sgn_{{DT}}(x)) { return -inf_{{DT}}(); }
  return inf_{{DT}}();
}
if (isinf_{{DT}}(x) && x < {{T}}(0)) {
  if (y > {{T}}(0)) { return select(-x, x, yodd); }
  return select({{T}}(0), {{T}}(1) / x, yodd);
}
if (x < {{T}}(0)) {
  if (!yint) { return nan_{{DT}}(); }
  let r = {{POW}}(-x, y);
  if (yodd) { return -r; }
  return r;
}
return {{POW}}(x, y);"""

_POW_NEG = """
if (y < {{T}}(0)) { if (x == {{T}}(1)) { return {{T}}(1); }
  if (x == -{{T}}(1)) { return select({{T}}(1), -{{T}}(1), (y & {{T}}(1)) != {{T}}(0)); }
  return {{T}}(0); }"""
_POW_U = """
var base = x; var e = y; var r = {{T}}(1);
loop { if (e == {{T}}(0)) { break; } if ((e & {{T}}(1)) != {{T}}(0)) { r = r * base; }
  base = base * base; e = e >> 1u; }
return r;"""

_MAXMIN_F = "if (isnan_{{DT}}(x) || isnan_{{DT}}(y)) { return x + y; } return %s(x, y);"
_LOGADDEXP = """
if (isnan_{{DT}}(x) || isnan_{{DT}}(y)) { return x + y; }
let m = max(x, y);
if (isinf_{{DT}}(m)) { return m; }
return m + log1p_{{DT}}(exp(-abs(x - y)));"""
_ATAN2 = """
if (isnan_{{DT}}(x) || isnan_{{DT}}(y)) { return x + y; }
let sy = sgn_{{DT}}(x);
let sx = sgn_{{DT}}(y);
let pi = {{T}}(3.141592653589793);
let h = {{T}}(1.5707963267948966);
if (x == {{T}}(0)) {
  if (sx) { return select(pi, -pi, sy); }
  return x;
}
if (y == {{T}}(0)) { return select(h, -h, sy); }
if (isinf_{{DT}}(y)) {
  if (isinf_{{DT}}(x)) {
    var r = {{T}}(0.7853981633974483);
    if (sx) { r = {{T}}(2.356194490192345); }
    return select(r, -r, sy);
  }
  if (sx) { return select(pi, -pi, sy); }
  return select({{T}}(0), -{{T}}(0), sy);
}
if (isinf_{{DT}}(x)) { return select(h, -h, sy); }
var r = atan_{{DT}}(abs(x / y));
if (sx) { r = pi - r; }
return select(r, -r, sy);"""
_HYPOT = """
if (isinf_{{DT}}(x) || isinf_{{DT}}(y)) { return inf_{{DT}}(); }
let m = max(abs(x), abs(y));
if (m == {{T}}(0) || isnan_{{DT}}(m)) { return m + x + y; }
let a = x / m; let b = y / m;
return m * sqrt(a * a + b * b);"""
_NEXTAFTER = """
if (isnan_float32(x) || isnan_float32(y)) { return x + y; }
if (x == y) { return y; }
if (x == 0.0) { return select(bitcast<f32>(1u), bitcast<f32>(0x80000001u), y < 0.0); }
let b = bitcast<u32>(x);
if ((y > x) == (x > 0.0)) { return bitcast<f32>(b + 1u); }
return bitcast<f32>(b - 1u);"""


_NEXTAFTER64 = """
if (isnan_float64(x) || isnan_float64(y)) { return x + y; }
if (x == y) { return y; }
if (x == 0.0) { return select(bitcast<f64>(1lu), bitcast<f64>(0x8000000000000001lu), y < 0.0); }
let b = bitcast<u64>(x);
if ((y > x) == (x > 0.0)) { return bitcast<f64>(b + 1lu); }
return bitcast<f64>(b - 1lu);"""


def _cmp(op: str) -> dict:
    body = f"return select(0u, 1u, x {op} y);"
    if op == "!=":  # lavapipe compiles float != as ordered (nan != y was false)
        return {F: "return select(1u, 0u, x == y);", I: body, U: body, B: body}
    return {F: body, I: body, U: body, B: body}


_SHL = "if (y < {{T}}(0) || u32(y) >= {{BITS}}u) { return {{T}}(0); } return x << u32(y);"
_SHR_I = "return x >> min(u32(max(y, {{T}}(0))), {{BITS}}u - 1u);"
_SHR_U = "if (u32(y) >= {{BITS}}u) { return {{T}}(0); } return x >> u32(y);"
# Signed division and remainder go through unsigned magnitudes: NVIDIA's Vulkan driver was
# seen to give x (not the remainder) for a negative divisor with the signed instructions.
_MAGNITUDES = """
let ux = select(bitcast<{{UT}}>(x), {{UT}}(0) - bitcast<{{UT}}>(x), x < {{T}}(0));
let uy = select(bitcast<{{UT}}>(y), {{UT}}(0) - bitcast<{{UT}}>(y), y < {{T}}(0));"""
_FLOORDIV_I = """
if (y == {{T}}(0)) { return {{T}}(0); }""" + _MAGNITUDES + """
let neg = (x < {{T}}(0)) != (y < {{T}}(0));
let uq = ux / uy;
var q = bitcast<{{T}}>(select(uq, {{UT}}(0) - uq, neg));
if (neg && (ux % uy) != {{UT}}(0)) { q = q - {{T}}(1); }
return q;"""
_REM_I = """
if (y == {{T}}(0)) { return {{T}}(0); }""" + _MAGNITUDES + """
let ur = ux % uy;
var r = bitcast<{{T}}>(select(ur, {{UT}}(0) - ur, x < {{T}}(0)));
if (r != {{T}}(0) && ((r < {{T}}(0)) != (y < {{T}}(0)))) { r = r + y; }
return r;"""
_REM_F = """
if (y == {{T}}(0) || isinf_{{DT}}(x) || isnan_{{DT}}(y)) { return nan_{{DT}}(); }
if (isinf_{{DT}}(y)) {
  if (x == {{T}}(0) || (x < {{T}}(0)) == (y < {{T}}(0))) { return x; }
  return y;
}
var r = x - y * trunc_{{DT}}(x / y);
if (r != {{T}}(0) && ((r < {{T}}(0)) != (y < {{T}}(0)))) { r = r + y; }
if (r == {{T}}(0) && y < {{T}}(0)) { return -abs(r); }
if (r == {{T}}(0)) { return abs(r); }
return r;"""


def _clip_step(op: str, fn: str) -> dict:
    f = f"return select(x, y, x {op} y || isnan_{{{{DT}}}}(y));"
    i = f"return {fn}(x, y);"
    return {F: f, I: i, U: i, B: i}


# name -> (result rule, bodies); rules: same | float | bool (result) | logical (bool in/out)
BINARY: dict[str, tuple[str, dict]] = {
    "add": ("same", {F: "return x + y;", I: "return x + y;", U: "return x + y;",
                     B: "return x | y;"}),
    "subtract": ("same", {F: "return x - y;", I: "return x - y;", U: "return x - y;"}),
    "multiply": ("same", {F: "return x * y;", I: "return x * y;", U: "return x * y;",
                          B: "return x & y;"}),
    "divide": ("float", {F: "return x / y;", "f32": _DIV32}),
    "floor_divide": ("same", {F: "return floor(x / y);", "f32": floor_div_body(),
                              "f64": floor_div64_body(),
                              I: _FLOORDIV_I,
                              U: "if (y == {{T}}(0)) { return {{T}}(0); } return x / y;"}),
    "remainder": ("same", {F: _REM_F, "f32": rem_body(), "f64": rem64_body(), I: _REM_I,
                           U: "if (y == {{T}}(0)) { return {{T}}(0); } return x % y;"}),
    "pow": ("same", {F: "return {{T}}(m32_pow(f32(x), f32(y)));",
                     "f64": _POW_F.replace("{{POW}}", "m64_pow_pos"),
                     I: _POW_NEG + _POW_U, U: _POW_U}),
    "maximum": ("same", {F: _MAXMIN_F % "max", I: "return max(x, y);", U: "return max(x, y);",
                         B: "return max(x, y);"}),
    "minimum": ("same", {F: _MAXMIN_F % "min", I: "return min(x, y);", U: "return min(x, y);",
                         B: "return min(x, y);"}),
    "atan2": ("float", {F: _ATAN2, "f64": "return m64_atan2(x, y);"}),
    "hypot": ("float", {F: _HYPOT}),
    "logaddexp": ("float", {F: _LOGADDEXP,
                            "f64": "return m64_logaddexp(x, y);"}),
    "copysign": ("float", {F: "if (sgn_{{DT}}(y)) { return -abs(x); } return abs(x);"}),
    "nextafter": ("float", {"f32": _NEXTAFTER, "f64": _NEXTAFTER64}),
    "equal": ("bool", _cmp("==")), "not_equal": ("bool", _cmp("!=")),
    "less": ("bool", _cmp("<")), "less_equal": ("bool", _cmp("<=")),
    "greater": ("bool", _cmp(">")), "greater_equal": ("bool", _cmp(">=")),
    "logical_and": ("logical", {B: "return x & y;"}),
    "logical_or": ("logical", {B: "return x | y;"}),
    "logical_xor": ("logical", {B: "return x ^ y;"}),
    "bitwise_and": ("same", {I: "return x & y;", U: "return x & y;", B: "return x & y;"}),
    "bitwise_or": ("same", {I: "return x | y;", U: "return x | y;", B: "return x | y;"}),
    "bitwise_xor": ("same", {I: "return x ^ y;", U: "return x ^ y;", B: "return x ^ y;"}),
    "bitwise_left_shift": ("same", {I: _SHL, U: _SHL}),
    "bitwise_right_shift": ("same", {I: _SHR_I, U: _SHR_U}),
    # clip's two steps (not in the namespace), as NumPy's: x replaced by the bound where
    # x is beyond it or the bound is nan, else x itself (a nan x stays, and a zero keeps its
    # sign: max/min may pick either zero, clip(-5.0, -0.0, 0.0) gave +0.0)
    "_clip_lo": ("same", _clip_step("<", "max")),
    "_clip_hi": ("same", _clip_step(">", "min")),
}


def _body(table: dict, name: str, dt: np.dtype) -> str:
    bodies = table[name][1]
    body = bodies.get(D.wgsl(dt)) or bodies.get(dt.name) or bodies.get(_kind(dt))
    if body is None:
        raise TypeError(f"{name}() does not support dtype {dt}")
    if "f64(" in body and dt == D.float32 and "shader-f64" not in _runtime.get().features:
        body = bodies[F]  # a correctly rounded float32 division goes through float64
    return body


def default_float() -> np.dtype:
    return D.float32


def default_int() -> np.dtype:
    return D.int64 if "shader-int64" in _runtime.get().features else D.int32


def _arg(x, fname: str) -> WgpuArray:
    if isinstance(x, WgpuArray):
        return x
    raise TypeError(f"{fname}() expected a WgpuArray, got {type(x).__name__}")


_FAST1: dict = {}  # (name, dtype, vec) -> flat program or None


def unary(name: str, x: WgpuArray) -> WgpuArray:
    if type(x) is WgpuArray and x._contig:
        key = (name, x._dtype, not x._offset & 3)
        f = _FAST1.get(key, 0)
        if f == 0:
            f = _fast1(key)
        if f is not None:
            n = prod(x._shape)
            out = fresh(x._shape, f.out_dtypes[0], n, f.osz)
            if n:
                if x._st.buf.cap > _runtime.get().max_binding:
                    _fuse.launch(f, n, [x], [out])
                elif f.vec:
                    REC.dispatch(f.kernel, (x._st.buf, out._st.buf),
                                 (-(-n // 4), x._offset >> 2, 0), -(-n // 1024))
                else:
                    REC.dispatch(f.kernel, (x._st.buf, out._st.buf), (n, x._offset, 0),
                                 -(-n // 256))
            return out
    elif isinstance(x, _fuse.Var):
        return x.tr.unary(name, x)
    return _unary(name, x)


def _fast1(key):
    """The flat program of a unary op on a contiguous array (None: general path)."""
    name, dt, vec = key
    f = None
    if D.kind(dt) in "biuf":
        try:
            tr = _fuse.Tracer()
            v = _fuse.Var(tr, 0, dt, ())
            tr.inputs.append(None)
            inputs, nodes, outputs = tr.program([tr.unary(name, v)])
            odt = tr.nodes[-1][3]
            vec = vec and _fuse.vec_ok(dt) and _fuse.vec_ok(odt)
            f = _fuse.flat(vec, ((_fuse.FULL, dt),), nodes, outputs)
        except (TypeError, ValueError):
            f = None
    _FAST1[key] = f
    return f


#: float16 unary functions computed in float32 and rounded once
_F16_VIA_F32 = frozenset({
    "sqrt", "reciprocal", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin",
    "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
})


def _unary(name: str, x: WgpuArray) -> WgpuArray:
    x = _arg(x, name)
    rule = UNARY[name][0]
    dt = x._dtype
    if D.kind(dt) == "c":
        return _cx.unary(name, x)
    if rule == "float" and D.kind(dt) != "f":
        if D.kind(dt) not in "iub":
            raise TypeError(f"{name}() does not support dtype {dt}")
        x = astype_raw(x, default_float())
        dt = x._dtype
    if rule == "bool" and name == "logical_not" and dt != D.bool_:
        x = astype_raw(x, D.bool_)
        dt = D.bool_
    if dt == D.float16 and name in _F16_VIA_F32:
        # WGSL's float16 builtins may be several ulp off on hardware (and the helpers'
        # series lose digits in float16): compute in float32 and round once
        return astype_raw(_unary(name, astype_raw(x, D.float32)), dt)
    body = _body(UNARY, name, dt)
    if name in ("positive", "conj", "real") or (body == _ident and rule == "same"):
        out = empty(x._shape, dt)  # a new array, never an alias of the input
        copy_into(x, out)
        return out
    out_dt = D.bool_ if rule == "bool" else dt
    out = empty(x._shape, out_dt)
    copy_into(x, out, body.replace("{{DT}}", D.NAME[dt]))
    return out


def _scalar_dtype(value, arr_dt: np.dtype, fname: str) -> np.dtype:
    """Dtype of the result of ``array op scalar`` (weak scalars)."""
    if isinstance(value, bool):
        return arr_dt
    if isinstance(value, int):
        return default_int() if arr_dt == D.bool_ else arr_dt
    if isinstance(value, float):
        return arr_dt if D.kind(arr_dt) in "fc" else default_float()
    if isinstance(value, complex):
        return _cx.scalar_dtype(value, arr_dt)
    raise TypeError(f"{fname}(): unsupported operand type {type(value).__name__}")


_SCALARS = (bool, int, float, complex)
_BIN_CACHE: dict = {}


_FAST2: dict = {}  # (name, dtype 1, dtype 2 or scalar type, side, vec) -> flat program
_FLOATS = (float, int)


def binary(name: str, x1, x2) -> WgpuArray:
    """``name(x1, x2)``; contiguous same-shape operands and array-scalar pairs take a flat
    kernel (vec4 for 4-byte dtypes), everything else the strided one."""
    if type(x1) is WgpuArray and x1._contig:
        t2 = type(x2)
        if t2 is WgpuArray:
            if x2._contig and x1._shape == x2._shape:
                vec = not (x1._offset | x2._offset) & 3
                key = (name, x1._dtype, x2._dtype, 0, vec)
                f = _FAST2.get(key, 0)
                if f == 0:
                    f = _fast2(key)
                if f is not None:
                    n = prod(x1._shape)
                    out = fresh(x1._shape, f.out_dtypes[0], n, f.osz)
                    if n:
                        b1, b2, bo = x1._st.buf, x2._st.buf, out._st.buf
                        if max(b1.cap, b2.cap) > _runtime.get().max_binding:
                            _fuse.launch(f, n, [x1, x2], [out])
                        elif f.vec:
                            REC.dispatch(f.kernel, (b1, b2, bo),
                                         (-(-n // 4), x1._offset >> 2, x2._offset >> 2, 0),
                                         -(-n // 1024))
                        else:
                            REC.dispatch(f.kernel, (b1, b2, bo),
                                         (n, x1._offset, x2._offset, 0), -(-n // 256))
                    return out
        elif t2 in _FLOATS:
            if x2 == 2 and name == "pow" and D.kind(x1._dtype) == "f":
                return unary("square", x1)  # as NumPy's ``x ** 2``: one rounded product
            return _binary_scalar(name, x1, x2, 2)
    elif type(x2) is WgpuArray and type(x1) in _FLOATS and x2._contig:
        return _binary_scalar(name, x2, x1, 1)
    return _binary(name, x1, x2)


def _binary_scalar(name: str, x: WgpuArray, s, side: int) -> WgpuArray:
    """``name(x, s)`` (side 2) or ``name(s, x)`` (side 1) for a contiguous ``x``."""
    key = (name, x._dtype, type(s), side, not x._offset & 3)
    f = _FAST2.get(key, 0)
    if f == 0:
        f = _fast2(key)
    if f is None:
        return _binary(name, s, x) if side == 1 else _binary(name, x, s)
    n = prod(x._shape)
    out = fresh(x._shape, f.out_dtypes[0], n, f.osz)
    if n:
        sw = words_for_scalar(s, f.sdt)  # (the program reads the array, then the scalar)
        if f.snw == 1:
            words = ((-(-n // 4), x._offset >> 2, sw[0], 0) if f.vec else
                     (n, x._offset, sw[0], 0))
        else:
            words = [n, x._offset, *sw[:f.snw], 0]
        if x._st.buf.cap > _runtime.get().max_binding:
            _fuse.launch(f, n, [x, sw[:f.snw]], [out])
        else:
            REC.dispatch(f.kernel, (x._st.buf, out._st.buf), words,
                         -(-n // 1024) if f.vec else -(-n // 256))
    return out


_SAMPLE = {float: 0.0, int: 0, bool: False}


def _fast2(key):
    """The flat program of a binary op on contiguous same-shape operands or an array and
    a Python scalar (None: general path)."""
    name, dt1, dt2, side, vec = key
    f = None
    try:
        tr = _fuse.Tracer()
        a = _fuse.Var(tr, 0, dt1, ())
        tr.inputs.append(None)
        if side == 0:
            if D.kind(dt1) not in "biuf" or D.kind(dt2) not in "biuf":
                raise TypeError
            if (name in ("floor_divide", "remainder") and dt1 != dt2
                    and D.result_type(dt1, dt2) == D.int64):
                # lavapipe miscompiled signed 64-bit division of an operand widened in the
                # same kernel (int64(1) // int32(-2) gave 0): cast first (general path)
                raise TypeError
            b = _fuse.Var(tr, 1, dt2, ())
            tr.inputs.append(None)
            v = tr.binary(name, a, b)
            modes = ((_fuse.FULL, dt1), (_fuse.FULL, dt2))
            vec = vec and _fuse.vec_ok(dt2)
        else:
            if D.kind(dt1) not in "biuf":
                raise TypeError
            s = _SAMPLE[dt2]
            v = tr.binary(name, s, a) if side == 1 else tr.binary(name, a, s)
            sdt = tr.inputs[1][1]
            modes = ((_fuse.FULL, dt1), (_fuse.IMM, sdt))
        inputs, nodes, outputs = tr.program([v])
        odt = tr.nodes[-1][3]
        vec = vec and _fuse.vec_ok(dt1) and _fuse.vec_ok(odt)
        f = _fuse.flat(vec, modes, nodes, outputs)
        if side:
            f.sdt = sdt
            f.snw = _fuse.imm_words(sdt)
    except (TypeError, ValueError, OverflowError):
        f = None
    _FAST2[key] = f
    return f


def _binary(name: str, x1, x2) -> WgpuArray:
    if isinstance(x1, _fuse.Var) or isinstance(x2, _fuse.Var):
        tr = x1.tr if isinstance(x1, _fuse.Var) else x2.tr
        return tr.binary(name, x1, x2)
    rule, _ = BINARY[name]
    s1 = isinstance(x1, _SCALARS) or isinstance(x1, np.generic)
    s2 = isinstance(x2, _SCALARS) or isinstance(x2, np.generic)
    if isinstance(x1, np.generic):
        x1 = x1.item()
    if isinstance(x2, np.generic):
        x2 = x2.item()
    if s1 and s2:  # not required by the standard; NumPy accepts it
        from ._creation import asarray

        x1 = asarray(x1)
        s1 = False
    if s1 or s2:
        arr = _arg(x2 if s1 else x1, name)
        dt = _scalar_dtype(x1 if s1 else x2, arr._dtype, name)
    else:
        x1 = _arg(x1, name)
        x2 = _arg(x2, name)
        dt = D.result_type(x1._dtype, x2._dtype)
    if D.kind(dt) == "c":
        return _cx.binary(name, x1, x2, dt)
    if rule == "float" and D.kind(dt) != "f":
        dt = default_float()
    elif rule == "logical":
        dt = D.bool_
    ck = _BIN_CACHE.get((name, dt))
    if ck is None:
        check_dtype(dt)
        body = _body(BINARY, name, dt)
        out_dt = D.bool_ if rule in ("bool", "logical") else dt
        kern = _kernels.kernel(
            "binary", "rrw", (dt, out_dt), T=D.wgsl(dt), R=D.wgsl(out_dt), DT=D.NAME[dt],
            DR=D.NAME[out_dt], BITS=8 * D.itemsize(dt), BODY=body,
            UT="u64" if D.wgsl(dt) in ("i64", "u64") else "u32",
        )
        ck = _BIN_CACHE[(name, dt)] = (kern, out_dt)
    kern, out_dt = ck
    if s1 or s2:
        arr = x2 if s1 else x1
        if arr._dtype != dt:
            arr = astype_raw(arr, dt)
        sw = words_for_scalar(x1 if s1 else x2, dt)
        shape = arr._shape
        a = b = arr
        flag_s = 4 if s1 else 8
    else:
        a = x1 if x1._dtype == dt else astype_raw(x1, dt)
        b = x2 if x2._dtype == dt else astype_raw(x2, dt)
        shape = a._shape if a._shape == b._shape else broadcast_shapes(a._shape, b._shape)
        sw = [0, 0, 0]
        flag_s = 0
    fl = _flat_binary(name, a, b, flag_s, x1 if s1 else x2, dt, shape, prod(shape))
    if fl is not None:
        return fl
    out = empty(shape, out_dt)
    n = out.size
    if n == 0:
        return out
    if a._contig and b._contig and a._shape == shape and b._shape == shape:
        nd, cshape, sa, sb, flags = 0, (), (), (), 3
    else:
        cshape, (sa, sb) = collapse(shape, broadcast_strides(a, shape), broadcast_strides(b, shape))
        nd = len(cshape)
        if nd > MAX_ND:
            a, b = contiguous(a), contiguous(b)
            return binary(name, a, b)
        cs = c_strides(cshape)
        flags = (1 if sa == cs else 0) | (2 if sb == cs else 0)
    words = [n, nd, flags | flag_s, a._offset, b._offset, 0, *sw, *cshape, *sa, *sb]
    REC.dispatch(kern, (a._st.buf, b._st.buf, out._st.buf), words, groups_for(n))
    return out


def _flat_binary(name, a, b, flag_s, scalar, dt, shape, n):
    """The op through a flat kernel when both operands are contiguous and broadcast only
    along leading dims (or are scalars), else None."""
    if D.kind(dt) not in "biuf":
        return None
    ins = []
    for k, x in enumerate((a, b)):
        if flag_s & (4 << k):
            ins.append((scalar, dt))
        elif _fuse.layout_mode(x, shape, n) is None:
            return None
        else:
            ins.append(x)
    tr = _fuse.Tracer()
    vs = []
    for x in ins:
        if isinstance(x, tuple):
            tr.inputs.append(x)
            vs.append(_fuse.Var(tr, len(tr.inputs) - 1, dt, ()))
        else:
            tr.inputs.append(x)
            vs.append(_fuse.Var(tr, len(tr.inputs) - 1, dt, x._shape))
    v = tr.binary(name, *vs)
    inputs, nodes, outputs = tr.program([v])
    return _fuse.run_flat(inputs, nodes, outputs, shape)[0]


def where(condition: WgpuArray, x1, x2, /) -> WgpuArray:
    """Elements of ``x1`` where ``condition`` is true, else of ``x2`` (scalars allowed)."""
    from ._creation import full

    for v in (condition, x1, x2):
        if isinstance(v, _fuse.Var):
            return v.tr.where(condition, x1, x2)

    c = _arg(condition, "where")
    if c._dtype != D.bool_:
        c = astype_raw(c, D.bool_)
    arrs = [x for x in (x1, x2) if isinstance(x, WgpuArray)]
    if not arrs:
        raise TypeError("where() needs at least one array among x1 and x2")
    if len(arrs) == 2:
        dt = D.result_type(x1._dtype, x2._dtype)
    else:
        other = x2 if isinstance(x1, WgpuArray) else x1
        dt = _scalar_dtype(other, arrs[0]._dtype, "where")
    if D.kind(dt) in "biuf" and c._contig and all(x._contig and x._shape == c._shape
                                                for x in arrs):
        # one shape, contiguous: the cached flat program, scalars as immediates
        ops = [c] + [(x if x._dtype == dt else astype_raw(x, dt))
                     if isinstance(x, WgpuArray) else (x, dt) for x in (x1, x2)]
        return _fuse.run_cached("where", _where_program, ops)
    ops = []
    for x in (x1, x2):
        if not isinstance(x, WgpuArray):
            x = full((), x, dtype=dt)
        elif x._dtype != dt:
            x = astype_raw(x, dt)
        ops.append(x)
    a, b = ops
    shape = broadcast_shapes(c._shape, a._shape, b._shape)
    n = prod(shape)
    if D.kind(dt) in "biuf" and all(_fuse.layout_mode(t, shape, n) for t in (c, a, b)):
        tr = _fuse.Tracer()  # contiguous operands: a flat kernel (vec4, chunked)
        v = tr.node("w", "where", dt, dt, [tr.array(t) for t in (c, a, b)], shape)
        return _fuse.run_flat(*tr.program([v]), shape)[0]
    out = empty(shape, dt)
    n = out.size
    if n == 0:
        return out
    cshape, strides = collapse(shape, *(broadcast_strides(t, shape) for t in (c, a, b)))
    if len(cshape) > 6:
        c, a, b = (contiguous(broadcast_to_raw(t, shape)) for t in (c, a, b))
        return where(c, a, b)
    cs = c_strides(cshape)
    flags = sum(1 << i for i, s in enumerate(strides) if s == cs)
    words = [n, len(cshape), flags, c._offset, a._offset, b._offset, 0, *cshape,
             *strides[0], *strides[1], *strides[2]]
    k = _kernels.kernel("where", "rrrw", (dt,), T=D.wgsl(dt))
    REC.dispatch(k, (c._st.buf, a._st.buf, b._st.buf, out._st.buf), words, groups_for(n))
    return out


def _where_program(tr, c, a, b):
    return tr.where(c, a, b)


def broadcast_to_raw(x: WgpuArray, shape) -> WgpuArray:
    from ._array import view

    shape = tuple(shape)
    broadcast_shapes(x._shape, shape)
    if len(shape) < x.ndim or broadcast_shapes(x._shape, shape) != shape:
        raise ValueError(f"cannot broadcast an array of shape {x._shape} to {shape}")
    return view(x, shape, broadcast_strides(x, shape), x._offset)


def clip(x: WgpuArray, /, min=None, max=None) -> WgpuArray:
    """Clamp ``x`` to ``[min, max]`` (either bound may be None, a scalar or an array), as
    ``np.clip``: ``x`` where it lies inside (signed zeros kept), a bound where ``x`` is
    beyond it, nan where ``x`` or a bound is nan, ``max`` where ``min > max``."""
    traced = isinstance(x, _fuse.Var)
    if not traced:
        x = _arg(x, "clip")
    if D.kind(x.dtype) in "iu":  # integer bounds beyond the dtype's range bind nothing
        info = np.iinfo(x.dtype)
        if isinstance(min, int) and not isinstance(min, bool) and min < info.min:
            min = None
        if isinstance(max, int) and not isinstance(max, bool) and max > info.max:
            max = None
        if isinstance(min, int) and not isinstance(min, bool) and min > info.max:
            min = int(info.max)
        if isinstance(max, int) and not isinstance(max, bool) and max < info.min:
            max = int(info.min)
    out = x
    if min is not None:
        out = binary("_clip_lo", out, min)
    if max is not None:
        out = binary("_clip_hi", out, max)
    if traced:
        return x.tr.cast(out, x.dtype)
    if out is x:
        out = copy(x)
    if out._dtype != x._dtype:
        out = astype_raw(out, x._dtype)
    return out


def copy(x: WgpuArray) -> WgpuArray:
    out = empty(x._shape, x._dtype)
    copy_into(x, out)
    return out


def _make_unary(name: str):
    def fn(x, /):
        return unary(name, x)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}`` (array API)."
    return fn


def _make_binary(name: str):
    def fn(x1, x2, /):
        return binary(name, x1, x2)

    fn.__name__ = name
    fn.__doc__ = f"Elementwise ``{name}`` with broadcasting (array API)."
    return fn


FUNCTIONS = {name: _make_unary(name) for name in UNARY}
FUNCTIONS.update({name: _make_binary(name) for name in BINARY if name[0] != "_"})


def round_(x, /, *, decimals: int = 0):
    if decimals == 0:
        return unary("round", x)
    scale = 10.0 ** decimals
    return binary("divide", unary("round", binary("multiply", x, scale)), scale)


FUNCTIONS["round"] = round_
round_.__name__ = "round"
_unused = (unary_kernel, check_dtype)

from . import _fuse  # noqa: E402  (imports this module)
