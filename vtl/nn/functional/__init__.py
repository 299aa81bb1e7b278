"""``vtl.nn.functional``: every neural-network op as a function.

Each function is written with ``xp = array_namespace(x)`` and standard
array-API calls only, so it runs on plain NumPy, CuPy or array-api-strict
arrays (without gradients) and is differentiable on vtl tensors. Names,
arguments and defaults follow ``torch.nn.functional``.

Files by topic: ``activation`` (elementwise activations), ``softmax``
(softmax, log_softmax, softmin, logsumexp), ``linear`` (linear, bilinear,
embedding, one_hot, pad, dropout), ``loss`` (losses). Convolution, pooling,
normalisation and attention go in modules of their own next to these.
"""

from .activation import *  # noqa: F403
from .activation import __all__ as _act
from .linear import *  # noqa: F403
from .linear import __all__ as _lin
from .loss import *  # noqa: F403
from .loss import __all__ as _loss
from .softmax import *  # noqa: F403
from .softmax import __all__ as _sm

__all__ = [*_act, *_lin, *_loss, *_sm]
