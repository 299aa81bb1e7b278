"""The optional kernels vtl may ask a backend for: one typed contract per kernel name.

The array API standard covers what every op needs; a backend may also provide fused
kernels for the hot spots of training (a convolution, a fused loss, an optimizer step
over all parameters at once...). Each kernel has a name, and here a ``typing.Protocol``
saying what it takes and returns. vtl looks a kernel up one way only::

    kern = tensor.device.backend.kernel("conv2d")   # None: the backend has none

and a backend registers its kernels in one place (the ``register`` function of
``vtl/backends/<name>/backend.py``) through :meth:`Backend.register_kernel
<vtl.backends.Backend.register_kernel>`, which refuses names not listed in
:data:`KERNELS` and objects lacking a method of the contract.

All kernels work on the backend's raw arrays (never on ``vtl.Tensor``), record nothing
in the autograd graph, and never wait for the device: a value check that needs the
device's data is left to a device-side flag that the backend reports at the next host
read (see ``CrossEntropyKernel``). A kernel may **decline** arguments it does not
handle by returning ``None`` (or ``False`` from ``supports``); vtl then runs the portable
array-API path, which stays the oracle the kernel's tests compare against. Where the
contract says a method returns a result (not ``None``), the kernel must handle every
argument ``supports`` accepted.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = [
    "KERNELS", "AmpUnscaleKernel", "AmpUpdateScaleKernel", "AttentionKernel",
    "BatchNormKernel", "Conv2dKernel", "CrossEntropyKernel",
    "GeluKernel",
    "GruCellKernel", "LayerNormKernel",
    "LinearGradWeightKernel", "LinearKernel", "LstmCellKernel", "MinmaxBackwardKernel",
    "MultiTensorApplyKernel", "PhiloxKernel", "Pool2dKernel", "ReluBackwardKernel",
    "SiluKernel", "ZeroWhereKernel",
]


@runtime_checkable
class Conv2dKernel(Protocol):
    """``kernel("conv2d")``: a 2-D convolution (NCHW) and its gradients.

    ``forward(x, w, b, stride, padding, dilation, groups)`` (``x``: 4-D input, ``w``:
    ``(C_out, C_in/groups, kh, kw)``, ``b``: ``None`` or ``(C_out,)``, ``padding = (top,
    bottom, left, right)``) returns ``(out, ctx)``: the ``(N, C_out, Ho, Wo)`` result and
    what the backward needs besides the weight (kept only while the weight or bias needs
    a gradient; otherwise ``None`` is passed back), or ``None`` for arguments it does not
    take.
    ``backward(ctx, x_shape, w, g, stride, padding, dilation, groups, need_x, need_w,
    need_b)`` returns ``(dx, dw, db)`` (``None`` where not asked for).
    """

    def supports(self, dtype: Any) -> bool:
        """Whether the kernel takes operands of ``dtype`` (input, weight and bias share it)."""
        ...

    def forward(self, x: Any, w: Any, b: Any, stride: tuple[int, int],
                padding: tuple[int, int, int, int], dilation: tuple[int, int],
                groups: int) -> tuple[Any, Any] | None: ...

    def backward(self, ctx: Any, x_shape: tuple[int, ...], w: Any, g: Any,
                 stride: tuple[int, int], padding: tuple[int, int, int, int],
                 dilation: tuple[int, int], groups: int, need_x: bool, need_w: bool,
                 need_b: bool) -> tuple[Any, Any, Any]: ...


@runtime_checkable
class Pool2dKernel(Protocol):
    """``kernel("pool2d")``: max and average pooling of 4-D (NCHW) arrays, both ways.

    Geometry: ``k``, ``s``, ``p`` (symmetric padding), ``d`` pairs and the output size
    ``out`` (``ceil_mode`` applied; windows may run past the padding, those taps count
    as padding). ``max_forward`` returns the maxima and ``arg``, the row-major tap
    number ``a*kw + b`` of the first maximal element of each window, or of its first
    nan (padding reads ``-inf``); ``max_backward`` adds each output gradient to the
    chosen element. ``avg_*`` divide window sums (zero padding) by PyTorch's divisors.
    """

    def supports(self, dtype: Any) -> bool: ...

    def max_forward(self, x: Any, k: tuple[int, int], s: tuple[int, int],
                    p: tuple[int, int], d: tuple[int, int], out: tuple[int, int]
                    ) -> tuple[Any, Any]: ...

    def max_backward(self, arg: Any, x_shape: tuple[int, ...], g: Any, k: tuple[int, int],
                     s: tuple[int, int], p: tuple[int, int], d: tuple[int, int]) -> Any: ...

    def avg_forward(self, x: Any, k: tuple[int, int], s: tuple[int, int],
                    p: tuple[int, int], out: tuple[int, int], count_include_pad: bool,
                    divisor_override: int | None) -> Any: ...

    def avg_backward(self, x_shape: tuple[int, ...], g: Any, k: tuple[int, int],
                     s: tuple[int, int], p: tuple[int, int], count_include_pad: bool,
                     divisor_override: int | None) -> Any: ...


@runtime_checkable
class LinearKernel(Protocol):
    """``kernel("linear")``: ``x @ w.T + b`` in one launch (the bias add as the product's
    epilogue); with ``relu``, ``maximum(x @ w.T + b, 0)`` (``nn.functional.linear_relu``),
    the ReLU in the same epilogue where the backend can.

    ``x`` is ``(M, K)``, ``w`` ``(N, K)`` (possibly a transposed view), ``b`` ``None`` or
    ``(N,)``, all of one floating dtype. Returns a new ``(M, N)`` array, or ``None`` to
    decline (with ``relu``, the caller then applies the ReLU to the plain result).
    """

    def __call__(self, x: Any, w: Any, b: Any, relu: bool = False) -> Any | None: ...


@runtime_checkable
class LinearGradWeightKernel(Protocol):
    """``kernel("linear_grad_weight")``: the weight gradient ``g.T @ x`` of ``linear`` and,
    with ``bias``, the bias gradient (the column sums of ``g``) in the same pass.

    ``g`` is ``(M, N)``, ``x`` ``(M, K)``. Returns ``(dw, db)`` (``db`` ``None`` without
    ``bias``), or ``None`` to decline.
    """

    def __call__(self, g: Any, x: Any, bias: bool) -> tuple[Any, Any] | None: ...


@runtime_checkable
class ReluKernel(Protocol):
    """``kernel("relu")``: ``maximum(x, 0)`` for a floating ``x``, NumPy's values (nan stays
    nan). Returns a new array, or ``None`` to decline (the caller then computes
    ``maximum(x, 0)`` itself)."""

    def __call__(self, x: Any) -> Any | None: ...


@runtime_checkable
class ReluBackwardKernel(Protocol):
    """``kernel("relu_backward")``: ``where(x <= 0, 0, g)`` for ``x`` and ``g`` of one shape
    and floating dtype (a nan in ``x`` passes ``g`` through, as PyTorch). Returns a new
    array, or ``None`` to decline."""

    def __call__(self, x: Any, g: Any) -> Any | None: ...


@runtime_checkable
class ZeroWhereKernel(Protocol):
    """``kernel("zero_where")``: ``where(mask, 0, g)`` for a boolean ``mask`` of ``g``'s
    shape; masked elements are ``+0.0`` (nan and inf in ``g`` do not leak through).
    Returns a new array, or ``None`` to decline."""

    def __call__(self, mask: Any, g: Any) -> Any | None: ...


@runtime_checkable
class MinmaxBackwardKernel(Protocol):
    """``kernel("minmax_backward")``: the gradient of ``maximum(a, b)`` (``minimum`` when
    not ``greater_is_first``) to ``a``: ``g`` where ``a`` wins, ``g / 2`` on ties, ``+0.0``
    where it loses. ``a`` has ``g``'s shape and dtype; ``b`` broadcasts to it (an array
    or a Python number). Returns a new array, or ``None`` to decline."""

    def __call__(self, a: Any, b: Any, g: Any, greater_is_first: bool) -> Any | None: ...


@runtime_checkable
class CrossEntropyKernel(Protocol):
    """``kernel("cross_entropy")``: softmax cross-entropy of ``(M, C)`` logits against
    ``(M,)`` class indices, forward and gradient, each in one or two launches.

    ``supports(x, t)``: whether it takes these logits and targets. ``targets_valid(t, c,
    ignore_index)``: ``True`` when every target is known (without a device sync) to be in
    ``[0, c)`` or ``ignore_index``, ``False`` when one is known not to be, ``None`` when
    unknown: the kernel then checks on the device and the backend raises ``IndexError``
    at the next host read. ``fwd(x, t, reduction, ignore_index)`` returns ``(loss,
    saved)`` (``loss`` 0-d for ``'mean'``/``'sum'``, ``(M,)`` for ``'none'``; ``saved``
    is what ``grad`` needs). ``grad(x, t, saved, g, reduction, ignore_index)`` returns
    the ``(M, C)`` gradient for the loss gradient ``g``.
    """

    def supports(self, x: Any, t: Any) -> bool: ...

    def targets_valid(self, t: Any, c: int, ignore_index: int) -> bool | None: ...

    def fwd(self, x: Any, t: Any, reduction: str, ignore_index: int) -> tuple[Any, Any]: ...

    def grad(self, x: Any, t: Any, saved: Any, g: Any, reduction: str,
             ignore_index: int) -> Any: ...


@runtime_checkable
class GeluKernel(Protocol):
    """``kernel("gelu")``: GELU and its gradient, one launch each way.

    ``forward(x, approximate)`` returns ``x * Phi(x)`` (``approximate='none'``) or
    PyTorch's tanh approximation (``'tanh'``), a new array of ``x``'s shape and dtype, or
    ``None`` to decline. ``backward(x, g, approximate)`` returns ``g`` times the derivative at
    ``x``, or ``None`` to decline.
    """

    def supports(self, dtype: Any) -> bool: ...

    def forward(self, x: Any, approximate: str) -> Any | None: ...

    def backward(self, x: Any, g: Any, approximate: str) -> Any | None: ...


@runtime_checkable
class SiluKernel(Protocol):
    """``kernel("silu")``: SiLU (``x * sigmoid(x)``) and its gradient, one launch each way.

    ``forward(x)`` returns a new array of ``x``'s shape and dtype, ``backward(x, g)`` ``g``
    times the derivative ``s (1 + x (1 - s))`` (``s = sigmoid(x)``); either returns ``None``
    to decline.
    """

    def supports(self, dtype: Any) -> bool: ...

    def forward(self, x: Any) -> Any | None: ...

    def backward(self, x: Any, g: Any) -> Any | None: ...


@runtime_checkable
class SoftmaxKernel(Protocol):
    """``kernel("softmax")``: softmax or log_softmax over the last axis, one launch each way.

    ``forward(x, log)`` returns a new array of ``x``'s shape and dtype: ``exp(x - m) / s``
    or ``(x - m) - log(s)`` per row, with ``m`` the row's maximum (0 where it is not
    finite) and ``s = sum(exp(x - m))``, the portable formulas; ``backward(y, g, log)``
    returns ``y (g - sum(g y))`` (softmax's output ``y``) or ``g - exp(y) sum(g)``
    (log_softmax's). Either returns ``None`` to decline. ``supports(dtype)``.
    """

    def supports(self, dtype: Any) -> bool: ...

    def forward(self, x: Any, log: bool) -> Any | None: ...

    def backward(self, y: Any, g: Any, log: bool) -> Any | None: ...


@runtime_checkable
class SpecialKernel(Protocol):
    """``kernel("special")``: special functions elementwise in one launch (``vtl.special``).

    ``supports(name, dtype)``: whether it computes ``name`` (``"erf"``, ``"erfc"`` or
    ``"erfinv"``) for arrays of ``dtype`` (float32, float64; 16-bit inputs reach it as
    float32). ``__call__(name, x)`` returns a new array of ``x``'s shape and dtype;
    ``grad(name, x, g)`` returns ``g`` times the derivative at ``x`` (``erf``, ``erfc``);
    either returns ``None`` to decline, and the portable code (``vtl.special``'s rational
    approximations, the oracle of the kernels' tests) runs instead.
    """

    def supports(self, name: str, dtype: Any) -> bool: ...

    def __call__(self, name: str, x: Any) -> Any | None: ...

    def grad(self, name: str, x: Any, g: Any) -> Any | None: ...


@runtime_checkable
class LayerNormKernel(Protocol):
    """``kernel("layer_norm")``: layer normalisation of the rows of an ``(M, N)`` array, each
    way in one or two launches, statistics in float32 or wider.

    ``forward(x, w, b, eps)`` (``w``/``b``: ``None`` or ``(N,)``) returns ``(y, mean, rstd)``:
    ``y = (x - mean) * rstd * w + b`` with the row means and ``rstd = 1 / sqrt(var + eps)``
    (biased variance) as ``(M, 1)`` arrays, or ``None`` to decline.
    ``backward(x, w, mean, rstd, g, need_x, need_w, need_b)`` returns ``(dx, dw, db)``
    (``None`` where not asked for): ``dx = rstd (gw - mean(gw) - xhat mean(gw xhat))`` with
    ``gw = g w`` and ``xhat = (x - mean) rstd`` per row, ``dw = sum(g xhat)`` and
    ``db = sum(g)`` over the rows; or ``None`` to decline.

    A kernel whose ``takes_rms`` attribute is true also takes ``rms=True`` each way:
    rms_norm's rows, whose mean is taken as 0 (``rstd = 1 / sqrt(mean(x**2) + eps)``, no
    ``mean(gw)`` term in ``dx``; ``mean`` is returned as zeros).
    """

    def supports(self, dtype: Any) -> bool: ...

    def forward(self, x: Any, w: Any, b: Any, eps: float) -> tuple[Any, Any, Any] | None: ...

    def backward(self, x: Any, w: Any, mean: Any, rstd: Any, g: Any, need_x: bool,
                 need_w: bool, need_b: bool) -> tuple[Any, Any, Any] | None: ...


@runtime_checkable
class AttentionKernel(Protocol):
    """``kernel("attention")``: scaled dot-product attention fused into a few launches, with
    no ``(L, S)`` matrix in memory either way.

    ``forward(q, k, v, mask, causal, scale, batch, dropout=None)`` takes ``(B, L, E)``
    queries, ``(B, S, E)`` keys and ``(B, S, Ev)`` values (``B = batch[0] * batch[1]``, the
    flattened batch and head axes), ``mask``: ``None`` or an additive float mask of shape
    broadcastable to ``(batch[0], batch[1], L, S)`` (4-D; ``-inf`` masks out), ``causal``:
    key ``j`` is masked for query ``i < j``; returns ``(out, lse)``: ``softmax(q k^T scale +
    mask) v`` and the rows' log-sum-exp ``(B, L)`` (``+inf`` for rows with every key masked,
    whose output is zero), or ``None`` to decline.

    ``dropout``: ``None`` or ``(p, words)``, dropout of probability ``0 < p < 1`` on the
    attention weights with the bits ``vtl.random`` would draw for them: ``words()``
    returns the Philox-4x32-10 counter (four words, low first) and key (two words) of the
    draw, as a tuple of six ints or, inside a capture, a
    :class:`~vtl.backends._base.DynamicScalars` of them; the kernel calls it only once it
    takes the call (the generator advances then), and later calls return the same words. Weight
    ``(b, i, j)`` (flat index ``f = (b * L + i) * S + j``) uses word ``f % 4`` of the block
    ``counter + f // 4``; it is kept when ``(word >> 8) * 2**-24 >= float32(p)`` and then
    scaled by ``1 / (1 - p)``. A kernel without dropout declines it.

    ``backward(q, k, v, out, lse, g, mask, causal, scale, batch, dropout=None)`` returns
    ``(dq, dk, dv)``; rows with every key masked get zero gradients.

    Optionally, multi-head self-attention read in place from its packed projection (no
    copies to split or merge heads): ``forward_packed(qkv, heads, batch_first, mask,
    causal, scale, dropout=None)`` takes ``qkv`` of shape ``(N, L, 3E)`` (``batch_first``)
    or ``(L, N, 3E)``, whose column blocks ``[0, E)``, ``[E, 2E)`` and ``[2E, 3E)`` are the
    queries, keys and values with head ``h`` at columns ``h * E / heads`` of each block, and
    returns ``(out, lse)``: the output with heads merged, ``(N, L, E)`` or ``(L, N, E)``,
    and ``lse`` of shape ``(N * heads, L)``; or ``None`` to decline. The batch entry of
    query ``i`` of head ``h`` of sequence ``n`` is ``n * heads + h`` (for ``mask``, which
    broadcasts to ``(N, heads, L, L)``, and for dropout's flat index).
    ``backward_packed(qkv, out, lse, g, heads, batch_first, mask, causal, scale,
    dropout=None)`` returns the gradient of ``qkv`` in its layout.
    """

    def supports(self, dtype: Any) -> bool: ...

    def forward(self, q: Any, k: Any, v: Any, mask: Any, causal: bool, scale: float,
                batch: tuple[int, int], dropout: Any = None) -> tuple[Any, Any] | None: ...

    def backward(self, q: Any, k: Any, v: Any, out: Any, lse: Any, g: Any, mask: Any,
                 causal: bool, scale: float, batch: tuple[int, int], dropout: Any = None
                 ) -> tuple[Any, Any, Any]: ...


@runtime_checkable
class BatchNormKernel(Protocol):
    """``kernel("batch_norm")``: training-mode batch normalisation of an ``(N, C, *)`` array
    with the batch statistics, each way in a few passes over memory.

    ``forward(x, w, b, eps)`` (``w``/``b``: ``None`` or ``(C,)``) returns ``(y, mean, var,
    saved)``: ``y = (x - mean) / sqrt(var + eps) * w + b`` per channel, the ``(C,)`` means
    and biased variances, and what ``backward`` needs; or ``None`` to decline.
    ``backward(saved, w, g, need_x, need_w, need_b)`` returns ``(dx, dw, db)`` (``None``
    where not asked for): with ``xhat = (x - mean) / sqrt(var + eps)``, ``dx = w / sqrt(var +
    eps) * (g - mean(g) - xhat mean(g xhat))``, ``dw = sum(g xhat)``, ``db = sum(g)`` (means
    and sums per channel); or ``None`` to decline.
    """

    def supports(self, dtype: Any) -> bool: ...

    def forward(self, x: Any, w: Any, b: Any, eps: float) -> tuple[Any, Any, Any, Any] | None:
        ...

    def backward(self, saved: Any, w: Any, g: Any, need_x: bool, need_w: bool,
                 need_b: bool) -> tuple[Any, Any, Any] | None: ...


@runtime_checkable
class LstmCellKernel(Protocol):
    """``kernel("lstm_cell")``: the LSTM cell's pointwise part, one launch each way.

    ``forward(gates, hidden_gates, c_prev, out=None)`` (``hidden_gates`` may be
    ``None``; otherwise it is added to ``gates``) returns ``(h, c, act, tc)``: ``act``
    holds the activated gates ``i, f, g, o`` laid out as ``gates`` (``(..., 4 * H)``),
    ``tc = tanh(c)``; ``out``, when given, is those four C-contiguous arrays to write
    into. ``backward(act, c_prev, tc, dh, dc, need_dc_prev, dh2=None, out=None)``
    (``dh``/``dc`` may be ``None``: no gradient reached that output; ``dh2``, when given,
    is added to ``dh``; ``out`` receives ``d_gates``) returns ``(d_gates, d_c_prev)``,
    ``d_c_prev`` being ``None`` unless asked for.

    Optionally a kernel runs whole time steps of ``lstm_layer`` with the recurrent product
    inside: ``step_forward(gates, h, w_hh, c, out)`` (``gates`` ``(N, 4H)`` of the step,
    ``w_hh`` ``(4H, H)``) returns ``(h, c, act, tc)`` written into ``out`` as
    ``forward``'s; ``step_backward(act, c_prev, tc, dz_next, w_hh, dh, dh2, dc,
    need_dc_prev, out)`` forms ``dh = dz_next @ w_hh + dh + dh2`` (``None`` terms left out)
    and returns ``backward``'s result. Either returns ``None`` to decline (the caller then
    runs the product and the pointwise kernel). A kernel with ``recurrent_weight(w_hh)``
    gets that method's result, formed once per layer call, as ``step_forward``'s ``w_hh``
    (e.g. ``W_hh^T`` laid out for the product, as ``GruCellKernel``'s). A kernel may also
    run a whole layer's forward: ``layer_forward(gates, h0, c0, w_hh, reverse)`` (``gates``
    ``(L, N, 4H)``) returns ``(h_all, c_all, act_all, tc_all)``, step ``t``'s arrays at index
    ``t``, or ``None`` to decline; and its backward: ``layer_backward(saved, w_hh, dout, dhn,
    dcn, need_c0, reverse)`` with ``saved`` = ``(c0, c_all, act_all, tc_all)`` of the forward
    (``layer_forward``'s or the steps' whole-sequence buffers), the output's gradient ``dout``
    ``(L, N, H)`` and ``h_n``'s and ``c_n``'s (each ``None`` where none reached it) returns
    ``(dz_all, dc0)``: the gates' gradient ``(L, N, 4H)`` and, with ``need_c0``, ``c0``'s
    (``h0``'s is ``dz_all[first step] @ w_hh``), or ``None`` to decline.
    """

    def supports(self, dtype: Any) -> bool: ...

    def forward(self, gates: Any, hidden_gates: Any, c_prev: Any, out: Any = None
                ) -> tuple[Any, Any, Any, Any]: ...

    def backward(self, act: Any, c_prev: Any, tc: Any, dh: Any, dc: Any,
                 need_dc_prev: bool, dh2: Any = None, out: Any = None) -> tuple[Any, Any]: ...


@runtime_checkable
class GruCellKernel(Protocol):
    """``kernel("gru_cell")``: the GRU cell's pointwise part, one launch each way.

    ``forward(gates, hidden_gates, h_prev)`` returns ``(h, act)``: ``act`` of shape
    ``(..., 4 * H)`` holds ``r, z, n`` and the hidden part ``h_n``.
    ``backward(act, h_prev, dh, need_dh_prev)`` returns ``(d_gates, d_hidden_gates,
    d_h_prev)`` (the last ``None`` unless asked for). A kernel with
    ``recurrent_weight(w_hh)`` gives ``gru_layer`` the right operand of its steps' product
    ``h @ W_hh^T``, formed once per layer call (e.g. laid out for that product).
    """

    def supports(self, dtype: Any) -> bool: ...

    def forward(self, gates: Any, hidden_gates: Any, h_prev: Any) -> tuple[Any, Any]: ...

    def backward(self, act: Any, h_prev: Any, dh: Any,
                 need_dh_prev: bool) -> tuple[Any, Any, Any]: ...


@runtime_checkable
class MultiTensorApplyKernel(Protocol):
    """``kernel("multi_tensor_apply")``: an optimizer's update over all the tensors of a
    parameter group at once.

    ``kern(program, tensors, scalars)`` runs ``program`` (a ``vtl.optim._programs.Program``:
    straight-line assignments over per-element values with ``+ - * /``, ``sqrt`` and
    ``max``) on every element of every tuple in ``tensors`` (one tuple of arrays per
    parameter, in ``program.arrays`` order, all of one dtype and device), with the
    per-launch ``scalars`` in ``program.scalars`` order; the arrays named in
    ``program.writes`` are updated in place, with the same arithmetic as
    ``Program.evaluate``. ``supports(dtype)``: whether it takes tensors of ``dtype``. A
    kernel with ``low_params = True`` also takes float16/bfloat16 parameters and gradients
    with float32 state arrays (``supports`` of the 16-bit dtype), computing in float32 and
    rounding the written 16-bit arrays once.

    ``skip`` (``GradScaler``'s step, :meth:`vtl.optim.Optimizer._step_skippable`): a 0-d
    float32 array on the tensors' device; where it holds a nonzero value when the launch
    runs, the launch changes nothing. The kernel reads it on the device (never on the host
    of a GPU backend), so a step can be skipped without a host read.
    """

    def supports(self, dtype: Any) -> bool: ...

    def __call__(self, prog: Any, tensors: list[tuple[Any, ...]],
                 scalars: tuple[float, ...], skip: Any = None) -> None: ...


@runtime_checkable
class PhiloxKernel(Protocol):
    """``kernel("philox")``: the random words of ``vtl.random``'s generator.

    ``kern(n, key, counter, index)`` returns the first ``n`` words (a 1-D ``uint32``
    array on device ``index``) of the Philox-4x32-10 stream of the 64-bit ``key =
    (k0, k1)`` from the 128-bit block ``counter`` on (block ``counter + i`` gives words
    ``4i .. 4i+3``): bit for bit what ``vtl.random.philox_words`` computes; or ``None`` to
    decline (e.g. a draw larger than the device's largest buffer).
    """

    def __call__(self, n: int, key: tuple[int, int], counter: int, index: int) -> Any | None:
        ...


@runtime_checkable
class GradNormKernel(Protocol):
    """``kernel("grad_norm")``: the joint norm of many arrays (gradient clipping) and their
    scaling, each in a few launches whatever the number of arrays.

    ``supports(dtype, norm_type)``: whether it takes arrays of ``dtype`` and that norm.
    ``norm(arrays, norm_type)`` returns the ``norm_type`` norm of all the arrays' elements as
    one vector (a 0-d array of their dtype, on their device), or ``None`` to decline (mixed
    dtypes, non-contiguous arrays). ``clip_(arrays, norm, max_norm)`` multiplies every
    array in place by ``min(max_norm / (norm + 1e-6), 1)`` computed on the device from the
    0-d ``norm`` (nan stays nan); returns ``False`` to decline.
    """

    def supports(self, dtype: Any, norm_type: float) -> bool: ...

    def norm(self, arrays: list[Any], norm_type: float) -> Any | None: ...

    def clip_(self, arrays: list[Any], norm: Any, max_norm: float) -> bool: ...


@runtime_checkable
class AmpUnscaleKernel(Protocol):
    """``kernel("amp_unscale")``: ``GradScaler``'s unscale of many gradients in a few
    launches. ``kern(arrays, inv_scale, found)`` multiplies every array (one dtype and
    device) in place by the 0-d float32 ``inv_scale`` and sets the 0-d float32 ``found`` to
    1 where a product is not finite (it never clears it, so calls for several dtypes share
    one flag); returns ``False``, having done nothing, for arrays it does not take."""

    def __call__(self, arrays: list[Any], inv_scale: Any, found: Any) -> bool: ...


@runtime_checkable
class AmpUpdateScaleKernel(Protocol):
    """``kernel("amp_update_scale")``: ``GradScaler.update``'s rule (PyTorch's
    ``_amp_update_scale_``) in one launch. ``kern(scale, tracker, found, growth_factor,
    backoff_factor, growth_interval)`` updates the 0-d float32 ``scale`` and the 0-d int32
    ``tracker`` in place from the 0-d float32 ``found`` (positive after a step with inf/nan
    gradients), with the values of ``vtl.amp.grad_scaler._update_scale`` (float32
    products; a grown scale only below ``_common.amp.update_threshold(growth_factor)``); returns
    ``False``, having done nothing, for arrays it does not take."""

    def __call__(self, scale: Any, tracker: Any, found: Any, growth_factor: float,
                 backoff_factor: float, growth_interval: int) -> bool: ...


@runtime_checkable
class DropoutKernel(Protocol):
    """``kernel("dropout")``: dropout with ``vtl.random``'s bits, one launch each way and no
    mask in memory.

    ``forward(x, p, words)`` returns ``x * keep / (1 - p)`` (``0 < p < 1``), or ``None`` to
    decline; ``backward(g, p, words)`` returns ``g * keep / (1 - p)``. ``words`` are the
    Philox-4x32-10 counter (four words, low first) and key (two words) of the draw of one
    word per element, as a tuple of six ints or, inside a capture, a
    :class:`~vtl.backends._base.DynamicScalars`: element ``f`` (C order) uses word ``f % 4``
    of the block ``counter + f // 4`` and is kept when ``(word >> 8) * 2**-24 >=
    float32(p)``, as ``vtl.nn.functional.dropout`` draws them.
    """

    def supports(self, dtype: Any) -> bool: ...

    def forward(self, x: Any, p: float, words: Any) -> Any | None: ...

    def backward(self, g: Any, p: float, words: Any) -> Any: ...


#: every kernel name vtl may look up, and its contract
KERNELS: dict[str, type] = {
    "attention": AttentionKernel,
    "conv2d": Conv2dKernel,
    "pool2d": Pool2dKernel,
    "linear": LinearKernel,
    "linear_grad_weight": LinearGradWeightKernel,
    "relu": ReluKernel,
    "relu_backward": ReluBackwardKernel,
    "zero_where": ZeroWhereKernel,
    "minmax_backward": MinmaxBackwardKernel,
    "cross_entropy": CrossEntropyKernel,
    "dropout": DropoutKernel,
    "gelu": GeluKernel,
    "silu": SiluKernel,
    "special": SpecialKernel,
    "softmax": SoftmaxKernel,
    "grad_norm": GradNormKernel,
    "amp_unscale": AmpUnscaleKernel,
    "amp_update_scale": AmpUpdateScaleKernel,
    "layer_norm": LayerNormKernel,
    "batch_norm": BatchNormKernel,
    "lstm_cell": LstmCellKernel,
    "gru_cell": GruCellKernel,
    "multi_tensor_apply": MultiTensorApplyKernel,
    "philox": PhiloxKernel,
}


def check(name: str, impl: Any) -> None:
    """``ValueError`` for a kernel name vtl never asks for, ``TypeError`` for an object
    that lacks a method of the contract of ``name``."""
    contract = KERNELS.get(name)
    if contract is None:
        raise ValueError(f"unknown kernel name {name!r}: vtl asks for "
                         f"{', '.join(sorted(KERNELS))}")
    if not isinstance(impl, contract):
        missing = [m for m in _methods(contract) if not callable(getattr(impl, m, None))]
        raise TypeError(f"kernel {name!r} must implement {contract.__name__} "
                        f"(missing: {', '.join(missing)}), got {type(impl).__name__}")


def _methods(contract: type) -> list[str]:
    return sorted(n for n, v in vars(contract).items()
                  if callable(v) and (not n.startswith("_") or n == "__call__"))
