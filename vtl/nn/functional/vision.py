"""Spatial transformers and channel rearranging: affine_grid, grid_sample and
channel_shuffle.

``grid_sample`` follows PyTorch's CPU kernels (``aten/src/ATen/native/GridSampler.h``):
each grid coordinate in ``[-1, 1]`` is unnormalised to a pixel position
(``align_corners`` decides whether -1 and 1 are the centres or the outer edges of the
corner pixels), moved into the image by the padding mode (``'border'`` clips,
``'reflection'`` reflects about the edges, then clips) and interpolated from its
neighbours: 4 (8 in 5-D) for ``'bilinear'``, the nearest one for ``'nearest'``
(round half to even), 16 for ``'bicubic'`` (Keys' cubic, ``A = -0.75``). With
``'zeros'`` padding, neighbours outside the image read 0.

Every neighbour is one ``take`` of the channels-last input rows and the result is the
weighted sum, written with array-API calls only: the gradient with respect to the
input is ``take``'s scatter-add, the gradient with respect to the grid flows through
the interpolation weights (the integer neighbour positions are constants), and
gradients of gradients work. The padding functions' gradients follow from the same
ops: 0 where a coordinate is clipped, the sign flip of a reflection.
"""

from __future__ import annotations

import itertools
import math
import operator
import warnings
from typing import Any

from ._utils import detach, namespace
from .sampling import _cached, _index_dtype

__all__ = ["affine_grid", "channel_shuffle", "grid_sample", "native_channel_shuffle"]

_CUBIC_A = -0.75
_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to "
                  "align_corners=False since 1.3.0. Please specify align_corners=True if the "
                  "old behavior is desired. See the documentation of grid_sample for details.")


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(x.shape)


