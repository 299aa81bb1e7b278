"""Automatic mixed precision: :class:`autocast` regions and :class:`GradScaler` (PyTorch's
``torch.amp``). ``vtl.autocast`` is the same class as ``vtl.amp.autocast``."""

from .autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler

__all__ = ["GradScaler", "autocast", "get_autocast_dtype", "is_autocast_enabled"]
