"""A module for every activation in ``vtl.nn.functional``.

``inplace=True`` (where PyTorch has it) makes the layer write its result into its input
and return it, as ``vtl.nn.functional``'s ``inplace=True`` does.
"""

from __future__ import annotations

from typing import Any

from ..._tensor import Tensor
from ...backends._dtypes import kind as _dkind
from .. import functional as F
from .. import init
from ._utils import check_float, check_tensor, empty
from .module import Module, Parameter

__all__ = [
    "CELU", "ELU", "GELU", "GLU", "Hardshrink", "Hardsigmoid", "Hardswish", "Hardtanh",
    "LeakyReLU", "LogSigmoid", "LogSoftmax", "Mish", "PReLU", "RReLU", "ReLU", "ReLU6", "SELU",
    "SiLU", "Sigmoid", "Softmax", "Softmax2d", "Softmin", "Softplus", "Softshrink", "Softsign",
    "Swish", "Tanh", "Tanhshrink", "Threshold",
]


class _Plain(Module):
    _fn: Any = None

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor:
            check_tensor(self, input)
        if self.inplace:
            return type(self)._fn(input, inplace=True)
        return type(self)._fn(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_Plain):
    """``max(x, 0)``."""

    _fn = staticmethod(F.relu)


class ReLU6(_Plain):
    """``min(max(x, 0), 6)``."""

    _fn = staticmethod(F.relu6)


class SELU(_Plain):
    """Scaled ELU with the self-normalising constants."""

    _fn = staticmethod(F.selu)


class SiLU(_Plain):
    """``x * sigmoid(x)``."""

    _fn = staticmethod(F.silu)


Swish = SiLU


class Mish(_Plain):
    """``x * tanh(softplus(x))``."""

    _fn = staticmethod(F.mish)


class Hardsigmoid(_Plain):
    """Piecewise-linear sigmoid."""

    _fn = staticmethod(F.hardsigmoid)


class Hardswish(_Plain):
    """``x * hardsigmoid(x)``."""

    _fn = staticmethod(F.hardswish)


class _NoArgs(Module):
    _fn: Any = None

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor:
            check_tensor(self, input)
        return type(self)._fn(input)


class Sigmoid(_NoArgs):
    """``1 / (1 + exp(-x))``."""

    _fn = staticmethod(F.sigmoid)


class Tanh(_NoArgs):
    """Hyperbolic tangent."""

    _fn = staticmethod(F.tanh)


class LogSigmoid(_NoArgs):
    """``log(sigmoid(x))``."""

    _fn = staticmethod(F.logsigmoid)


class Softsign(_NoArgs):
    """``x / (1 + |x|)``."""

    _fn = staticmethod(F.softsign)


class Tanhshrink(_NoArgs):
    """``x - tanh(x)``."""

    _fn = staticmethod(F.tanhshrink)


class LeakyReLU(Module):
    """``x`` for ``x > 0``, else ``negative_slope * x``."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor:
            check_tensor(self, input)
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace
                                                           else "")


class RReLU(Module):
    """Randomized leaky ReLU: in training mode each negative element is scaled by its own
    slope drawn from ``U(lower, upper)`` (``vtl.random``); in eval mode by
    ``(lower + upper) / 2``."""

    def __init__(self, lower: float = 1.0 / 8.0, upper: float = 1.0 / 3.0,
                 inplace: bool = False) -> None:
        super().__init__()
        if not lower <= upper:
            raise ValueError(f"RReLU: lower ({lower}) must not exceed upper ({upper})")
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor or _dkind(input._data.dtype) in "iub":
            check_float(self, input)
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace
                                                            else "")


class ELU(Module):
    """``x`` for ``x > 0``, else ``alpha * (exp(x) - 1)``."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor:
            check_tensor(self, input)
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor:
            check_tensor(self, input)
        return F.celu(input, self.alpha, self.inplace)


class GELU(Module):
    """``x * Phi(x)``; ``approximate='tanh'`` for the tanh approximation."""

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor:
            check_tensor(self, input)
        return F.gelu(input, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softplus(Module):
    """``log(1 + exp(beta x)) / beta``, linear above ``threshold``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor:
            check_tensor(self, input)
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    """``clip(x, min_val, max_val)``."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0,
                 inplace: bool = False) -> None:
        super().__init__()
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val ({min_val}) must not exceed max_val "
                             f"({max_val})")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor:
            check_tensor(self, input)
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (
            ", inplace=True" if self.inplace else "")


class _Shrink(Module):
    _fn: Any = None

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor:
            check_tensor(self, input)
        return type(self)._fn(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(_Shrink):
    """Soft thresholding by ``lambd``."""

    _fn = staticmethod(F.softshrink)


class Hardshrink(_Shrink):
    """Hard thresholding by ``lambd``."""

    _fn = staticmethod(F.hardshrink)


class Threshold(Module):
    """``x`` where ``x > threshold``, else ``value``."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor:
            check_tensor(self, input)
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (
            ", inplace=True" if self.inplace else "")


class PReLU(Module):
    """Leaky ReLU with a learned slope (one, or one per channel), initialised to ``init``."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, *, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(empty((num_parameters,), device, dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor or _dkind(input._data.dtype) in "iub":
            check_float(self, input)
        if self.num_parameters != 1 and (input.ndim < 2 or
                                         input.shape[1] != self.num_parameters):
            raise ValueError(f"PReLU(num_parameters={self.num_parameters}): expected "
                             f"{self.num_parameters} channels on axis 1, got input of shape "
                             f"{tuple(input.shape)}")
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class GLU(Module):
    """Gated linear unit along ``dim``."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor:
            check_tensor(self, input)
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class _SoftmaxBase(Module):
    _fn: Any = None

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor:
            check_tensor(self, input)
        return type(self)._fn(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_SoftmaxBase):
    """Softmax along ``dim``."""

    _fn = staticmethod(F.softmax)


class Softmin(_SoftmaxBase):
    """Softmin along ``dim``."""

    _fn = staticmethod(F.softmin)


class LogSoftmax(_SoftmaxBase):
    """Log-softmax along ``dim``."""

    _fn = staticmethod(F.log_softmax)


class Softmax2d(Module):
    """Softmax over the channels of ``(N, C, H, W)`` or ``(C, H, W)`` inputs (axis -3) at
    every spatial position."""

    def forward(self, input: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor:
            check_tensor(self, input)
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input, "
                             f"got input of shape {tuple(input.shape)}")
        return F.softmax(input, -3)
