"""``kernel("batch_norm")`` of the CuPy backend (the contract is ``BatchNormKernel`` in
``vtl.backends.kernels``): training-mode batch normalisation in three launches each way,
where the portable path takes about a dozen array ops forward and twenty backward.

* statistics (:data:`BN_PARTIAL`): a block per (channel, slab of the channel's
  ``N * HW`` elements) sums in double, in a fixed order (deterministic, no atomics):
  forward the deviations from the channel's first element and their squares (so a large
  mean does not cancel the variance away), backward ``g`` and ``g * (x - mean)``;
* a thread per channel (:data:`BN_FORWARD_STATS`, :data:`BN_BACKWARD_COEFFS`) adds the
  slabs in order and derives mean, biased variance, ``1/sqrt(var + eps)`` and the
  per-channel factors, or the weight and bias gradients and the factors of ``dx``;
* one elementwise pass (:data:`BN_APPLY`) writes ``y = (x - mean) * scale + bias`` or
  ``dx = g * scale - (x - mean) * k - c``;
* the running statistics' update is one more launch (:data:`BN_RUNNING`), where the
  portable update takes about ten array ops;
* :func:`channel_sums` (a convolution's bias gradient) sums ``g`` per channel the way the
  statistics do, in two launches.

float16/bfloat16 inputs are read and written as 16-bit words and computed in float32 (one
rounding per result), with float32 statistics, and take float32 (or same-dtype) weight and
bias, as autocast gives them; their weight and bias gradients come back in the weight's
dtype. The sources are :class:`~vtl.backends.cupy.nn.Spec` objects, compiled by NVRTC and,
in the tests, for the host.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .nn import _I32, _I64, FLOAT_NAMES, KernelFamily, Spec, _blocks, compute_dtype

__all__ = ["BN_APPLY", "BN_BACKWARD_COEFFS", "BN_FORWARD_STATS", "BN_PARTIAL", "BN_RUNNING",
           "CHANNEL_SUM_FINISH", "CHANNEL_SUM_PARTIAL", "SPECS", "CupyBatchNorm",
           "channel_sums"]

#: blocks the statistics launch aims at, and the fewest elements a slab gets
BN_BLOCKS = 1024
BN_SLAB_MIN = 4096
_THREADS = 256

_SIZES = ("const long long", "C"), ("const long long", "HW"), ("const long long", "NHW")


def _narrow(names: str) -> str:
    return "".join(f"const TI {k}_ = (TI){k};\n" for k in names.split())


#: ``part[(c * S + s) * 2 + {0, 1}]``: block ``c * S + s`` sums slab ``s`` of channel ``c``
#: (``mode`` 0: ``x - x[c, first]`` and its square; 1: ``g`` and ``g * (x - stats[c])``)
BN_PARTIAL = Spec("vtl_bn_partial", (
    ("const T* __restrict__", "x"), ("const T* __restrict__", "g"),
    ("const A* __restrict__", "stats"), ("double* __restrict__", "part"), *_SIZES,
    ("const long long", "S"), ("const int", "mode")), _narrow("C HW NHW S") + r"""
  __shared__ double sh0[256], sh1[256];
  const TI c = (TI)blockIdx.x / S_, s = (TI)blockIdx.x - c * S_;
  const TI rows = (NHW_ + S_ - 1) / S_;
  const TI j1 = (s + 1) * rows < NHW_ ? (s + 1) * rows : NHW_;
  const unsigned t = threadIdx.x;
  const double ref = mode == 0 ? (double)vtl_ld(x[(TI)c * HW_]) : (double)stats[c];
  double a0 = 0, a1 = 0;
  for (TI j = s * rows + (TI)t; j < j1; j += (TI)blockDim.x) {
    const TI n = j / HW_;
    const TI i = (n * C_ + c) * HW_ + (j - n * HW_);
    const double d = (double)vtl_ld(x[i]) - ref;
    if (mode == 0) { a0 += d; a1 += d * d; }
    else { const double gv = (double)vtl_ld(g[i]); a0 += gv; a1 += gv * d; }
  }
  sh0[t] = a0; sh1[t] = a1;
  __syncthreads();
  for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
    if (t < k) { sh0[t] += sh0[t + k]; sh1[t] += sh1[t + k]; }
    __syncthreads();
  }
  if (t == 0) { part[((TI)c * S_ + s) * 2] = sh0[0]; part[((TI)c * S_ + s) * 2 + 1] = sh1[0]; }
