"""Flat elementwise kernels: the contiguous fast path, fused chains and chunking.

A *flat program* computes one or more outputs from inputs by a chain of
elementwise nodes (the bodies of ``_elementwise.UNARY``/``BINARY``, casts and
``where``), one thread per element or, when every bound buffer holds 4-byte
elements, per ``vec4`` of elements. No stride arithmetic: each input is

* ``full``   -- contiguous with the output's shape (element ``off + i``),
* ``period`` -- contiguous and broadcast along leading dims (``off + (base + i) % p``),
* ``splat``  -- one element broadcast (``off``),
* ``imm``    -- a scalar passed in the immediates.

Programs are compiled once per structure (dtypes, modes, ops); offsets, periods
and scalars are dispatch parameters. Arrays larger than one storage binding are
processed in windows (bind-group offsets aligned to the adapter's
``min-storage-buffer-offset-alignment``), one dispatch per window.

:func:`fuse` traces a Python function of elementwise operations on wgpu arrays
into one such program (like ``cupy.fuse``); each call re-traces the function
(cheap), so scalars captured from the caller are always current.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from . import _dtypes as D
from . import _kernels, _runtime
from ._array import (
    WgpuArray,
    broadcast_shapes,
    c_strides,
    contiguous,
    fresh,
    view,
    words_for_scalar,
)
from ._recorder import _NWORDS, REC

FULL, PERIOD, SPLAT, IMM = "full", "period", "splat", "imm"
_LANES = ("x", "y", "z", "w")
_WG = 256


def imm_words(dt: np.dtype) -> int:
    """Immediate words of one scalar of ``dt`` (see ``_kernels._helpers``)."""
    if dt == D.float64:
        return 3
    return 2 if D.itemsize(dt) == 8 else 1


def imm(value, dt: np.dtype) -> list[int]:
    """The immediate words of the scalar ``value`` of dtype ``dt`` in a flat program."""
    return words_for_scalar(value, dt)[:imm_words(dt)]


def vec_ok(dt: np.dtype) -> bool:
    return D.itemsize(dt) == 4


# -- code generation ----------------------------------------------------------------------

def _fill(body: str, dt: np.dtype, out_dt: np.dtype) -> str:
    t = D.wgsl(dt)
    return (body.replace("{{T}}", t).replace("{{R}}", D.wgsl(out_dt))
            .replace("{{DT}}", dt.name).replace("{{DR}}", out_dt.name)
            .replace("{{BITS}}", str(8 * D.itemsize(dt)))
            .replace("{{UT}}", "u64" if t in ("i64", "u64") else "u32"))


_WIDEN = {("u32", "i64"): "return i64(u64(x));", ("i32", "u64"): "return u64(i64(x));"}


def cast_body(dt_in: np.dtype, dt_out: np.dtype) -> str:
    """The WGSL body of ``astype`` from ``dt_in`` to ``dt_out`` (as ``_array.copy_into``)."""
    tin, tout = D.wgsl(dt_in), D.wgsl(dt_out)
    if (tin, tout) in _WIDEN:
        return _WIDEN[(tin, tout)]
    if dt_out == D.bool_:
        if D.kind(dt_in) == "f":
            return f"return select(0u, 1u, x != {tin}(0) || isnan_{dt_in.name}(x));"
        return f"return select(0u, 1u, x != {tin}(0));"
    return f"return {tout}(x);"


class Flat:
    """A compiled flat program: kernel, binding signature and immediate word layout."""

    __slots__ = ("kernel", "vec", "modes", "dtypes", "in_words", "out_words", "nwords",
                 "out_dtypes", "osz", "sdt", "snw")

    def __init__(self, kernel, vec, modes, dtypes, in_words, out_words, nwords, out_dtypes):
        self.kernel = kernel
        self.vec = vec
        self.modes = modes
        self.dtypes = dtypes
        self.in_words = in_words
        self.out_words = out_words
        self.nwords = nwords
        self.out_dtypes = out_dtypes
        self.osz = D.itemsize(out_dtypes[0])
        self.sdt = self.snw = None


_FLATS: dict[tuple, Flat] = {}
_NAMES: dict[tuple, str] = {}


def flat(vec: bool, inputs: tuple, nodes: tuple, outputs: tuple) -> Flat:
    """The compiled program (cached): ``inputs`` ((mode, dtype), ...), ``nodes``
    ((kind, name, dt, out_dt, args), ...) with ``args`` indexing inputs then nodes,
    ``outputs`` (refs, ...)."""
    key = (vec, inputs, nodes, outputs)
    f = _FLATS.get(key)
    if f is None:
        f = _FLATS[key] = _compile(key)
    return f


def _compile(key) -> Flat:
    vec, inputs, nodes, outputs = key
    nin = len(inputs)

    def dtype_of(ref):
        return inputs[ref][1] if ref < nin else nodes[ref - nin][3]

    # immediate word layout
    w = 1
    in_words = []
    for mode, dt in inputs:
        in_words.append(w)
        w += {FULL: 1, PERIOD: 3, SPLAT: 1}.get(mode) or imm_words(dt)
    out_words = []
    for _ in outputs:
        out_words.append(w)
        w += 1
    if w > _NWORDS:
        raise ValueError(f"flat program needs {w} parameter words (at most {_NWORDS})")
    out_dts = tuple(dtype_of(r) for r in outputs)
    dts = dict.fromkeys([dt for _, dt in inputs] + [n[2] for n in nodes] + [n[3] for n in nodes])
    lines = []
    b = 0
    for k, (mode, dt) in enumerate(inputs):
        if mode == IMM:
            continue
        t = D.wgsl(dt)
        t = f"vec4<{t}>" if vec and mode != SPLAT else t
        lines.append(f"@group(0) @binding({b}) var<storage, read> I{k}: array<{t}>;")
        b += 1
    for j, dt in enumerate(out_dts):
        t = f"vec4<{D.wgsl(dt)}>" if vec else D.wgsl(dt)
        lines.append(f"@group(0) @binding({b}) var<storage, read_write> O{j}: array<{t}>;")
        b += 1
    sig = "r" * (b - len(out_dts)) + "w" * len(out_dts)
    # one function per node, then the lane function computing every output of one element
    from . import _elementwise as E

    calls = []
    for j, (kind, name, dt, odt, args) in enumerate(nodes):
        t, r = D.wgsl(dt), D.wgsl(odt)
        vals = ", ".join(f"v{a}" for a in args)
        if kind == "b":
            body = _fill(E._body(E.BINARY, name, dt), dt, odt)
            lines.append(f"fn f{j}(x: {t}, y: {t}) -> {r} {{ {body} }}")
        elif kind == "u":
            body = _fill(E._body(E.UNARY, name, dt), dt, odt)
            lines.append(f"fn f{j}(x: {t}) -> {r} {{ {body} }}")
        elif kind == "c":
            lines.append(f"fn f{j}(x: {t}) -> {r} {{ {cast_body(dt, odt)} }}")
        else:  # where(c, x, y): args (bool, dt, dt)
            lines.append(f"fn f{j}(c: u32, x: {t}, y: {t}) -> {r} "
                         "{ return select(y, x, c != 0u); }")
        calls.append(f"  let v{nin + j} = wrap_{odt.name}(f{j}({vals}));")
    params = ", ".join(f"v{k}: {D.wgsl(dt)}" for k, (_, dt) in enumerate(inputs))
    if len(outputs) == 1:
        ret_t, ret = D.wgsl(out_dts[0]), f"v{outputs[0]}"
    else:
        lines.append("struct Lane { " + ", ".join(
            f"o{j}: {D.wgsl(dt)}" for j, dt in enumerate(out_dts)) + " }")
        ret_t = "Lane"
        ret = "Lane(" + ", ".join(f"v{r}" for r in outputs) + ")"
    lines.append(f"fn lane({params}) -> {ret_t} {{")
    lines.extend(calls)
    lines.append(f"  return {ret};\n}}")
    lines.append(
        "@compute @workgroup_size(256)\n"
        "fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,\n"
        "        @builtin(local_invocation_index) lid: u32) {\n"
        "  let i = linear_id(wid, nwg, lid);\n"
        "  if (i >= pw(0u)) { return; }")
    for k, (mode, dt) in enumerate(inputs):
        q = in_words[k]
        if mode == FULL:
            lines.append(f"  let a{k} = I{k}[pw({q}u) + i];")
        elif mode == PERIOD:
            lines.append(f"  let a{k} = I{k}[pw({q}u) + (pw({q + 1}u) + i) % pw({q + 2}u)];")
        elif mode == SPLAT:
            lines.append(f"  let a{k} = I{k}[pw({q}u)];")
        else:
            lines.append(f"  let a{k} = scal_{dt.name}({q}u);")
    one = len(outputs) == 1
    if vec:
        for c in _LANES:
            args = ", ".join(f"a{k}.{c}" if m in (FULL, PERIOD) else f"a{k}"
                             for k, (m, _) in enumerate(inputs))
            lines.append(f"  let l{c} = lane({args});")
        for j, dt in enumerate(out_dts):
            parts = ", ".join(f"l{c}" if one else f"l{c}.o{j}" for c in _LANES)
            lines.append(f"  O{j}[pw({out_words[j]}u) + i] = vec4<{D.wgsl(dt)}>({parts});")
    else:
        args = ", ".join(f"a{k}" for k in range(nin))
        lines.append(f"  let l = lane({args});")
        for j in range(len(out_dts)):
            lines.append(f"  O{j}[pw({out_words[j]}u) + i] = {'l' if one else f'l.o{j}'};")
    lines.append("}")
    src = "\n".join(lines) + "\n"
    name = _NAMES.get(key)
    if name is None:
        name = _NAMES[key] = f"flat{len(_NAMES)}"
    _kernels._sources[name] = src
    kern = _kernels.kernel(name, sig, tuple(dts))
    return Flat(kern, vec, tuple(m for m, _ in inputs), tuple(dt for _, dt in inputs),
                tuple(in_words), tuple(out_words), w, out_dts)


# -- launching ----------------------------------------------------------------------------

def launch(f: Flat, n: int, args: list, outs: list) -> None:
    """Dispatch ``f`` over ``n`` elements.

    ``args`` per input: an array (full/splat), ``(array, period)`` (period) or the
    immediate words (imm); ``outs``: contiguous output arrays (offsets may be any
    multiple of 4 elements in vec4 programs).
    """
    vec = f.vec
    count = -(-n // 4) if vec else n
    words = [count]
    bufs = []
    rt = _runtime.get()
    big = False
    for mode, a in zip(f.modes, args, strict=True):
        if mode == FULL:
            words.append(a._offset >> 2 if vec else a._offset)
            bufs.append(a._st.buf)
        elif mode == SPLAT:
            words.append(a._offset)
            bufs.append(a._st.buf)
        elif mode == PERIOD:
            arr, p = a
            words += (arr._offset >> 2, 0, p >> 2) if vec else (arr._offset, 0, p)
            bufs.append(arr._st.buf)
        else:
            words += a
    for o in outs:
        words.append(o._offset >> 2 if vec else o._offset)
        bufs.append(o._st.buf)
    for b in bufs:
        if b.cap > rt.max_binding:
            big = True
    if not big:
        REC.dispatch(f.kernel, bufs, words, -(-count // _WG))
        return
    _launch_chunked(f, rt, n, args, outs)


def _window(buf, first: int, count: int, isz: int, align: int, rt) -> tuple:
    """Window (buf, byte offset, byte size) holding elements [first, first + count)."""
    start = (first * isz) // align * align
    end = -(-((first + count) * isz) // 16) * 16
    size = min(end, buf.cap) - start
    if size > rt.max_binding:
        raise AssertionError("wgpu: chunk window exceeds the binding limit")
    return buf, start, size


def _launch_chunked(f: Flat, rt, n: int, args: list, outs: list) -> None:
    vec = f.vec
    align = max(int(rt.limits.get("min-storage-buffer-offset-alignment", 256)), 16)
    isz = max([D.itemsize(dt) for dt in f.dtypes] + [D.itemsize(dt) for dt in f.out_dtypes])
    # elements per chunk: windows of chunk + alignment slack fit one binding
    chunk = (rt.max_binding - 2 * align - 64) // isz // 1024 * 1024
    for mode, a in zip(f.modes, args, strict=True):
        if mode in (SPLAT, PERIOD):
            arr = a if mode == SPLAT else a[0]
            if arr._st.buf.cap > rt.max_binding:
                raise ValueError("wgpu: a broadcast operand larger than one binding "
                                 f"({rt.max_binding} bytes) is not supported")
    for e0 in range(0, n, chunk):
        cn = min(chunk, n - e0)
        count = -(-cn // 4) if vec else cn
        words = [count]
        wins = []
        for mode, a, dt in zip(f.modes, args, f.dtypes, strict=True):
            s = D.itemsize(dt)
            if mode == FULL:
                first = a._offset + e0
                win = _window(a._st.buf, first, cn, s, align, rt)
                rel = first - win[1] // s
                words.append(rel >> 2 if vec else rel)
                wins.append(win)
            elif mode == SPLAT:
                words.append(a._offset)
                wins.append((a._st.buf, 0, a._st.buf.cap))
            elif mode == PERIOD:
                arr, p = a
                if vec:
                    words += (arr._offset >> 2, (e0 >> 2) % (p >> 2), p >> 2)
                else:
                    words += (arr._offset, e0 % p, p)
                wins.append((arr._st.buf, 0, arr._st.buf.cap))
            else:
                words += a
        for o, dt in zip(outs, f.out_dtypes, strict=True):
            s = D.itemsize(dt)
            first = o._offset + e0
            win = _window(o._st.buf, first, cn, s, align, rt)
            rel = first - win[1] // s
            words.append(rel >> 2 if vec else rel)
            wins.append(win)
        bg = _kernels.window_bind_group(f.kernel.layout, tuple(wins))
        REC.record(f.kernel, bg, [w[0] for w in wins], words, -(-count // _WG))


def tail_safe(out: WgpuArray, n: int) -> bool:
    """Whether a vec4 program may store whole vectors into contiguous ``out``: nothing else
    lives in the padding of its last vector."""
    return not out._offset & 3 and (
        not n & 3 or (out._offset == 0 and out._st.nbytes == n * D.itemsize(out._dtype)))


def fill(out: WgpuArray, value) -> None:
    """``out[...] = value`` for a contiguous ``out`` (vec4 stores where safe; chunked)."""
    dt = out._dtype
    n = out.size
    if n == 0:
        return
    f = flat(vec_ok(dt) and tail_safe(out, n), ((IMM, dt),),
             (("c", "astype", dt, dt, (0,)),), (1,))
    launch(f, n, [imm(value, dt)], [out])


def layout_mode(x: WgpuArray, shape: tuple, n: int):
    """How a flat program can read ``x`` broadcast to ``shape`` (``n`` elements):
    (mode, period) or None when ``x`` must be copied first."""
    if x.size == 1:
        return SPLAT, 1
    if not x._contig:
        return None
    xs = x._shape
    k = 0
    while k < len(xs) and xs[k] == 1:
        k += 1
    xs = xs[k:]
    if len(xs) > len(shape) or tuple(shape[len(shape) - len(xs):]) != xs:
        return None
    p = x.size
    return (FULL, n) if p == n else (PERIOD, p)


def run_flat(inputs: list, nodes: tuple, outputs: tuple, shape: tuple) -> list:
    """Evaluate a flat program over ``shape``: ``inputs`` are arrays or (value, dtype)
    scalars; returns the new output arrays."""
    n = 1
    for s in shape:
        n *= s
    modes, args, arrays = [], [], []
    for x in inputs:
        if isinstance(x, WgpuArray):
            lm = layout_mode(x, shape, n)
            if lm is None:
                x = contiguous(_broadcast_view(x, shape))
                lm = (FULL, n)
            mode, p = lm
            modes.append((mode, x._dtype))
            args.append((x, p) if mode == PERIOD else x)
            arrays.append((mode, x, p))
        else:
            value, dt = x
            modes.append((IMM, dt))
            args.append(imm(value, dt))
    vec = _vec_eligible(arrays, nodes, outputs, len(inputs))
    f = flat(vec, tuple(modes), nodes, outputs)
    outs = [fresh(shape, dt, n, D.itemsize(dt)) for dt in f.out_dtypes]
    if n:
        launch(f, n, args, outs)
    return outs


class _Slot:
    """Operand ``k`` of a cached program (:func:`run_cached`), resolved at each call."""

    __slots__ = ("k",)

    def __init__(self, k: int) -> None:
        self.k = k


_CACHED: dict[tuple, tuple] = {}


def run_cached(name: str, build, operands: list) -> WgpuArray:
    """Run the elementwise program ``build(tracer, *vars)`` over ``operands``: contiguous
    arrays of one shape, or ``(value, dtype)`` scalars. The traced program is kept per
    ``name``, operand dtypes and kinds, so a call costs no tracing; scalar values are
    immediates of each call. Returns the program's single output."""
    arrays = [a for a in operands if isinstance(a, WgpuArray)]
    x0 = arrays[0]
    n = x0.size
    vec = all(D.itemsize(a._dtype) == 4 and not a._offset & 3 for a in arrays)
    key = (name, tuple(a._dtype if isinstance(a, WgpuArray) else (a[1],) for a in operands),
           vec)
    hit = _CACHED.get(key)
    if hit is None:
        tr = Tracer()
        vs = []
        for k, a in enumerate(operands):
            vs.append(Var(tr, k, a._dtype if isinstance(a, WgpuArray) else a[1], ()))
            tr.inputs.append(_Slot(k))
        inputs, nodes, outputs = tr.program([build(tr, *vs)])
        modes, args = [], []
        for x in inputs:
            if isinstance(x, _Slot):
                a = operands[x.k]
                arr = isinstance(a, WgpuArray)
                modes.append((FULL, a._dtype) if arr else (IMM, a[1]))
                args.append(x.k)
            else:
                value, dt = x
                modes.append((IMM, dt))
                args.append(imm(value, dt))
        vec = vec and all(vec_ok(nd[3]) for nd in nodes)
        hit = _CACHED[key] = (flat(vec, tuple(modes), nodes, outputs), args)
    f, args = hit
    out = fresh(x0._shape, f.out_dtypes[0], n, f.osz)
    if n:
        call = []
        for a in args:
            if a.__class__ is int:
                a = operands[a]
                if not isinstance(a, WgpuArray):
                    a = imm(*a)
            call.append(a)
        launch(f, n, call, [out])
    return out


