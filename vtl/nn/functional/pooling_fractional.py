"""Fractional max pooling (Graham, "Fractional Max-Pooling", 2014), as PyTorch's
``fractional_max_pool2d``/``3d``.

Each ``(sample, channel)`` plane draws one number ``u`` in ``[0, 1)`` per spatial axis
(``_random_samples``, shape ``(N, C, 2)`` or ``(N, C, 3)``; drawn from ``vtl.random``
when not given). Along an axis of input size ``n``, output size ``o`` and pool size
``k`` the windows start at ``trunc((i + u) * a) - trunc(u * a)`` for ``i < o - 1``
with ``a = (n - k) / (o - 1)`` (in the input's dtype), and the last one at ``n - k``
(PyTorch's ``generate_intervals``). Sample ``[..., 0]`` drives the last axis (width) in
2-D, the first one (time) in 3-D, as PyTorch's kernels. Each output is the maximum of
its ``k``-window (the first maximum in row-major window order, or the last NaN);
the gradient goes to that element.
"""

from __future__ import annotations

import math
from typing import Any

from ._utils import detach, namespace
from .conv import _ntuple
from .sampling import _index_dtype

__all__ = ["fractional_max_pool2d", "fractional_max_pool2d_with_indices",
           "fractional_max_pool3d", "fractional_max_pool3d_with_indices"]


def _out_size(output_size: Any, output_ratio: Any, sizes: tuple[int, ...], nsp: int,
              fname: str) -> tuple[int, ...]:
    if output_size is None and output_ratio is None:
        raise ValueError(f"{fname} requires specifying either an output_size or an "
                         f"output_ratio")
    if output_size is not None:
        return _ntuple(output_size, nsp, "output_size", fname)
    ratio = tuple(output_ratio) if isinstance(output_ratio, (tuple, list)) \
        else (output_ratio,) * nsp
    if len(ratio) != nsp or not all(isinstance(r, (int, float)) for r in ratio):
        raise ValueError(f"{fname}(): output_ratio must be a number or a tuple of {nsp} "
                         f"numbers, got {output_ratio!r}")
    return tuple(int(s * r) for s, r in zip(sizes, ratio, strict=True))


def _fractional_max_pool(input: Any, kernel_size: Any, output_size: Any,  # noqa: A002
                         output_ratio: Any, samples: Any, nsp: int, fname: str,
                         generator: Any = None) -> tuple[Any, Any]:
    xp = namespace(input, samples)
    if not xp.isdtype(input.dtype, "real floating"):
        raise TypeError(f"{fname}() needs a real floating-point input, got {input.dtype}")
    if input.ndim not in (nsp + 1, nsp + 2):
        raise ValueError(f"{fname}(): expected a {nsp + 1}-D (unbatched) or {nsp + 2}-D "
                         f"(batched) input, got shape {tuple(input.shape)}")
    batched = input.ndim == nsp + 2
    x = input if batched else xp.expand_dims(input, axis=0)
    n, c = x.shape[:2]
    sizes = tuple(x.shape[2:])
    k = _ntuple(kernel_size, nsp, "kernel_size", fname)
    out = _out_size(output_size, output_ratio, sizes, nsp, fname)
    for a in range(nsp):
        if out[a] < 1 or out[a] + k[a] - 1 > sizes[a]:
            raise ValueError(f"{fname}(): output size {out} with pool size {k} does not fit "
                             f"the input of spatial size {sizes} (need output + pool - 1 <= "
                             f"input and output >= 1 along every axis)")
    if samples is None:
        from ... import random

        gen = random.default_generator() if generator is None else generator
        samples = xp.astype(gen._random_like(detach(x), (n, c, nsp)), x.dtype)
    elif tuple(samples.shape) != (n, c, nsp):
        raise ValueError(f"{fname}(): expected _random_samples of shape {(n, c, nsp)}, got "
                         f"{tuple(samples.shape)}")
    else:
        samples = xp.astype(detach(samples), x.dtype)
    idt = _index_dtype(xp, x)
    dev = x.device
    order = list(reversed(range(nsp))) if nsp == 2 else list(range(nsp))  # axis of sample j
    flat = None
    stride = 1
    kk = math.prod(k)
    for a in reversed(range(nsp)):
        size, o, p = sizes[a], out[a], k[a]
        last = xp.full((n, c, 1), size - p, dtype=idt, device=dev)
        if o > 1:
            u = samples[:, :, order.index(a)][:, :, None]
            alpha = (xp.asarray(float(size - p), dtype=x.dtype, device=dev)
                     / xp.asarray(float(o - 1), dtype=x.dtype, device=dev))
            i = xp.arange(o - 1, dtype=x.dtype, device=dev)
            seq = xp.astype(xp.trunc((i + u) * alpha), idt) - xp.astype(xp.trunc(u * alpha), idt)
            start = xp.concat([seq, last], axis=2)
        else:
            start = last
        # (N, C, 1.., o, 1.., 1.., p, 1..): output axis a and window axis a
        shape = [n, c] + [1] * (2 * nsp)
        shape[2 + a] = o
        pos = xp.reshape(start, tuple(shape))
        wshape = [1] * (2 + 2 * nsp)
        wshape[2 + nsp + a] = p
        pos = pos + xp.reshape(xp.arange(p, dtype=idt, device=dev), tuple(wshape))
        term = pos * stride
        flat = term if flat is None else flat + term
        stride *= size
    full = (n, c, *out, *k)
    flat = xp.reshape(xp.broadcast_to(flat, full), (n, c, math.prod(out) * kk))
    plane = xp.reshape(x, (n, c, math.prod(sizes)))
    vals = xp.reshape(xp.take_along_axis(plane, flat, axis=2), (n, c, math.prod(out), kk))
    dv = detach(vals)
    best = xp.argmax(dv, axis=3, keepdims=True)
    nan = xp.isnan(dv)
    last_nan = (kk - 1) - xp.argmax(xp.flip(xp.astype(nan, idt), axis=3), axis=3, keepdims=True)
    best = xp.where(xp.any(nan, axis=3, keepdims=True), xp.astype(last_nan, best.dtype), best)
    res = xp.reshape(xp.take_along_axis(vals, best, axis=3), (n, c, *out))
    idx = xp.take_along_axis(xp.reshape(flat, (n, c, math.prod(out), kk)),
                             xp.astype(best, idt), axis=3)
    idx = xp.reshape(idx, (n, c, *out))
    if not batched:
        res, idx = res[0, ...], idx[0, ...]
    return res, idx


