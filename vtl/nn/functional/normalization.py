"""Normalisation: layer_norm, rms_norm, batch_norm, group_norm, instance_norm and
local_response_norm.

Statistics use the biased variance (divide by ``n``) for normalising, as
PyTorch; ``batch_norm`` in training mode updates the running statistics in
place, outside the graph, with the unbiased variance (``n / (n - 1)``).
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from ... import _autocast
from ..._ops._core import _grad, needs_grad, new, record
from ..._tensor import Tensor
from ...backends._dtypes import LOW_FLOATING, float32
from ._utils import detach, namespace, reshaped

__all__ = ["batch_norm", "group_norm", "instance_norm", "layer_norm", "local_response_norm",
           "rms_norm"]


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape)


def _check_float(xp: Any, x: Any, fname: str) -> None:
    if not xp.isdtype(x.dtype, "real floating"):
        raise TypeError(f"{fname}() needs a real floating-point input, got {x.dtype}")


def _normalize(xp: Any, x: Any, axes: tuple[int, ...], eps: float) -> tuple[Any, Any, Any]:
    """``(x - mean) / sqrt(var + eps)`` over ``axes`` with the biased variance; also
    returns the mean and variance (keepdims)."""
    mean = xp.mean(x, axis=axes, keepdims=True)
    d = x - mean
    var = xp.mean(d * d, axis=axes, keepdims=True)
    return d / xp.sqrt(var + eps), mean, var


def _affine(xp: Any, out: Any, weight: Any, bias: Any, shape: tuple[int, ...]) -> Any:
    if weight is not None:
        out = out * xp.reshape(weight, shape)
    if bias is not None:
        out = out + xp.reshape(bias, shape)
    return out


def layer_norm(input: Any, normalized_shape: Any, weight: Any = None, bias: Any = None,  # noqa: A002
               eps: float = 1e-5) -> Any:
    """Normalise over the trailing ``normalized_shape`` axes, then scale by ``weight``
    and shift by ``bias`` (both of shape ``normalized_shape``).

    Args:
        input: The input tensor.
        normalized_shape: The trailing shape normalised over.
        weight: Scale of shape ``normalized_shape``.
        bias: Shift of shape ``normalized_shape``.
        eps: Added to the variance.

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If the input does not end with ``normalized_shape`` or ``weight``/``bias`` has
            another shape.
    """
    xp = namespace(input, weight, bias)
    _check_float(xp, input, "layer_norm")
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(ns)
    if k == 0 or input.ndim < k or _shape(input)[input.ndim - k:] != ns:
        raise ValueError(f"layer_norm(): input of shape {_shape(input)} does not end with "
                         f"normalized_shape {ns}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and _shape(t) != ns:
            raise ValueError(f"layer_norm(): {name} must have shape {ns}, got {_shape(t)}")
    if isinstance(input, Tensor) and all(t is None or isinstance(t, Tensor)
                                         for t in (weight, bias)):
        out = _layer_norm_tensor(input, ns, weight, bias, eps)
        if out is not None:
            return out
    axes = tuple(range(input.ndim - k, input.ndim))
    out, _, _ = _normalize(xp, input, axes, eps)
    return _affine(xp, out, weight, bias, ns)


def _layer_norm_tensor(x: Tensor, ns: tuple[int, ...], w: Tensor | None, b: Tensor | None,
                       eps: float, rms: bool = False) -> Tensor | None:
    """layer_norm (``rms``: rms_norm, the rows not centred) of a tensor as ONE graph node:
    the backend's ``layer_norm`` kernel where it has one (in its rms mode for rms_norm),
    else the portable statistics on the raw arrays; ``None`` for arguments the general
    path takes (mixed devices or dtypes, no elements)."""
    rows = _as_rows(x, ns, (w, b))
    if rows is None:
        return None
    dev, xd, xp = x._device, x._data, x._device.xp
    x2, (w2, b2) = rows
    kern, (y2, mean, rstd) = _rows_forward(dev, x2, w2, b2, eps, rms)
    out = reshaped(xp, y2, xd.shape)
    if needs_grad(x, w, b):
        return record(out, dev, "RmsNormBackward" if rms else "LayerNormBackward", (x, w, b),
                      partial(_layer_norm_vjp, kern, x, w, b, ns, mean, rstd, eps, rms),
                      (x, w), raw=_layer_norm_raw)
    return new(out, dev)


def _as_rows(x: Tensor, ns: tuple[int, ...], params: tuple) -> tuple[Any, list] | None:
    """``(rows, params)``: the raw ``(M, N)`` rows of ``x`` over its trailing ``ns`` axes
    (``N = prod(ns)``) and the ``(N,)`` raw arrays of the tensors ``params`` (``None`` kept);
    ``None`` for a parameter on another device or of another dtype, or no elements."""
    xd = x._data
    n = math.prod(ns)
    if not _params_match(x, params) or n == 0 or xd.size == 0:
        return None
    xp = x._device.xp
    return reshaped(xp, xd, (xd.size // n, n)), [
        None if t is None else reshaped(xp, t._data, (n,)) for t in params]


def _params_match(x: Tensor, params: tuple) -> bool:
    """Whether the tensors ``params`` (``None`` allowed) are on ``x``'s device with its
    dtype (a normalisation node takes them; else the general path promotes or raises)."""
    return all(t is None or (t._device is x._device and t._data.dtype == x._data.dtype)
               for t in params)


def _rows_forward(dev: Any, x2: Any, w2: Any, b2: Any, eps: float, rms: bool = False
                  ) -> tuple[Any, tuple]:
    """``(kernel or None, (y, mean, rstd))``: layer_norm (``rms``: not centred) of the raw
    ``(M, N)`` rows by the backend's ``layer_norm`` kernel where it takes them (the kernel
    is then passed to the backward), else by the portable statistics."""
    kern = dev.backend.kernel("layer_norm")
    if kern is not None and kern.supports(x2.dtype) and (
            not rms or getattr(kern, "takes_rms", False)):
        res = kern.forward(x2, w2, b2, eps, rms=True) if rms else kern.forward(x2, w2, b2, eps)
        if res is not None:
            return kern, res
    return None, _ln_forward(dev.xp, x2, w2, b2, eps, not rms)


def _ln_forward(xp: Any, x: Any, w: Any, b: Any, eps: float, center: bool = True
                ) -> tuple[Any, Any, Any]:
    """The portable forward on raw ``(M, N)`` rows: ``(y, mean, rstd)``, statistics ``(M, 1)``
    (the biased variance; ``rstd = 1 / sqrt(var + eps)``); without ``center`` (rms_norm) the
    rows are not centred and ``mean`` is ``None``."""
    mean = xp.mean(x, axis=1, keepdims=True) if center else None
    d = x - mean if center else x
    rstd = 1.0 / xp.sqrt(xp.mean(d * d, axis=1, keepdims=True) + eps)
    y = d * rstd
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y, mean, rstd


def _ln_backward(xp: Any, x: Any, w: Any, mean: Any, rstd: Any, g: Any, need_x: bool,
                 need_w: bool, need_b: bool, center: bool = True) -> tuple[Any, Any, Any]:
    """The portable backward on raw ``(M, N)`` rows: ``(dx, dw, db)`` (``None`` where not
    asked for): ``dx = rstd (gw - mean(gw) - xhat mean(gw xhat))`` with ``gw = g w``
    (without ``center``, rms_norm's rows, no ``mean(gw)`` term), ``dw = sum(g xhat)``,
    ``db = sum(g)`` over the rows."""
    xhat = (x - mean) * rstd if center else x * rstd
    dx = dw = db = None
    if need_x:
        gw = g if w is None else g * w
        c2 = xp.mean(gw * xhat, axis=1, keepdims=True)
        if center:
            dx = rstd * (gw - xp.mean(gw, axis=1, keepdims=True) - xhat * c2)
        else:
            dx = rstd * (gw - xhat * c2)
    if need_w:
        dw = xp.sum(g * xhat, axis=0)
    if need_b:
        db = xp.sum(g, axis=0)
    return dx, dw, db


def _rows_backward(kern: Any, xp: Any, x2: Any, w2: Any, mean: Any, rstd: Any, g2: Any,
                   need_x: bool, need_w: bool, need_b: bool, rms: bool) -> tuple:
    """``(dx, dw, db)`` of raw rows: the forward's kernel where it ran (in its rms mode for
    rms_norm) and takes them, else the portable rule."""
    res = None
    if kern is not None:
        args = (x2, w2, mean, rstd, g2, need_x, need_w, need_b)
        res = kern.backward(*args, rms=True) if rms else kern.backward(*args)
    if res is None:
        res = _ln_backward(xp, x2, w2, mean, rstd, g2, need_x, need_w, need_b, not rms)
    return res


def _rows_rule(x2: Tensor, gw: Tensor | None, eps: float, center: bool) -> tuple:
    """The row rule in vtl functions (``create_graph``), the statistics recomputed:
    ``(dx, xhat)`` of rows ``x2`` for the weighted gradient ``gw`` (``dx`` ``None`` without
    one); ``center=False`` for rms_norm's rows."""
    import vtl

    d = x2 - vtl.mean(x2, axis=1, keepdims=True) if center else x2
    r = 1.0 / vtl.sqrt(vtl.mean(d * d, axis=1, keepdims=True) + eps)
    xhat = d * r
    if gw is None:
        return None, xhat
    c2 = vtl.mean(gw * xhat, axis=1, keepdims=True)
    t = gw - vtl.mean(gw, axis=1, keepdims=True) if center else gw
    return r * (t - xhat * c2), xhat


