"""ChannelShuffle: ShuffleNet's channel interleaving."""

from __future__ import annotations

import operator
from typing import Any

from .. import functional as F
from ._utils import check_tensor
from .module import Module

__all__ = ["ChannelShuffle"]


class ChannelShuffle(Module):
    """Split the ``C`` channels of an ``(N, C, *)`` input into ``groups`` groups and
    interleave them (see :func:`vtl.nn.functional.channel_shuffle`)."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        try:
            self.groups = operator.index(groups)
        except TypeError:
            raise TypeError(f"ChannelShuffle: groups must be an int, got "
                            f"{type(groups).__name__}") from None

    def forward(self, input: Any) -> Any:  # noqa: A002
        check_tensor(self, input)
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"
