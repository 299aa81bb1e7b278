"""``vtl.nn.utils``: helpers around modules and parameters (PyTorch's ``torch.nn.utils``).

One file per job: gradient clipping lives in ``vtl.optim.clip`` and is
re-exported here under PyTorch's names.
"""

from __future__ import annotations

from ...optim.clip import (
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from . import rnn

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]

from . import parametrizations, parametrize  # noqa: E402
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: E402
from .spectral_norm import remove_spectral_norm, spectral_norm  # noqa: E402
from .weight_norm import remove_weight_norm, weight_norm  # noqa: E402

__all__ += ["parameters_to_vector", "parametrizations", "parametrize", "remove_spectral_norm",
            "remove_weight_norm", "spectral_norm", "vector_to_parameters", "weight_norm"]

from . import stateless  # noqa: E402
from .stateless import functional_call  # noqa: E402

__all__ += ["functional_call", "stateless"]
