"""``vtl.nn.functional``: every neural-network op as a function.

Each function is written with ``xp = array_namespace(x)`` and standard
array-API calls only, so it runs on plain NumPy, CuPy or array-api-strict
arrays (without gradients) and is differentiable on vtl tensors. Names,
arguments and defaults follow ``torch.nn.functional``.

Files by topic: ``activation`` (elementwise activations), ``softmax``
(softmax, log_softmax, softmin, logsumexp), ``linear`` (linear, bilinear,
embedding, one_hot, pad, dropout), ``loss`` (losses), ``loss_margin`` (margin,
ranking and embedding losses), ``ctc`` (CTC loss), ``conv`` (convolutions),
``vision`` (affine_grid, grid_sample, channel_shuffle), ``pooling``,
``normalization`` (layer/batch/group/instance norm), ``attention``
(scaled dot-product and multi-head attention), ``sampling`` (interpolate,
pixel_shuffle, fold/unfold); ``_rnn`` holds the recurrent
cells used by ``nn.RNN``/``nn.LSTM``/``nn.GRU``.
"""

from .activation import *  # noqa: F403
from .activation import __all__ as _act
from .attention import *  # noqa: F403
from .attention import __all__ as _attn
from .conv import *  # noqa: F403
from .conv import __all__ as _conv
from .ctc import *  # noqa: F403
from .ctc import __all__ as _ctc
from .distance import *  # noqa: F403
from .distance import __all__ as _dist
from .linear import *  # noqa: F403
from .linear import __all__ as _lin
from .linear_cross_entropy import *  # noqa: F403
from .linear_cross_entropy import __all__ as _lce
from .loss import *  # noqa: F403
from .loss import __all__ as _loss
from .loss_margin import *  # noqa: F403
from .loss_margin import __all__ as _loss_margin
from .normalization import *  # noqa: F403
from .normalization import __all__ as _norm
from .pooling import *  # noqa: F403
from .pooling import __all__ as _pool
from .pooling_fractional import *  # noqa: F403
from .pooling_fractional import __all__ as _pool_frac
from .sampling import *  # noqa: F403
from .sampling import __all__ as _samp
from .softmax import *  # noqa: F403
from .softmax import __all__ as _sm
from .vision import *  # noqa: F403
from .vision import __all__ as _vision

__all__ = [*_act, *_lin, *_loss, *_sm, *_conv, *_pool, *_norm, *_attn]
__all__ += [*_loss_margin, *_ctc]
__all__ += [*_dist]
__all__ += [*_samp]
__all__ += [*_vision]
__all__ += [*_pool_frac]
__all__ += [*_lce]
