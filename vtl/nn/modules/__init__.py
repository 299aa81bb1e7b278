"""Layers of ``vtl.nn``: each owns its parameters and calls ``vtl.nn.functional``.

One file per family (``linear``, ``activation``, ``dropout``, ``sparse``,
``flatten``, ``loss``, ``container``); convolution, pooling, normalisation,
recurrent and attention layers go in files of their own.
"""

from .activation import *  # noqa: F403
from .activation import __all__ as _act
from .container import *  # noqa: F403
from .container import __all__ as _cont
from .dropout import *  # noqa: F403
from .dropout import __all__ as _drop
from .flatten import *  # noqa: F403
from .flatten import __all__ as _flat
from .linear import *  # noqa: F403
from .linear import __all__ as _lin
from .loss import *  # noqa: F403
from .loss import __all__ as _loss
from .module import *  # noqa: F403
from .module import __all__ as _mod
from .sparse import *  # noqa: F403
from .sparse import __all__ as _sparse

__all__ = [*_mod, *_cont, *_lin, *_act, *_drop, *_flat, *_loss, *_sparse]
