"""Matrix products of the CuPy backend by direct cuBLAS calls (through ``ctypes``).

CuPy's own cuBLAS bindings refuse to run while a stream is being captured into a CUDA
graph ("calling cuBLAS API during stream capture is currently unsupported"), and cost
20-40 µs of host time per ``matmul``/``dot``. cuBLAS itself can be captured (NVIDIA's
conditions: a workspace set by the caller, so that no call allocates one, and scalars in
host memory that do not change between replays: alpha 1, beta 0 here), so vtl keeps a
handle of its own per thread and device, with a workspace from CuPy's pool, and calls
``cublas{S,D}gemm_v2`` and ``cublas{S,D}gemmStridedBatched`` on the current stream.

float16 and bfloat16 products are ``cublasGemmEx``/``cublasGemmStridedBatchedEx`` with
float32 compute (``CUBLAS_COMPUTE_32F``: tensor cores, float32 accumulation, the result
rounded once to the operands' dtype), as PyTorch's. float32 products use TF32 tensor
cores when ``vtl.set_float32_matmul_precision`` is ``"high"`` or ``"medium"`` (the handle's
math mode follows the setting at each call).

Row-major ``C = A @ B`` is the column-major ``C^T = B^T A^T``: each operand is passed as
its column-major transpose (a C-contiguous matrix as is, an F-contiguous one transposed).
Batched products take operands whose matrices sit at a fixed stride (0 for one matrix
broadcast over the batch); others are made contiguous first.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

import numpy as np

from .. import _precision

__all__ = ["Blas"]

_OP_N, _OP_T = 0, 1
_DEFAULT_MATH, _TF32_MATH = 0, 3
#: cudaDataType_t of the low-precision dtypes, cublasComputeType_t, cublasGemmAlgo_t
_CUDA_R_16F, _CUDA_R_16BF = 2, 14
_COMPUTE_32F = 68
_GEMM_DEFAULT = -1
#: bytes of the workspace each handle uses (NVIDIA's recommendation for Hopper: 32 MiB)
WORKSPACE = 32 << 20
#: the most operand layouts whose plans (shapes, leading dimensions, batch strides) are kept
PLANS = 1024


def _library() -> ctypes.CDLL:
    """The cuBLAS library CuPy loaded (found through the process's mapped files)."""
    from cupy_backends.cuda.libs import cublas  # noqa: F401 - loads libcublas

    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.rsplit(" ", 1)[-1].strip()
            if "libcublas.so" in path and "Lt" not in os.path.basename(path):
                return ctypes.CDLL(path)
    return ctypes.CDLL("libcublas.so")


class _Handle:
    """One cuBLAS handle on one device, its workspace and the stream it was last set to."""

    def __init__(self, lib: ctypes.CDLL, cupy: Any) -> None:
        h = ctypes.c_void_p()
        _check(lib.cublasCreate_v2(ctypes.byref(h)), "cublasCreate")
        self.ptr = h
        self.workspace = cupy.empty(WORKSPACE, dtype=np.uint8)
        self.stream: int | None = None
        self.lib = lib
        self.tf32 = os.environ.get("CUPY_TF32", "0").strip() not in ("", "0")
        _check(lib.cublasSetMathMode(h, _TF32_MATH if self.tf32 else _DEFAULT_MATH),
               "cublasSetMathMode")

    def math_mode(self, tf32: bool) -> None:
        """TF32 tensor-core math for float32 products on (``tf32``) or off."""
        if tf32 != self.tf32:
            _check(self.lib.cublasSetMathMode(self.ptr, _TF32_MATH if tf32 else _DEFAULT_MATH),
                   "cublasSetMathMode")
            self.tf32 = tf32


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"cuBLAS: {what} failed with status {status}")


class _GemmEx:
    """``cublasGemmEx`` with float32 compute for one low-precision dtype, called with the
    arguments of ``cublas{S,D}gemm_v2`` (the dtype's code and the compute type added)."""

    def __init__(self, fn: Any, code: int) -> None:
        self.fn, self.code = fn, code

    def __call__(self, h: Any, ta: int, tb: int, m: int, n: int, k: int, alpha: int, a: int,
                 lda: int, b: int, ldb: int, beta: int, c: int, ldc: int) -> int:
        t = self.code
        return self.fn(h, ta, tb, m, n, k, alpha, a, t, lda, b, t, ldb, beta, c, t, ldc,
                       _COMPUTE_32F, _GEMM_DEFAULT)