def _vec_eligible(arrays, nodes, outputs, nin) -> bool:
    for mode, x, p in arrays:
        if not vec_ok(x._dtype):
            return False
        if mode == FULL and x._offset & 3:
            return False
        if mode == PERIOD and (x._offset & 3 or p & 3):
            return False
    for r in outputs:
        if r >= nin and not vec_ok(nodes[r - nin][3]):
            return False
    return True


def _broadcast_view(x: WgpuArray, shape: tuple) -> WgpuArray:
    from ._array import broadcast_strides

    return view(x, shape, broadcast_strides(x, shape), x._offset)


# -- tracing ------------------------------------------------------------------------------

class Var:
    """A value inside a traced function (see :func:`fuse`): operators and the library's
    elementwise functions record nodes instead of computing."""

    __slots__ = ("tr", "ref", "dtype", "shape")
    __array_priority__ = 200

    def __init__(self, tr, ref, dtype, shape) -> None:
        self.tr = tr
        self.ref = ref
        self.dtype = dtype
        self.shape = shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __bool__(self):
        raise TypeError("a fused function cannot branch on array values")

    __float__ = __int__ = __index__ = __bool__

    def __array_namespace__(self, *, api_version=None):
        import vtl.backends.wgpu as ns

        return ns


def _install_operators() -> None:
    from . import _dunders, _elementwise

    binary, unary = _elementwise.binary, _elementwise.unary

    def fwd(name):
        return lambda self, other: binary(name, self, other)

    def rev(name):
        return lambda self, other: binary(name, other, self)

    def un(name):
        return lambda self: unary(name, self)

    for d, name in {**_dunders._BINARY, **_dunders._COMPARE}.items():
        setattr(Var, f"__{d}__", fwd(name))
        if d in _dunders._BINARY:
            setattr(Var, f"__r{d}__", rev(name))
    for d, name in {"neg": "negative", "pos": "positive", "abs": "abs",
                    "invert": "bitwise_invert"}.items():
        setattr(Var, f"__{d}__", un(name))
    Var.__hash__ = object.__hash__