def _layer_norm_plain(kern: Any, x: Tensor, w: Tensor | None, b: Tensor | None,
                      ns: tuple[int, ...], mean: Any, rstd: Any, rms: bool, gd: Any) -> tuple:
    """The raw gradients ``(dx, dw, db)`` (``None`` where not needed) of layer_norm's rows
    for the raw output gradient ``gd``: the backend's kernel where it ran."""
    need_x = x._requires_grad
    need_w = w is not None and w._requires_grad
    need_b = b is not None and b._requires_grad
    n = math.prod(ns)
    m = x._data.size // n
    xp = x._device.xp
    x2 = reshaped(xp, x._data, (m, n))
    w2 = None if w is None else reshaped(xp, w._data, (n,))
    g2 = reshaped(xp, gd, (m, n))
    dx, dw, db = _rows_backward(kern, xp, x2, w2, mean, rstd, g2, need_x, need_w, need_b, rms)
    return (None if dx is None else reshaped(xp, dx, x._data.shape),
            None if dw is None else reshaped(xp, dw, ns),
            None if db is None else reshaped(xp, db, ns))


def _layer_norm_raw(vjp: Any, gd: Any) -> tuple:
    """Plain backward's rule on raw arrays (the arguments of ``vjp``, the partial of
    :func:`_layer_norm_vjp`)."""
    kern, x, w, b, ns, mean, rstd, _, rms = vjp.args
    return _layer_norm_plain(kern, x, w, b, ns, mean, rstd, rms, gd)


