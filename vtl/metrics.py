"""``vtl.metrics``: classification and regression metrics on Tensors.

Every function takes predictions first and targets second (PyTorch/VTL
order: ``metric(output, target)``), runs without recording a graph and
works on any backend. Scalar metrics return Python floats; ``confusion_matrix``
and ``average=None`` results return Tensors.

* classification: :func:`accuracy`, :func:`top_k_accuracy`,
  :func:`confusion_matrix`, :func:`precision`, :func:`recall`, :func:`f1_score`
  (``average="macro"|"micro"|"weighted"|None``).
* regression (VTL's error functions): :func:`squared_error`,
  :func:`mean_squared_error` (``mse``), :func:`absolute_error`,
  :func:`mean_absolute_error` (``mae``), :func:`relative_error`,
  :func:`mean_relative_error`.

``output`` for classification is either class scores/logits of shape
``(N, C)`` (the predicted class is their ``argmax`` along axis 1), or
predicted labels of shape ``(N,)`` with the targets' integer dtype.
"""

from __future__ import annotations

from typing import Any

import vtl

from ._tensor import Tensor

__all__ = [
    "accuracy", "top_k_accuracy", "confusion_matrix", "precision", "recall", "f1_score",
    "precision_recall_f1", "squared_error", "mean_squared_error", "mse", "absolute_error",
    "mean_absolute_error", "mae", "relative_error", "mean_relative_error", "get",
]

_AVERAGES = ("macro", "micro", "weighted", None)


def _tensor(x: Any, like: Tensor | None = None) -> Tensor:
    if isinstance(x, Tensor):
        return x.detach()
    if like is not None:
        return vtl.asarray(x, device=like.device)
    return vtl.asarray(x)


def _labels(output: Any, target: Any, fname: str) -> tuple[Tensor, Tensor]:
    """Predicted labels (N,) and targets (N,) as int64 tensors on one device."""
    out = _tensor(output)
    tgt = _tensor(target, out)
    if tgt.ndim != 1:
        raise ValueError(f"{fname}: target must be 1-D class labels of shape (N,), "
                         f"got shape {tuple(tgt.shape)}")
    if vtl.isdtype(tgt.dtype, "real floating"):
        raise TypeError(f"{fname}: target must hold integer class labels, got {tgt.dtype}")
    if out.ndim == 2:
        pred = vtl.argmax(out, axis=1)
    elif out.ndim == 1:
        if vtl.isdtype(out.dtype, ("real floating", "complex floating")):
            raise TypeError(f"{fname}: 1-D output must be integer predicted labels, got "
                            f"{out.dtype} (pass (N, C) scores to take their argmax)")
        pred = out
    else:
        raise ValueError(f"{fname}: output must be scores of shape (N, C) or labels of shape "
                         f"(N,), got shape {tuple(out.shape)}")
    if pred.shape[0] != tgt.shape[0]:
        raise ValueError(f"{fname}: output has {pred.shape[0]} samples but target has "
                         f"{tgt.shape[0]}")
    return vtl.astype(pred, vtl.int64), vtl.astype(tgt, vtl.int64)


def accuracy(output: Any, target: Any) -> float:
    """Fraction of samples whose predicted class equals the target (``nan`` for N = 0).

    Example:
        >>> logits = vtl.asarray([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
        >>> round(vtl.metrics.accuracy(logits, vtl.asarray([0, 1, 1])), 4)
        0.6667
    """
    n, correct = _accuracy_sum(output, target)
    return float(correct.item()) / n if n else float("nan")


def _accuracy_sum(output: Any, target: Any) -> tuple[int, Tensor]:
    """``(N, number of correct predictions)``, the count a 0-d int64 tensor on the device."""
    with vtl.no_grad():
        pred, tgt = _labels(output, target, "accuracy")
        return tgt.shape[0], vtl.sum(vtl.astype(pred == tgt, vtl.int64))