class Tracer:
    def __init__(self) -> None:
        self.inputs: list = []  # WgpuArray or (value, dtype)
        self.nodes: list = []
        self.ids: dict[int, Var] = {}

    def array(self, x: WgpuArray) -> Var:
        v = self.ids.get(id(x))
        if v is None:
            v = self.ids[id(x)] = Var(self, len(self.inputs), x._dtype, x._shape)
            self.inputs.append(x)
        return v

    def scalar(self, value, dt) -> Var:
        words_for_scalar(value, dt)  # range check, as the eager op
        self.inputs.append((value, dt))
        return Var(self, len(self.inputs) - 1, dt, ())

    def node(self, kind, name, dt, odt, args, shape) -> Var:
        self.nodes.append((kind, name, dt, odt, tuple(a.ref for a in args)))
        return Var(self, ("n", len(self.nodes) - 1), odt, shape)

    def cast(self, v: Var, dt) -> Var:
        if v.dtype == dt:
            return v
        return self.node("c", "astype", v.dtype, dt, (v,), v.shape)

    def operand(self, x) -> Var | None:
        if isinstance(x, Var):
            if x.tr is not self:
                raise TypeError("a value of another fused function")
            return x
        if isinstance(x, WgpuArray):
            return self.array(x)
        return None

    def unary(self, name: str, x) -> Var:
        from . import _elementwise as E

        v = self.operand(x)
        rule = E.UNARY[name][0]
        dt = v.dtype
        if rule == "float" and D.kind(dt) != "f":
            if D.kind(dt) not in "iub":
                raise TypeError(f"{name}() does not support dtype {dt}")
            v = self.cast(v, E.default_float())
            dt = v.dtype
        if rule == "bool" and name == "logical_not" and dt != D.bool_:
            v = self.cast(v, D.bool_)
            dt = D.bool_
        if dt == D.float16 and name in E._F16_VIA_F32:  # as the eager op: in float32
            w = self.cast(v, D.float32)
            E._body(E.UNARY, name, D.float32)
            return self.cast(self.node("u", name, D.float32, D.float32, (w,), w.shape),
                             D.float16)
        E._body(E.UNARY, name, dt)
        out_dt = D.bool_ if rule == "bool" else dt
        return self.node("u", name, dt, out_dt, (v,), v.shape)

    def binary(self, name: str, x1, x2) -> Var:
        from . import _elementwise as E

        rule = E.BINARY[name][0]
        v1, v2 = self.operand(x1), self.operand(x2)
        if v1 is None or v2 is None:
            s = x1 if v1 is None else x2
            if isinstance(s, np.generic):
                s = s.item()
            arr = v2 if v1 is None else v1
            dt = E._scalar_dtype(s, arr.dtype, name)
        else:
            dt = D.result_type(v1.dtype, v2.dtype)
        if rule == "float" and D.kind(dt) != "f":
            dt = E.default_float()
        elif rule == "logical":
            dt = D.bool_
        E.check_dtype(dt)
        if (name == "pow" and v2 is None and D.kind(dt) == "f" and type(s) in (int, float)
                and s == 2):
            return self.unary("square", self.cast(v1, dt))  # as the eager x ** 2
        E._body(E.BINARY, name, dt)
        out_dt = D.bool_ if rule in ("bool", "logical") else dt
        v1 = self.scalar(s, dt) if v1 is None else self.cast(v1, dt)
        v2 = self.scalar(s, dt) if v2 is None else self.cast(v2, dt)
        shape = broadcast_shapes(v1.shape, v2.shape)
        return self.node("b", name, dt, out_dt, (v1, v2), shape)

    def where(self, cond, x1, x2) -> Var:
        from . import _elementwise as E

        c = self.cast(self.operand(cond), D.bool_)
        v1, v2 = self.operand(x1), self.operand(x2)
        if v1 is not None and v2 is not None:
            dt = D.result_type(v1.dtype, v2.dtype)
        else:
            arr = v1 if v1 is not None else v2
            if arr is None:
                raise TypeError("where() needs at least one array among x1 and x2")
            dt = E._scalar_dtype(x2 if v2 is None else x1, arr.dtype, "where")
        v1 = self.scalar(x1, dt) if v1 is None else self.cast(v1, dt)
        v2 = self.scalar(x2, dt) if v2 is None else self.cast(v2, dt)
        shape = broadcast_shapes(c.shape, v1.shape, v2.shape)
        return self.node("w", "where", dt, dt, (c, v1, v2), shape)

    def program(self, outs: list) -> tuple:
        """Prune to what ``outs`` need; (inputs, nodes, outputs) with refs renumbered."""
        nodes = self.nodes
        need_in: set[int] = set()
        need_n: set[int] = set()
        stack = [o.ref for o in outs]
        while stack:
            r = stack.pop()
            if isinstance(r, tuple):
                j = r[1]
                if j not in need_n:
                    need_n.add(j)
                    stack.extend(nodes[j][4])
            else:
                need_in.add(r)
        in_order = sorted(need_in)
        n_order = sorted(need_n)
        nin = len(in_order)
        remap = {r: k for k, r in enumerate(in_order)}
        remap.update({("n", j): nin + k for k, j in enumerate(n_order)})
        new_nodes = tuple((k, nm, dt, odt, tuple(remap[a] for a in args))
                          for k, nm, dt, odt, args in (nodes[j] for j in n_order))
        outputs = []
        for o in outs:
            r = remap[o.ref]
            if r < nin:  # an input returned as is: a copy
                new_nodes += (("c", "astype", o.dtype, o.dtype, (r,)),)
                r = nin + len(new_nodes) - 1
            outputs.append(r)
        return [self.inputs[r] for r in in_order], new_nodes, tuple(outputs)


