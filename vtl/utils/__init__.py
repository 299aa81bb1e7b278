"""``vtl.utils``: training utilities outside ``vtl.nn`` (PyTorch's ``torch.utils`` names)."""

from . import checkpoint

__all__ = ["checkpoint"]
