"""vtl: deep learning on the Python array API.

``vtl`` is an array-API (2024.12) namespace whose ``Tensor`` runs on NumPy,
CuPy or WebGPU and records a graph for reverse-mode autograd.
"""

from __future__ import annotations

__version__ = "0.1.0"
__array_api_version__ = "2024.12"

from math import e, inf, nan, pi

from ._openblas import shorten_spin as _shorten_spin

_shorten_spin()  # before anything imports NumPy


from . import backends
from ._info import __array_namespace_info__
from ._tensor import Tensor
from .autograd.grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .backends import Device, get_backend, set_backend, use_backend
from .backends._dtypes import (
    bfloat16,
    bool,
    complex64,
    complex128,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
)

newaxis = None

from . import _tensor_operators
from ._ops.creation import *
from ._ops.dtype_functions import *
from ._ops.einsum import *
from ._ops.elementwise import *
from ._ops.indexing import *
from ._ops.indexing import _getitem, _setitem
from ._ops.linear_algebra import *
from ._ops.manipulation import *
from ._ops.searching import *
from ._ops.sets import *
from ._ops.sorting import *
from ._ops.statistical import *
from ._ops.transfer import *
from ._ops.utility import *

# Tensor's operators call the functions above (their modules import Tensor)
_tensor_operators.bind()

from . import _tensor_methods, autograd, fft, linalg

_tensor_methods.bind()  # Tensor's PyTorch-style methods call the vtl namespace
from . import (
    amp,
    capture,
    cuda,
    data,
    datasets,
    distributed,  # MPI/NCCL are loaded only by init_process_group
    func,  # noqa: E402  (torch.func's names; imports nn)
    io,
    metrics,
    nn,
    optim,
    random,
    special,
    train,
    utils,
)
from ._conveniences import *
from ._ops.scatter import *
from ._ops.torch_functions import *
from .amp import autocast
from .autograd.functional import grad, hessian, jacobian, jvp, value_and_grad, vjp
from .autograd.grad_mode import inference_mode
from .autograd.vmap import vmap
from .backends._precision import get_float32_matmul_precision, set_float32_matmul_precision
from .capture import CaptureError, compile
from .io import load, load_checkpoint, save, save_checkpoint
from .special import digamma, erf, erfc, erfinv, lgamma, polygamma, sinc, xlogy
