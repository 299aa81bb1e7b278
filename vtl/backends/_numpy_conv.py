"""conv2d by strided im2col for array libraries with NumPy's indexing (NumPy, CuPy).

:class:`StridedConv2d` implements the raw-array ``conv2d`` kernel protocol of
``vtl.nn.functional.conv`` (see ``Conv2dKernel`` there) with the module it is
given (``numpy`` or ``cupy``); no index arrays are involved:

* forward: the input is zero-padded once, then each of the ``kh*kw`` taps is
  ONE strided-slice copy into a preallocated ``(N, G, C/G*kh*kw + 1, Ho*Wo)``
  patch buffer whose last row per group is ones; ONE (batched) matrix product
  with the ``(G, O/G, C/G*kh*kw + 1)`` weight matrix, whose last column is the
  bias, gives the ``(N, O, Ho*Wo)`` output, already in NCHW order (the bias
  add rides in the product);
* backward: ``dW`` (and ``db``, the ones row's column) is a matrix product of
  the output gradient with the patches, ``dcol`` a matrix product with the
  weight, and ``dx`` (col2im) ``kh*kw`` strided-slice adds into a zero-padded
  buffer.

The heavy work is in the matrix products (multi-threaded BLAS / cuBLAS); the
copies and adds are memory-bound passes over the patch buffer.

Threads (NumPy, inputs of at least :data:`THRESHOLD` patch elements): the memory-bound
passes are split by images over a persistent thread pool of :func:`num_threads` threads
(the usable CPUs, capped by ``VTL_NUM_THREADS``; NumPy releases the GIL in copies and
ufuncs), each thread working through blocks of images that stay in cache. The products
stay on the calling thread: BLAS spreads one product over its own threads, and BLAS calls
from several Python threads at once run one after the other (measured with NumPy's
OpenBLAS), so products per thread would gain nothing. With fewer than
:data:`ONE_PRODUCT_THREADS` threads the layout above is kept (a product per image writes
NCHW directly; the weight gradient's per-image products are summed block by block); from
that many on, the patches of all images form one *wide* ``(G, C/G*kh*kw + 1, N*Ho*Wo)``
matrix, so forward, weight gradient and patch gradient are one large product each (a
product per image is too small to spread over many BLAS threads), and the output and its
gradient are transposed between NCHW and the wide layout by the pool. Either way every
value is computed by the same products as on one thread, up to the summation order of the
weight gradient over images.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

__all__ = ["THRESHOLD", "StridedConv2d", "num_threads", "parallel_for", "scratch"]

#: Patch elements (``N * (C/G*kh*kw + 1) * G * Ho*Wo``) from which the NumPy kernel takes the
#: wide layout and the thread pool; below it everything runs on the calling thread.
THRESHOLD = 1 << 18

#: Pool threads from which the wide layout's products are one BLAS call over all images
#: (BLAS spreads it over its threads; the images' outputs then need a transpose pass);
#: with fewer, a BLAS call per image writes the NCHW output directly.
ONE_PRODUCT_THREADS = 4

#: Elements of a block of images handled in one pass of im2col/col2im (cache-sized).
BLOCK = 1 << 21

_pool: ThreadPoolExecutor | None = None
_pool_key: tuple[int, int] = (0, 0)
_pool_lock = threading.Lock()
_local = threading.local()


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)


def num_threads() -> int:
    """Threads of the NumPy kernels' pool: the usable CPUs, capped by ``VTL_NUM_THREADS``."""
    n = usable_cpus()
    env = os.environ.get("VTL_NUM_THREADS", "").strip()
    if env:
        try:
            cap = int(env)
        except ValueError:
            cap = 0
        if cap < 1:
            raise ValueError(f"VTL_NUM_THREADS must be a positive integer, got {env!r}")
        n = min(n, cap)
    return n