# -- channel_shuffle --------------------------------------------------------------------------
def channel_shuffle(input: Any, groups: int) -> Any:  # noqa: A002
    """Divide the ``C`` channels of an ``(N, C, *)`` input into ``groups`` groups and
    interleave them: output channel ``j * groups + g`` is input channel
    ``g * (C // groups) + j`` (ShuffleNet's channel shuffle)."""
    xp = namespace(input)
    try:
        g = operator.index(groups)
    except TypeError:
        raise TypeError(f"channel_shuffle(): groups must be an int, got "
                        f"{type(groups).__name__}") from None
    if input.ndim <= 2:
        raise ValueError(f"channel_shuffle(): expected an input with more than 2 dimensions "
                         f"(N, C, *), got shape {_shape(input)}")
    if g <= 0:
        raise ValueError(f"channel_shuffle(): the number of groups must be positive, got {g}")
    n, c, *rest = _shape(input)
    if c % g:
        raise ValueError(f"channel_shuffle(): the number of channels must be divisible by "
                         f"groups, got {c} channels and {g} groups")
    x = xp.reshape(input, (n, g, c // g, *rest))
    x = xp.permute_dims(x, (0, 2, 1, *range(3, x.ndim)))
    return xp.reshape(x, (n, c, *rest))


def native_channel_shuffle(input: Any, groups: int) -> Any:  # noqa: A002
    """The same as :func:`channel_shuffle` (PyTorch's native entry point)."""
    return channel_shuffle(input, groups)


# -- affine_grid ------------------------------------------------------------------------------
def _base_coords(n: int, align_corners: bool) -> list[float]:
    """PyTorch's ``linspace_from_neg_one``: ``n`` positions spanning ``[-1, 1]`` (the pixel
    centres: ``(2i + 1) / n - 1`` unless ``align_corners``); ``[0]`` for ``n <= 1``."""
    if n <= 1:
        return [0.0]
    if align_corners:
        return [2.0 * i / (n - 1) - 1.0 for i in range(n)]
    return [(2.0 * i + 1.0) / n - 1.0 for i in range(n)]


def affine_grid(theta: Any, size: Any, align_corners: bool | None = None) -> Any:
    """A sampling grid for :func:`grid_sample` from a batch of affine matrices.

    ``theta`` of shape ``(N, 2, 3)`` and ``size = (N, C, H, W)`` give a grid of shape
    ``(N, H, W, 2)``; ``(N, 3, 4)`` and ``(N, C, D, H, W)`` give ``(N, D, H, W, 3)``.
    Each output position's normalised coordinates ``(x, y[, z], 1)`` (x along the width)
    are multiplied by ``theta``; ``align_corners`` as in :func:`grid_sample`
    (``None`` warns, as PyTorch, and means ``False``). Differentiable in ``theta``.
    """
    xp = namespace(theta)
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if not xp.isdtype(theta.dtype, "real floating"):
        raise TypeError(f"affine_grid(): expected theta to have a floating-point dtype, got "
                        f"{theta.dtype}")
    try:
        size = tuple(operator.index(s) for s in size)
    except TypeError:
        raise TypeError(f"affine_grid(): size must be a sequence of ints, got {size!r}") from None
    if len(size) not in (4, 5):
        raise ValueError(f"affine_grid(): only 4-D and 5-D sizes are supported (2-D and 3-D "
                         f"affine transforms), got size {size}")
    nsp = len(size) - 2
    want = (nsp, nsp + 1)
    if theta.ndim != 3 or _shape(theta)[1:] != want:
        raise ValueError(f"affine_grid(): expected a batch of {nsp}-D affine matrices of shape "
                         f"(N, {want[0]}, {want[1]}) for size {size}, got theta of shape "
                         f"{_shape(theta)}")
    spatial = size[2:]
    if align_corners and min(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size "
                      "grids when align_corners=True. This is not an intended use case of "
                      "affine_grid. See the documentation of affine_grid for details.",
                      stacklevel=2)
    elif min(size) <= 0:
        raise ValueError(f"affine_grid(): expected a non-zero, positive output size, got {size}")
    n = size[0]
    if theta.shape[0] != n:
        raise ValueError(f"affine_grid(): theta holds {theta.shape[0]} matrices but size "
                         f"{size} asks for a batch of {n}")
    p = math.prod(spatial)

    def build() -> Any:
        axes = [_base_coords(s, bool(align_corners)) for s in spatial]  # (D,) H, W
        rows = [[*reversed(pos), 1.0] for pos in itertools.product(*axes)]  # (x, y[, z], 1)
        return xp.reshape(xp.asarray(rows, dtype=theta.dtype, device=theta.device),
                          (1, p, nsp + 1))

    base = _cached(("affine_grid", spatial, bool(align_corners), str(theta.dtype)), xp, theta,
                   build)
    grid = xp.matmul(base, xp.matrix_transpose(theta))  # (N, P, nsp)
    return xp.reshape(grid, (n, *spatial, nsp))


# -- grid_sample ------------------------------------------------------------------------------
def _unnormalize(coord: Any, size: int, align_corners: bool) -> Any:
    """PyTorch's ``grid_sampler_unnormalize``: ``[-1, 1]`` to pixel positions."""
    if align_corners:
        return (coord + 1.0) / 2.0 * (size - 1)
    return ((coord + 1.0) * size - 1.0) / 2.0


def _clip(xp: Any, coord: Any, size: int) -> Any:
    """PyTorch's ``clip_coordinates``: into ``[0, size - 1]`` (gradient 0 where clipped)."""
    return xp.clip(coord, 0.0, float(size - 1))


def _reflect(xp: Any, coord: Any, twice_low: int, twice_high: int) -> Any:
    """PyTorch's ``reflect_coordinates``: reflect about ``low`` and ``high`` (given doubled,
    so half-integers are exact) until the coordinate lies between them."""
    if twice_low == twice_high:
        return xp.zeros_like(coord)
    lo = twice_low / 2.0
    span = (twice_high - twice_low) / 2.0
    d = xp.abs(coord - lo)
    extra = xp.remainder(d, span)
    flips = xp.floor(detach(d) / span)
    odd = xp.remainder(flips, 2.0) == 1.0
    return xp.where(odd, span - extra + lo, extra + lo)


def _pad_coord(xp: Any, coord: Any, size: int, padding_mode: str, align_corners: bool) -> Any:
    """PyTorch's ``compute_coordinates``."""
    if padding_mode == "border":
        return _clip(xp, coord, size)
    if padding_mode == "reflection":
        if align_corners:
            coord = _reflect(xp, coord, 0, 2 * (size - 1))
        else:
            coord = _reflect(xp, coord, -1, 2 * size - 1)
        return _clip(xp, coord, size)
    return coord


def _cubic_coeffs(t: Any) -> tuple[Any, Any, Any, Any]:
    """PyTorch's ``get_cubic_upsample_coefficients`` for fractions ``t`` in ``[0, 1)``."""
    a = _CUBIC_A

    def conv1(x: Any) -> Any:  # |x| <= 1
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0

    def conv2(x: Any) -> Any:  # 1 < |x| < 2
        return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a

    t2 = 1.0 - t
    return conv2(t + 1.0), conv1(t), conv1(t2), conv2(t2 + 1.0)


class _Gather:
    """Reads the channels of given pixel positions from the input, channels last."""

    def __init__(self, xp: Any, input: Any, sizes: tuple[int, ...], n_points: int) -> None:  # noqa: A002
        self.xp = xp
        n, c = input.shape[:2]
        self.sizes = sizes
        self.n_points = n_points
        self.c = c
        nsp = len(sizes)
        s = math.prod(sizes)
        rows = xp.permute_dims(input, (0, *range(2, 2 + nsp), 1))
        self.rows = xp.reshape(rows, (n * s, c))
        self.idt = _index_dtype(xp, input)
        self.base = _cached(("grid_sample_base", n, s, n_points), xp, input, lambda: xp.reshape(
            xp.arange(0, n * s, s, dtype=self.idt, device=input.device), (n, 1)))
        self.n = n

    def __call__(self, pos: list[Any]) -> tuple[Any, Any]:
        """``(values (N, P, C), valid (N, P))`` for integral float positions ``pos`` (one
        ``(N, P)`` array per axis, last spatial axis first); outside positions read row 0 and
        are not valid."""
        xp = self.xp
        valid = None
        flat = None
        stride = 1
        for a, q in enumerate(pos):
            size = self.sizes[-1 - a]
            ok = (q >= 0.0) & (q <= float(size - 1))
            valid = ok if valid is None else valid & ok
        for a, q in enumerate(pos):
            size = self.sizes[-1 - a]
            qi = xp.astype(xp.where(valid, q, 0.0), self.idt)
            flat = qi * stride if flat is None else flat + qi * stride
            stride *= size
        idx = xp.reshape(flat + self.base, (-1,))
        vals = xp.take(self.rows, idx, axis=0)
        return xp.reshape(vals, (self.n, self.n_points, self.c)), valid


def _weighted(xp: Any, vals: Any, valid: Any, w: Any) -> Any:
    """``vals * w`` with invalid neighbours contributing 0 (even where ``w`` is not finite)."""
    if w is None:
        return xp.where(valid[..., None], vals, 0.0)
    return vals * xp.where(valid, w, 0.0)[..., None]


def grid_sample(input: Any, grid: Any, mode: str = "bilinear",  # noqa: A002
                padding_mode: str = "zeros", align_corners: bool | None = None) -> Any:
    """Sample ``input`` at the positions of ``grid`` (spatial transformer networks).

    ``input`` ``(N, C, H_in, W_in)`` with ``grid`` ``(N, H_out, W_out, 2)`` gives
    ``(N, C, H_out, W_out)``; in 5-D, ``(N, C, D_in, H_in, W_in)`` with ``(N, D_out, H_out,
    W_out, 3)``. ``grid[..., 0]`` is x (along the width), ``grid[..., 1]`` y (``[..., 2]``
    z), normalised to ``[-1, 1]``. ``mode``: ``'bilinear'`` (trilinear in 5-D),
    ``'nearest'`` or ``'bicubic'`` (4-D only); ``padding_mode``: ``'zeros'``,
    ``'border'`` or ``'reflection'``; ``align_corners``: -1 and 1 are the centres
    (``True``) or the outer edges (``False``) of the corner pixels (``None`` warns, as
    PyTorch, and means ``False``). Differentiable with respect to ``input`` and ``grid``
    (``'nearest'`` gives the grid a zero gradient).
    """
    xp = namespace(input, grid)
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"grid_sample(): expected mode to be 'bilinear', 'nearest' or "
                         f"'bicubic', got {mode!r}")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', got {padding_mode!r}")
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    align_corners = bool(align_corners)
    if input.ndim not in (4, 5) or grid.ndim != input.ndim:
        raise ValueError(f"grid_sample(): expected a 4-D or 5-D input and a grid with the same "
                         f"number of dimensions, got input of shape {_shape(input)} and grid "
                         f"of shape {_shape(grid)}")
    nsp = input.ndim - 2
    if grid.shape[0] != input.shape[0]:
        raise ValueError(f"grid_sample(): expected grid and input to have the same batch size, "
                         f"got input of shape {_shape(input)} and grid of shape {_shape(grid)}")
    if grid.shape[-1] != nsp:
        raise ValueError(f"grid_sample(): expected grid to have size {nsp} in its last "
                         f"dimension for a {input.ndim}-D input, got grid of shape "
                         f"{_shape(grid)}")
    if mode == "bicubic" and nsp != 2:
        raise ValueError("grid_sample(): bicubic interpolation only supports 4-D input")
    for name, t in (("input", input), ("grid", grid)):
        if not xp.isdtype(t.dtype, "real floating"):
            raise TypeError(f"grid_sample(): expected a floating-point {name}, got {t.dtype}")
    if input.dtype != grid.dtype:
        raise TypeError(f"grid_sample(): expected input and grid to have the same dtype, got "
                        f"{input.dtype} and {grid.dtype}")
    sizes = _shape(input)[2:]
    if any(s == 0 for s in sizes):
        raise ValueError(f"grid_sample(): expected input to have non-empty spatial dimensions, "
                         f"got input of shape {_shape(input)}")
    n, c = input.shape[:2]
    out_sp = _shape(grid)[1:-1]
    p = math.prod(out_sp)
    if n == 0 or c == 0 or p == 0:
        return xp.zeros((n, c, *out_sp), dtype=input.dtype, device=input.device)
    g = xp.reshape(grid, (n, p, nsp))
    gather = _Gather(xp, input, sizes, p)
    # coordinate of each axis, last spatial axis (x) first
    coords = [_unnormalize(g[:, :, a], sizes[-1 - a], align_corners) for a in range(nsp)]
    if mode == "bicubic":
        out = _bicubic(xp, gather, coords, sizes, padding_mode, align_corners)
    else:
        coords = [_pad_coord(xp, q, sizes[-1 - a], padding_mode, align_corners)
                  for a, q in enumerate(coords)]
        if mode == "nearest":
            vals, valid = gather([xp.round(detach(q)) for q in coords])
            out = _weighted(xp, vals, valid, None)
            if getattr(grid, "requires_grad", False):
                # the output depends on the grid with a zero gradient, as PyTorch
                never = xp.zeros((1, 1, 1), dtype=xp.bool, device=grid.device)
                out = out + xp.where(never, g[:, :, :1], 0.0)
        else:
            lows = [xp.floor(detach(q)) for q in coords]
            # weights as PyTorch: (low + 1 - q) for the low neighbour, (q - low) for the high
            ws = [((lo + 1.0) - q, q - lo) for q, lo in zip(coords, lows, strict=True)]
            out = None
            # corners in PyTorch's order: the last spatial axis (x) varies fastest
            for bits in itertools.product((0, 1), repeat=nsp):
                xb = bits[::-1]  # per axis, x first
                pos = [lo + b for lo, b in zip(lows, xb, strict=True)]
                w = ws[0][xb[0]]
                for a in range(1, nsp):
                    w = w * ws[a][xb[a]]
                vals, valid = gather(pos)
                term = _weighted(xp, vals, valid, w)
                out = term if out is None else out + term
    out = xp.permute_dims(out, (0, 2, 1))  # (N, C, P)
    return xp.reshape(out, (n, c, *out_sp))


def _bicubic(xp: Any, gather: _Gather, coords: list[Any], sizes: tuple[int, ...],
             padding_mode: str, align_corners: bool) -> Any:
    """PyTorch's bicubic grid sampling: 4 x 4 neighbours around the unpadded position, each
    neighbour's integer position moved inside by the padding mode (``get_value_bounded``)."""
    ix, iy = coords
    h, w = sizes
    x0 = xp.floor(detach(ix))
    y0 = xp.floor(detach(iy))
    cx = _cubic_coeffs(ix - x0)
    cy = _cubic_coeffs(iy - y0)

    def bounded(q: Any, size: int) -> Any:
        q = _pad_coord(xp, q, size, padding_mode, align_corners)
        return xp.trunc(q) if padding_mode != "zeros" else q

    xs = [bounded(x0 + (j - 1.0), w) for j in range(4)]
    ys = [bounded(y0 + (i - 1.0), h) for i in range(4)]
    out = None
    for i in range(4):
        row = None
        for j in range(4):
            vals, valid = gather([xs[j], ys[i]])
            term = _weighted(xp, vals, valid, None) * cx[j][..., None]
            row = term if row is None else row + term
        term = row * cy[i][..., None]
        out = term if out is None else out + term
    return out
