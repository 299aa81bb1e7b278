"""``vtl.nn.parameter``: the tensor kinds a Module registers (PyTorch's
``torch.nn.parameter``): :class:`Parameter`, :class:`Buffer` and the lazy layers'
placeholders :class:`UninitializedParameter` and :class:`UninitializedBuffer`."""

from .modules.lazy import UninitializedBuffer, UninitializedParameter
from .modules.module import Buffer, Parameter

__all__ = ["Buffer", "Parameter", "UninitializedBuffer", "UninitializedParameter"]