""")

#: a thread per channel: ``stats`` rows mean, biased variance, rstd, scale (``rstd * w``),
#: bias (``b`` or 0); ``flags``: 1 weight given, 2 bias given
BN_FORWARD_STATS = Spec("vtl_bn_forward_stats", (
    ("const double* __restrict__", "part"), ("const T* __restrict__", "x"),
    ("const A* __restrict__", "w"), ("const A* __restrict__", "b"),
    ("A* __restrict__", "stats"), *_SIZES, ("const long long", "S"), ("const A", "eps"),
    ("const int", "flags")), _narrow("C HW NHW S") + r"""
  const TI c = (TI)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C_) return;
  double s0 = 0, s1 = 0;
  for (TI s = 0; s < S_; ++s) { s0 += part[(c * S_ + s) * 2]; s1 += part[(c * S_ + s) * 2 + 1]; }
  const double m = s0 / (double)NHW_;
  double var = s1 / (double)NHW_ - m * m;
  if (var < 0) var = 0;
  const A rstd = (A)(1.0 / sqrt((double)(A)var + (double)eps));
  stats[c] = (A)((double)vtl_ld(x[c * HW_]) + m);
  stats[C_ + c] = (A)var;
  stats[2 * C_ + c] = rstd;
  stats[3 * C_ + c] = (flags & 1) ? rstd * w[c] : rstd;
  stats[4 * C_ + c] = (flags & 2) ? b[c] : (A)0;
""")

#: a thread per channel: ``dw = sum(g (x - mean)) * rstd``, ``db = sum(g)``;
#: ``coef`` rows ``k = scale * rstd^2 * sum(g (x - mean)) / n`` and ``scale * sum(g) / n``
BN_BACKWARD_COEFFS = Spec("vtl_bn_backward_coeffs", (
    ("const double* __restrict__", "part"), ("const A* __restrict__", "stats"),
    ("A* __restrict__", "dw"), ("A* __restrict__", "db"), ("A* __restrict__", "coef"),
    ("const long long", "C"),
    ("const long long", "NHW"), ("const long long", "S")), _narrow("C NHW S") + r"""
  const TI c = (TI)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C_) return;
  double sg = 0, sgd = 0;
  for (TI s = 0; s < S_; ++s) { sg += part[(c * S_ + s) * 2]; sgd += part[(c * S_ + s) * 2 + 1]; }
  const double rstd = (double)stats[2 * C_ + c], scale = (double)stats[3 * C_ + c];
  const double n = (double)NHW_;
  dw[c] = (A)(sgd * rstd);
  db[c] = (A)sg;
  coef[c] = (A)(scale * rstd * rstd * sgd / n);
  coef[C_ + c] = (A)(scale * sg / n);
""")

#: elementwise over the ``(N, C, HW)`` array: ``mode`` 0 ``out = (x - mean) * scale + bias``,
#: 1 ``out = g * scale - (x - mean) * coef[c] - coef[C + c]``
BN_APPLY = Spec("vtl_bn_apply", (
    ("const T* __restrict__", "x"), ("const T* __restrict__", "g"),
    ("const A* __restrict__", "stats"), ("const A* __restrict__", "coef"),
    ("T* __restrict__", "out"), ("const long long", "C"), ("const long long", "HW"),
    ("const long long", "total"), ("const int", "mode")), _narrow("C HW total") + r"""
  const TI stride = (TI)blockDim.x * gridDim.x;
  for (TI i = (TI)blockIdx.x * blockDim.x + threadIdx.x; i < total_; i += stride) {
    const TI c = (i / HW_) % C_;
    const A d = vtl_ld(x[i]) - stats[c];
    if (mode == 0) out[i] = vtl_st(d * stats[3 * C_ + c] + stats[4 * C_ + c]);
    else out[i] = vtl_st(vtl_ld(g[i]) * stats[3 * C_ + c] - d * coef[c] - coef[C_ + c]);
  }
""")

#: a thread per channel: ``rm = a * rm + b * mean``, ``rv = a * rv + bv * var`` (the running
#: statistics' update; ``bv`` carries the unbiasing ``n / (n - 1)``)
BN_RUNNING = Spec("vtl_bn_running", (
    ("const A* __restrict__", "mean"), ("const A* __restrict__", "var"),
    ("A* __restrict__", "rm"), ("A* __restrict__", "rv"), ("const long long", "C"),
    ("const A", "a"), ("const A", "b"), ("const A", "bv")), r"""
  const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  rm[c] = a * rm[c] + b * mean[c];
  rv[c] = a * rv[c] + bv * var[c];
