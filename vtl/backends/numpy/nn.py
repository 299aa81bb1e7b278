"""Fused nn kernels of the NumPy backend (``relu_backward``, ``zero_where``,
``minmax_backward``, ``batch_norm``, and with numba ``layer_norm``, ``gelu`` and ``silu``;
the contracts are in ``vtl.backends.kernels``).

* ``relu_backward``: ``where(x <= 0, 0, g)`` (nan in ``x`` passes ``g``), equal to the
  portable expression bit for bit, computed through the bits: ``g`` AND a mask of all ones
  (``x > 0`` or nan) or all zeros (+0.0). NumPy's masked selections (``where``,
  ``copyto(where=)``, ``putmask``) branch per element and ran 3-7x slower on a mix of signs.
  From :data:`THRESHOLD` elements of C-contiguous arrays the passes are split over the
  kernels' thread pool (``vtl.backends._common.threads.parallel_for``; NumPy releases the
  GIL in ufuncs).
* ``zero_where``: ``where(mask, 0, g)`` for a boolean mask of ``g``'s shape, the same way
  (the gradient of ``maximum``/``minimum`` to the losing operand).
* ``minmax_backward``: the gradient of ``maximum(a, b)`` (``minimum``) to ``a`` when ``a``
  has the gradient's shape: ``g`` where ``a`` wins, ``g / 2`` on ties, 0 where it loses
  (the whole rule in one call; the halving pass runs only when there is a tie).
* ``batch_norm`` (:class:`NumpyBatchNorm`): training-mode batch normalisation in a few
  passes each way. The input is seen as ``(N, C, L)``; the statistics are sums over ``L``
  per image and channel (``np.add.reduce`` along the contiguous axis, ``np.vecdot`` for the
  sums of products: no temporary), then over the images in image order, so they do not
  depend on how the images are split over threads. Forward: the sums, ``d = x - mean``
  (kept for the backward), the variance, ``y = d * scale (+ shift)``. Backward:
  ``sum(g)`` and ``sum(g d)``, then ``dx = (g - c1) * scale - d * c2`` in place. From
  :data:`THRESHOLD` elements the passes are split by images over the pool.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._common import threads as _pool
from .._dtypes import kind as _dkind
from . import _compiled
from .backend import _count_nonzero

#: elements from which a pass is split over the pool: a call to the pool costs tens of
#: microseconds (its threads are woken, then waited for), more than a memory-bound pass
#: over fewer elements gains from a second core (measured on 2 cores: batch norm over 512K
#: float32 elements 0.34 ms pooled, 0.23 ms on the calling thread)
THRESHOLD = 1 << 20
#: the unsigned integers of each float dtype's width (its bits)
_BITS = {np.dtype(np.float32): np.dtype(np.uint32), np.dtype(np.float64): np.dtype(np.uint64)}
#: a 0-d 1 of each of those (a Python int operand costs NumPy a scalar conversion per call)
_ONE = {b: np.ones((), b) for b in _BITS.values()}
#: a 0-d zero of each float dtype, by its bits' dtype
_ZERO = {b: np.zeros((), f) for f, b in _BITS.items()}


def _zeroed(mask: Any, g: Any, out: Any, bits: Any) -> None:
    """``out = where(mask, 0, g)`` through the bits of ``g``."""
    m = mask.astype(bits)
    np.subtract(m, _ONE[bits], out=m)  # mask: 0; otherwise all ones
    np.bitwise_and(g.view(bits), m, out=out.view(bits))


def _zeroed_copy(mask: Any, g: Any, bits: Any) -> Any:
    """``where(mask, 0, g)`` through the bits of ``g``, written into the mask's integer copy
    (below :data:`THRESHOLD` elements: one pass and one array fewer than :func:`_select`)."""
    m = mask.astype(bits)
    np.subtract(m, _ONE[bits], out=m)
    np.bitwise_and(g.view(bits), m, out=m)
    return m.view(g.dtype)


def _zero_masked(mask: Any, g: Any, bits: Any) -> Any:
    """``where(mask, 0, g)`` for a boolean mask of ``g``'s shape: in one pass below
    :data:`THRESHOLD` elements, else over the pool."""
    if g.size < THRESHOLD:
        return _zeroed_copy(mask, g, bits)
    return _select(lambda m, g, out: _zeroed(m, g, out, bits), mask, g)


def _select(fn: Any, a: Any, g: Any) -> Any:
    """A new array ``out`` from ``fn(a, g, out)`` over the same-shaped ``a`` and ``g`` (of at
    least :data:`THRESHOLD` elements), split over the pool when both are C-contiguous."""
    out = np.empty_like(g)  # C-contiguous when g is
    threads = _pool.pass_threads(g.size, THRESHOLD)
    if threads <= 1 or not (a.flags.c_contiguous and g.flags.c_contiguous):
        fn(a, g, out)
        return out
    af, gf, of = a.reshape(-1), g.reshape(-1), out.reshape(-1)
    _pool.parallel_for(lambda i, j: fn(af[i:j], gf[i:j], of[i:j]), af.size, threads)
    return out


def _compiled_mask(a: Any, g: Any) -> bool:
    """Whether the compiled one-pass masks (``_mask_kernels``) take C-contiguous ``a`` and
    ``g`` (with at least one element)."""
    return a.flags.c_contiguous and g.flags.c_contiguous and g.size > 0 \
        and _compiled.available()


def _compiled_select(kern: Any, a: Any, g: Any) -> Any:
    """A new array from the compiled ``kern(a, g, i, j, out)`` over the flat arrays, split
    over the pool from :data:`THRESHOLD` elements."""
    out = np.empty_like(g)
    af, gf, of = a.reshape(-1), g.reshape(-1), out.reshape(-1)
    _split_images(lambda i, j: kern(af, gf, i, j, of), af.size, af.size)
    return out


class NumpyGelu:
    """``kernel("gelu")`` with numba (the ``vtl[cpu]`` extra): the exact form
    (``approximate='none'``) of float32 and float64 arrays, each way one compiled pass in
    float64 through the C library's ``erfc``, rounded once (``_activation_kernels``), split
    over the pool from :data:`THRESHOLD` elements. The tanh form is declined (NumPy's
    vectorized ``tanh`` is the faster path)."""

    def supports(self, dtype: Any) -> bool:
        return dtype in _FLOATS and _compiled.available()

    def forward(self, x: Any, approximate: str) -> Any | None:
        return _activation_pass("gelu_forward", x) if approximate == "none" else None

    def backward(self, x: Any, g: Any, approximate: str) -> Any | None:
        return _activation_pass("gelu_backward", x, g) if approximate == "none" else None


class NumpySilu:
    """``kernel("silu")`` with numba (the ``vtl[cpu]`` extra): float32 and float64, each
    way one compiled pass in float64, rounded once (``_activation_kernels``), split over
    the pool from :data:`THRESHOLD` elements."""

    def supports(self, dtype: Any) -> bool:
        return dtype in _FLOATS and _compiled.available()

    def forward(self, x: Any) -> Any | None:
        return _activation_pass("silu_forward", x)

    def backward(self, x: Any, g: Any) -> Any | None:
        return _activation_pass("silu_backward", x, g)


#: elements of a slab of rows that softmax's passes run over while it stays in cache
_SOFTMAX_SLAB = 1 << 18


def _row_max(x: Any) -> Any:
    """The maxima of ``x``'s last-axis rows (kept as an axis), 0 where a maximum is not
    finite: the shift that keeps a row's ``exp`` in range, as the portable softmax takes."""
    m = np.max(x, axis=-1, keepdims=True)
    if not np.isfinite(m).all():
        m = np.where(np.isfinite(m), m, 0.0).astype(x.dtype)
    return m