_OPS_READY = []


class Fused:
    """A function of elementwise operations compiled into one kernel per call signature."""

    def __init__(self, fn) -> None:
        self.fn = fn
        self.fallbacks = 0
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        if not _OPS_READY:
            _install_operators()
            _OPS_READY.append(True)
        tr = Tracer()
        targs = [tr.array(a) if isinstance(a, WgpuArray) else a for a in args]
        tkw = {k: tr.array(a) if isinstance(a, WgpuArray) else a for k, a in kwargs.items()}
        try:
            res = self.fn(*targs, **tkw)
            single = not isinstance(res, (tuple, list))
            outs = [res] if single else list(res)
            vars_ = [o for o in outs if isinstance(o, Var)]
            if not vars_:
                raise TypeError("no traced output")
            shape = broadcast_shapes(*(v.shape for v in vars_))
            if any(v.shape != shape for v in vars_) or 0 in shape:
                raise TypeError("outputs of different shapes or empty")
            inputs, nodes, outputs = tr.program(vars_)
            arrs = run_flat(inputs, nodes, outputs, shape)
        except Exception:
            # not expressible as one kernel (or an error the eager call reports)
            self.fallbacks += 1
            return self.fn(*args, **kwargs)
        it = iter(arrs)
        outs = [next(it) if isinstance(o, Var) else o for o in outs]
        if single:
            return outs[0]
        return type(res)(outs)