""")

#: ``part[c * S + s]``: block ``c * S + s`` sums slab ``s`` of channel ``c`` of ``g`` in double,
#: in a fixed order (the channel sums of a bias gradient, first launch)
CHANNEL_SUM_PARTIAL = Spec("vtl_channel_sum_partial", (
    ("const T* __restrict__", "g"), ("double* __restrict__", "part"), *_SIZES,
    ("const long long", "S")), _narrow("C HW NHW S") + r"""
  __shared__ double sh[256];
  const TI c = (TI)blockIdx.x / S_, s = (TI)blockIdx.x - c * S_;
  const TI rows = (NHW_ + S_ - 1) / S_;
  const TI j1 = (s + 1) * rows < NHW_ ? (s + 1) * rows : NHW_;
  const unsigned t = threadIdx.x;
  double a = 0;
  for (TI j = s * rows + (TI)t; j < j1; j += (TI)blockDim.x) {
    const TI n = j / HW_;
    a += (double)vtl_ld(g[(n * C_ + c) * HW_ + (j - n * HW_)]);
  }
  sh[t] = a;
  __syncthreads();
  for (unsigned k = blockDim.x / 2; k > 0; k >>= 1) {
    if (t < k) sh[t] += sh[t + k];
    __syncthreads();
  }
  if (t == 0) part[(TI)c * S_ + s] = sh[0];
""")

#: a thread per channel: ``out[c] = sum_s part[c * S + s]`` in slab order, rounded once
CHANNEL_SUM_FINISH = Spec("vtl_channel_sum_finish", (
    ("const double* __restrict__", "part"), ("T* __restrict__", "out"),
    ("const long long", "C"), ("const long long", "S")), _narrow("C S") + r"""
  const TI c = (TI)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C_) return;
  double a = 0;
  for (TI s = 0; s < S_; ++s) a += part[c * S_ + s];
  out[c] = vtl_st((A)a);
