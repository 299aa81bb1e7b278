"""Identity, Linear and Bilinear layers."""

from __future__ import annotations

import math
from typing import Any

from ..._tensor import Tensor
from ...backends._dtypes import kind as _dkind
from .. import functional as F
from .. import init
from ._utils import check_float, empty
from .module import Module, Parameter

__all__ = ["Bilinear", "Identity", "Linear"]


class Identity(Module):
    """Returns its input; accepts and ignores any constructor arguments."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Any) -> Any:  # noqa: A002
        return input


class Linear(Module):
    """``y = x W^T + b`` with ``W`` of shape ``(out_features, in_features)``.

    Default init as PyTorch: ``W, b ~ U(-1/sqrt(in_features), 1/sqrt(in_features))``
    (``kaiming_uniform_(W, a=sqrt(5))``).

    Args:
        in_features: Size of each input sample.
        out_features: Size of each output sample.
        bias: Whether to learn an additive bias ``b``.
        device: Device of the parameters and buffers (default: the current default device).
        dtype: Floating dtype of the parameters and buffers (default: the default dtype).

    Raises:
        ValueError: If ``in_features`` or ``out_features`` is negative.

    Example:
        >>> layer = nn.Linear(3, 2)
        >>> layer(vtl.ones((4, 3))).shape
        (4, 2)
        >>> layer.weight.shape, layer.bias.shape
        ((2, 3), (2,))
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if in_features < 0 or out_features < 0:
            raise ValueError(f"Linear: in_features and out_features must be >= 0, got "
                             f"{in_features} and {out_features}")
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in_features), device, dtype))
        if bias:
            self.bias = Parameter(empty((out_features,), device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def _describe(self) -> str:
        return f"Linear(in_features={self.in_features}, out_features={self.out_features})"

    def forward(self, input: Any) -> Any:  # noqa: A002
        return self._apply_to(input, F.linear)

    def _forward_relu(self, input: Any) -> Any:  # noqa: A002
        """``relu(self(input))`` as one op (``F.linear_relu``), for a ``Sequential`` whose
        next module is a plain ``ReLU``; this module's hooks are the caller's to check."""
        return self._apply_to(input, F.linear_relu)

    def _apply_to(self, input: Any, op: Any) -> Any:  # noqa: A002
        if input.__class__ is not Tensor or _dkind(input._data.dtype) in "iub":
            check_float(self, input)
        shape = input.shape
        if not shape or shape[-1] != self.in_features:
            raise ValueError(
                f"{self._describe()}: expected input with last dimension {self.in_features}, "
                f"got input of shape {tuple(shape)}"
            )
        params = self.__dict__["_parameters"]  # skips Module.__getattr__ when it can
        w = params["weight"] if "weight" in params else self.weight
        b = params["bias"] if "bias" in params else self.bias
        return op(input, w, b)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Bilinear(Module):
    """``y_k = x1^T W_k x2 + b_k``; init ``U(-1/sqrt(in1_features), 1/sqrt(in1_features))``.

    Args:
        in1_features: Size of each first input sample.
        in2_features: Size of each second input sample.
        out_features: Size of each output sample.
        bias: Whether to learn an additive bias ``b``.
        device: Device of the parameters and buffers (default: the current default device).
        dtype: Floating dtype of the parameters and buffers (default: the default dtype).
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, *, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in1_features, in2_features), device, dtype))
        if bias:
            self.bias = Parameter(empty((out_features,), device, dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1 / math.sqrt(self.in1_features) if self.in1_features > 0 else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def _describe(self) -> str:
        return (f"Bilinear(in1_features={self.in1_features}, in2_features="
                f"{self.in2_features}, out_features={self.out_features})")

    def forward(self, input1: Any, input2: Any) -> Any:
        check_float(self, input1, "input1")
        check_float(self, input2, "input2")
        if input1.ndim == 0 or input1.shape[-1] != self.in1_features or input2.ndim == 0 \
                or input2.shape[-1] != self.in2_features:
            raise ValueError(
                f"{self._describe()}: expected inputs with last dimensions "
                f"{self.in1_features} and {self.in2_features}, got inputs of shapes "
                f"{tuple(input1.shape)} and {tuple(input2.shape)}"
            )
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
