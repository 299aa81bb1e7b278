"""``vtl.fft``: the Fourier transform extension of the array API standard (2024.12).

The forward transforms call the backend's ``xp.fft``; results keep the input's
precision (``float32``/``complex64`` in, ``complex64``/``float32`` out).

Gradients follow PyTorch's convention for complex tensors (the conjugate
Wirtinger derivative): for a transform that is linear, ``y = A x``, the
vector-Jacobian product is ``A^H g``. The adjoint of a transform is the
opposite transform with the dual normalisation (``'backward'`` <->
``'forward'``, ``'ortho'`` <-> ``'ortho'``); zero-padding and trimming by
``n=``/``s=`` are undone on the gradient (trimmed entries get zero gradient).
The real-input/real-output transforms weight the bins that stand for two
conjugate-symmetric frequencies: ``irfft``/``hfft`` ignore the imaginary part
of the zero-frequency (and, for even ``n``, the Nyquist) bin, as NumPy does,
so those parts get zero gradient. Real inputs get real gradients.

Choices where the standard leaves freedom: ``fft``/``ifft``/``fftn``/
``ifftn``/``irfft``/``irfftn``/``hfft`` also accept real floating-point input
(treated as complex with zero imaginary part); integer and boolean inputs are
a ``TypeError`` (cast with ``astype`` first); ``rfft``/``rfftn``/``ihfft``
reject complex input with a ``TypeError``; repeated axes are a ``ValueError``;
``norm=None`` means ``'backward'``; in the n-dimensional transforms ``s=`` without
``axes=`` transforms the last ``len(s)`` axes, as NumPy, PyTorch and array-api-strict do
(the standard asks callers to give both). In ``irfftn``, ``s[-1] == -1`` uses all
``M`` input bins of the last axis, as the standard says, so the output has the
default size ``2*(M-1)`` there (NumPy gives ``M`` points and trims the input).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ._ops._core import needs_grad, new, record, sum_to, tensor_arg
from ._ops.dtype_functions import astype
from ._ops.elementwise import add, conj, multiply, real
from ._tensor import Tensor
from .backends import _dtypes, resolve_device
from .backends._dtypes import kind as _dkind

__all__ = [
    "fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
    "fftfreq", "rfftfreq", "fftshift", "ifftshift",
]

Norm = Literal["backward", "ortho", "forward"]

_DUAL = {"backward": "forward", "ortho": "ortho", "forward": "backward"}
_COMPLEX_OF = {
    _dtypes.float32: _dtypes.complex64, _dtypes.float64: _dtypes.complex128,
    _dtypes.complex64: _dtypes.complex64, _dtypes.complex128: _dtypes.complex128,
}
_REAL_OF = {
    _dtypes.float32: _dtypes.float32, _dtypes.float64: _dtypes.float64,
    _dtypes.complex64: _dtypes.float32, _dtypes.complex128: _dtypes.float64,
}


# -- argument checks ---------------------------------------------------------------
def _input(x: Any, fname: str, real_only: bool = False) -> Tensor:
    x = tensor_arg(x, fname)
    kind = _dkind(x._data.dtype)
    if real_only:
        if kind != "f":
            raise TypeError(
                f"{fname}() needs a real floating-point tensor (float32 or float64), "
                f"got dtype {x.dtype}"
                + ("; take vtl.real(x) or use fft()" if kind == "c" else
                   "; cast it with vtl.astype(x, vtl.float32)")
            )
    elif kind not in "fc":
        raise TypeError(
            f"{fname}() needs a floating-point or complex tensor, got dtype {x.dtype}; "
            "cast it with vtl.astype(x, vtl.complex64) first"
        )
    if x.ndim == 0:
        raise IndexError(f"{fname}() needs a tensor with at least one dimension, got a 0-D tensor")
    return x


def _norm(norm: Any, fname: str) -> str:
    if norm is None:
        return "backward"
    if norm not in _DUAL:
        raise ValueError(
            f"{fname}(): norm must be 'backward', 'ortho' or 'forward', got {norm!r}"
        )
    return norm


def _int(v: Any, fname: str, what: str) -> int:
    if isinstance(v, bool):
        raise TypeError(f"{fname}(): {what} must be an integer, got bool")
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{fname}(): {what} must be an integer, got {type(v).__name__}") from None


def _axis(axis: Any, ndim: int, fname: str) -> int:
    a = _int(axis, fname, "axis")
    if not -ndim <= a < ndim:
        raise IndexError(f"{fname}(): axis {a} is out of bounds for a {ndim}-D tensor")
    return a % ndim


def _points(n: int, fname: str, what: str) -> int:
    if n < 1:
        raise ValueError(f"{fname}(): invalid number of data points {n}; {what}")
    return n


def _n(n: Any, fname: str) -> int | None:
    if n is None:
        return None
    n = _int(n, fname, "n")
    return _points(n, fname, "n must be a positive integer")


def _axes_list(axes: Any, ndim: int, fname: str) -> tuple[int, ...]:
    if isinstance(axes, (int, np.integer)) and not isinstance(axes, bool):
        axes = (axes,)
    try:
        axes = tuple(axes)
    except TypeError:
        raise TypeError(
            f"{fname}(): axes must be a sequence of integers, got {type(axes).__name__}"
        ) from None
    out = tuple(_axis(a, ndim, fname) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"{fname}(): repeated axis in axes={axes}")
    return out


def _axes_s(x: Tensor, s: Any, axes: Any, fname: str, c2r: bool = False) -> tuple:
    """``(axes, sizes, s_arg, axes_arg)``: the resolved axes and an explicit size for
    each (the output size for ``c2r`` transforms, where the last axis's default is
    ``2*(M-1)``), and the ``s=``/``axes=`` arguments for the backend (``None`` where the
    caller gave ``None``: NumPy is faster that way)."""
    given_s, given_axes = s is not None, axes is not None
    axes, sizes = _resolve_axes_s(x, s, axes, fname, c2r)
    return axes, sizes, sizes if given_s else None, axes if given_axes or given_s else None


def _resolve_axes_s(x: Tensor, s: Any, axes: Any, fname: str,
                    c2r: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    ndim = x.ndim
    if s is not None:
        try:
            s = tuple(s)
        except TypeError:
            raise TypeError(
                f"{fname}(): s must be a sequence of integers, got {type(s).__name__}"
            ) from None
    if axes is None:
        if s is None:
            axes = _ALL_AXES[ndim] if ndim < 8 else tuple(range(ndim))
        elif len(s) > ndim:
            raise ValueError(
                f"{fname}(): s={s} has {len(s)} entries but the input has only {ndim} axes"
            )
        else:  # the last len(s) axes, as NumPy
            axes = tuple(range(ndim - len(s), ndim))
    else:
        axes = _axes_list(axes, ndim, fname)
    shape = x.shape
    if s is None:
        sizes = [shape[a] for a in axes]
        if c2r and axes:
            sizes[-1] = 2 * (sizes[-1] - 1)
        if not sizes or min(sizes) >= 1:
            return axes, tuple(sizes)
    else:
        if len(s) != len(axes):
            raise ValueError(
                f"{fname}(): s and axes must have the same length, got s={s} and axes={axes}"
            )
        sizes = []
        for i, (v, a) in enumerate(zip(s, axes, strict=True)):
            v = _int(v, fname, "each entry of s")
            if v == -1:
                v = 2 * (shape[a] - 1) if c2r and i == len(axes) - 1 else shape[a]
            elif v < 1:
                raise ValueError(
                    f"{fname}(): entries of s must be positive (or -1 for the input size), "
                    f"got s={s}"
                )
            sizes.append(v)
    for i, (v, a) in enumerate(zip(sizes, axes, strict=True)):
        if c2r and i == len(axes) - 1 and (s is None or s[i] == -1):
            _points(v, fname, f"the default output size 2*(M-1) needs M >= 2 along axis {a}, "
                    f"got M = {shape[a]}; pass s=")
        _points(v, fname, f"axis {a} of the input has size {shape[a]}")
    return axes, tuple(sizes)


_ALL_AXES = [tuple(range(d)) for d in range(8)]


def _fix(out: Any, dtype: Any, xp: Any) -> Any:
    """Cast a backend result that lost the input's precision."""
    return out if out.dtype == dtype else xp.astype(out, dtype)