""")

SPECS = (BN_PARTIAL, BN_FORWARD_STATS, BN_BACKWARD_COEFFS, BN_APPLY, BN_RUNNING,
         CHANNEL_SUM_PARTIAL, CHANNEL_SUM_FINISH)


def _slabs(c: int, nhw: int) -> int:
    """Slabs per channel of a per-channel sum over ``nhw`` elements each: about
    :data:`BN_BLOCKS` blocks in all, each slab at least :data:`BN_SLAB_MIN` elements."""
    return max(1, min(-(-BN_BLOCKS // c), -(-nhw // BN_SLAB_MIN)))


def channel_sums(kernels: Any, cupy: Any, g: Any) -> Any:
    """``sum(g, axis=(0, 2, ...))`` of an ``(N, C, ...)`` array of a float dtype (a
    convolution's bias gradient): summed in double in a fixed order (deterministic), rounded
    once into ``g``'s dtype; two launches of ``kernels`` (a ``_Kernels``)."""
    n, c = g.shape[:2]
    hw = g.size // (n * c) if n * c else 0
    out = cupy.empty((c,), dtype=g.dtype)
    if c == 0:
        return out
    if g.size == 0:
        out.fill(0)
        return out
    dt = np.dtype(g.dtype)
    g = cupy.ascontiguousarray(g)
    ti = np.int32 if g.size + BN_BLOCKS * _THREADS < 2**31 else np.int64
    slabs = _slabs(c, n * hw)
    part = cupy.empty((c * slabs,), dtype=np.float64)
    kernels.get(CHANNEL_SUM_PARTIAL, dt, ti)((c * slabs,), (_THREADS,), (
        g, part, _I64(c), _I64(hw), _I64(n * hw), _I64(slabs)))
    kernels.get(CHANNEL_SUM_FINISH, dt, ti)((_blocks(c),), (_THREADS,), (
        part, out, _I64(c), _I64(slabs)))
    return out


class CupyBatchNorm(KernelFamily):
    """``kernel("batch_norm")`` on CuPy arrays: float32, float64, float16 and bfloat16."""

    #: float16/bfloat16 inputs take float32 weight and bias (autocast's mixed case)
    takes_float32_params = True

    def _param(self, p: Any, c: int, dt: np.dtype, adt: np.dtype) -> Any:
        """``p`` as a contiguous ``(C,)`` array of ``adt``; ``False`` if it is not one."""
        if p is None:
            return None
        if type(p) is not self._cp.ndarray or p.shape != (c,) or p.dtype not in (dt, adt):
            return False
        return self._cp.ascontiguousarray(p.astype(adt, copy=False))

    def forward(self, x: Any, w: Any, b: Any, eps: float) -> tuple[Any, Any, Any, Any] | None:
        cp = self._cp
        if type(x) is not cp.ndarray or x.ndim < 2 or x.dtype not in FLOAT_NAMES \
                or 0 in x.shape:
            return None
        dt = np.dtype(x.dtype)
        adt = compute_dtype(dt)
        n, c = x.shape[:2]
        hw = x.size // (n * c)
        with self._device_of(x):
            wa, ba = self._param(w, c, dt, adt), self._param(b, c, dt, adt)
            if wa is False or ba is False or n * hw < 2:
                return None
            x = cp.ascontiguousarray(x)
            # 32-bit indices unless a grid-stride step could pass 2**31
            ti = np.int32 if x.size + _blocks(x.size) * _THREADS < 2**31 else np.int64
            slabs = _slabs(c, n * hw)
            part = cp.empty((c * slabs * 2,), dtype=np.float64)
            stats = cp.empty((5, c), dtype=adt)
            sizes = (_I64(c), _I64(hw), _I64(n * hw))
            self._k.get(BN_PARTIAL, dt, ti)((c * slabs,), (_THREADS,), (
                x, x, stats, part, *sizes, _I64(slabs), _I32(0)))
            flags = (1 if wa is not None else 0) | (2 if ba is not None else 0)
            self._k.get(BN_FORWARD_STATS, dt, ti)((_blocks(c),), (_THREADS,), (
                part, x, stats if wa is None else wa, stats if ba is None else ba, stats,
                *sizes, _I64(slabs), adt.type(eps), _I32(flags)))
            y = cp.empty(x.shape, dtype=dt)
            self._k.get(BN_APPLY, dt, ti)((_blocks(x.size),), (_THREADS,), (
                x, x, stats, stats, y, _I64(c), _I64(hw), _I64(x.size), _I32(0)))
            self.launches += 3
        return y, stats[0], stats[1], (x, stats, slabs, ti)

    def update_running(self, mean: Any, var: Any, running_mean: Any, running_var: Any,
                       momentum: float, count: int) -> bool:
        """``running = (1 - momentum) * running + momentum * batch`` (the variance
        unbiased by ``count / (count - 1)``) in place, in one launch, for the float32/float64
        ``(C,)`` statistics of :meth:`forward` and running statistics of their dtype;
        ``False`` (nothing done) otherwise."""
        cp = self._cp
        arrays = (mean, var, running_mean, running_var)
        if not all(type(a) is cp.ndarray and a.ndim == 1 and a.flags.c_contiguous
                   for a in arrays):
            return False
        dt = np.dtype(mean.dtype)
        c = mean.shape[0]
        if dt not in (np.float32, np.float64) or any(a.dtype != dt or a.shape != (c,)
                                                     for a in arrays):
            return False
        with self._device_of(mean):
            self._k.get(BN_RUNNING, dt)((_blocks(c),), (_THREADS,), (
                mean, var, running_mean, running_var, _I64(c), dt.type(1.0 - momentum),
                dt.type(momentum), dt.type(momentum * count / (count - 1))))
        self.launches += 1
        return True

    def backward(self, saved: Any, w: Any, g: Any, need_x: bool, need_w: bool,
                 need_b: bool) -> tuple[Any, Any, Any] | None:
        cp = self._cp
        x, stats, slabs, ti = saved
        if type(g) is not cp.ndarray or g.shape != x.shape or g.dtype not in FLOAT_NAMES:
            return None
        dt = np.dtype(x.dtype)
        adt = stats.dtype
        n, c = x.shape[:2]
        hw = x.size // (n * c)
        with self._device_of(x):
            g = cp.ascontiguousarray(g.astype(dt, copy=False))
            part = cp.empty((c * slabs * 2,), dtype=np.float64)
            sizes = (_I64(c), _I64(hw), _I64(n * hw))
            self._k.get(BN_PARTIAL, dt, ti)((c * slabs,), (_THREADS,), (
                x, g, stats, part, *sizes, _I64(slabs), _I32(1)))
            # two arrays, not two rows of one: a view would be copied again before it
            # became a parameter's .grad
            sw, sb = cp.empty((c,), dtype=adt), cp.empty((c,), dtype=adt)
            coef = cp.empty((2, c), dtype=adt)
            self._k.get(BN_BACKWARD_COEFFS, dt, ti)((_blocks(c),), (_THREADS,), (
                part, stats, sw, sb, coef, _I64(c), _I64(n * hw), _I64(slabs)))
            self.launches += 2
            dx = None
            if need_x:
                dx = cp.empty(x.shape, dtype=dt)
                self._k.get(BN_APPLY, dt, ti)((_blocks(x.size),), (_THREADS,), (
                    x, g, stats, coef, dx, _I64(c), _I64(hw), _I64(x.size), _I32(1)))
                self.launches += 1
        pdt = adt if w is None else w.dtype
        dw = sw.astype(pdt, copy=False) if need_w else None
        db = sb.astype(pdt, copy=False) if need_b else None
        return dx, dw, db