def top_k_accuracy(output: Any, target: Any, k: int = 5) -> float:
    """Fraction of samples whose target is among the ``k`` highest scores.

    ``output`` must be scores of shape ``(N, C)``. Ties are counted in the
    target's favour only when its score is strictly among the top ``k``: a
    sample is correct when fewer than ``k`` classes score strictly higher than
    the target's class (the usual "rank < k" definition).
    """
    n, correct = _top_k_sum(output, target, k)
    return float(correct.item()) / n if n else float("nan")


def _top_k_sum(output: Any, target: Any, k: int) -> tuple[int, Tensor]:
    """``(N, number of samples whose target is among the k highest scores)``."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"top_k_accuracy: k must be a positive int, got {k!r}")
    with vtl.no_grad():
        out = _tensor(output)
        tgt = _tensor(target, out)
        if out.ndim != 2:
            raise ValueError("top_k_accuracy: output must be scores of shape (N, C), got "
                             f"shape {tuple(out.shape)}")
        if tgt.ndim != 1 or tgt.shape[0] != out.shape[0]:
            raise ValueError(f"top_k_accuracy: target must have shape ({out.shape[0]},), got "
                             f"{tuple(tgt.shape)}")
        if k > out.shape[1]:
            raise ValueError(f"top_k_accuracy: k={k} exceeds the number of classes "
                             f"{out.shape[1]}")
        n = out.shape[0]
        tgt = vtl.astype(tgt, vtl.int64)
        picked = vtl.take_along_axis(out, vtl.reshape(tgt, (n, 1)), axis=1)
        higher = vtl.sum(vtl.astype(out > picked, vtl.int64), axis=1)
        return n, vtl.sum(vtl.astype(higher < k, vtl.int64))


def confusion_matrix(output: Any, target: Any, num_classes: int | None = None) -> Tensor:
    """``(C, C)`` int64 Tensor: entry ``[i, j]`` counts samples of true class ``i``
    predicted as class ``j`` (scikit-learn's layout).

    ``num_classes`` defaults to the score width for ``(N, C)`` output, else to
    ``max(labels) + 1``; labels outside ``[0, num_classes)`` raise ``ValueError``.
    """
    with vtl.no_grad():
        out = _tensor(output)
        pred, tgt = _labels(out, target, "confusion_matrix")
        if num_classes is None:
            if out.ndim == 2:
                num_classes = out.shape[1]
            elif tgt.shape[0] == 0:
                num_classes = 0
            else:
                num_classes = int(max(vtl.max(pred).item(), vtl.max(tgt).item())) + 1
        if not isinstance(num_classes, int) or num_classes < 0:
            raise ValueError("confusion_matrix: num_classes must be a non-negative int, got "
                             f"{num_classes!r}")
        if tgt.shape[0]:
            lo = min(vtl.min(pred).item(), vtl.min(tgt).item())
            hi = max(vtl.max(pred).item(), vtl.max(tgt).item())
            if lo < 0 or hi >= num_classes:
                raise ValueError(f"confusion_matrix: labels must lie in [0, {num_classes}), "
                                 f"got values in [{lo}, {hi}]")
        classes = vtl.arange(num_classes, dtype=vtl.int64, device=tgt.device)
        t1 = vtl.astype(vtl.reshape(tgt, (-1, 1)) == classes, vtl.float32)
        p1 = vtl.astype(vtl.reshape(pred, (-1, 1)) == classes, vtl.float32)
        counts = vtl.matrix_transpose(t1) @ p1
        return vtl.astype(vtl.round(counts), vtl.int64)


def _check_average(average: Any, fname: str) -> None:
    if average not in _AVERAGES:
        raise ValueError(f"{fname}: average must be one of 'macro', 'micro', 'weighted' or "
                         f"None, got {average!r}")


def precision_recall_f1(output: Any, target: Any, num_classes: int | None = None,
                        average: str | None = "macro") -> tuple[Any, Any, Any]:
    """``(precision, recall, f1)`` from one confusion matrix.

    Per class: ``precision = TP / (TP + FP)``, ``recall = TP / (TP + FN)``,
    ``f1 = 2 P R / (P + R)``; a 0/0 ratio counts as 0 (scikit-learn's
    ``zero_division=0``). ``average``: ``"macro"`` (unweighted mean over
    classes), ``"weighted"`` (weighted by each class's support), ``"micro"``
    (from global counts; equals accuracy for single-label data) or ``None``
    (float32 Tensors of per-class values).
    """
    _check_average(average, "precision_recall_f1")
    cm = confusion_matrix(output, target, num_classes)
    with vtl.no_grad():
        cm = vtl.astype(cm, vtl.float32)
        tp = vtl.linalg.diagonal(cm)
        pred_pos = vtl.sum(cm, axis=0)
        support = vtl.sum(cm, axis=1)
        if average == "micro":
            t, p, s = float(vtl.sum(tp).item()), float(vtl.sum(pred_pos).item()), \
                float(vtl.sum(support).item())
            prec = t / p if p else 0.0
            rec = t / s if s else 0.0
            f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
            return prec, rec, f1
        zero = vtl.zeros_like(tp)
        prec = vtl.where(pred_pos > 0, tp / vtl.where(pred_pos > 0, pred_pos, 1.0), zero)
        rec = vtl.where(support > 0, tp / vtl.where(support > 0, support, 1.0), zero)
        denom = prec + rec
        f1 = vtl.where(denom > 0, 2 * prec * rec / vtl.where(denom > 0, denom, 1.0), zero)
        if average is None:
            return prec, rec, f1
        c = tp.shape[0]
        if c == 0:
            return float("nan"), float("nan"), float("nan")
        if average == "macro":
            return tuple(float(vtl.mean(v).item()) for v in (prec, rec, f1))
        total = float(vtl.sum(support).item())
        if total == 0:
            return 0.0, 0.0, 0.0
        return tuple(float(vtl.sum(v * support).item()) / total for v in (prec, rec, f1))


def precision(output: Any, target: Any, num_classes: int | None = None,
              average: str | None = "macro") -> Any:
    """Precision ``TP / (TP + FP)``; see :func:`precision_recall_f1` for ``average``."""
    _check_average(average, "precision")
    return precision_recall_f1(output, target, num_classes, average)[0]


def recall(output: Any, target: Any, num_classes: int | None = None,
           average: str | None = "macro") -> Any:
    """Recall ``TP / (TP + FN)``; see :func:`precision_recall_f1` for ``average``."""
    _check_average(average, "recall")
    return precision_recall_f1(output, target, num_classes, average)[1]


def f1_score(output: Any, target: Any, num_classes: int | None = None,
             average: str | None = "macro") -> Any:
    """F1 ``2 P R / (P + R)``; see :func:`precision_recall_f1` for ``average``."""
    _check_average(average, "f1_score")
    return precision_recall_f1(output, target, num_classes, average)[2]


# -- regression ----------------------------------------------------------------------------------
def _pair(y: Any, y_true: Any, fname: str) -> tuple[Tensor, Tensor]:
    a = _tensor(y)
    b = _tensor(y_true, a)
    try:
        vtl.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ValueError(f"{fname}: shapes {tuple(a.shape)} and {tuple(b.shape)} do not "
                         "broadcast") from None
    if not vtl.isdtype(a.dtype, "real floating"):
        a = vtl.astype(a, vtl.float32 if not vtl.isdtype(b.dtype, "real floating") else b.dtype)
    if not vtl.isdtype(b.dtype, "real floating"):
        b = vtl.astype(b, a.dtype)
    return a, b


def squared_error(y: Any, y_true: Any) -> Tensor:
    """Elementwise ``(y - y_true) ** 2``."""
    with vtl.no_grad():
        a, b = _pair(y, y_true, "squared_error")
        d = a - b
        return d * d


def absolute_error(y: Any, y_true: Any) -> Tensor:
    """Elementwise ``|y - y_true|``."""
    with vtl.no_grad():
        a, b = _pair(y, y_true, "absolute_error")
        return vtl.abs(a - b)


def relative_error(y: Any, y_true: Any) -> Tensor:
    """Elementwise symmetric relative error ``|y - y_true| / max(|y|, |y_true|)``
    (0 where both are 0), in ``[0, 2]``.

    VTL's definition, with its sign bug fixed: VTL took ``| |y_true| - |y| |``
    for the numerator, which calls ``y = -y_true`` exact; here that gives 2.
    """
    with vtl.no_grad():
        a, b = _pair(y, y_true, "relative_error")
        denom = vtl.maximum(vtl.abs(a), vtl.abs(b))
        safe = vtl.where(denom == 0, vtl.ones_like(denom), denom)
        return vtl.where(denom == 0, vtl.zeros_like(denom), vtl.abs(a - b) / safe)


def _mean(t: Tensor) -> float:
    return float(vtl.mean(t).item()) if t.size else float("nan")


def _top5(output: Any, target: Any) -> float:
    """:func:`top_k_accuracy` with ``k=5``."""
    return top_k_accuracy(output, target, 5)


def mean_squared_error(y: Any, y_true: Any) -> float:
    """Mean of :func:`squared_error` (MSE)."""
    return _mean(squared_error(y, y_true))


def mean_absolute_error(y: Any, y_true: Any) -> float:
    """Mean of :func:`absolute_error` (MAE)."""
    return _mean(absolute_error(y, y_true))


def mean_relative_error(y: Any, y_true: Any) -> float:
    """Mean of :func:`relative_error`."""
    return _mean(relative_error(y, y_true))


mse = mean_squared_error
mae = mean_absolute_error

_BY_NAME = {
    "accuracy": accuracy, "acc": accuracy, "top5": _top5,
    "top_k_accuracy": top_k_accuracy, "precision": precision, "recall": recall,
    "f1": f1_score, "f1_score": f1_score, "mse": mean_squared_error,
    "mean_squared_error": mean_squared_error, "mae": mean_absolute_error,
    "mean_absolute_error": mean_absolute_error, "relative_error": mean_relative_error,
    "mean_relative_error": mean_relative_error,
}


def _weighted_mean(error: Any) -> Any:
    def batch_sum(y: Any, y_true: Any, n: int) -> Tensor:
        with vtl.no_grad():
            return vtl.mean(error(y, y_true)) * n
    return batch_sum


#: metric -> ``f(output, target, n) -> Tensor``: the batch's value times its weight ``n``
#: (the number of samples), computed on the device, so that a loop averages over batches
#: without reading each batch's value back (``vtl.train.fit``); accuracies are exact counts
_BATCH_SUMS: dict[Any, Any] = {
    accuracy: lambda o, t, n: _accuracy_sum(o, t)[1],
    top_k_accuracy: lambda o, t, n: _top_k_sum(o, t, 5)[1],
    _top5: lambda o, t, n: _top_k_sum(o, t, 5)[1],
    mean_squared_error: _weighted_mean(squared_error),
    mean_absolute_error: _weighted_mean(absolute_error),
    mean_relative_error: _weighted_mean(relative_error),
}


def get(metric: Any) -> Any:
    """A metric function from its name (``"accuracy"``, ``"top5"``, ``"f1"``, ``"mse"``,
    ``"mae"``, ...) or a callable ``metric(output, target) -> float`` unchanged."""
    if callable(metric):
        return metric
    if isinstance(metric, str) and metric in _BY_NAME:
        return _BY_NAME[metric]
    raise ValueError(f"unknown metric {metric!r}; known: {sorted(_BY_NAME)} or a callable "
                     "metric(output, target)")
