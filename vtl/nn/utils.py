"""``vtl.nn.utils``: gradient clipping (PyTorch's ``torch.nn.utils`` names)."""

from __future__ import annotations

from ..optim.clip import clip_grad_norm_, clip_grad_value_

__all__ = ["clip_grad_norm_", "clip_grad_value_"]
