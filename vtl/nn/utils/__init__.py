"""``vtl.nn.utils``: helpers around modules and parameters (PyTorch's ``torch.nn.utils``).

One file per job: gradient clipping lives in ``vtl.optim.clip`` and is
re-exported here under PyTorch's names.
"""

from __future__ import annotations

from ...optim.clip import clip_grad_norm_, clip_grad_value_
from . import rnn

__all__ = ["clip_grad_norm_", "clip_grad_value_"]
