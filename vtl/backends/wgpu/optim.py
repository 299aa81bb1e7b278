"""``kernel("multi_tensor_apply")`` of the wgpu backend: fused optimizer steps.

An update program (``vtl/optim/_programs.py``: a few assignments using
``+ - * /``, ``sqrt`` and ``max``) becomes one WGSL compute shader, compiled
once per (program, dtype) through the library's pipeline cache. Each parameter
tensor is updated by ONE dispatch: its parameter, gradient and state buffers
are bound directly (read-only for arrays the program does not write), their
element offsets and the scalars (learning rate, betas, bias corrections...)
travel as immediates. Non-contiguous arrays, arrays of another dtype and
arrays sharing a buffer with another operand are copied to fresh contiguous
arrays first (and written back afterwards when the program updates them), as
the CuPy kernel does.

The calling convention is the CuPy backend's (``vtl/backends/cupy/optim.py``):
``kern(program, tensors, scalars)`` with one tuple of arrays per parameter in
``program.arrays`` order, and ``kern.supports(dtype)``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .._base import DynamicScalars
from . import _dtypes as D
from . import _kernels, _runtime
from ._array import astype_raw, contiguous, copy_into, words_for_scalar
from ._recorder import REC, groups_for

_TEMPLATE_NAME = "fused_optim"
_TEMPLATE = """
// Fused optimizer update over one tensor (see vtl/backends/wgpu/optim.py).
// Words: 0 n, 1.. element offset of each array, then the scalars.
{{DECLS}}
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let i = linear_id(wid, nwg, lid);
  if (i >= pw(0u)) { return; }
{{BODY}}
}
"""
_NAME = re.compile(r"\b([A-Za-z_][A-Za-z_0-9]*)\b")
_FUNCS = frozenset({"sqrt", "max"})
#: immediate words: one for n, one offset per array, 1 (float32) or 3 (float64) per scalar
_MAX_WORDS = _runtime.PARAM_BYTES // 4


def _ident(expr: str) -> str:
    """Prefix the program's names so none collides with a WGSL keyword or built-in."""
    return _NAME.sub(lambda m: m.group(1) if m.group(1) in _FUNCS else "v_" + m.group(1), expr)


def _scalar_words(dt: np.dtype) -> int:
    return 3 if dt == D.float64 else 1


def wgsl_source(prog: Any, dtype: Any) -> tuple[str, str, str]:
    """Binding signature ('r'/'w' per array), declarations and body of ``prog``'s shader."""
    dt = np.dtype(dtype)
    t = D.wgsl(dt)
    sig = "".join("w" if a in prog.writes else "r" for a in prog.arrays)
    decls = []
    for n, a in enumerate(prog.arrays):
        access = "read_write" if a in prog.writes else "read"
        decls.append(f"@group(0) @binding({n}) var<storage, {access}> b_{a}: array<{t}>;")
    body = []
    k = 1
    for a in prog.arrays:
        body.append(f"  let j_{a} = pw({k}u) + i;")
        body.append(f"  var v_{a}: {t} = b_{a}[j_{a}];")
        k += 1
    for s in prog.scalars:
        body.append(f"  let v_{s}: {t} = scal_{dt.name}({k}u);")
        k += _scalar_words(dt)
    for tmp in prog.temps:
        body.append(f"  var v_{tmp}: {t};")
    for target, expr in prog.body:
        body.append(f"  v_{target} = {_ident(expr)};")
    for a in prog.writes:
        body.append(f"  b_{a}[j_{a}] = v_{a};")
    return sig, "\n".join(decls) + "\n", "\n".join(body)


class MultiTensorApply:
    """The ``multi_tensor_apply`` kernel: ``kern(program, tensors, scalars)``.

    ``tensors`` is a list of tuples of wgpu arrays (one tuple per parameter, in
    ``program.arrays`` order, all of one dtype); arrays named in
    ``program.writes`` are updated in place. ``launches`` counts the dispatches
    of update programs. ``scalars`` may be the :class:`~vtl.backends.DynamicScalars` of a
    captured step: the dispatches' words are then encoded anew at each replay.
    """

    def __init__(self) -> None:
        self.launches = 0
        self._kernels: dict[tuple, tuple[Any, str]] = {}
        if _kernels._sources.get(_TEMPLATE_NAME) is None:
            _kernels._sources[_TEMPLATE_NAME] = _TEMPLATE

    def supports(self, dtype: Any) -> bool:
        dt = np.dtype(dtype)
        if dt == D.float32:
            return True
        return dt == D.float64 and "shader-f64" in _runtime.get().features

    def _kernel(self, prog: Any, dt: np.dtype) -> tuple[Any, str]:
        key = (prog.key, dt)
        hit = self._kernels.get(key)
        if hit is None:
            sig, decls, body = wgsl_source(prog, dt)
            kern = _kernels.kernel(_TEMPLATE_NAME, sig, (dt,), DECLS=decls, BODY=body)
            hit = self._kernels[key] = (kern, sig)
        return hit

    def __call__(self, prog: Any, tensors: list[tuple[Any, ...]],
                 scalars: tuple[float, ...]) -> None:
        tensors = [arrs for arrs in tensors if arrs[0].size]
        if not tensors:
            return
        dt = np.dtype(tensors[0][0].dtype)
        if 1 + len(prog.arrays) + _scalar_words(dt) * len(prog.scalars) > _MAX_WORDS:
            raise ValueError(f"multi_tensor_apply: program {prog.name} needs more than "
                             f"{_MAX_WORDS} immediate words")
        kern, sig = self._kernel(prog, dt)
        dynamic = isinstance(scalars, DynamicScalars)

        def encode(values: Any) -> list[int]:
            out: list[int] = []
            for v in values:
                out += words_for_scalar(v, dt)[:_scalar_words(dt)]
            return out

        swords = encode(scalars.values if dynamic else scalars)
        start = 1 + len(prog.arrays)
        for arrs in tensors:
            n = arrs[0].size
            bound: list[Any] = []
            back: list[tuple[Any, Any]] = []  # (original, copy) to write back
            seen: set[int] = set()
            for a, mode in zip(arrs, sig, strict=True):
                c = a
                if a.dtype != dt:
                    c = astype_raw(a, dt)
                elif not a._contig or a.size != n:
                    c = contiguous(a)
                if c._st.buf.uid in seen:  # the same buffer twice: give it its own copy
                    c = astype_raw(c, dt)
                seen.add(c._st.buf.uid)
                if c is not a and mode == "w":
                    back.append((a, c))
                bound.append(c)
            words = [n, *(c._offset for c in bound), *swords]
            REC.dispatch(kern, tuple(c._st.buf for c in bound), words, groups_for(n),
                         dynamic=[(start, scalars, encode)] if dynamic else None)
            self.launches += 1
            for orig, c in back:
                copy_into(c, orig)