def _executor(workers: int) -> ThreadPoolExecutor:
    """The persistent pool with room for ``workers`` threads (started on demand; a new pool
    after a fork, whose child has none of the parent's threads)."""
    global _pool, _pool_key
    pid = os.getpid()
    with _pool_lock:
        if _pool is None or _pool_key[0] != pid or _pool_key[1] < workers:
            size = max(workers, usable_cpus())
            # a replaced pool is not shut down (another thread may still submit to it);
            # its idle threads end when it is collected
            _pool = ThreadPoolExecutor(size, thread_name_prefix="vtl-numpy")
            _pool_key = (pid, size)
        return _pool


def scratch(slot: str, shape: tuple[int, ...], dtype: Any) -> Any:
    """A temporary of ``shape`` in this thread's reusable buffer ``slot`` (grown as needed
    and kept: one or two buffers of the largest temporaries seen per calling thread). Fresh
    large temporaries cost page faults on every call (the allocator hands them back to the
    OS), milliseconds per call for a layer of a small CNN."""
    dt = np.dtype(dtype)
    size = dt.itemsize
    for v in shape:
        size *= v
    bufs = getattr(_local, "scratch", None)
    if bufs is None:
        bufs = _local.scratch = {}
    buf = bufs.get(slot)
    if buf is None or buf.size < size:
        buf = bufs[slot] = np.empty(size, dtype=np.uint8)
    return buf[:size].view(dt).reshape(shape)


def _run_chunk(fn: Callable[[int, int], None], i: int, j: int) -> None:
    _local.inside = True
    try:
        fn(i, j)
    finally:
        _local.inside = False