# -- differentiable helpers used by the VJP rules ---------------------------------------
def _resize(x: Tensor, sizes: dict[int, int]) -> Tensor:
    """Trim or zero-pad ``x`` at the end of each axis ``a`` to ``sizes[a]`` (differentiable;
    its VJP resizes back)."""
    old = {a: x.shape[a] for a in sizes}
    if all(old[a] == n for a, n in sizes.items()):
        return x
    dev = x._device
    xp = dev.xp
    data = x._data
    for a, n in sizes.items():
        m = data.shape[a]
        if n < m:
            data = data[(slice(None),) * a + (slice(0, n),)]
        elif n > m:
            shape = list(data.shape)
            shape[a] = n - m
            pad = xp.zeros(tuple(shape), dtype=data.dtype,
                           device=dev.backend.native_device(dev.index))
            data = xp.concat([data, pad], axis=a)
    if needs_grad(x):
        return record(data, dev, "FftResizeBackward", (x,), lambda g, _: _resize(g, old))
    return new(data, dev)


def _weight(values: np.ndarray, axis: int, ndim: int, like: Tensor) -> Tensor:
    """A real constant tensor holding ``values`` along ``axis`` (broadcastable), on
    ``like``'s device with ``like``'s real precision."""
    dev = like._device
    shape = [1] * ndim
    shape[axis] = values.shape[0]
    host = values.astype(_REAL_OF[like._data.dtype]).reshape(shape)
    return new(dev.backend.from_host(host, dev.index), dev)


