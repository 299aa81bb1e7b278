"""``vtl.optim``: optimizers and learning-rate schedulers (PyTorch's names).

Optimizers update parameters in place on the raw backend arrays; a backend's
fused multi-tensor kernel is used automatically when it has one
(``foreach=None``), and ``foreach=False`` forces the portable array-API rules.
"""

from . import lr_scheduler, swa_utils
from .adagrad import Adagrad
from .adam import Adam
from .adamax import Adamax
from .adamw import AdamW
from .clip import clip_grad_norm_, clip_grad_value_
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = [
    "Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "lr_scheduler",
    "clip_grad_norm_", "clip_grad_value_",
]
__all__ += ["NAdam", "RAdam", "Adamax", "LBFGS", "swa_utils"]
