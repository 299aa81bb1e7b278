"""Layers of ``vtl.nn``: each owns its parameters and calls ``vtl.nn.functional``.

One file per family (``linear``, ``activation``, ``distance``, ``dropout``, ``sparse``,
``flatten``, ``loss``, ``padding``, ``container``, ``conv``, ``pooling``, ``normalization``,
``rnn``, ``attention``, ``transformer``, ``positional``, ``sampling``, ``lazy``,
``sync_batchnorm``, ``adaptive``, ``channelshuffle``).
"""

from .activation import *  # noqa: F403
from .activation import __all__ as _act
from .adaptive import *  # noqa: F403
from .adaptive import __all__ as _adaptive
from .attention import *  # noqa: F403
from .attention import __all__ as _attn
from .channelshuffle import *  # noqa: F403
from .channelshuffle import __all__ as _chshuffle
from .container import *  # noqa: F403
from .container import __all__ as _cont
from .conv import *  # noqa: F403
from .conv import __all__ as _conv
from .distance import *  # noqa: F403
from .distance import __all__ as _dist
from .dropout import *  # noqa: F403
from .dropout import __all__ as _drop
from .flatten import *  # noqa: F403
from .flatten import __all__ as _flat
from .lazy import *  # noqa: F403
from .lazy import __all__ as _lazy
from .linear import *  # noqa: F403
from .linear import __all__ as _lin
from .linear_cross_entropy import *  # noqa: F403
from .linear_cross_entropy import __all__ as _lce
from .loss import *  # noqa: F403
from .loss import __all__ as _loss
from .module import *  # noqa: F403
from .module import __all__ as _mod
from .normalization import *  # noqa: F403
from .normalization import __all__ as _norm
from .padding import *  # noqa: F403
from .padding import __all__ as _padding
from .pooling import *  # noqa: F403
from .pooling import __all__ as _pool
from .pooling_fractional import *  # noqa: F403
from .pooling_fractional import __all__ as _pool_frac
from .positional import *  # noqa: F403
from .positional import __all__ as _pos
from .rnn import *  # noqa: F403
from .rnn import __all__ as _rnn
from .sampling import *  # noqa: F403
from .sampling import __all__ as _samp
from .sparse import *  # noqa: F403
from .sparse import __all__ as _sparse
from .sync_batchnorm import *  # noqa: F403
from .sync_batchnorm import __all__ as _syncbn
from .transformer import *  # noqa: F403
from .transformer import __all__ as _tf

__all__ = [*_mod, *_cont, *_lin, *_act, *_drop, *_flat, *_loss, *_sparse, *_conv, *_pool,
           *_norm, *_rnn, *_attn, *_tf, *_pos]
__all__ += [*_dist, *_padding, *_samp]
__all__ += [*_adaptive, *_chshuffle, *_lazy, *_syncbn]
__all__ += [*_pool_frac]
__all__ += [*_lce]