def _r2c_adjoint(g: Tensor, axes: tuple[int, ...], s: tuple[int, ...],
                 in_shape: tuple[int, ...], norm: str) -> Tensor:
    """``A^H g`` (real part) for ``A = rfftn(., s, axes, norm)`` on an input of
    ``in_shape``; ``g`` has the rfftn output's shape."""
    dual = _DUAL[norm]
    last, n = axes[-1], s[-1]
    if len(axes) > 1:
        g = ifftn(g, axes=axes[:-1], norm=dual)
    k = n // 2 + 1
    # irfft of h equals Re(F^H [g, 0]) when the bins that stand for two conjugate
    # frequencies are halved and DC/Nyquist are made real (irfft would ignore their
    # imaginary parts).
    wc = np.full(k, 0.5)
    wr = np.zeros(k)
    wc[0], wr[0] = 0.0, 1.0
    if n % 2 == 0:
        wc[-1], wr[-1] = 0.0, 1.0
    nd = g.ndim
    h = add(multiply(g, _weight(wc, last, nd, g)), multiply(real(g), _weight(wr, last, nd, g)))
    out = irfft(h, n=n, axis=last, norm=dual)
    return _resize(out, {a: in_shape[a] for a in axes})


def _c2r_adjoint(g: Tensor, axes: tuple[int, ...], s: tuple[int, ...],
                 in_shape: tuple[int, ...], norm: str) -> Tensor:
    """``A^H g`` for ``A = irfftn(., s, axes, norm)`` (real ``g`` of the output's shape)."""
    out = rfftn(g, axes=axes, norm=_DUAL[norm])
    n = s[-1]
    w = np.full(n // 2 + 1, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    out = multiply(out, _weight(w, axes[-1], out.ndim, out))
    return _resize(out, {a: in_shape[a] for a in axes})


# -- one-dimensional transforms --------------------------------------------------------
def _c2c(fname: str, x: Any, n: Any, axis: Any, norm: Any) -> Tensor:
    x = _input(x, fname)
    axis = _axis(axis, x.ndim, fname)
    n = _n(n, fname)
    norm = _norm(norm, fname)
    m = x.shape[axis]
    if n is None:
        _points(m, fname, f"axis {axis} of the input is empty")
    dev = x._device
    xp = dev.xp
    out = _fix(getattr(xp.fft, fname)(x._data, n=n, axis=axis, norm=norm),
               _COMPLEX_OF[x._data.dtype], xp)
    if needs_grad(x):
        adjoint = ifft if fname == "fft" else fft
        dual = _DUAL[norm]

        def vjp(g: Tensor, _: Any) -> Tensor:
            return sum_to(_resize(adjoint(g, axis=axis, norm=dual), {axis: m}), x)

        return record(out, dev, fname.capitalize() + "Backward", (x,), vjp)
    return new(out, dev)


def fft(x: Tensor, /, *, n: int | None = None, axis: int = -1,
        norm: Norm = "backward") -> Tensor:
    """One-dimensional discrete Fourier transform along ``axis`` (zero-padded or
    trimmed to ``n`` points). Real input is treated as complex."""
    return _c2c("fft", x, n, axis, norm)


def ifft(x: Tensor, /, *, n: int | None = None, axis: int = -1,
         norm: Norm = "backward") -> Tensor:
    """One-dimensional inverse discrete Fourier transform along ``axis``."""
    return _c2c("ifft", x, n, axis, norm)


def rfft(x: Tensor, /, *, n: int | None = None, axis: int = -1,
         norm: Norm = "backward") -> Tensor:
    """Discrete Fourier transform of real input: the ``n//2 + 1`` non-negative
    frequency bins along ``axis``."""
    x = _input(x, "rfft", real_only=True)
    axis = _axis(axis, x.ndim, "rfft")
    n = _n(n, "rfft")
    norm = _norm(norm, "rfft")
    if n is None:
        n = _points(x.shape[axis], "rfft", f"axis {axis} of the input is empty")
    dev = x._device
    xp = dev.xp
    out = _fix(xp.fft.rfft(x._data, n=n, axis=axis, norm=norm), _COMPLEX_OF[x._data.dtype], xp)
    if needs_grad(x):
        shape = x.shape

        def vjp(g: Tensor, _: Any) -> Tensor:
            return sum_to(_r2c_adjoint(g, (axis,), (n,), shape, norm), x)

        return record(out, dev, "RfftBackward", (x,), vjp)
    return new(out, dev)


def _c2r(fname: str, x: Any, n: Any, axis: Any, norm: Any) -> Tensor:
    x = _input(x, fname)
    axis = _axis(axis, x.ndim, fname)
    n = _n(n, fname)
    norm = _norm(norm, fname)
    if n is None:
        n = _points(2 * (x.shape[axis] - 1), fname,
                    f"the default n = 2*(M-1) needs M >= 2 along axis {axis}, "
                    f"got M = {x.shape[axis]}; pass n=")
    dev = x._device
    xp = dev.xp
    out = _fix(getattr(xp.fft, fname)(x._data, n=n, axis=axis, norm=norm),
               _REAL_OF[x._data.dtype], xp)
    if needs_grad(x):
        shape = x.shape
        if fname == "irfft":
            def vjp(g: Tensor, _: Any) -> Tensor:
                return sum_to(_c2r_adjoint(g, (axis,), (n,), shape, norm), x)
        else:  # hfft(x) = irfft(conj(x), norm=dual)
            def vjp(g: Tensor, _: Any) -> Tensor:
                return sum_to(conj(_c2r_adjoint(g, (axis,), (n,), shape, _DUAL[norm])), x)

        return record(out, dev, fname.capitalize() + "Backward", (x,), vjp)
    return new(out, dev)


def irfft(x: Tensor, /, *, n: int | None = None, axis: int = -1,
          norm: Norm = "backward") -> Tensor:
    """Inverse of :func:`rfft`: ``n`` real points (default ``2*(M-1)``) along ``axis``
    from the non-negative frequency bins (trimmed or zero-padded to ``n//2 + 1``)."""
    return _c2r("irfft", x, n, axis, norm)


def hfft(x: Tensor, /, *, n: int | None = None, axis: int = -1,
         norm: Norm = "backward") -> Tensor:
    """Discrete Fourier transform of a Hermitian-symmetric signal given by its first
    half: ``n`` real points (default ``2*(M-1)``) along ``axis``."""
    return _c2r("hfft", x, n, axis, norm)


def ihfft(x: Tensor, /, *, n: int | None = None, axis: int = -1,
          norm: Norm = "backward") -> Tensor:
    """Inverse of :func:`hfft` for real input: ``n//2 + 1`` complex bins along ``axis``."""
    x = _input(x, "ihfft", real_only=True)
    axis = _axis(axis, x.ndim, "ihfft")
    n = _n(n, "ihfft")
    norm = _norm(norm, "ihfft")
    if n is None:
        n = _points(x.shape[axis], "ihfft", f"axis {axis} of the input is empty")
    dev = x._device
    xp = dev.xp
    out = _fix(xp.fft.ihfft(x._data, n=n, axis=axis, norm=norm), _COMPLEX_OF[x._data.dtype], xp)
    if needs_grad(x):
        shape = x.shape

        def vjp(g: Tensor, _: Any) -> Tensor:  # ihfft(x) = conj(rfft(x, norm=dual))
            return sum_to(_r2c_adjoint(conj(g), (axis,), (n,), shape, _DUAL[norm]), x)

        return record(out, dev, "IhfftBackward", (x,), vjp)
    return new(out, dev)


# -- n-dimensional transforms -----------------------------------------------------------
def _c2c_nd(fname: str, x: Any, s: Any, axes: Any, norm: Any) -> Tensor:
    x = tensor_arg(x, fname)
    if _dkind(x._data.dtype) not in "fc":
        _input(x, fname)  # raises the TypeError
    norm = _norm(norm, fname)
    axes, s, s_in, ax_in = _axes_s(x, s, axes, fname)
    cdt = _COMPLEX_OF[x._data.dtype]
    if not axes:
        return astype(x, cdt)
    dev = x._device
    xp = dev.xp
    out = _fix(getattr(xp.fft, fname)(x._data, s=s_in, axes=ax_in, norm=norm), cdt, xp)
    if needs_grad(x):
        adjoint = ifftn if fname == "fftn" else fftn
        dual = _DUAL[norm]
        shape = x.shape

        def vjp(g: Tensor, _: Any) -> Tensor:
            gx = adjoint(g, axes=axes, norm=dual)
            return sum_to(_resize(gx, {a: shape[a] for a in axes}), x)

        return record(out, dev, fname.capitalize() + "Backward", (x,), vjp)
    return new(out, dev)


def fftn(x: Tensor, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: Norm = "backward") -> Tensor:
    """n-dimensional discrete Fourier transform over ``axes`` (all by default, the last
    ``len(s)`` when only ``s`` is given), each zero-padded or trimmed to ``s[i]`` points
    (``-1``: keep the input size)."""
    return _c2c_nd("fftn", x, s, axes, norm)


def ifftn(x: Tensor, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: Norm = "backward") -> Tensor:
    """n-dimensional inverse discrete Fourier transform over ``axes``."""
    return _c2c_nd("ifftn", x, s, axes, norm)


def rfftn(x: Tensor, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: Norm = "backward") -> Tensor:
    """n-dimensional discrete Fourier transform of real input; the last of ``axes``
    keeps ``s[-1]//2 + 1`` non-negative frequency bins."""
    x = _input(x, "rfftn", real_only=True)
    norm = _norm(norm, "rfftn")
    axes, s, s_in, ax_in = _axes_s(x, s, axes, "rfftn")
    if not axes:
        raise ValueError("rfftn() needs at least one axis to transform, got axes=()")
    dev = x._device
    xp = dev.xp
    out = _fix(xp.fft.rfftn(x._data, s=s_in, axes=ax_in, norm=norm), _COMPLEX_OF[x._data.dtype], xp)
    if needs_grad(x):
        shape = x.shape

        def vjp(g: Tensor, _: Any) -> Tensor:
            return sum_to(_r2c_adjoint(g, axes, s, shape, norm), x)

        return record(out, dev, "RfftnBackward", (x,), vjp)
    return new(out, dev)


def irfftn(x: Tensor, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: Norm = "backward") -> Tensor:
    """Inverse of :func:`rfftn`: real output with ``s[i]`` points on each of ``axes``
    (default: the input sizes, and ``2*(M-1)`` for the last axis)."""
    x = tensor_arg(x, "irfftn")
    if _dkind(x._data.dtype) not in "fc":
        _input(x, "irfftn")
    norm = _norm(norm, "irfftn")
    axes, s, s_in, ax_in = _axes_s(x, s, axes, "irfftn", c2r=True)
    if not axes:
        raise ValueError("irfftn() needs at least one axis to transform, got axes=()")
    dev = x._device
    xp = dev.xp
    out = _fix(xp.fft.irfftn(x._data, s=s_in, axes=ax_in, norm=norm), _REAL_OF[x._data.dtype], xp)
    if needs_grad(x):
        shape = x.shape

        def vjp(g: Tensor, _: Any) -> Tensor:
            return sum_to(_c2r_adjoint(g, axes, s, shape, norm), x)

        return record(out, dev, "IrfftnBackward", (x,), vjp)
    return new(out, dev)


# -- helper routines --------------------------------------------------------------------
def _freq(fname: str, n: Any, d: Any, dtype: Any, device: Any) -> Tensor:
    n = _int(n, fname, "n")
    if n < 1:
        raise ValueError(f"{fname}(): the window length n must be a positive integer, got {n}")
    if isinstance(d, bool) or not isinstance(d, (int, float, np.integer, np.floating)):
        raise TypeError(f"{fname}(): d must be a real number, got {type(d).__name__}")
    if d == 0:
        raise ValueError(f"{fname}(): the sample spacing d must be non-zero")
    dev = resolve_device(device)
    if dtype is None:
        dt = dev.backend.default_dtypes(dev.index)["real floating"]
    else:
        dt = _dtypes.to_dtype(dtype)
        if _dkind(dt) != "f":
            raise TypeError(f"{fname}(): dtype must be a real floating-point dtype, got {dt}")
        dev.backend.check_dtype(dt, dev.index)
    xp = dev.xp
    # Built from arange, as numpy.fft does (array_api_compat's fftfreq refuses non-CPU
    # devices): k / (d*n) with k = 0, 1, ..., then the negative frequencies.
    native = dev.backend.native_device(dev.index)
    if fname == "fftfreq":
        k = xp.concat([xp.arange(0, (n - 1) // 2 + 1, dtype=dt, device=native),
                       xp.arange(-(n // 2), 0, dtype=dt, device=native)])
    else:
        k = xp.arange(0, n // 2 + 1, dtype=dt, device=native)
    return new(xp.multiply(k, 1.0 / (n * float(d))), dev)


def fftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Tensor:
    """Sample frequencies ``[0, 1, ..., -1] / (d*n)`` of an ``n``-point transform
    (default real floating dtype, default device)."""
    return _freq("fftfreq", n, d, dtype, device)


def rfftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Tensor:
    """Sample frequencies ``[0, 1, ..., n//2] / (d*n)`` of the bins of :func:`rfft`."""
    return _freq("rfftfreq", n, d, dtype, device)


def _shift(fname: str, x: Any, axes: Any) -> Tensor:
    x = tensor_arg(x, fname)
    axes = tuple(range(x.ndim)) if axes is None else _axes_list(axes, x.ndim, fname)
    dev = x._device
    xp = dev.xp
    if axes:
        out = getattr(xp.fft, fname)(x._data, axes=axes)
    else:
        out = xp.asarray(x._data, copy=True)
    if needs_grad(x):
        inverse = ifftshift if fname == "fftshift" else fftshift

        def vjp(g: Tensor, _: Any) -> Tensor:
            return inverse(g, axes=axes) if axes else g

        return record(out, dev, fname.capitalize() + "Backward", (x,), vjp)
    return new(out, dev)


def fftshift(x: Tensor, /, *, axes: int | Sequence[int] | None = None) -> Tensor:
    """Move the zero-frequency bin to the centre along ``axes`` (all by default)."""
    return _shift("fftshift", x, axes)


def ifftshift(x: Tensor, /, *, axes: int | Sequence[int] | None = None) -> Tensor:
    """Inverse of :func:`fftshift` (they differ by one sample for odd lengths)."""
    return _shift("ifftshift", x, axes)