def _layer_norm_vjp(kern: Any, x: Tensor, w: Tensor | None, b: Tensor | None,
                    ns: tuple[int, ...], mean: Any, rstd: Any, eps: float, rms: bool,
                    g: Tensor, _: Any) -> tuple:
    if not _grad.enabled:  # plain backward: raw arrays (the backend's kernel where it ran)
        dev = g._device
        grads = _layer_norm_plain(kern, x, w, b, ns, mean, rstd, rms, g._data)
        return tuple(None if d is None else new(d, dev) for d in grads)
    import vtl  # create_graph: the same rule in vtl functions (recomputing the statistics)

    need_x = x._requires_grad
    need_w = w is not None and w._requires_grad
    need_b = b is not None and b._requires_grad
    n = math.prod(ns)
    m = x._data.size // n
    g2 = vtl.reshape(g, (m, n))
    gw = None
    if need_x:
        gw = g2 if w is None else g2 * vtl.reshape(w, (n,))
    dx, xhat = _rows_rule(vtl.reshape(x, (m, n)), gw, eps, not rms)
    dw = db = None
    if dx is not None:
        dx = vtl.reshape(dx, x.shape)
    if need_w:
        dw = vtl.reshape(vtl.sum(g2 * xhat, axis=0), ns)
    if need_b:
        db = vtl.reshape(vtl.sum(g2, axis=0), ns)
    return dx, dw, db


def _write(buf: Any, value: Any) -> None:
    """``buf[...] = value`` outside the graph (running statistics are buffers)."""
    xp = namespace(buf)
    value = xp.astype(detach(value), buf.dtype)
    if isinstance(buf, Tensor):
        import vtl

        with vtl.no_grad():
            buf[...] = value
    else:
        buf[...] = value