def parallel_for(fn: Callable[[int, int], None], n: int, threads: int | None = None) -> None:
    """``fn(i, j)`` over ``[0, n)`` split into ``threads`` contiguous ranges (default
    :func:`num_threads`), one on the calling thread and the others on the pool; returns
    when all are done and re-raises the first error. Runs ``fn(0, n)`` inline for one
    thread, one item, or when called from inside the pool (no nested waits)."""
    t = min(num_threads() if threads is None else threads, n)
    if t <= 1 or getattr(_local, "inside", False):
        fn(0, n)
        return
    bounds = [n * i // t for i in range(t + 1)]
    pool = _executor(t - 1)
    futures = [pool.submit(_run_chunk, fn, bounds[i], bounds[i + 1]) for i in range(1, t)]
    err: BaseException | None = None
    try:
        _run_chunk(fn, bounds[0], bounds[1])
    except BaseException as e:  # noqa: BLE001 - re-raised below after the others finish
        err = e
    for f in futures:  # wait for every range: none may still write after the return
        try:
            f.result()
        except BaseException as e:  # noqa: BLE001
            err = err or e
    if err is not None:
        raise err


def _blocks(i: int, j: int, per_image: int):
    """``[i, j)`` in ranges of about :data:`BLOCK` elements of ``per_image`` each."""
    step = max(1, BLOCK // max(per_image, 1))
    for a in range(i, j, step):
        yield a, min(a + step, j)


def _out_size(size: int, k: int, s: int, lo: int, hi: int, d: int) -> int:
    return (size + lo + hi - d * (k - 1) - 1) // s + 1


def _tap(a: int, b: int, ho: int, wo: int, s: tuple[int, int], d: tuple[int, int]
         ) -> tuple[slice, slice]:
    """The rows and columns of the padded input that tap ``(a, b)`` reads."""
    r0, c0 = a * d[0], b * d[1]
    return (slice(r0, r0 + s[0] * (ho - 1) + 1, s[0]), slice(c0, c0 + s[1] * (wo - 1) + 1, s[1]))


def _taps_in(m: Any, x: Any, col: Any, geom: tuple) -> None:
    """im2col of ``x`` into the first ``C/G*kh*kw`` rows of each group of ``col``
    (``(N, G, rows, Ho*Wo)``, any strides): one strided-slice copy per tap."""
    stride, (pt, pb, pl, pr), dilation, groups, kh, kw, ho, wo = geom
    n, c, h, wd = x.shape
    cg = c // groups
    if pt or pb or pl or pr:
        xpad = m.zeros((n, c, h + pt + pb, wd + pl + pr), dtype=x.dtype)
        xpad[:, :, pt:pt + h, pl:pl + wd] = x
    else:
        xpad = x
    taps = col[:, :, :cg * kh * kw, :].reshape(n, groups, cg, kh, kw, ho, wo)
    src = xpad.reshape(n, groups, cg, *xpad.shape[2:])
    for a in range(kh):
        for bb in range(kw):
            rs, cs = _tap(a, bb, ho, wo, stride, dilation)
            taps[:, :, :, a, bb] = src[:, :, :, rs, cs]


def _taps_out(m: Any, dcol: Any, x_shape: tuple[int, ...], geom: tuple, dx: Any = None) -> Any:
    """col2im: the input gradient from the patch gradient ``dcol`` (``(N, G, C/G*kh*kw,
    Ho*Wo)``, any strides), one strided-slice add per tap into a zero-padded buffer;
    written into ``dx`` when given, else returned (a view of the buffer)."""
    stride, (pt, pb, pl, pr), dilation, groups, kh, kw, ho, wo = geom
    n, c, h, wd = x_shape
    cg = c // groups
    d7 = dcol.reshape(n, groups, cg, kh, kw, ho, wo)
    padded = pt or pb or pl or pr
    if dx is not None and not padded:
        dxpad = dx
        dxpad[...] = 0
    else:
        dxpad = m.zeros((n, c, h + pt + pb, wd + pl + pr), dtype=dcol.dtype)
    dst = dxpad.reshape(n, groups, cg, *dxpad.shape[2:])
    for a in range(kh):
        for bb in range(kw):
            rs, cs = _tap(a, bb, ho, wo, stride, dilation)
            dst[:, :, :, rs, cs] += d7[:, :, :, a, bb]
    res = dxpad[:, :, pt:pt + h, pl:pl + wd] if padded else dxpad
    if dx is not None and res is not dx:
        dx[...] = res
    return res


class FloatKernel:
    """A kernel on the float32/float64 arrays of ``mod`` (``numpy`` or ``cupy``)."""

    def __init__(self, mod: Any) -> None:
        self.m = mod
        self._dtypes = (np.dtype(np.float32), np.dtype(np.float64))

    def supports(self, dtype: Any) -> bool:
        return dtype in self._dtypes


class StridedConv2d(FloatKernel):
    """The ``conv2d`` kernel on the arrays of ``mod`` (``numpy`` or ``cupy``).

    ``forward(x, w, b, stride, padding, dilation, groups) -> (out, col)`` and
    ``backward(col, x_shape, w, g, stride, padding, dilation, groups, need_x, need_w,
    need_b) -> (dx, dw, db)``; see ``vtl.nn.functional.conv.Conv2dKernel``. ``col`` is the
    ``(N, G, rows, Ho*Wo)`` patch buffer, or the ``(G, rows, N*Ho*Wo)`` wide one (NumPy,
    from :data:`THRESHOLD` patch elements and :data:`ONE_PRODUCT_THREADS` threads).
    """

    def _threads(self, size: int) -> int:
        """Pool threads for ``size`` patch elements: 0 for the single-threaded path (other
        array modules, small inputs), else :func:`num_threads`."""
        return num_threads() if self.m is np and size >= THRESHOLD else 0

    def forward(self, x: Any, w: Any, b: Any, stride: tuple[int, int],
                padding: tuple[int, int, int, int], dilation: tuple[int, int],
                groups: int) -> tuple[Any, Any]:
        m = self.m
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        pt, pb, pl, pr = padding
        ho = _out_size(h, kh, stride[0], pt, pb, dilation[0])
        wo = _out_size(wd, kw, stride[1], pl, pr, dilation[1])
        k = cg * kh * kw
        extra = 0 if b is None else 1
        og = o // groups
        wm = w.reshape(groups, og, k)
        if extra:
            wext = m.empty((groups, og, k + 1), dtype=x.dtype)
            wext[:, :, :k] = wm
            wext[:, :, k] = b.reshape(groups, og)
            wm = wext
        geom = (stride, padding, dilation, groups, kh, kw, ho, wo)
        threads = self._threads(n * groups * (k + extra) * ho * wo)
        if threads >= ONE_PRODUCT_THREADS:
            return self._forward_wide(x, wm, extra, geom, threads)
        col = m.empty((n, groups, k + extra, ho * wo), dtype=x.dtype)
        if extra:
            col[:, :, k, :] = 1
        if threads:
            per = groups * (k + extra) * ho * wo

            def fill(i: int, j: int) -> None:
                for a, b in _blocks(i, j, per):
                    self._im2col(x[a:b], col[a:b], geom)

            parallel_for(fill, n, threads)
        else:
            self._im2col(x, col, geom)
        out = m.matmul(wm, col)  # (N, G, O/G, Ho*Wo)
        return out.reshape(n, o, ho, wo), col

    def _forward_wide(self, x: Any, wm: Any, extra: int, geom: tuple, threads: int
                      ) -> tuple[Any, Any]:
        """The forward pass in the wide layout: one product per group over all images."""
        n = x.shape[0]
        groups, og, rows = wm.shape
        ho, wo = geom[6:]
        hw = ho * wo
        col = np.empty((groups, rows, n * hw), dtype=x.dtype)
        col4 = col.reshape(groups, rows, n, hw)
        if extra:
            col[:, rows - 1, :] = 1

        def fill(i: int, j: int) -> None:
            for a, b in _blocks(i, j, groups * rows * hw):
                _taps_in(np, x[a:b], col4[:, :, a:b].transpose(2, 0, 1, 3), geom)

        parallel_for(fill, n, threads)
        prod = np.matmul(wm, col, out=scratch("a", (groups, og, n * hw), x.dtype))
        prod = prod.reshape(groups, og, n, hw)
        out = np.empty((n, groups, og, hw), dtype=x.dtype)

        def scatter(i: int, j: int) -> None:
            out[i:j] = prod[:, :, i:j].transpose(2, 0, 1, 3)

        parallel_for(scatter, n, threads)
        return out.reshape(n, groups * og, ho, wo), col

    def backward(self, col: Any, x_shape: tuple[int, ...], w: Any, g: Any,
                 stride: tuple[int, int], padding: tuple[int, int, int, int],
                 dilation: tuple[int, int], groups: int, need_x: bool, need_w: bool,
                 need_b: bool) -> tuple[Any, Any, Any]:
        m = self.m
        n, c, h, wd = x_shape
        o, cg, kh, kw = w.shape
        og = o // groups
        ho, wo = g.shape[2:]
        hw = ho * wo
        k = cg * kh * kw
        geom = (stride, padding, dilation, groups, kh, kw, ho, wo)
        threads = self._threads(n * groups * k * hw) if need_x or need_w else 0
        if col is not None and col.ndim == 3 or col is None and threads >= ONE_PRODUCT_THREADS:
            return self._backward_wide(col, x_shape, w, g, geom, need_x, need_w, need_b,
                                       max(threads, 1))
        # a BLAS-friendly (N, G, O/G, Ho*Wo) gradient (e.g. not a broadcast view)
        g4 = m.ascontiguousarray(g).reshape(n, groups, og, hw)
        dx = dw = db = None
        if need_w or (need_b and col is not None and col.shape[2] > k):
            kc = col.shape[2]
            if threads:  # products per image, summed over blocks of images that stay in cache
                dwe = None
                for a, b in _blocks(0, n, groups * og * kc):
                    part = m.matmul(g4[a:b], col[a:b].transpose(0, 1, 3, 2)).sum(axis=0)
                    dwe = part if dwe is None else m.add(dwe, part, out=dwe)
            elif kc <= hw:  # a batch of products, summed over the images
                dwe = m.matmul(g4, col.transpose(0, 1, 3, 2)).sum(axis=0)
            else:  # few pixels, many taps: one product over all images
                ga = m.ascontiguousarray(g4.transpose(1, 2, 0, 3)).reshape(groups, og, n * hw)
                ca = m.ascontiguousarray(col.transpose(1, 0, 3, 2)).reshape(groups, n * hw, kc)
                dwe = m.matmul(ga, ca)
            if need_w:
                dw = m.ascontiguousarray(dwe[:, :, :k]).reshape(o, cg, kh, kw)
            if need_b and kc > k:
                db = m.ascontiguousarray(dwe[:, :, k]).reshape(o)
        if need_b and db is None:
            db = g4.sum(axis=(0, 3)).reshape(o)
        if need_x:
            wt = w.reshape(groups, og, k).transpose(0, 2, 1)
            if threads:
                dcol = m.matmul(wt, g4, out=scratch("b", (n, groups, k, hw), g.dtype))
                dx = m.empty(x_shape, dtype=g.dtype)

                def spread(i: int, j: int) -> None:
                    for a, b in _blocks(i, j, groups * k * hw):
                        dx[a:b] = self._col2im(dcol[a:b], dx[a:b].shape, geom)

                parallel_for(spread, n, threads)
            else:
                dcol = m.matmul(wt, g4)  # (N, G, C/G*kh*kw, Ho*Wo)
                dx = self._col2im(dcol, x_shape, geom)
        return dx, dw, db

    def _backward_wide(self, col: Any, x_shape: tuple[int, ...], w: Any, g: Any, geom: tuple,
                       need_x: bool, need_w: bool, need_b: bool, threads: int
                       ) -> tuple[Any, Any, Any]:
        """The backward pass in the wide layout: the output gradient transposed to it, then
        one product per group over all images for each gradient."""
        n = x_shape[0]
        o, cg, kh, kw = w.shape
        groups = geom[3]
        og = o // groups
        ho, wo = g.shape[2:]
        hw = ho * wo
        k = cg * kh * kw
        g4 = g.reshape(n, groups, og, hw)
        gm = scratch("a", (groups, og, n * hw), g.dtype)
        gw4 = gm.reshape(groups, og, n, hw)

        def gather(i: int, j: int) -> None:
            gw4[:, :, i:j] = g4[i:j].transpose(1, 2, 0, 3)

        parallel_for(gather, n, threads)
        dx = dw = db = None
        with_b = col is not None and col.shape[1] > k
        if need_w or need_b and with_b:
            dwe = np.matmul(gm, col.transpose(0, 2, 1))  # (G, O/G, rows)
            if need_w:
                dw = np.ascontiguousarray(dwe[:, :, :k]).reshape(o, cg, kh, kw)
            if need_b and with_b:
                db = np.ascontiguousarray(dwe[:, :, k]).reshape(o)
        if need_b and db is None:
            db = gm.sum(axis=2).reshape(o)
        if need_x:
            wt = w.reshape(groups, og, k).transpose(0, 2, 1)
            dcol = np.matmul(wt, gm, out=scratch("b", (groups, k, n * hw), g.dtype))
            dcol = dcol.reshape(groups, k, n, hw).transpose(2, 0, 1, 3)
            dx = np.empty(x_shape, dtype=g.dtype)

            def spread(i: int, j: int) -> None:
                for a, b in _blocks(i, j, groups * k * hw):
                    _taps_out(np, dcol[a:b], dx[a:b].shape, geom, dx[a:b])

            parallel_for(spread, n, threads)
        return dx, dw, db

    def _im2col(self, x: Any, col: Any, geom: tuple) -> None:
        """Write the taps of ``x`` into the first ``C/G*kh*kw`` rows of each group of
        ``col`` (``(N, G, rows, Ho*Wo)``): one strided-slice copy per tap."""
        _taps_in(self.m, x, col, geom)

    def _col2im(self, dcol: Any, x_shape: tuple[int, ...], geom: tuple) -> Any:
        """The input gradient from the patch gradient ``dcol`` (``(N, G, C/G*kh*kw,
        Ho*Wo)``): one strided-slice add per tap into a zero-padded buffer."""
        return _taps_out(self.m, dcol, x_shape, geom)
