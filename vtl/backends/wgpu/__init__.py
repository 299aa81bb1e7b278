"""vtl's own array-API library on wgpu-py (WebGPU) with WGSL kernels.

Usable on its own::

    import vtl.backends.wgpu as xp
    x = xp.arange(10, dtype=xp.float32)
    y = xp.sum(xp.exp(x) * 2.0)
    float(y)               # the only point where work is submitted and awaited

and as the array namespace of vtl's ``wgpu`` backend. Pieces: ``_runtime``
(adapter/device), ``_memory`` (buffer pool), ``_recorder`` (one open compute
pass), ``_kernels`` (WGSL templates and pipeline cache), ``_array``
(``WgpuArray``), and the op modules.

Sorting, searching and sets run on the device (``_sorting``: sort/argsort as a
stable radix or bitonic sort, searchsorted/isin as binary searches, ``unique_*`` as sort,
flags and a prefix sum with one readback, their result size; all real dtypes), so do
``nonzero`` and boolean masks (one readback, the count) and
``linalg.solve``/``inv``/``det``/``slogdet`` of float matrices up to 64x64 (``_lu``).
Computed through host NumPy (a readback, then an upload): ``unique_*``, ``isin``
and ``nonzero`` of complex arrays, the other linalg decompositions and solvers and
larger solves (``_linalg.HOST_LINALG``), the FFTs (``_fft.HOST_FFT``)
of lengths that are not powers of two (powers of two run a Stockham kernel on the
device) and ``cumulative_prod`` of complex arrays.

Complex dtypes: complex64 always, complex128 with ``shader-f64``, stored as
(real, imag) pairs (``_complex``; the functions with the standard's special
cases are in ``wgsl/math/complex.wgsl``). As the standard says, ``astype`` refuses
complex -> real/integer casts (take ``real``/``imag``); complex -> bool is allowed.
"""

from __future__ import annotations

from math import e, inf, nan, pi
from typing import Any

import numpy as np

from . import _runtime
from ._array import DEVICE, WgpuArray, check_dtype, to_numpy
from ._creation import (
    arange,
    asarray,
    empty,
    empty_like,
    eye,
    from_dlpack,
    full,
    full_like,
    linspace,
    meshgrid,
    ones,
    ones_like,
    tril,
    triu,
    zeros,
    zeros_like,
)
from ._dtypes import (
    bfloat16,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ._dtypes import (
    bool_ as bool,  # noqa: A001 - the standard's name
)
from ._elementwise import FUNCTIONS as _EW
from ._elementwise import clip, where
from ._info import __array_namespace_info__, can_cast, finfo, iinfo, isdtype, result_type
from ._manipulation import (
    astype,
    broadcast_arrays,
    broadcast_to,
    concat,
    expand_dims,
    flip,
    matrix_transpose,
    moveaxis,
    permute_dims,
    repeat,
    reshape,
    roll,
    squeeze,
    stack,
    tile,
    unstack,
)
from ._memory import POOL as _POOL
from ._recorder import REC as _REC
from ._recorder import synchronize

__array_api_version__ = "2024.12"
newaxis = None
complex64 = np.dtype("complex64")
complex128 = np.dtype("complex128")

globals().update(_EW)
from . import _dunders  # noqa: E402
from ._fft import fft  # noqa: E402
from ._fuse import fuse  # noqa: E402
from ._indexing import (  # noqa: E402
    nonzero,
    scatter_add,
    take,
    take_along_axis,
)
from ._linalg import linalg, matmul, tensordot, vecdot  # noqa: E402
from ._reduction import (  # noqa: E402
    all,
    any,
    argmax,
    argmin,
    count_nonzero,
    cumulative_prod,
    cumulative_sum,
    max,
    mean,
    min,
    prod,
    std,
    sum,
    var,
)
from ._sorting import (  # noqa: E402
    argsort,
    diff,
    isin,
    searchsorted,
    sort,
    unique_all,
    unique_counts,
    unique_inverse,
    unique_values,
)

_dunders.install()


def runtime_info() -> dict[str, Any]:
    """The adapter, its features and limits, pipeline/bind-group cache stats."""
    from . import _coop, _kernels, _subgroups

    out = _runtime.get().describe()
    out["dtypes"] = sorted(__array_namespace_info__().dtypes())
    out["float16_products"] = _coop.describe()
    out["row_reductions"] = _subgroups.status()
    out["kernels"] = _kernels.stats()
    out["submits"] = _REC.submits
    out["waits"] = _REC.waits
    out["dispatches"] = _REC.dispatches
    return out


def memory_info() -> dict[str, int]:
    """Bytes in use by live arrays, pooled for reuse, and the peak in use."""
    return _POOL.info()


def empty_cache() -> None:
    """Submit pending work, wait, and free every pooled buffer."""
    synchronize()
    _POOL.trim()


def from_host(a: np.ndarray) -> WgpuArray:
    """Upload a NumPy array (keeps its dtype)."""
    return asarray(np.asarray(a))


def is_available() -> bool:
    """Whether a WebGPU adapter and device can be created here (creating them if not yet)."""
    try:
        _runtime.get()
    except RuntimeError:
        return False
    return True


__all__ = [n for n in list(globals()) if not n.startswith("_")
           and n not in ("annotations", "Any", "np")]