def batch_norm(input: Any, running_mean: Any, running_var: Any, weight: Any = None,  # noqa: A002
               bias: Any = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-5) -> Any:
    """Normalise each channel (axis 1) of ``(N, C, *)`` inputs.

    In training mode the batch statistics are used and, when given, the running
    statistics are updated in place: ``running = (1 - momentum) * running +
    momentum * batch`` (unbiased variance). In eval mode the running statistics
    are used (they must be given). A float16/bfloat16 input keeps its dtype with float32
    statistics and parameters, as PyTorch's CUDA batch norm (statistics in float32).

    Args:
        input: The input, ``(N, C, *)``.
        running_mean: Running means ``(C,)``, or ``None``.
        running_var: Running variances ``(C,)``, or ``None``.
        weight: Per-channel scale ``(C,)``.
        bias: Per-channel shift ``(C,)``.
        training: Use (and track) the batch statistics.
        momentum: Weight of the batch statistics in the running update.
        eps: Added to the variance.

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If the shapes do not match, a channel has one value in training mode, or the
            running statistics are missing in eval mode.
    """
    xp = namespace(input, running_mean, running_var, weight, bias)
    _check_float(xp, input, "batch_norm")
    if input.ndim < 2:
        raise ValueError(f"batch_norm(): expected an input of shape (N, C, *), got "
                         f"{_shape(input)}")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and _shape(t) != (c,):
            raise ValueError(f"batch_norm(): {name} must have shape ({c},) for input of shape "
                             f"{_shape(input)}, got {_shape(t)}")
    shape = (1, c) + (1,) * (input.ndim - 2)
    fused = None
    if training:
        axes = (0, *range(2, input.ndim))
        n = math.prod(input.shape[a] for a in axes)
        if n == 0:  # an empty batch: an empty result, the running statistics unchanged
            return _affine(xp, input, weight, bias, shape)
        if n == 1:
            raise ValueError(f"batch_norm(): expected more than 1 value per channel when "
                             f"training, got input of shape {_shape(input)}")
        if isinstance(input, Tensor) and all(t is None or isinstance(t, Tensor)
                                             for t in (weight, bias)):
            fused = _batch_norm_tensor(input, weight, bias, eps)
        if fused is not None:  # one graph node, the affine part included
            out, mean, var = fused
        else:
            src = input
            if input.dtype in LOW_FLOATING and any(
                    t is not None and t.dtype == float32
                    for t in (weight, bias, running_mean, running_var)):
                src = xp.astype(input, float32)  # float32 statistics, as the kernels keep
            out, mean, var = _normalize(xp, src, axes, eps)
        if not _update_running_fused(input, mean, var, running_mean, running_var, momentum,
                                     n, c):
            if running_mean is not None:
                _write(running_mean, (1.0 - momentum) * detach(running_mean)
                       + momentum * xp.reshape(detach(mean), (c,)))
            if running_var is not None:
                _write(running_var, (1.0 - momentum) * detach(running_var)
                       + (momentum * n / (n - 1)) * xp.reshape(detach(var), (c,)))
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm(): running_mean and running_var are required in "
                             "eval mode (training=False)")
        rm = xp.astype(xp.reshape(running_mean, shape), input.dtype)
        rv = xp.astype(xp.reshape(running_var, shape), input.dtype)
        out = (input - rm) / xp.sqrt(rv + eps)
    if fused is None:
        out = _affine(xp, out, weight, bias, shape)
    if input.dtype in LOW_FLOATING and out.dtype != input.dtype:
        out = xp.astype(out, input.dtype)  # float32 parameters: the input's dtype (PyTorch)
    return out


def _update_running_fused(x: Any, mean: Any, var: Any, running_mean: Any, running_var: Any,
                          momentum: float, n: int, c: int) -> bool:
    """Both ``(c,)`` running statistics updated by the backend's batch_norm kernel in one
    launch (``update_running``), where it has one for these arrays."""
    if not all(isinstance(t, Tensor) for t in (x, mean, var, running_mean, running_var)):
        return False
    dev = x._device
    upd = getattr(dev.backend.kernel("batch_norm"), "update_running", None)
    if upd is None or running_mean._device is not dev or running_var._device is not dev:
        return False
    xp = dev.xp
    if not upd(xp.reshape(mean._data, (c,)), xp.reshape(var._data, (c,)), running_mean._data,
               running_var._data, momentum, n):
        return False
    running_mean._bump_version()
    running_var._bump_version()
    return True