class NumpyCrossEntropy:
    """``kernel("cross_entropy")`` in NumPy for float32/float64 ``(M, C)`` logits and
    integer targets: the portable path's formulas (``log_softmax``, the picked entry, the
    reduction) on raw arrays in a few NumPy calls, without the graph nodes and temporaries
    of the dozen array-API ops the portable path records (130 -> about 20 us for a small
    batch). The forward computes every loss by the portable path's operations, in its
    order; the gradient is ``softmax(x) - onehot(t)`` scaled, as on the GPU backends."""

    def supports(self, x: Any, t: Any) -> bool:
        return type(x) is np.ndarray and type(t) is np.ndarray and x.ndim == 2 \
            and x.shape[1] > 0 and x.dtype in _FLOATS and t.ndim == 1 \
            and t.shape[0] == x.shape[0] and t.dtype.kind in "iu"

    def targets_valid(self, t: Any, c: int, ignore_index: int) -> bool:
        if t.size == 0 or (t.min() >= 0 and t.max() < c):
            return True
        return bool(np.all((t == ignore_index) | ((t >= 0) & (t < c))))

    def fwd(self, x: Any, t: Any, reduction: str, ignore_index: int) -> tuple[Any, Any]:
        with np.errstate(all="ignore"):  # inf/nan logits, an all-ignored mean: as portable
            m = _row_max(x)
            s = np.exp(x - m).sum(axis=1)
            ignored = t == ignore_index
            ts = np.where(ignored, 0, t)
            lp = (x[np.arange(x.shape[0]), ts] - m[:, 0]) - np.log(s)
            w = np.logical_not(ignored).astype(x.dtype)
            loss = np.where(ignored, x.dtype.type(0), -(lp * w))
            if reduction == "mean":
                loss = np.asarray(loss.sum() / w.sum())
            elif reduction == "sum":
                loss = np.asarray(loss.sum())
        return loss, (m, s)

    def grad(self, x: Any, t: Any, saved: Any, g: Any, reduction: str,
             ignore_index: int) -> Any:
        m, s = saved
        with np.errstate(all="ignore"):
            p = np.exp(x - m)
            p /= s[:, None]
            ignored = t == ignore_index
            p[np.arange(x.shape[0]), np.where(ignored, 0, t)] -= 1
            w = np.logical_not(ignored).astype(x.dtype)
            if reduction == "mean":
                w = w / w.sum()
            p *= (np.asarray(g, dtype=x.dtype) * w)[:, None]
            p[ignored] = 0
        return p