class _BatchedEx:
    """``cublasGemmStridedBatchedEx`` with float32 compute, called with the arguments of
    ``cublas{S,D}gemmStridedBatched``."""

    def __init__(self, fn: Any, code: int) -> None:
        self.fn, self.code = fn, code

    def __call__(self, h: Any, ta: int, tb: int, m: int, n: int, k: int, alpha: int, a: int,
                 lda: int, sa: int, b: int, ldb: int, sb: int, beta: int, c: int, ldc: int,
                 sc: int, count: int) -> int:
        t = self.code
        return self.fn(h, ta, tb, m, n, k, alpha, a, t, lda, sa, b, t, ldb, sb, beta, c, t,
                       ldc, sc, count, _COMPUTE_32F, _GEMM_DEFAULT)


class Blas:
    """``matmul(a, b)`` of float16/bfloat16/float32/float64 CuPy arrays by cuBLAS, or
    ``None`` for operands it does not take (other dtypes, fewer than two dimensions)."""

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._lib = lib = _library()
        # a handle per thread and device (as CuPy's own): threads may set different streams
        self._local = threading.local()
        self._plans: dict[tuple, Any] = {}
        vp, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        gemm = [vp, i, i, i, i, i, vp, vp, i, vp, i, vp, vp, i]
        batched = [vp, i, i, i, i, i, vp, vp, i, ll, vp, i, ll, vp, vp, i, ll, i]
        self._gemm = {}
        self._batched = {}
        for dt, c in ((np.dtype(np.float32), "S"), (np.dtype(np.float64), "D")):
            fn = getattr(lib, f"cublas{c}gemm_v2")
            fn.argtypes, fn.restype = gemm, i
            self._gemm[dt] = fn
            fn = getattr(lib, f"cublas{c}gemmStridedBatched")
            fn.argtypes, fn.restype = batched, i
            self._batched[dt] = fn
        # float16/bfloat16: the Ex entry points with float32 compute (alpha/beta float32)
        gemm_ex = [vp, i, i, i, i, i, vp, vp, i, i, vp, i, i, vp, vp, i, i, i, i]
        batched_ex = [vp, i, i, i, i, i, vp, vp, i, i, ll, vp, i, i, ll, vp, vp, i, i, ll, i,
                      i, i]
        self._scalar_dt: dict[np.dtype, np.dtype] = {}
        try:
            ex = lib.cublasGemmEx
            bex = lib.cublasGemmStridedBatchedEx
        except AttributeError:  # an old cuBLAS: CuPy's own products for these dtypes
            ex = bex = None
        if ex is not None:
            ex.argtypes, ex.restype = gemm_ex, i
            bex.argtypes, bex.restype = batched_ex, i
            import ml_dtypes

            for dt, code in ((np.dtype(np.float16), _CUDA_R_16F),
                             (np.dtype(ml_dtypes.bfloat16), _CUDA_R_16BF)):
                self._gemm[dt] = _GemmEx(ex, code)
                self._batched[dt] = _BatchedEx(bex, code)
                self._scalar_dt[dt] = np.dtype(np.float32)
        lib.cublasSetStream_v2.argtypes = [vp, vp]
        lib.cublasSetWorkspace_v2.argtypes = [vp, vp, ctypes.c_size_t]
        lib.cublasCreate_v2.argtypes = [ctypes.POINTER(vp)]
        lib.cublasSetMathMode.argtypes = [vp, i]
        # alpha, beta (host memory; float32 for the float32-compute Ex calls)
        self._one = {dt: np.ones((), self._scalar_dt.get(dt, dt)) for dt in self._gemm}
        self._zero = {dt: np.zeros((), self._scalar_dt.get(dt, dt)) for dt in self._gemm}
        # their host addresses, read once (``.ctypes.data`` costs about a microsecond a call)
        self._scalars = {dt: (self._one[dt].ctypes.data, self._zero[dt].ctypes.data)
                         for dt in self._gemm}

    def _handle(self, device: int) -> ctypes.c_void_p:
        handles = getattr(self._local, "handles", None)
        if handles is None:
            handles = self._local.handles = {}
        h = handles.get(device)
        if h is None:
            h = handles[device] = _Handle(self._lib, self._cp)
        h.math_mode(_precision.float32_matmul_precision() != "highest")
        stream = self._cp.cuda.get_current_stream().ptr
        if h.stream != stream:  # setting the stream resets the workspace: set both
            _check(self._lib.cublasSetStream_v2(h.ptr, stream), "cublasSetStream")
            _check(self._lib.cublasSetWorkspace_v2(h.ptr, h.workspace.data.ptr, WORKSPACE),
                   "cublasSetWorkspace")
            h.stream = stream
        return h.ptr

    @staticmethod
    def _layout(a: Any) -> tuple[int, int] | None:
        """(op, leading dimension) of the last two axes of ``a`` as a column-major matrix:
        rows (or columns) of unit stride at a stride of at least their length, as a slice
        of a wider matrix has; ``None`` for any other layout."""
        *_, r, c = a.shape
        item = a.itemsize
        sr, sc = a.strides[-2], a.strides[-1]  # the stride of an axis of size 1 is any
        if (c <= 1 or sc == item) and (r <= 1 or (sr >= c * item and sr % item == 0)):
            return _OP_N, max(c, 1) if r <= 1 else sr // item
        if (r <= 1 or sr == item) and (c <= 1 or (sc >= r * item and sc % item == 0)):
            return _OP_T, max(r, 1) if c <= 1 else sc // item
        return None

    def matmul(self, a: Any, b: Any) -> Any | None:
        cp = self._cp
        dt = a.dtype
        if dt != b.dtype or dt not in self._gemm:
            return None
        if a.ndim == 2 and b.ndim == 2:  # the common case, with the least host work
            la, lb = self._layout(a), self._layout(b)
            device = a.data.device_id
            if la is not None and lb is not None and device == cp.cuda.runtime.getDevice():
                m, k = a.shape
                k2, n = b.shape
                if k != k2:
                    raise ValueError(f"matmul: shapes {a.shape} and {b.shape} are not aligned "
                                     f"({k} != {k2})")
                out = cp.empty((m, n), dtype=dt)
                if m and n:
                    if k:
                        one, zero = self._scalars[dt]
                        _check(self._gemm[dt](
                            self._handle(device), lb[0], la[0], n, m, k, one, b.data.ptr,
                            lb[1], a.data.ptr, la[1], zero, out.data.ptr, n), "gemm")
                    else:
                        out.fill(0)
                return out
        if a.ndim < 2 or b.ndim < 2:
            return None
        dims = self._dims_of(a, b)
        m, k, n, batch, _ = dims
        with cp.cuda.Device(a.data.device_id):
            out = cp.empty((*batch, m, n), dtype=dt)
            if out.size == 0:
                return out
            if k == 0:
                out.fill(0)
                return out
            self._run(a, b, dims, out, n, m * n, False)
        return out

    def matmul_into(self, a: Any, b: Any, out: Any, accumulate: bool = False) -> bool:
        """``out = a @ b`` (``accumulate``: ``out += a @ b``, cuBLAS's ``beta = 1``) written
        by cuBLAS into ``out`` where it lies (a slice of a larger array: rows at any stride of
        at least their length, the batch at one stride); ``False``, nothing written, where
        ``out`` is laid out otherwise, is on another device, its shape or dtype is not the
        product's, or the operands are ones :meth:`matmul` declines. Operands whose inner
        sizes differ raise ``ValueError`` as :meth:`matmul` does; ``out`` must not share
        memory with ``a`` or ``b`` (the caller's to ensure, as for a BLAS call)."""
        dt = a.dtype
        if dt != b.dtype or dt != out.dtype or dt not in self._gemm or a.ndim < 2 \
                or b.ndim < 2 or out.data.device_id != a.data.device_id:
            return False
        dims = self._dims_of(a, b)
        m, k, n, batch, _ = dims
        if out.shape != (*batch, m, n) or out.size == 0 or k == 0:
            return False
        key = ("out", out.shape, out.strides, out.itemsize)
        plan = self._plans.get(key, False)
        if plan is False:
            lo = self._layout(out)
            sc = self._batch_stride(out) if out.ndim > 2 else m * n
            ok = lo is not None and lo[0] == _OP_N and sc is not None \
                and not (sc == 0 and out.size > m * n)
            plan = self._keep(key, (lo[1], sc) if ok else None)
        if plan is None:
            return False  # C must be written row by row, each matrix its own
        with self._cp.cuda.Device(a.data.device_id):
            self._run(a, b, dims, out, plan[0], plan[1], accumulate)
        return True

    def _keep(self, key: tuple, plan: Any) -> Any:
        """``plan`` kept for ``key`` (the plans of at most :data:`PLANS` layouts: a model
        has a few dozen product shapes) and returned."""
        if len(self._plans) >= PLANS:
            self._plans.clear()
        self._plans[key] = plan
        return plan

    def _dims_of(self, a: Any, b: Any) -> tuple[int, int, int, tuple[int, ...], int]:
        """:meth:`_dims`, kept per pair of shapes."""
        key = ("dims", a.shape, b.shape)
        dims = self._plans.get(key)
        if dims is None:
            dims = self._keep(key, self._dims(a, b))
        return dims

    @staticmethod
    def _dims(a: Any, b: Any) -> tuple[int, int, int, tuple[int, ...], int]:
        """``(m, k, n, batch shape, batch count)`` of ``a @ b``."""
        m, k = a.shape[-2:]
        k2, n = b.shape[-2:]
        if k != k2:
            raise ValueError(f"matmul: shapes {a.shape} and {b.shape} are not aligned "
                             f"({k} != {k2})")
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        count = 1
        for s in batch:
            count *= s
        return m, k, n, batch, count

    def _run(self, a: Any, b: Any, dims: tuple, out: Any, ldc: int, sc: int,
             accumulate: bool) -> None:
        """cuBLAS's ``a @ b`` (operands read in place where they can be, else copied) into
        ``out``'s memory: rows ``ldc`` elements apart, matrices ``sc`` apart; added to what
        is there with ``accumulate``. On the current device."""
        m, k, n, batch, count = dims
        dt = a.dtype
        key = ("ops", a.shape, a.strides, b.shape, b.strides, a.itemsize, batch)
        plan = self._plans.get(key)
        if plan is not None:  # both read in place, as before for these layouts
            la, lb, sa, sb = plan
        else:
            pa, pb = a.data.ptr, b.data.ptr
            a, sa = self._operand(a, batch)
            b, sb = self._operand(b, batch)
            la, lb = self._layout(a), self._layout(b)
            if a.data.ptr == pa and b.data.ptr == pb:  # no copy: the same plan next time
                self._keep(key, (la, lb, sa, sb))
        h = self._handle(a.data.device_id)
        one, zero = self._scalars[dt]
        beta = one if accumulate else zero
        if count == 1:
            status = self._gemm[dt](h, lb[0], la[0], n, m, k, one, b.data.ptr, lb[1],
                                    a.data.ptr, la[1], beta, out.data.ptr, ldc)
        else:
            status = self._batched[dt](h, lb[0], la[0], n, m, k, one, b.data.ptr, lb[1], sb,
                                       a.data.ptr, la[1], sa, beta, out.data.ptr, ldc, sc,
                                       count)
        _check(status, "gemm")

    def _operand(self, x: Any, batch: tuple[int, ...]) -> tuple[Any, int]:
        """``x`` with its matrices C- or F-ordered at one stride (elements) over the flattened
        ``batch`` (0: one matrix for all), copied where they are not."""
        cp = self._cp
        lead = x.shape[:-2]
        if all(s == 1 for s in lead):  # one matrix for every batch entry
            x2 = x.reshape(x.shape[-2:]) if lead else x
            if self._layout(x2) is None:
                x2 = cp.ascontiguousarray(x2)
            return x2, 0
        if lead != batch:
            x = cp.broadcast_to(x, (*batch, *x.shape[-2:]))
        r, c = x.shape[-2:]
        if self._layout(x) is not None:
            step = self._batch_stride(x)
            if step is not None:
                return x, step
        return cp.ascontiguousarray(x), r * c

    @staticmethod
    def _batch_stride(x: Any) -> int | None:
        """The one stride (elements, 0 for a broadcast) at which the batch axes of ``x``
        flatten, as cuBLAS's strided batches need; ``None`` where they do not (or a stride is
        negative or not of whole elements)."""
        item = x.itemsize
        step = expect = None
        for size, st in zip(reversed(x.shape[:-2]), reversed(x.strides[:-2]), strict=True):
            if size == 1:
                continue
            if st < 0 or st % item:
                return None
            if step is None:
                step, expect = st // item, st // item * size
            elif st // item != expect:
                return None
            else:
                expect *= size
        return x.shape[-2] * x.shape[-1] if step is None else step