def fractional_max_pool2d_with_indices(input: Any, kernel_size: Any,  # noqa: A002
                                       output_size: Any = None, output_ratio: Any = None,
                                       return_indices: bool = False,
                                       _random_samples: Any = None, *,
                                       generator: Any = None) -> tuple[Any, Any]:
    """Fractional max pooling of ``(N, C, H, W)``/``(C, H, W)`` inputs to ``output_size``
    (or ``int(size * output_ratio)``) with ``kernel_size`` windows; returns ``(output,
    indices)`` (flat ``h * W + w`` positions). ``_random_samples`` ``(N, C, 2)`` in
    ``[0, 1)`` fixes the windows, else they are drawn from ``generator`` (default
    ``vtl.random``'s)."""
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, _random_samples,
                                2, "fractional_max_pool2d", generator)


def fractional_max_pool2d(input: Any, kernel_size: Any, output_size: Any = None,  # noqa: A002
                          output_ratio: Any = None, return_indices: bool = False,
                          _random_samples: Any = None, *, generator: Any = None) -> Any:
    """:func:`fractional_max_pool2d_with_indices`; the indices too when
    ``return_indices``."""
    out, idx = fractional_max_pool2d_with_indices(input, kernel_size, output_size,
                                                  output_ratio, return_indices,
                                                  _random_samples, generator=generator)
    return (out, idx) if return_indices else out


def fractional_max_pool3d_with_indices(input: Any, kernel_size: Any,  # noqa: A002
                                       output_size: Any = None, output_ratio: Any = None,
                                       return_indices: bool = False,
                                       _random_samples: Any = None, *,
                                       generator: Any = None) -> tuple[Any, Any]:
    """Fractional max pooling of ``(N, C, T, H, W)``/``(C, T, H, W)`` inputs; returns
    ``(output, indices)`` (flat ``t * H * W + h * W + w`` positions); ``_random_samples``
    ``(N, C, 3)``."""
    return _fractional_max_pool(input, kernel_size, output_size, output_ratio, _random_samples,
                                3, "fractional_max_pool3d", generator)


def fractional_max_pool3d(input: Any, kernel_size: Any, output_size: Any = None,  # noqa: A002
                          output_ratio: Any = None, return_indices: bool = False,
                          _random_samples: Any = None, *, generator: Any = None) -> Any:
    """:func:`fractional_max_pool3d_with_indices`; the indices too when
    ``return_indices``."""
    out, idx = fractional_max_pool3d_with_indices(input, kernel_size, output_size,
                                                  output_ratio, return_indices,
                                                  _random_samples, generator=generator)
    return (out, idx) if return_indices else out


