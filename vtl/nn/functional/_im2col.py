"""im2col by one gather: the cached row index of every kernel tap.

Convolutions and pools view a 4-D ``(N, C, H, W)`` input as the matrix of its
pixels, ``rows = reshape(permute_dims(x, (0, 2, 3, 1)), (N*H*W, C))`` (free when
``x`` is already stored channels-last, as the outputs of these functions are),
and gather all patches with one ``take(rows, index, axis=0)``: a
``(N*Ho*Wo*kh*kw, C)`` matrix whose row ``((n*Ho + i)*Wo + j)*kh*kw + a*kw + b``
is the pixel under tap ``(a, b)`` of output ``(n, i, j)``. The gradient of that
gather is one scatter-add (repeated rows accumulate).

Taps that fall on padding (or, for a transposed convolution, on the zeros
between input pixels, or beyond the end for ``ceil_mode``) read *fill rows*
appended below the pixels (zeros, or ``-inf`` for max pooling). The taps are
spread over up to :data:`MAX_FILL` fill rows so that the scatter-add of the
gradient does not pile all padding taps onto one address (atomics on GPUs).

The index depends only on the geometry; it is built once on the host and kept
per device (:func:`tap_index`).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from ..._tensor import Tensor
from ...capture import hold

__all__ = ["adaptive_index", "arange_host", "axis_index", "gather_rows", "host_index",
           "on_device", "pixel_rows", "raw", "tap_index"]

#: At most this many fill rows (the padding taps are spread over them).
MAX_FILL = 1024
#: Device index arrays kept (least recently used dropped first).
CACHE_SIZE = 64

_host_cache: OrderedDict[tuple, tuple[np.ndarray, int, np.ndarray]] = OrderedDict()
_dev_cache: OrderedDict[tuple, Any] = OrderedDict()


def _touch(cache: OrderedDict, key: tuple) -> None:
    try:
        cache.move_to_end(key)
    except KeyError:  # dropped by another thread meanwhile
        pass


def _lru_put(cache: OrderedDict, key: tuple, value: Any) -> None:
    cache[key] = value
    while len(cache) > CACHE_SIZE:
        cache.popitem(last=False)


def _axis_taps(size: int, k: int, s: int, d: int, lo: int, out: int, dil: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per ``(output, tap)`` of one spatial axis: the source pixel and whether it exists.

    Output ``o``'s tap ``t`` sits at ``v = o*s + t*d - lo`` of the input with
    ``dil - 1`` zeros between pixels; it reads pixel ``v // dil`` when ``v`` is on
    the pixel grid and inside.
    """
    v = np.arange(out)[:, None] * s + np.arange(k)[None, :] * d - lo
    ok = (v >= 0) & (v % dil == 0) & (v // dil < size)
    return np.where(ok, v // dil, 0), ok


def host_index(n: int, h: int, w: int, k: tuple[int, int], s: tuple[int, int],
               d: tuple[int, int], lo: tuple[int, int], out: tuple[int, int],
               dil: tuple[int, int] = (1, 1)) -> tuple[np.ndarray, int, np.ndarray]:
    """``(rows, fill, spatial)`` for the geometry, built once (host NumPy, int64).

    ``rows``: the ``N*Ho*Wo*kh*kw`` row numbers into the pixel rows followed by
    ``fill`` fill rows; ``spatial``: the ``Ho*Wo*kh*kw`` flat input index
    ``r*W + c`` of each tap of one image, as if the input extended beyond its
    edges (what ``max_pool2d(..., return_indices=True)`` reports).
    """
    key = (n, h, w, k, s, d, lo, out, dil)
    hit = _host_cache.get(key)
    if hit is not None:
        _touch(_host_cache, key)
        return hit
    (kh, kw), (ho, wo) = k, out
    r, rok = _axis_taps(h, kh, s[0], d[0], lo[0], ho, dil[0])
    c, cok = _axis_taps(w, kw, s[1], d[1], lo[1], wo, dil[1])
    pix = (r[:, None, :, None] * w + c[None, :, None, :]).reshape(-1)  # (ho, wo, kh, kw)
    ok = (rok[:, None, :, None] & cok[None, :, None, :]).reshape(-1)
    rows = (np.arange(n, dtype=np.int64)[:, None] * (h * w) + pix[None, :]).reshape(-1)
    bad = np.tile(~ok, n)
    taps = int(np.count_nonzero(bad))
    fill = min(taps, MAX_FILL)
    if taps:
        rows[bad] = n * h * w + np.arange(taps, dtype=np.int64) % fill
    vr = np.arange(ho)[:, None] * s[0] + np.arange(kh)[None, :] * d[0] - lo[0]
    vc = np.arange(wo)[:, None] * s[1] + np.arange(kw)[None, :] * d[1] - lo[1]
    spatial = (vr[:, None, :, None] * w + vc[None, :, None, :]).reshape(-1)
    hit = (rows, fill, spatial)
    _lru_put(_host_cache, key, hit)
    return hit


def arange_host(start: int, stop: int, step: int, shape: tuple[int, ...]) -> np.ndarray:
    """A host integer range in ``shape``, to be placed with :func:`on_device`."""
    return np.arange(start, stop, step, dtype=np.int64).reshape(shape)


def _index_dtype(xp: Any, device: Any) -> Any:
    return xp.__array_namespace_info__().default_dtypes(device=device)["indexing"]


def on_device(host: np.ndarray, what: str, geometry: tuple, xp: Any, x: Any) -> Any:
    """``host`` as a raw index array of ``x``'s backend and device (cached)."""
    if isinstance(x, Tensor):
        dev = x._device
        dkey: Any = dev
    else:
        dev = x.device
        try:
            hash(dev)
            dkey = (id(xp), dev)
        except TypeError:
            dkey = (id(xp), repr(dev))
    key = (what, geometry, dkey)
    arr = _dev_cache.get(key)
    if arr is not None:
        _touch(_dev_cache, key)
        hold(arr)
        return arr
    if isinstance(x, Tensor):
        idt = dev.backend.default_dtypes(dev.index)["indexing"]
        host = np.ascontiguousarray(host.astype(idt, copy=False))
        arr = dev.backend.from_host(host, dev.index)
    else:
        idt = _index_dtype(xp, dev)
        arr = xp.asarray(host, dtype=idt, device=dev)
    _lru_put(_dev_cache, key, arr)
    hold(arr)
    return arr


def tap_index(xp: Any, x: Any, k: tuple[int, int], s: tuple[int, int], d: tuple[int, int],
              lo: tuple[int, int], out: tuple[int, int], dil: tuple[int, int] = (1, 1)
              ) -> tuple[Any, int]:
    """The raw device row index of every tap of the 4-D ``x`` and the number of fill rows."""
    n, _, h, w = x.shape
    geometry = (n, h, w, k, s, d, lo, out, dil)
    rows, fill, _ = host_index(*geometry)
    return on_device(rows, "rows", geometry, xp, x), fill


def pixel_rows(xp: Any, x: Any, fill: int, value: float) -> Any:
    """``(N*H*W + fill, C)``: the pixels of the 4-D ``x`` as rows, then ``fill`` rows of
    ``value``."""
    n, c, h, w = x.shape
    rows = xp.reshape(xp.permute_dims(x, (0, 2, 3, 1)), (n * h * w, c))
    if fill:
        pad = xp.full((fill, c), value, dtype=x.dtype, device=x.device)
        rows = xp.concat([rows, pad], axis=0)
    return rows


def gather_rows(xp: Any, x: Any, rows: Any) -> Any:
    """``take(x, rows, axis=0)`` for a raw index array known to be in range.

    On vtl tensors this skips ``take``'s index normalisation and bounds check
    (the index is built in range); the gradient is the same scatter-add.
    """
    if isinstance(x, Tensor):
        from ..._ops.indexing import _gather_rows

        return _gather_rows(x, rows)
    return xp.take(x, rows, axis=0)


def raw(x: Any, xp: Any) -> tuple[Any, Any]:
    """The backend array and namespace under ``x`` (for index arithmetic without a graph)."""
    if isinstance(x, Tensor):
        return x._data, x._device.xp
    return x, xp


def out_size(size: int, k: int, s: int, lo: int, hi: int, d: int) -> int:
    return (size + lo + hi - d * (k - 1) - 1) // s + 1


def axis_index(size: int, k: int, s: int, d: int, lo: int, out: int, dil: int = 1
               ) -> tuple[np.ndarray, bool]:
    """The source position along one axis of every ``(output, tap)`` pair (host, int64,
    ``out * k`` entries, output-major) and whether any tap reads no input position
    (padding, or a zero between the pixels of an input dilated by ``dil``): those get
    ``size``, the index of one zero slice appended to the axis. Output ``o``'s tap
    ``t`` sits at ``o*s + t*d - lo`` of the dilated input (``d`` may be negative)."""
    src, ok = _axis_taps(size, k, s, d, lo, out, dil)
    return np.where(ok, src, size).reshape(-1).astype(np.int64), not bool(ok.all())


def adaptive_index(spatial: tuple[int, ...], out: tuple[int, ...]) -> tuple[np.ndarray, int]:
    """PyTorch's adaptive pooling windows ``[floor(i*L/O), ceil((i+1)*L/O))`` of every
    output position as flat (row-major) input positions: ``(index, taps)`` with
    ``index`` of shape ``(prod(out) * taps,)`` (host, int64, output-major) and ``taps``
    the largest window's number of elements. A window smaller than the largest repeats
    its first element, which changes neither its maximum nor which element is first."""
    per_axis = []
    for size, o in zip(spatial, out, strict=True):
        i = np.arange(o)
        start = (i * size) // o
        length = -((-(i + 1) * size) // o) - start
        kmax = int(length.max())
        t = np.arange(kmax)[None, :]
        per_axis.append(start[:, None] + np.where(t < length[:, None], t, 0))  # (o, kmax)
    flat = np.zeros((1, 1), dtype=np.int64)
    for a, tab in enumerate(per_axis):
        stride = int(np.prod(spatial[a + 1:], dtype=np.int64))
        o, kk = tab.shape
        # combine: (O_prev, K_prev) x (o, kk) -> (O_prev*o, K_prev*kk), output- and tap-major
        flat = (flat[:, None, :, None] + tab[None, :, None, :] * stride)
        flat = flat.reshape(flat.shape[0] * o, -1)
    return flat.reshape(-1).astype(np.int64), flat.shape[1]