def fuse(fn=None):
    """Compile a function of elementwise operations into one kernel (like ``cupy.fuse``).

    ``fuse(fn)`` (or ``@fuse``) returns a callable with ``fn``'s signature: wgpu arrays
    among its arguments (and arrays it captures) become inputs; operators and the
    library's elementwise functions (and ``where``/``clip``) applied to them are traced into
    one WGSL kernel (vec4 loads/stores when every array has 4-byte elements), compiled
    once per structure. Results equal the unfused ones (same dtype rules and WGSL
    bodies; a device compiler may still contract ``a * b + c`` into one fused
    multiply-add). ``fn`` may return one array or a tuple of arrays of the broadcast
    shape. A function that does anything else (reductions, indexing, branching on
    values) runs unfused, eagerly.
    """
    if fn is None:
        return fuse
    return Fused(fn)


_unused = (c_strides, Any)


# -- reductions above one binding ---------------------------------------------------------

_SUB = 1 << 16  # elements one workgroup folds in the first pass over long rows


def reduce_chunked(xr: WgpuArray, rows: int, K: int, out: WgpuArray, subs: dict) -> WgpuArray:
    """Row reduction (``wgsl/reduction/reduce.wgsl``) of a contiguous (rows, K) block larger
    than one binding: whole rows per window, or, for long rows, partial results of blocks of
    ``_SUB`` elements reduced again (``subs``: the template's substitutions)."""
    from ._array import empty

    rt = _runtime.get()
    dt, out_dt = xr._dtype, out._dtype
    isz = D.itemsize(dt)
    align = max(int(rt.limits.get("min-storage-buffer-offset-alignment", 256)), 16)
    cap = (rt.max_binding - 2 * align - 64) // isz
    k = _kernels.kernel("reduce", "rw", (dt, out_dt), **subs)
    buf = xr._st.buf

    def run(first, nrows, k_len, dst, dst_off):
        win = _window(buf, first, nrows * k_len, isz, align, rt)
        bg = _kernels.window_bind_group(k.layout, (win, (dst._st.buf, 0, dst._st.buf.cap)))
        small = k_len <= 64
        words = [nrows, k_len, first - win[1] // isz, dst_off, 1 if small else 0]
        REC.record(k, bg, [buf, dst._st.buf], words, -(-nrows // _WG) if small else nrows)

    if K <= cap:
        step = cap // K
        for r0 in range(0, rows, step):
            run(xr._offset + r0 * K, min(step, rows - r0), K, out, out._offset + r0)
        return out
    sub = min(_SUB, cap // 4)
    q, rem = divmod(K, sub)
    per = q + (rem > 0)
    part = empty((rows, per), out_dt)
    m = cap // sub
    for r in range(rows):
        base = xr._offset + r * K
        for j0 in range(0, q, m):
            run(base + j0 * sub, min(m, q - j0), sub, part, r * per + j0)
        if rem:
            run(base + q * sub, 1, rem, part, r * per + q)
    acc = subs["A"]
    k2 = _kernels.kernel("reduce", "rw", (out_dt, out_dt), **{
        **subs, "T": D.wgsl(out_dt), "DT": out_dt.name, "MAP": f"return {acc}(x);"})
    small = per <= 64
    REC.dispatch(k2, (part._st.buf, out._st.buf), [rows, per, 0, out._offset, 1 if small else 0],
                 -(-rows // _WG) if small else rows)
    return out