class NumpySoftmax:
    """``kernel("softmax")`` in NumPy (no numba: NumPy's vectorized ``exp`` is several times
    faster than a compiled loop's): the portable formulas, in place, over slabs of rows
    that stay in cache while their passes run (one trip through memory instead of six),
    the slabs side by side on the pool from :data:`THRESHOLD` elements. Every element is
    computed by the operations of the portable path, in its order: the same bits."""

    def supports(self, dtype: Any) -> bool:
        return dtype in _FLOATS

    @staticmethod
    def _rows(fn: Any, *arrays: Any) -> Any | None:
        """A new array from ``fn(rows..., out)`` over slabs of the last-axis rows of
        ``arrays`` (of one shape and float dtype); ``None`` for other operands."""
        x = arrays[0]
        if any(type(a) is not np.ndarray or a.dtype != x.dtype or a.shape != x.shape
               for a in arrays) or x.dtype not in _FLOATS or x.ndim == 0 or x.size == 0:
            return None
        n = x.shape[-1]
        rows = [np.ascontiguousarray(a).reshape(-1, n) for a in arrays]
        out = np.empty(x.shape, dtype=x.dtype)
        o2 = out.reshape(-1, n)
        m = o2.shape[0]
        step = max(1, _SOFTMAX_SLAB // n)
        starts = list(range(0, m, step))

        def run(i: int, j: int) -> None:
            for a in starts[i:j]:
                fn(*[r[a:a + step] for r in rows], o2[a:a + step])

        _split_images(run, len(starts), x.size)
        return out

    @staticmethod
    def _forward(x: Any, out: Any, log: bool) -> None:
        np.subtract(x, _row_max(x), out=out)  # z
        if log:
            e = np.exp(out)
            out -= np.log(np.sum(e, axis=-1, keepdims=True))
        else:
            np.exp(out, out=out)
            out /= np.sum(out, axis=-1, keepdims=True)

    @staticmethod
    def _backward(y: Any, g: Any, out: Any, log: bool) -> None:
        if log:  # g - exp(y) * sum(g)
            np.exp(y, out=out)
            out *= np.sum(g, axis=-1, keepdims=True)
            np.subtract(g, out, out=out)
        else:  # y * (g - sum(g * y))
            np.multiply(g, y, out=out)
            t = np.sum(out, axis=-1, keepdims=True)
            np.subtract(g, t, out=out)
            out *= y

    def forward(self, x: Any, log: bool) -> Any | None:
        return self._rows(lambda xr, o: self._forward(xr, o, log), x)

    def backward(self, y: Any, g: Any, log: bool) -> Any | None:
        return self._rows(lambda yr, gr, o: self._backward(yr, gr, o, log), y, g)


class NumpySpecial:
    """``kernel("special")`` with numba (the ``vtl[cpu]`` extra): ``erf`` and ``erfc`` of
    float32 and float64 arrays and their gradients, one compiled pass each in float64
    through the C library's functions, rounded once (``_activation_kernels``); ``erfinv``
    is left to the portable code."""

    _NAMES = frozenset({"erf", "erfc"})

    def supports(self, name: str, dtype: Any) -> bool:
        return name in self._NAMES and dtype in _FLOATS and _compiled.available()

    def __call__(self, name: str, x: Any) -> Any | None:
        return _activation_pass(f"{name}_forward", x) if name in self._NAMES else None

    def grad(self, name: str, x: Any, g: Any) -> Any | None:
        return _activation_pass(f"{name}_backward", x, g) if name in self._NAMES else None


def _activation_pass(name: str, x: Any, g: Any = None) -> Any | None:
    """A new array of ``x``'s shape from the compiled ``_activation_kernels.<name>`` over
    the flat ``x`` (and ``g``, a backward), split over the pool from :data:`THRESHOLD`
    elements; ``None`` without numba, or for operands other than same-shape float32 or
    float64 NumPy arrays."""
    arrays = (x,) if g is None else (x, g)
    if g is not None and (getattr(g, "shape", None) != x.shape
                          or getattr(g, "dtype", None) != x.dtype):
        return None
    if not _compiled.available() or any(
            type(a) is not np.ndarray or a.dtype not in _FLOATS for a in arrays):
        return None
    from . import _activation_kernels

    kern = getattr(_activation_kernels, name)
    flat = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
    out = np.empty(x.shape, dtype=x.dtype)
    of = out.reshape(-1)
    n = x.size
    _split_images(lambda i, j: kern(*flat, i, j, of), n, n)
    return out


def relu(x: Any) -> Any:
    """``maximum(x, 0)`` split over the pool for C-contiguous floating arrays of at least
    :data:`THRESHOLD` elements (``None`` otherwise: the caller's one NumPy call serves)."""
    if type(x) is not np.ndarray or x.size < THRESHOLD or not x.flags.c_contiguous \
            or _dkind(x.dtype) != "f":
        return None
    threads = _pool.pass_threads(x.size, THRESHOLD)
    if threads <= 1:
        return None
    out = np.empty_like(x)
    xf, of = x.reshape(-1), out.reshape(-1)
    _pool.parallel_for(lambda i, j: np.maximum(xf[i:j], 0, out=of[i:j]), xf.size, threads)
    return out


def relu_backward(x: Any, g: Any) -> Any:
    if type(x) is not np.ndarray or type(g) is not np.ndarray or x.shape != g.shape \
            or x.dtype != g.dtype:
        return None
    bits = _BITS.get(x.dtype)
    if bits is None:
        return None
    if _compiled_mask(x, g):
        from ._mask_kernels import relu_grad

        return _compiled_select(relu_grad, x, g)
    if x.size < THRESHOLD:
        return _zeroed_copy(np.asarray(np.less_equal(x, 0)), g, bits)
    return _select(lambda x, g, out: _zeroed(np.less_equal(x, 0), g, out, bits), x, g)


def zero_where(mask: Any, g: Any) -> Any:
    """``where(mask, 0, g)`` for a boolean ``mask`` of ``g``'s shape (``None``: not handled
    here, use ``where``)."""
    if type(mask) is not np.ndarray or type(g) is not np.ndarray or mask.shape != g.shape \
            or _dkind(mask.dtype) != "b":
        return None
    bits = _BITS.get(g.dtype)
    if bits is None:
        return None
    if _compiled_mask(mask, g):
        from ._mask_kernels import zero_where as kern

        return _compiled_select(kern, mask, g)
    return _zero_masked(mask, g, bits)


def minmax_backward(a: Any, b: Any, g: Any, greater_is_first: bool) -> Any:
    """The gradient of ``maximum(a, b)`` (``minimum`` when not ``greater_is_first``) to
    ``a``, for an ``a`` of ``g``'s shape and dtype and a ``b`` that broadcasts to it (an
    array or a Python number); ``None``: not handled here."""
    if type(a) is not np.ndarray or type(g) is not np.ndarray or a.shape != g.shape \
            or a.dtype != g.dtype or not a.ndim:  # (0-d: NumPy's comparisons give scalars)
        return None
    bits = _BITS.get(g.dtype)
    if bits is None:
        return None
    if b.__class__ is float and b == 0.0:  # maximum(h, 0.0): compare with a 0-d zero
        b = _ZERO[bits]  # (same results: -0.0 == 0.0; a Python float costs a conversion)
    tie = np.equal(a, b)
    if _count_nonzero(tie):
        g = np.where(tie, g * 0.5, g)
    lose = np.less(a, b) if greater_is_first else np.greater(a, b)
    return _zero_masked(lose, g, bits)


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _split_images(fn: Any, n: int, size: int) -> None:
    """``fn(i, j)`` over the images (or pieces of rows) ``[0, n)`` of ``size`` elements in
    all: on the pool from :data:`THRESHOLD` elements (as many threads as
    :func:`~vtl.backends._common.threads.pass_threads` gives), else on the calling thread."""
    threads = _pool.pass_threads(size, THRESHOLD)
    if threads > 1:
        _pool.parallel_for(fn, n, threads)
    else:
        fn(0, n)


class _CompiledSaved(NamedTuple):
    """What the compiled forward keeps for the backward: the ``(N, C, L)`` input and the
    float64 mean and reciprocal standard deviation."""

    x3: Any
    mean: Any
    rstd: Any
    shape: tuple[int, ...]


class NumpyBatchNorm:
    """The ``batch_norm`` kernel on NumPy arrays (float32, float64); with numba (the
    ``vtl[cpu]`` extra) two compiled passes each way, statistics summed in float64."""

    def supports(self, dtype: Any) -> bool:
        return dtype in _FLOATS

    def forward(self, x: Any, w: Any, b: Any, eps: float) -> tuple[Any, Any, Any, Any] | None:
        if type(x) is not np.ndarray or x.ndim < 2 or x.dtype not in _FLOATS:
            return None
        if _compiled.available() and x.size and all(
                p is None or p.dtype == x.dtype for p in (w, b)):
            return self._forward_compiled(x, w, b, eps)
        n, c = x.shape[:2]
        x3 = x.reshape(n, c, -1)
        count = x3.shape[0] * x3.shape[2]
        dt = x.dtype
        rows = np.empty((n, c), dtype=dt)
        d = np.empty(x3.shape, dtype=dt)
        y = np.empty(x3.shape, dtype=dt)

        def sums(i: int, j: int) -> None:
            np.add.reduce(x3[i:j], axis=2, out=rows[i:j])

        _split_images(sums, n, x.size)
        mean = np.add.reduce(rows, axis=0) / count
        m3 = mean[:, None]

        def center(i: int, j: int) -> None:
            np.subtract(x3[i:j], m3, out=d[i:j])
            np.vecdot(d[i:j], d[i:j], out=rows[i:j])

        _split_images(center, n, x.size)
        var = np.add.reduce(rows, axis=0) / count
        rstd = 1.0 / np.sqrt(var + dt.type(eps))
        scale = (rstd if w is None else rstd * w)[:, None]
        shift = None if b is None else b[:, None]

        def affine(i: int, j: int) -> None:
            np.multiply(d[i:j], scale, out=y[i:j])
            if shift is not None:
                np.add(y[i:j], shift, out=y[i:j])

        _split_images(affine, n, x.size)
        return y.reshape(x.shape), mean, var, (d, rstd, x.shape)

    def update_running(self, mean: Any, var: Any, running_mean: Any, running_var: Any,
                       momentum: float, count: int) -> bool:
        """``running = (1 - momentum) * running + momentum * batch`` (the variance unbiased
        by ``count / (count - 1)``) in place, in the running statistics' dtype as the
        portable update computes it, for ``(C,)`` float32/float64 arrays of one dtype;
        ``False`` (nothing done) otherwise."""
        arrays = (mean, var, running_mean, running_var)
        if not all(type(a) is np.ndarray and a.ndim == 1 for a in arrays):
            return False
        dt = mean.dtype
        if dt not in _FLOATS or any(a.dtype != dt or a.shape != mean.shape for a in arrays):
            return False
        keep = dt.type(1.0 - momentum)
        for run, batch, weight in ((running_mean, mean, momentum),
                                   (running_var, var, momentum * count / (count - 1))):
            new = np.multiply(batch, dt.type(weight))
            np.multiply(run, keep, out=run)
            np.add(run, new, out=run)
        return True

    def _forward_compiled(self, x: Any, w: Any, b: Any, eps: float
                          ) -> tuple[Any, Any, Any, Any]:
        """One pass for the statistics (sums shifted by each channel's first element,
        float64), one for ``y = x * scale + offset``."""
        from . import _batch_norm_kernels as kern

        n, c = x.shape[:2]
        x3 = np.ascontiguousarray(x).reshape(n, c, -1)
        count = n * x3.shape[2]
        s = np.empty((n, c), dtype=np.float64)
        q = np.empty((n, c), dtype=np.float64)
        _split_images(lambda i, j: kern.forward_sums(x3, i, j, s, q), n, x.size)
        s_sum, q_sum = np.add.reduce(s, axis=0), np.add.reduce(q, axis=0)
        mean = x3[0, :, 0].astype(np.float64) + s_sum / count
        var = np.maximum(q_sum - s_sum * s_sum / count, 0.0) / count
        rstd = 1.0 / np.sqrt(var + eps)
        scale = rstd if w is None else rstd * w
        offset = -mean * scale if b is None else b - mean * scale
        y3 = np.empty(x3.shape, dtype=x.dtype)
        sc, off = scale.astype(x.dtype), offset.astype(x.dtype)
        _split_images(lambda i, j: kern.affine(x3, i, j, sc, off, y3), n, x.size)
        return (y3.reshape(x.shape), mean.astype(x.dtype), var.astype(x.dtype),
                _CompiledSaved(x3, mean, rstd, x.shape))

    def _backward_compiled(self, saved: _CompiledSaved, w: Any, g: Any, need_x: bool,
                           need_w: bool, need_b: bool) -> tuple[Any, Any, Any]:
        """One pass for ``sum(g)`` and ``sum(g (x - mean))`` (float64), one for ``dx = g a
        + x b + e`` per channel."""
        from . import _batch_norm_kernels as kern

        x3, mean, rstd, shape = saved
        n, c = x3.shape[:2]
        dt = x3.dtype
        g3 = np.ascontiguousarray(g).reshape(x3.shape)
        count = n * x3.shape[2]
        sg_rows = np.empty((n, c), dtype=np.float64)
        sgd_rows = np.empty((n, c), dtype=np.float64)
        _split_images(lambda i, j: kern.backward_sums(x3, g3, mean, i, j, sg_rows, sgd_rows),
                      n, x3.size)
        sg = np.add.reduce(sg_rows, axis=0)
        sgd = np.add.reduce(sgd_rows, axis=0)
        dx = dw = db = None
        if need_x:
            scale = rstd if w is None else rstd * w
            c2 = scale * rstd * rstd * sgd / count
            a, bb, e = (v.astype(dt) for v in (scale, -c2, mean * c2 - scale * sg / count))
            dx3 = np.empty(x3.shape, dtype=dt)
            _split_images(lambda i, j: kern.input_grad(x3, g3, i, j, a, bb, e, dx3), n,
                          x3.size)
            dx = dx3.reshape(shape)
        if need_w:
            dw = (sgd * rstd).astype(dt)
        if need_b:
            db = sg.astype(dt)
        return dx, dw, db

    def backward(self, saved: Any, w: Any, g: Any, need_x: bool, need_w: bool,
                 need_b: bool) -> tuple[Any, Any, Any] | None:
        if isinstance(saved, _CompiledSaved):
            if type(g) is not np.ndarray or g.dtype != saved.x3.dtype:
                return None
            return self._backward_compiled(saved, w, g, need_x, need_w, need_b)
        d, rstd, shape = saved
        if type(g) is not np.ndarray or g.dtype != d.dtype:
            return None
        n, c = d.shape[:2]
        g3 = g.reshape(d.shape)
        count = d.shape[0] * d.shape[2]
        dt = d.dtype
        sg_rows = np.empty((n, c), dtype=dt)
        sgd_rows = np.empty((n, c), dtype=dt)

        def sums(i: int, j: int) -> None:
            np.add.reduce(g3[i:j], axis=2, out=sg_rows[i:j])
            np.vecdot(g3[i:j], d[i:j], out=sgd_rows[i:j])

        _split_images(sums, n, d.size)
        sg = np.add.reduce(sg_rows, axis=0)
        sgd = np.add.reduce(sgd_rows, axis=0)
        dx = dw = db = None
        if need_x:
            scale = rstd if w is None else rstd * w
            c1 = (sg / count)[:, None]
            c2 = (scale * rstd * rstd * sgd / count)[:, None]
            s3 = scale[:, None]
            dx = np.empty(d.shape, dtype=dt)

            def grad(i: int, j: int) -> None:
                out = dx[i:j]
                tmp = _pool.scratch("bn_tmp", out.shape, dt)
                np.subtract(g3[i:j], c1, out=out)
                np.multiply(out, s3, out=out)
                np.multiply(d[i:j], c2, out=tmp)
                np.subtract(out, tmp, out=out)

            _split_images(grad, n, d.size)
            dx = dx.reshape(shape)
        if need_w:
            dw = sgd * rstd
        if need_b:
            db = sg
        return dx, dw, db


#: rows of one piece of a layer norm: each piece's sums for the weight's and bias's
#: gradients are added in piece order (the same bits on any thread count)
LN_ROWS = 256


class NumpyLayerNorm:
    """``kernel("layer_norm")`` with numba (the ``vtl[cpu]`` extra): float32 and float64
    rows, statistics in float64, one compiled pass of two loops over each row each way,
    pieces of :data:`LN_ROWS` rows spread over the kernels' thread pool; with ``rms=True``
    rms_norm's rows (no centring)."""

    #: forward and backward take ``rms=True`` (``LayerNormKernel``)
    takes_rms = True

    def supports(self, dtype: Any) -> bool:
        return dtype in _FLOATS and _compiled.available()

    def forward(self, x: Any, w: Any, b: Any, eps: float, rms: bool = False
                ) -> tuple[Any, Any, Any] | None:
        if type(x) is not np.ndarray or x.ndim != 2 or x.dtype not in _FLOATS or \
                any(p is not None and p.dtype != x.dtype for p in (w, b)):
            return None
        from ._batch_norm_kernels import layer_norm_forward

        m, n = x.shape
        xc = np.ascontiguousarray(x)
        y = np.empty((m, n), dtype=x.dtype)
        mean = np.empty((m, 1), dtype=np.float64)
        rstd = np.empty((m, 1), dtype=np.float64)
        wd = x[0] if w is None else np.ascontiguousarray(w)
        bd = x[0] if b is None else np.ascontiguousarray(b)
        pieces = -(-m // LN_ROWS)
        _split_images(lambda i, j: layer_norm_forward(
            xc, wd, bd, w is not None, b is not None, eps, i * LN_ROWS, min(m, j * LN_ROWS),
            y, mean, rstd, not rms), pieces, x.size)
        return y, mean.astype(x.dtype), rstd.astype(x.dtype)

    def backward(self, x: Any, w: Any, mean: Any, rstd: Any, g: Any, need_x: bool,
                 need_w: bool, need_b: bool, rms: bool = False
                 ) -> tuple[Any, Any, Any] | None:
        if type(x) is not np.ndarray or type(g) is not np.ndarray or x.ndim != 2 or \
                g.dtype != x.dtype or x.dtype not in _FLOATS:
            return None
        from ._batch_norm_kernels import layer_norm_backward

        m, n = x.shape
        xc, gc = np.ascontiguousarray(x), np.ascontiguousarray(np.broadcast_to(g, x.shape))
        mc, rc = np.ascontiguousarray(mean), np.ascontiguousarray(rstd)
        wd = x[0] if w is None else np.ascontiguousarray(w)
        # (a writable stand-in where no dx is wanted: the kernel's stores must type-check)
        dx = np.empty((m, n) if need_x else (1, 1), dtype=x.dtype)
        pieces = -(-m // LN_ROWS)
        wb = need_w or need_b
        parts = np.zeros((pieces if wb else 1, 2, n), dtype=np.float64)

        def run(i: int, j: int) -> None:
            for p in range(i, j):
                layer_norm_backward(xc, wd, w is not None, mc, rc, gc, need_x, wb,
                                    p * LN_ROWS, min(m, (p + 1) * LN_ROWS), dx,
                                    parts[p if wb else 0, 0], parts[p if wb else 0, 1],
                                    not rms)

        _split_images(run, pieces, x.size)
        sums = np.add.reduce(parts, axis=0) if wb else None
        return (dx if need_x else None,
                sums[0].astype(x.dtype) if need_w else None,
                sums[1].astype(x.dtype) if need_b else None)

