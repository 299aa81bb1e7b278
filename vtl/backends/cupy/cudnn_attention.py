"""``kernel("attention")`` with cuDNN's fused attention for float16 and bfloat16, where
``nvidia-cudnn-frontend`` and cuDNN are installed: forward and backward each one cuDNN
graph (flash attention on tensor cores, float32 softmax and accumulation), on the split
heads and on the packed ``(N, L, 3E)``/``(L, N, 3E)`` projection read in place (its heads
are strided views for cuDNN, the output written with its heads merged and the gradient into
one array of the projection's shape).

* Taken: float16/bfloat16, one head size for queries, keys and values, a multiple of 8 and
  at most 128, no ``attn_mask`` (``is_causal`` is cuDNN's top-left diagonal band), dropout
  included. Everything else (masks, float32/float64, other head sizes) runs vtl's own
  kernels (:class:`~vtl.backends.cupy.attention.CupyAttention`), whose log-sum-exp has the
  same meaning, so either backward follows either forward.
* Dropout keeps vtl's draws, so the numbers match the other backends': the keep mask of the
  weights is formed by vtl's Philox kernel (``vtl_attn_dropout_mask``, the bits the tiled
  kernels apply) and handed to cuDNN as a tensor, formed again for the backward rather than
  kept; masks above :attr:`CudnnAttention.MASK_BYTES` run vtl's kernels. cuDNN's backward
  with a mask tensor divides the ``rowsum(dO * O)`` term by the keep probability as well as
  the kept weights' gradients; it is handed ``O`` times the keep probability, which makes
  that term right (tested against vtl's kernels).
* The backward uses cuDNN's deterministic algorithm, so compiled steps equal eager ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._common.packed_attention import packed_geometry
from .attention import MAX_DIM, CupyAttention
from .cudnn import GraphCache, Handles, c_strides, direct_launch

__all__ = ["CudnnAttention"]

_LOW = {"float16": "HALF", "bfloat16": "BFLOAT16"}
_F32 = np.dtype(np.float32)


class CudnnAttention(CupyAttention):
    """:class:`CupyAttention` with float16/bfloat16 attention through cuDNN's fused
    kernels (see :mod:`vtl.backends.cupy.cudnn_attention`)."""

    #: the largest head size cuDNN's fused attention is asked for
    MAX_HEAD = 128
    #: the largest dropout keep mask (bytes) formed for cuDNN; larger ones run vtl's kernels
    MASK_BYTES = 1 << 28

    def __init__(self, cupy: Any, cudnn: Any, tiled: bool | None = None,
                 gemm: Any = None) -> None:
        super().__init__(cupy, tiled, gemm)
        self._cudnn = cudnn
        self._handles = Handles(cupy, cudnn)
        self._cache = GraphCache()
        self.declined = self._cache.declined  # graph key -> why cuDNN did not serve it
        self.served = 0  # graphs executed (for tests and `vtl info`)

    # -- which calls cuDNN takes ---------------------------------------------------------
    def _takes(self, dtype: Any, d: int, dv: int, mask: Any, dropout: Any, weights: int
               ) -> bool:
        """Whether cuDNN is asked for attention of ``dtype`` with head sizes ``d``/``dv``
        over ``weights`` attention weights (with dropout, a keep mask of that many 16-bit
        values)."""
        return (np.dtype(dtype).name in _LOW and mask is None and d == dv and d % 8 == 0
                and 0 < d <= self.MAX_HEAD
                and (dropout is None or 2 * weights <= self.MASK_BYTES))

    # -- graphs ----------------------------------------------------------------------------
    def _graph(self, key: tuple) -> Any:
        return self._cache.get(key, self._build)

    def _build(self, key: tuple) -> tuple:
        cudnn = self._cudnn
        op, name, (n, h, lq, lk, d), strides, causal, scale, drop, _device = key
        dt = getattr(cudnn.data_type, _LOW[name])
        f32 = cudnn.data_type.FLOAT
        graph = cudnn.pygraph(io_data_type=dt, intermediate_data_type=f32,
                              compute_data_type=f32, handle=self._handles.get())
        qdim, kdim = [n, h, lq, d], [n, h, lk, d]

        def tensor(tname: str, dim: list, stride: Any, dtype: Any = dt) -> Any:
            return graph.tensor(name=tname, dim=dim, stride=list(stride), data_type=dtype)

        q, k, v = (tensor("q", qdim, strides[0]), tensor("k", kdim, strides[1]),
                   tensor("v", kdim, strides[2]))
        band = {"diagonal_band_right_bound": 0 if causal else None,
                "diagonal_alignment": cudnn.diagonal_alignment.TOP_LEFT}
        stats_dim, stats_stride = [n, h, lq, 1], [h * lq, lq, 1, 1]
        ins, extra = [q, k, v], {}
        if op == "fwd":
            if drop:
                keep = tensor("keep", [n, h, lq, lk], c_strides((n, h, lq, lk)))
                sc = tensor("scale", [1, 1, 1, 1], [1, 1, 1, 1], f32)
                extra["dropout"] = (keep, sc)
                ins += [keep, sc]
            o, st = graph.sdpa(name="sdpa", q=q, k=k, v=v, generate_stats=True,
                               attn_scale=scale, **band, **extra)
            o.set_output(True).set_dim(qdim).set_stride(list(strides[3])).set_data_type(dt)
            st.set_output(True).set_dim(stats_dim).set_stride(stats_stride).set_data_type(f32)
            outs = [o, st]
        else:
            o, do = tensor("o", qdim, strides[3]), tensor("do", qdim, strides[4])
            st = tensor("stats", stats_dim, stats_stride, f32)
            ins += [o, do, st]
            if drop:
                keep = tensor("keep", [n, h, lq, lk], c_strides((n, h, lq, lk)))
                sc = tensor("scale", [1, 1, 1, 1], [1, 1, 1, 1], f32)
                sci = tensor("scale_inv", [1, 1, 1, 1], [1, 1, 1, 1], f32)
                extra["dropout"] = (keep, sc, sci)
                ins += [keep, sc, sci]
            dq, dk, dv = graph.sdpa_backward(name="sdpa_backward", q=q, k=k, v=v, o=o, dO=do,
                                             stats=st, attn_scale=scale,
                                             use_deterministic_algorithm=True, **band,
                                             **extra)
            for t, dim, stride in ((dq, qdim, strides[5]), (dk, kdim, strides[6]),
                                   (dv, kdim, strides[7])):
                t.set_output(True).set_dim(dim).set_stride(list(stride)).set_data_type(dt)
            outs = [dq, dk, dv]
        graph.validate()
        graph.build_operation_graph()
        graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        graph.check_support()
        graph.build_plans()
        tensors = ins + outs
        return (graph, tensors, graph.get_workspace_size(),
                direct_launch(graph, tuple(t.uid for t in tensors)))

    def _run(self, built: tuple, ptrs: list[int]) -> None:
        graph, tensors, ws, direct = built
        work = self._cp.empty(ws, dtype=self._cp.uint8) if ws else None  # held to the launch
        ptr = 0 if work is None else work.data.ptr
        handle = self._handles.get()
        if direct is not None:
            direct(handle, tuple(ptrs), ptr)
        else:
            graph.execute(dict(zip(tensors, ptrs, strict=True)), ptr or None, handle=handle)
        self.served += 1

    def _dropout_operands(self, dropout: Any, dtype: Any, total: int, backward: bool
                          ) -> tuple[list, list[int]]:
        """The keep mask of ``total`` weights and the scale tensors (the arrays, to hold
        until the launch, and their pointers)."""
        cp = self._cp
        p = dropout[0]
        args = self._drop_args(dropout, dtype, True)[:-1]  # words, mode, keep threshold
        keep = cp.empty(total, dtype=dtype)
        kern, _ = self._kernel("vtl_attn_dropout_mask", dtype, 8, 8, True)
        kern((-(-total // 1024),), (256,), (keep, np.int64(total), *args))
        arrays = [keep, cp.full(1, 1.0 / (1.0 - p), dtype=_F32)]
        if backward:
            arrays.append(cp.full(1, 1.0 - p, dtype=_F32))
        return arrays, [a.data.ptr for a in arrays]

    def _execute(self, op: str, dims: tuple, strides: tuple, ptrs: list[int], causal: bool,
                 scale: float, dtype: Any, dropout: Any = None, out: Any = None) -> bool:
        """Run the ``"fwd"`` graph (``ptrs``: q, k, v, o, stats) or the ``"bwd"`` one (q, k,
        v, o, dO, stats, dq, dk, dv; ``out`` the forward's output, for dropout); ``False``
        where cuDNN has no engine for it."""
        built = self._graph((op, np.dtype(dtype).name, dims, strides, bool(causal),
                             float(scale), dropout is not None, self._cp.cuda.Device().id))
        if built is None:
            return False
        held: list = []
        if dropout is not None:
            n, h, lq, lk, _ = dims
            held, extra = self._dropout_operands(dropout, dtype, n * h * lq * lk, op == "bwd")
            if op == "fwd":
                ptrs = ptrs[:3] + extra + ptrs[3:]
            else:  # O times the keep probability: see the module's docstring
                o = (out.astype(_F32) * (1.0 - dropout[0])).astype(dtype)
                held.append(o)
                ptrs = ptrs[:3] + [o.data.ptr] + ptrs[4:6] + extra + ptrs[6:]
        self._run(built, ptrs)
        del held  # the launch is ordered on the stream before any reuse of the memory
        return True

    # -- the kernel contract ---------------------------------------------------------------
    def forward(self, q: Any, k: Any, v: Any, mask: Any, causal: bool, scale: float,
                batch: tuple[int, int], dropout: Any = None) -> tuple[Any, Any] | None:
        b, n_q, d = q.shape
        n_k, dv = v.shape[1], v.shape[2]
        if not (q.dtype == k.dtype == v.dtype) or 0 in (b, n_q, n_k) \
                or not self._takes(q.dtype, d, dv, mask, dropout, b * n_q * n_k):
            return super().forward(q, k, v, mask, causal, scale, batch, dropout)
        cp = self._cp
        q, k, v = (cp.ascontiguousarray(a) for a in (q, k, v))
        out = cp.empty((b, n_q, d), dtype=q.dtype)
        lse = cp.empty((b, n_q), dtype=_F32)
        b1, b2 = batch
        qs, ks = c_strides((b1, b2, n_q, d)), c_strides((b1, b2, n_k, d))
        if not self._execute("fwd", (b1, b2, n_q, n_k, d), (qs, ks, ks, qs),
                             [q.data.ptr, k.data.ptr, v.data.ptr, out.data.ptr, lse.data.ptr],
                             causal, scale, q.dtype, dropout):
            return super().forward(q, k, v, mask, causal, scale, batch, dropout)
        return out, lse

    def backward(self, q: Any, k: Any, v: Any, out: Any, lse: Any, g: Any, mask: Any,
                 causal: bool, scale: float, batch: tuple[int, int], dropout: Any = None
                 ) -> tuple[Any, Any, Any]:
        b, n_q, d = q.shape
        n_k, dv = v.shape[1], v.shape[2]
        cp = self._cp
        if (q.dtype == k.dtype == v.dtype == g.dtype == out.dtype) and lse.dtype == _F32 \
                and self._takes(q.dtype, d, dv, mask, dropout, b * n_q * n_k) \
                and 0 not in (b, n_q, n_k):
            q, k, v, out, g, lse = (cp.ascontiguousarray(a) for a in (q, k, v, out, g, lse))
            dq, dk, dvv = cp.empty_like(q), cp.empty_like(k), cp.empty_like(v)
            b1, b2 = batch
            qs, ks = c_strides((b1, b2, n_q, d)), c_strides((b1, b2, n_k, d))
            if self._execute("bwd", (b1, b2, n_q, n_k, d), (qs, ks, ks, qs, qs, qs, ks, ks),
                              [a.data.ptr for a in (q, k, v, out, g, lse, dq, dk, dvv)],
                              causal, scale, q.dtype, dropout, out):
                return dq, dk, dvv
        return super().backward(q, k, v, out, lse, g, mask, causal, scale, batch, dropout)

    def _packed_layout(self, qkv: Any, heads: int, batch_first: bool, mask: Any,
                       dropout: Any) -> tuple | None:
        """``(dims, q strides, output strides)`` of a packed projection cuDNN takes."""
        geo = packed_geometry(qkv.shape, heads, batch_first, MAX_DIM)
        if geo is None:
            return None
        n, length, e = geo
        hd = e // heads
        if not self._takes(qkv.dtype, hd, hd, mask, dropout, n * heads * length * length):
            return None
        if batch_first:
            qs, os_ = (length * 3 * e, hd, 3 * e, 1), (length * e, hd, e, 1)
        else:
            qs, os_ = (3 * e, hd, n * 3 * e, 1), (e, hd, n * e, 1)
        return (n, heads, length, length, hd), qs, os_

    def forward_packed(self, qkv: Any, heads: int, batch_first: bool, mask: Any,
                       causal: bool, scale: float, dropout: Any = None
                       ) -> tuple[Any, Any] | None:
        layout = self._packed_layout(qkv, heads, batch_first, mask, dropout)
        if layout is not None:
            cp = self._cp
            dims, qs, os_ = layout
            n, h, length, _, hd = dims
            qkv = cp.ascontiguousarray(qkv)
            out = cp.empty((*qkv.shape[:2], h * hd), dtype=qkv.dtype)
            lse = cp.empty((n * h, length), dtype=_F32)
            base, step = qkv.data.ptr, h * hd * qkv.itemsize
            if self._execute("fwd", dims, (qs, qs, qs, os_),
                             [base, base + step, base + 2 * step, out.data.ptr, lse.data.ptr],
                             causal, scale, qkv.dtype, dropout):
                return out, lse
        return super().forward_packed(qkv, heads, batch_first, mask, causal, scale, dropout)

    def backward_packed(self, qkv: Any, out: Any, lse: Any, g: Any, heads: int,
                        batch_first: bool, mask: Any, causal: bool, scale: float,
                        dropout: Any = None) -> Any:
        layout = self._packed_layout(qkv, heads, batch_first, mask, dropout)
        if layout is not None and lse.dtype == _F32:
            cp = self._cp
            dims, qs, os_ = layout
            dt = qkv.dtype
            qkv = cp.ascontiguousarray(qkv)
            g, out = cp.ascontiguousarray(g.astype(dt, copy=False)), cp.ascontiguousarray(out)
            lse = cp.ascontiguousarray(lse)
            grad = cp.empty(qkv.shape, dtype=dt)
            step = dims[1] * dims[4] * qkv.itemsize
            base, gb = qkv.data.ptr, grad.data.ptr
            if self._execute("bwd", dims, (qs, qs, qs, os_, os_, qs, qs, qs),
                              [base, base + step, base + 2 * step, out.data.ptr, g.data.ptr,
                               lse.data.ptr, gb, gb + step, gb + 2 * step], causal, scale,
                              dt, dropout, out):
                return grad
        return super().backward_packed(qkv, out, lse, g, heads, batch_first, mask, causal,
                                       scale, dropout)
