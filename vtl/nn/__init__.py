"""``vtl.nn``: layers, losses and initialisation (PyTorch's ``torch.nn`` names).

* ``vtl.nn.functional`` — every op as a function written against the array
  API (runs on any array-API array; differentiable on vtl tensors).
* ``vtl.nn.Module``/``Parameter`` and the layers in ``vtl.nn.modules``.
* ``vtl.nn.init`` — in-place initialisers drawing from ``vtl.random``.
* ``vtl.nn.grad`` — gradients of the convolutions (``conv2d_input``, ...).
"""

from . import functional, grad, init, parameter, utils
from .modules import *  # noqa: F403
from .modules import __all__ as _modules_all

__all__ = ["functional", "grad", "init", "parameter", "utils", *_modules_all]
