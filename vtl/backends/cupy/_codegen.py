"""CUDA source helpers shared by the CuPy backend's kernels: the float C types, narrowed
index arithmetic, geometry folded in as constants, and the cache of ``ElementwiseKernel``s
built from ``(inputs, outputs, body)`` specs."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def narrow(names: str, itype: str) -> str:
    """C++ declarations ``const I N_ = (I)N;`` of the ``int64`` kernel parameters ``names``
    (index arithmetic in the narrower type ``itype``)."""
    return "".join(f"const {itype} {k}_ = ({itype}){k};\n" for k in names.split())


def needs_wide_index(*sizes: int) -> bool:
    """Whether a kernel's index arithmetic needs 64 bits (2**31 elements or more)."""
    return max(sizes) >= 2 ** 31


#: Elements (threads) from which a spec kernel is compiled for its geometry (:func:`fold`).
FOLD_MIN = 1 << 20


def fold(names: Any, values: Any, size: int) -> tuple | None:
    """The ``fold`` argument of :meth:`SpecKernels.get`: the geometry ``names``/``values`` as
    constants for a launch of ``size`` threads from :data:`FOLD_MIN`, else ``None`` (small
    launches do not pay a compilation per geometry)."""
    if size < FOLD_MIN:
        return None
    return tuple((n, int(v)) for n, v in zip(names, values, strict=True))


def fold_constants(body: str, consts: tuple) -> str:
    """``body`` with the narrowed parameters ``N_`` of :func:`narrow` (``(name, value)``
    pairs in ``consts``; names the body does not narrow are skipped) declared as constants."""
    for name, value in consts:
        body = re.sub(rf"const (\w+) {name}_ = \(\1\){name};\n",
                      rf"const \g<1> {name}_ = {int(value)};\n", body)
    return body


class SpecKernels:
    """``ElementwiseKernel``s built once per (spec, dtype, index width) from
    ``spec(dtype, wide) -> (inputs, outputs, body)``, named ``{prefix}{spec}_{dtype}[_wide]``;
    the kernels of dtypes other than float32/float64 (16-bit words) get ``low_preamble``.

    With ``fold`` (see :func:`fold`) the narrowed size parameters are compiled in as
    constants, one kernel per geometry: the compiler turns the index arithmetic's divisions
    by them into multiplications and shifts and unrolls the tap loops (a 32-bit division by
    a runtime value costs about twenty instructions; im2col does five per element).
    """

    def __init__(self, cupy: Any, prefix: str, low_preamble: str = "") -> None:
        self._cp = cupy
        self._prefix = prefix
        self._low_preamble = low_preamble  # device functions of the 16-bit kernels
        self._kernels: dict[tuple, Any] = {}

    def get(self, spec: Any, dtype: Any, wide: bool = False, fold: tuple | None = None) -> Any:
        key = (spec.__name__, np.dtype(dtype), wide, fold)
        kern = self._kernels.get(key)
        if kern is None:
            ins, outs, body = spec(dtype, wide)
            if fold:
                body = fold_constants(body, fold)
            name = f"{self._prefix}{spec.__name__}_{key[1].name}{'_wide' if wide else ''}"
            kern = self._kernels[key] = self._cp.ElementwiseKernel(
                ", ".join(ins), ", ".join(outs), body, name,
                preamble="" if key[1] in CTYPES else self._low_preamble)
        return kern