def _batch_norm_tensor(x: Tensor, w: Tensor | None, b: Tensor | None, eps: float
                       ) -> tuple[Tensor, Tensor, Tensor] | None:
    """Training-mode batch_norm of a tensor with the batch statistics, the affine part
    included, as ONE graph node on the raw arrays (a few passes over memory each way,
    where the composed ops make a dozen nodes): ``(out, mean, var)`` (the statistics
    ``(1, C, 1, ...)``, biased variance, outside the graph), or ``None`` for arguments the
    general path takes (mixed devices or dtypes)."""
    dev = x._device
    xd = x._data
    dt = xd.dtype
    kern = dev.backend.kernel("batch_norm")
    mixed = False
    for t in (w, b):
        if t is not None and t._device is not dev:
            return None
        if t is not None and t._data.dtype != dt:
            mixed = True
    if mixed and not _takes_float32_params(kern, dt, w, b):
        return None
    xp = dev.xp
    c = xd.shape[1]
    axes = (0, *range(2, xd.ndim))
    shape = (1, c) + (1,) * (xd.ndim - 2)
    wd = None if w is None else w._data
    bd = None if b is None else b._data
    res = None
    if kern is not None and kern.supports(dt):
        res = kern.forward(xd, wd, bd, eps)
    if res is None and mixed:
        return None
    if res is not None:
        y, mean, var, saved = res
        mean, var = xp.reshape(mean, shape), xp.reshape(var, shape)
    else:
        kern = None
        mean = xp.mean(xd, axis=axes, keepdims=True)
        d = xd - mean
        var = xp.mean(d * d, axis=axes, keepdims=True)
        rstd = 1.0 / xp.sqrt(var + eps)
        scale = rstd if w is None else rstd * xp.reshape(wd, shape)
        y = d * scale
        if b is not None:
            y = y + xp.reshape(bd, shape)
        saved = (d, rstd)
    stats = new(mean, dev), new(var, dev)
    if needs_grad(x, w, b):
        out = record(y, dev, "NativeBatchNormBackward", (x, w, b),
                     partial(_batch_norm_vjp, kern, x, w, b, saved, eps), (x,))
        return out, *stats
    return new(y, dev), *stats


def _training(args: tuple, kwargs: dict) -> bool:
    """``training`` of a :func:`batch_norm` call."""
    return bool(args[5] if len(args) > 5 else kwargs.get("training", False))


def _takes_float32_params(kern: Any, dt: Any, *params: Tensor | None) -> bool:
    """Whether ``kern`` normalises a float16/bfloat16 input of dtype ``dt`` with these
    float32 weight and bias (autocast's case: PyTorch's batch norm takes them too)."""
    return (kern is not None and getattr(kern, "takes_float32_params", False)
            and dt in LOW_FLOATING and kern.supports(dt)
            and all(p is None or p._data.dtype in (dt, float32) for p in params))


def _batch_norm_vjp(kern: Any, x: Tensor, w: Tensor | None, b: Tensor | None, saved: Any,
                    eps: float, g: Tensor, _: Any) -> tuple:
    """The gradients of :func:`_batch_norm_tensor` (the backend's kernel where its forward
    ran, else the portable rule on raw arrays): with ``xhat = d * rstd``, ``dx = rstd w (g -
    mean(g) - xhat mean(g xhat))``, ``dw = sum(g xhat)``, ``db = sum(g)`` (means and sums
    per channel)."""
    need_x = x._requires_grad
    need_w = w is not None and w._requires_grad
    need_b = b is not None and b._requires_grad
    xd = x._data
    c = xd.shape[1]
    axes = (0, *range(2, xd.ndim))
    shape = (1, c) + (1,) * (xd.ndim - 2)
    n = xd.size // c
    if not _grad.enabled:  # plain backward: raw arrays
        dev = g._device
        xp = dev.xp
        gd = g._data
        res = None
        if kern is not None:
            res = kern.backward(saved, None if w is None else w._data, gd, need_x, need_w,
                                need_b)
        if res is not None:
            dx, dw, db = res
            return (None if dx is None else new(dx, dev),
                    None if dw is None else new(dw, dev),
                    None if db is None else new(db, dev))
        if kern is not None:  # the kernel declined: the portable rule from its statistics
            mu = xp.mean(xd, axis=axes, keepdims=True)
            d = xd - mu
            rstd = 1.0 / xp.sqrt(xp.mean(d * d, axis=axes, keepdims=True) + eps)
        else:
            d, rstd = saved
        sg = xp.sum(gd, axis=axes, keepdims=True)
        sgd = xp.sum(gd * d, axis=axes, keepdims=True)
        dx = dw = db = None
        if need_x:
            scale = rstd if w is None else rstd * xp.reshape(w._data, shape)
            k = scale * (rstd * rstd) * sgd / n
            dx = gd * scale - (d * k + scale * sg / n)
        if need_w:
            dw = xp.reshape(sgd * rstd, (c,))
        if need_b:
            db = xp.reshape(sg, (c,))
        return (None if dx is None else new(dx, dev),
                None if dw is None else new(dw, dev),
                None if db is None else new(db, dev))
    import vtl  # create_graph: the same rule in vtl functions (recomputing the statistics)

    mu = vtl.mean(x, axis=axes, keepdims=True)
    dd = x - mu
    r = 1.0 / vtl.sqrt(vtl.mean(dd * dd, axis=axes, keepdims=True) + eps)
    xhat = dd * r
    dx = dw = db = None
    if need_x:
        gw = g if w is None else g * vtl.reshape(w, shape)
        c1 = vtl.mean(gw, axis=axes, keepdims=True)
        c2 = vtl.mean(gw * xhat, axis=axes, keepdims=True)
        dx = r * (gw - c1 - xhat * c2)
    if need_w:
        dw = vtl.sum(g * xhat, axis=axes)
    if need_b:
        db = vtl.sum(g, axis=axes)
    return dx, dw, db


