"""AdaptiveLogSoftmaxWithLoss: the adaptive softmax of Grave et al., "Efficient softmax
approximation for GPUs" (2016)."""

from __future__ import annotations

import operator
from typing import Any, NamedTuple

import vtl

from ..._tensor import Tensor
from .. import functional as F
from ._utils import check_float, check_tensor
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]


class _ASMoutput(NamedTuple):
    """What :class:`AdaptiveLogSoftmaxWithLoss` returns: each row's target log-probability
    and the mean negative log-likelihood."""

    output: Any
    loss: Any


class AdaptiveLogSoftmaxWithLoss(Module):
    """Adaptive softmax: the frequent classes ``[0, cutoffs[0])`` and one entry per tail
    cluster form the ``head`` (a :class:`Linear`, ``head_bias``); cluster ``i`` covers the
    classes ``[cutoffs[i], cutoffs[i + 1])`` (the last one up to ``n_classes``) through a
    projection to ``in_features // div_value ** (i + 1)`` features, then to its classes
    (``tail[i]``, two :class:`Linear` without bias). Labels must be sorted by frequency
    (0 the most frequent).

    ``forward(input, target)`` returns ``(output, loss)`` (a named tuple): ``output`` the
    log-probability of each row's target ``(N,)`` (``()`` for a 1-D input with a 0-D
    target), ``loss`` the mean of ``-output``. :meth:`log_prob` gives the log-probabilities
    of all classes, :meth:`predict` the most likely class. Every cluster is evaluated on
    every row (fixed shapes, no data-dependent indexing); a target outside
    ``[0, n_classes)`` is a ``RuntimeError`` (a host sync on accelerators).
    """

    def __init__(self, in_features: int, n_classes: int, cutoffs: Any, div_value: float = 4.0,
                 head_bias: bool = False, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        try:
            ints = [operator.index(c) if not isinstance(c, float) or not c.is_integer()
                    else int(c) for c in cutoffs]
        except TypeError:
            ints = None
        if (ints is None or ints != sorted(ints) or min(ints) <= 0
                or max(ints) > n_classes - 1 or len(set(ints)) != len(ints)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted "
                             "in an increasing order, where each value is between 1 and "
                             f"n_classes-1; got cutoffs={cutoffs} for n_classes={n_classes}")
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = ints + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device,
                           dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hsz = int(in_features // (div_value ** (i + 1)))
            osz = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(
                Linear(in_features, hsz, bias=False, device=device, dtype=dtype),
                Linear(hsz, osz, bias=False, device=device, dtype=dtype)))

    def reset_parameters(self) -> None:
        """Re-initialise the head and every tail projection as at construction."""
        self.head.reset_parameters()
        for proj in self.tail:
            for lin in proj:
                lin.reset_parameters()

    def _describe(self) -> str:
        return f"AdaptiveLogSoftmaxWithLoss({self.in_features}, {self.n_classes})"

    def _rows(self, input: Any) -> Any:  # noqa: A002
        check_float(self, input)
        if input.ndim not in (1, 2) or input.shape[-1] != self.in_features:
            raise ValueError(f"{self._describe()}: expected an input of shape (N, "
                             f"{self.in_features}) or ({self.in_features},), got input of "
                             f"shape {tuple(input.shape)}")
        return input if input.ndim == 2 else vtl.expand_dims(input, axis=0)

    def forward(self, input_: Any, target_: Any) -> _ASMoutput:
        check_float(self, input_)
        check_tensor(self, target_, "target")
        if target_.ndim == 1:
            if input_.ndim != 2:
                raise ValueError(f"{self._describe()}: a 1-D target expects a 2-D input, got "
                                 f"input of shape {tuple(input_.shape)}")
            if input_.shape[0] != target_.shape[0]:
                raise ValueError(f"{self._describe()}: input and target should have the same "
                                 f"size in the batch dimension, got shapes "
                                 f"{tuple(input_.shape)} and {tuple(target_.shape)}")
        elif target_.ndim == 0:
            if input_.ndim != 1:
                raise ValueError(f"{self._describe()}: a 0-D target expects a 1-D input, got "
                                 f"input of shape {tuple(input_.shape)}")
        else:
            raise ValueError(f"{self._describe()}: 0-D or 1-D target tensor expected, "
                             f"multi-target not supported; got target of shape "
                             f"{tuple(target_.shape)}")
        if vtl.isdtype(target_.dtype, "real floating") or target_.dtype == vtl.bool:
            raise TypeError(f"{self._describe()}: expected integer class indices as target, "
                            f"got {target_.dtype}")
        x = self._rows(input_)
        t = target_ if target_.ndim == 1 else vtl.expand_dims(target_, axis=0)
        if t.shape[0] and bool(vtl.any((t < 0) | (t >= self.n_classes))):
            lo, hi = int(vtl.min(t)), int(vtl.max(t))
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but "
                               f"values in range [{lo}, {hi}] were found.")
        t = vtl.astype(t, vtl.int64) if t.dtype != vtl.int64 and _has_int64(t) else t
        head_logprob = F.log_softmax(self.head(x), dim=1)
        short = self.shortlist_size
        gather = t
        output = None
        for i in range(self.n_clusters):
            low, high = self.cutoffs[i], self.cutoffs[i + 1]
            in_cluster = (t >= low) & (t < high)
            gather = vtl.where(in_cluster, vtl.asarray(short + i, dtype=t.dtype,
                                                       device=t.device), gather)
            logp = F.log_softmax(self.tail[i](x), dim=1)
            rel = vtl.clip(t - low, 0, high - low - 1)
            local = vtl.take_along_axis(logp, vtl.expand_dims(rel, axis=1), axis=1)[:, 0]
            term = vtl.where(in_cluster, local, 0.0)
            output = term if output is None else output + term
        head = vtl.take_along_axis(head_logprob, vtl.expand_dims(gather, axis=1), axis=1)[:, 0]
        output = head if output is None else output + head
        loss = vtl.mean(-output)
        if target_.ndim == 0:
            output = output[0]
        return _ASMoutput(output, loss)

    def log_prob(self, input: Any) -> Any:  # noqa: A002
        """Log-probabilities of all ``n_classes`` classes: ``(N, n_classes)`` for an
        ``(N, in_features)`` input (``(n_classes,)`` for a 1-D input)."""
        x = self._rows(input)
        head_logprob = F.log_softmax(self.head(x), dim=1)
        short = self.shortlist_size
        parts = [head_logprob[:, :short]]
        for i in range(self.n_clusters):
            logp = F.log_softmax(self.tail[i](x), dim=1)
            parts.append(logp + head_logprob[:, short + i:short + i + 1])
        out = vtl.concat(parts, axis=1)
        return out if input.ndim == 2 else out[0]

    def predict(self, input: Any) -> Any:  # noqa: A002
        """The most likely class of each row: ``argmax(log_prob(input), dim=1)``."""
        lp = self.log_prob(input)
        return vtl.argmax(lp, axis=-1)

    def extra_repr(self) -> str:
        return ""


def _has_int64(t: Tensor) -> bool:
    from ... import __array_namespace_info__

    return "int64" in __array_namespace_info__().dtypes(device=t.device)