def group_norm(input: Any, num_groups: int, weight: Any = None, bias: Any = None,  # noqa: A002
               eps: float = 1e-5) -> Any:
    """Normalise ``(N, C, *)`` inputs over groups of ``C / num_groups`` channels (and all
    spatial positions), then apply the per-channel ``weight`` and ``bias``.

    Args:
        input: The input, ``(N, C, *)``.
        num_groups: Number of groups (divides ``C``).
        weight: Per-channel scale ``(C,)``.
        bias: Per-channel shift ``(C,)``.
        eps: Added to the variance.

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If the shapes do not match or ``C`` is not divisible by ``num_groups``.
    """
    xp = namespace(input, weight, bias)
    _check_float(xp, input, "group_norm")
    if input.ndim < 2:
        raise ValueError(f"group_norm(): expected an input of shape (N, C, *), got "
                         f"{_shape(input)}")
    n, c = input.shape[:2]
    if num_groups < 1 or c % num_groups:
        raise ValueError(f"group_norm(): {c} channels of input shape {_shape(input)} are not "
                         f"divisible into num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and _shape(t) != (c,):
            raise ValueError(f"group_norm(): {name} must have shape ({c},), got {_shape(t)}")
    if isinstance(input, Tensor) and all(t is None or isinstance(t, Tensor)
                                         for t in (weight, bias)):
        out = _group_norm_tensor(input, num_groups, weight, bias, eps)
        if out is not None:
            return out
    shape = (1, c) + (1,) * (input.ndim - 2)
    if math.prod(_shape(input)) == 0:  # no elements: an empty result, as PyTorch's
        return _affine(xp, input - input, weight, bias, shape)
    x = xp.reshape(input, (n, num_groups, c // num_groups * math.prod(input.shape[2:])))
    out, _, _ = _normalize(xp, x, (2,), eps)
    out = xp.reshape(out, _shape(input))
    return _affine(xp, out, weight, bias, shape)


def _group_norm_tensor(x: Tensor, groups: int, w: Tensor | None, b: Tensor | None,
                       eps: float) -> Tensor | None:
    """group_norm of a tensor as ONE graph node: each (sample, group) is a row normalised
    by the backend's ``layer_norm`` kernel (without its affine part) where it has one, else
    by the portable statistics, then scaled and shifted per channel; ``None`` for arguments
    the general path takes (mixed devices or dtypes, no elements)."""
    dev = x._device
    xd = x._data
    if not _params_match(x, (w, b)) or xd.size == 0:
        return None
    xp = dev.xp
    rows = xd.shape[0] * groups
    x2 = xp.reshape(xd, (rows, xd.size // rows))
    kern, (y2, mean, rstd) = _rows_forward(dev, x2, None, None, eps)
    shape = _channel_shape(xd)
    out = xp.reshape(y2, xd.shape)
    if w is not None:
        out = out * xp.reshape(w._data, shape)
    if b is not None:
        out = out + xp.reshape(b._data, shape)
    if needs_grad(x, w, b):
        return record(out, dev, "GroupNormBackward", (x, w, b),
                      partial(_group_norm_vjp, kern, x, w, b, groups, mean, rstd, eps),
                      (x, w))
    return new(out, dev)


def _channel_shape(x: Any) -> tuple[int, ...]:
    """The shape a per-channel ``(C,)`` array broadcasts with ``(N, C, *)`` ``x`` in."""
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


def _group_norm_vjp(kern: Any, x: Tensor, w: Tensor | None, b: Tensor | None, groups: int,
                    mean: Any, rstd: Any, eps: float, g: Tensor, _: Any) -> tuple:
    need_x = x._requires_grad
    need_w = w is not None and w._requires_grad
    need_b = b is not None and b._requires_grad
    shape = _channel_shape(x)
    rows = x.shape[0] * groups
    d = x._data.size // rows
    axes = (0, *range(2, x.ndim))  # the per-channel sums
    if not _grad.enabled:  # plain backward: raw arrays (the backend's kernel where it ran)
        dev = g._device
        xp = dev.xp
        x2 = xp.reshape(x._data, (rows, d))
        gd = g._data
        dt = x._data.dtype
        dx = dw = db = None
        # (16-bit rows have float32 statistics: the sums are float32, rounded once)
        if need_w:
            xhat = xp.reshape((x2 - mean) * rstd, x._data.shape)
            dw = new(xp.astype(xp.sum(gd * xhat, axis=axes), dt), dev)
        if need_b:
            db = new(xp.astype(xp.sum(gd, axis=axes, dtype=mean.dtype), dt), dev)
        if need_x:
            gw = gd if w is None else gd * xp.reshape(w._data, shape)
            res = _rows_backward(kern, xp, x2, None, mean, rstd, xp.reshape(gw, (rows, d)),
                                 True, False, False, False)
            dx = new(xp.reshape(res[0], x._data.shape), dev)
        return dx, dw, db
    import vtl  # create_graph: the same rule in vtl functions (recomputing the statistics)

    g2 = None
    if need_x:
        g2 = vtl.reshape(g if w is None else g * vtl.reshape(w, shape), (rows, d))
    dx, xhat2 = _rows_rule(vtl.reshape(x, (rows, d)), g2, eps, True)
    dw = db = None
    if need_w:
        dw = vtl.sum(g * vtl.reshape(xhat2, x.shape), axis=axes)
    if need_b:
        db = vtl.sum(g, axis=axes)
    if dx is not None:
        dx = vtl.reshape(dx, x.shape)
    return dx, dw, db


def instance_norm(input: Any, running_mean: Any = None, running_var: Any = None,  # noqa: A002
                  weight: Any = None, bias: Any = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Any:
    """Normalise each channel of each sample of ``(N, C, *)`` inputs over its spatial
    positions (batch_norm applied per sample).

    Args:
        input: The input, ``(N, C, *)``.
        running_mean: Running means ``(C,)``, or ``None``.
        running_var: Running variances ``(C,)``, or ``None``.
        weight: Per-channel scale ``(C,)``.
        bias: Per-channel shift ``(C,)``.
        use_input_stats: Use the statistics of each sample (else the running ones).
        momentum: Weight of the new statistics in the running update.
        eps: Added to the variance.

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If the input has no spatial axis or one spatial element, or the running
            statistics are missing when ``use_input_stats=False``.
    """
    xp = namespace(input, running_mean, running_var, weight, bias)
    _check_float(xp, input, "instance_norm")
    if input.ndim < 3:
        raise ValueError(f"instance_norm(): expected an input of shape (N, C, L, ...), got "
                         f"{_shape(input)}")
    n, c = input.shape[:2]
    shape = (1, c) + (1,) * (input.ndim - 2)
    if use_input_stats:
        if math.prod(input.shape[2:]) == 1:
            raise ValueError(f"instance_norm(): expected more than 1 spatial element when "
                             f"training, got input of shape {_shape(input)}")
        axes = tuple(range(2, input.ndim))
        out, mean, var = _normalize(xp, input, axes, eps)
        m = math.prod(input.shape[2:])
        if running_mean is not None:
            _write(running_mean, (1.0 - momentum) * detach(running_mean)
                   + momentum * xp.mean(xp.reshape(detach(mean), (n, c)), axis=0))
        if running_var is not None and m > 1:
            _write(running_var, (1.0 - momentum) * detach(running_var)
                   + (momentum * m / (m - 1)) * xp.mean(xp.reshape(detach(var), (n, c)), axis=0))
    else:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm(): running statistics are required when "
                             "use_input_stats=False")
        out = (input - xp.reshape(running_mean, shape)) / xp.sqrt(
            xp.reshape(running_var, shape) + eps)
    return _affine(xp, out, weight, bias, shape)


def _normalized_shape(normalized_shape: Any, fname: str) -> tuple[int, ...]:
    try:
        if isinstance(normalized_shape, int):
            return (normalized_shape,)
        return tuple(int(s) for s in normalized_shape)
    except TypeError:
        raise TypeError(f"{fname}(): normalized_shape must be an int or a sequence of ints, "
                        f"got {normalized_shape!r}") from None


def rms_norm(input: Any, normalized_shape: Any, weight: Any = None,  # noqa: A002
             eps: float | None = None) -> Any:
    """Root-mean-square normalisation over the trailing ``normalized_shape`` axes:
    ``x / sqrt(mean(x**2) + eps) * weight``; ``eps=None`` uses ``finfo(dtype).eps``
    of the input's dtype (PyTorch's default).

    Args:
        input: The input tensor.
        normalized_shape: The trailing shape normalised over.
        weight: Scale of shape ``normalized_shape``.
        eps: Added to the mean square (``None``: the dtype's ``eps``).

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If the input does not end with ``normalized_shape`` or ``weight`` has another
            shape.
    """
    xp = namespace(input, weight)
    _check_float(xp, input, "rms_norm")
    ns = _normalized_shape(normalized_shape, "rms_norm")
    k = len(ns)
    if k == 0 or input.ndim < k or _shape(input)[input.ndim - k:] != ns:
        raise ValueError(f"rms_norm(): input of shape {_shape(input)} does not end with "
                         f"normalized_shape {ns}")
    if weight is not None and _shape(weight) != ns:
        raise ValueError(f"rms_norm(): weight must have shape {ns}, got {_shape(weight)}")
    if eps is None:
        eps = float(xp.finfo(input.dtype).eps)
    if isinstance(input, Tensor) and (weight is None or isinstance(weight, Tensor)):
        out = _layer_norm_tensor(input, ns, weight, None, eps, rms=True)
        if out is not None:
            return out
    axes = tuple(range(input.ndim - k, input.ndim))
    out = input / xp.sqrt(xp.mean(input * input, axis=axes, keepdims=True) + eps)
    return out if weight is None else out * weight


def local_response_norm(input: Any, size: int, alpha: float = 1e-4, beta: float = 0.75,  # noqa: A002
                        k: float = 1.0) -> Any:
    """Normalise each element of ``(N, C, *)`` inputs by its neighbours across channels:
    ``x / (k + alpha / size * sum(x**2 over channels c - size//2 .. c + (size-1)//2))
    ** beta`` (channels beyond the edges count as zeros, as PyTorch).

    Args:
        input: The input, ``(N, C, *)``.
        size: Number of neighbouring channels.
        alpha: Multiplicative factor.
        beta: Exponent.
        k: Additive factor.

    Returns:
        A tensor of the input's shape.

    Raises:
        ValueError: If the input has fewer than 3 dimensions or ``size`` is not a positive int.
    """
    xp = namespace(input)
    _check_float(xp, input, "local_response_norm")
    if input.ndim < 3:
        raise ValueError(f"local_response_norm(): expected a 3-D or higher input (N, C, *), "
                         f"got shape {_shape(input)}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"local_response_norm(): size must be a positive int, got {size!r}")
    if math.prod(input.shape) == 0:
        return input
    c = input.shape[1]
    sq = input * input
    lo, hi = size // 2, (size - 1) // 2
    tail = _shape(input)[2:]
    n = input.shape[0]
    parts = []
    if lo:
        parts.append(xp.zeros((n, lo) + tail, dtype=input.dtype, device=input.device))
    parts.append(sq)
    if hi:
        parts.append(xp.zeros((n, hi) + tail, dtype=input.dtype, device=input.device))
    padded = xp.concat(parts, axis=1) if len(parts) > 1 else sq
    total = padded[:, 0:c, ...]
    for j in range(1, size):
        total = total + padded[:, j:j + c, ...]
    div = (total * (alpha / size) + k) ** beta
    return input / div


def _cross_map_lrn2d(input: Any, size: int, alpha: float, beta: float, k: float) -> Any:  # noqa: A002
    """PyTorch's legacy ``CrossMapLRN2d`` forward on ``(N, C, H, W)`` inputs:
    ``x * (k + alpha / size * S) ** -beta`` where ``S`` sums the squares over the channels
    ``[c - p + 1, c + p)`` with ``p = int((size - 1) / 2 + 1)``, except that the running
    sum of PyTorch's kernel never drops channel 0 (it stays in every window)."""
    xp = namespace(input)
    _check_float(xp, input, "CrossMapLRN2d")
    if input.ndim != 4:
        raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.ndim}D instead.")
    c = input.shape[1]
    p = int((size - 1) / 2 + 1)
    rows = [[1.0 if j < min(i + p, c) and not (1 <= j <= i - p) else 0.0 for j in range(c)]
            for i in range(c)]
    m = xp.asarray(rows, dtype=input.dtype, device=input.device)
    sq = xp.permute_dims(input * input, (0, 2, 3, 1))
    s = xp.permute_dims(xp.matmul(sq, xp.matrix_transpose(m)), (0, 3, 1, 2))
    return input * (k + (alpha / size) * s) ** (-beta)


# autocast (vtl.amp): the list each op belongs to
_autocast.apply(
    globals(),
    float32_ops=("group_norm", "layer_norm", "rms_norm", "local_response_norm"),
    stats_ops=("batch_norm", "instance_norm"),
    native_low={"batch_norm": lambda x, args, kwargs: _training(args, kwargs)
                and _takes_float32_params(x._device.backend.kernel("batch_norm"),
                                          x._data.dtype)},
)
