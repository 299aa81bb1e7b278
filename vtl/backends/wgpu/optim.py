"""``kernel("multi_tensor_apply")`` of the wgpu backend: fused optimizer steps;
``kernel("grad_norm")``: gradient clipping's joint norm and scaling (:class:`WgpuGradNorm`);
and ``kernel("amp_update_scale")``: ``GradScaler.update`` in one dispatch.

An update program (``vtl/optim/_programs.py``: a few assignments using
``+ - * /``, ``sqrt`` and ``max``) becomes one WGSL compute shader, compiled
once per (program, dtype) through the library's pipeline cache. Contiguous parameter
tensors are updated several to a dispatch (as many as the adapter's storage bindings per
stage and the 32 immediate words allow, at most ``GROUP_MAX``: for Adam in float32, eight
whose arrays all start their buffers (no offset words), else four),
each tensor taking a range of the dispatch's workgroups: its parameter, gradient and state
buffers are bound directly (read-only for arrays the program does not write), their element
offsets, sizes and the scalars (learning rate, betas, bias corrections...) travel as
immediates. Non-contiguous arrays, arrays of another dtype and arrays sharing a buffer with
another operand are copied to fresh contiguous arrays first (and written back afterwards
when the program updates them), as the CuPy kernel does; such a tensor, and 16-bit
parameters, take one dispatch each.

float16/bfloat16 parameters and gradients are widened to float32 on load, computed with
float32 state arrays and rounded once on store, as on cupy.

The calling convention is the CuPy backend's (``vtl/backends/cupy/optim.py``):
``kern(program, tensors, scalars)`` with one tuple of arrays per parameter in
``program.arrays`` order, and ``kern.supports(dtype)``.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .._base import DynamicScalars
from .._common.amp import update_threshold
from . import _dtypes as D
from . import _kernels, _runtime
from ._array import astype_raw, contiguous, copy_into, empty, words_for_scalar
from ._elementwise import div_body
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
_GROUP_TEMPLATE_NAME = "fused_optim_group"
_GROUP_TEMPLATE = """
// Fused optimizer update over several tensors (see vtl/backends/wgpu/optim.py): tensor s
// takes the workgroups from its first one on. Words: per tensor its size, its first
// workgroup and the element offset of each array, then the scalars.
{{DECLS}}
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) lid: u32) {
  let wg = wid.y * nwg.x + wid.x;
{{BODY}}
}
"""
_NAME = re.compile(r"\b([A-Za-z_][A-Za-z_0-9]*)\b")
_FUNCS = frozenset({"sqrt", "max"})
#: immediate words: one for n, one offset per array, 1 (float32) or 3 (float64) per scalar
_MAX_WORDS = _runtime.PARAM_BYTES // 4
#: the most tensors one grouped optimizer dispatch updates
GROUP_MAX = 8


def _ident(expr: str) -> str:
    """Prefix the program's names so none collides with a WGSL keyword or built-in."""
    return _NAME.sub(lambda m: m.group(1) if m.group(1) in _FUNCS else "v_" + m.group(1), expr)


def _scalar_words(dt: np.dtype) -> int:
    return 3 if dt == D.float64 else 1


def _skip_parts(binding: int, word: int) -> tuple[str, str]:
    """Declaration and first line of a kernel that returns without writing where the 0-d
    float32 flag at element ``pw(word)`` of binding ``binding`` is nonzero."""
    return (f"@group(0) @binding({binding}) var<storage, read> b_skip: array<f32>;",
            f"  if (b_skip[pw({word}u)] != 0.0) {{ return; }}")


def wgsl_source(prog: Any, dtype: Any, low_arrays: tuple[str, ...] = (), skip: bool = False
                ) -> tuple[str, str, str]:
    """Binding signature ('r'/'w' per array), declarations and body of ``prog``'s shader;
    for float16/bfloat16 ``dtype`` the arrays named in ``low_arrays`` are of that dtype
    (widened on load, rounded once on store) and the others float32. With ``skip``, one
    more binding (a float32 flag, its element offset the word after the scalars): nonzero,
    nothing is written."""
    dt = np.dtype(dtype)
    cdt = D.compute_dtype(dt)
    t = D.wgsl(cdt)
    sig = "".join("w" if a in prog.writes else "r" for a in prog.arrays)
    decls = []
    for n, a in enumerate(prog.arrays):
        access = "read_write" if a in prog.writes else "read"
        at = D.wgsl(dt) if a in low_arrays else t
        decls.append(f"@group(0) @binding({n}) var<storage, {access}> b_{a}: array<{at}>;")
    body = []
    if skip:
        sig += "r"
        decl, first = _skip_parts(len(prog.arrays), 1 + len(prog.arrays)
                                  + _scalar_words(cdt) * len(prog.scalars))
        decls.append(decl)
        body.append(first)
    k = 1
    for a in prog.arrays:
        body.append(f"  let j_{a} = pw({k}u) + i;")
        body.append(f"  var v_{a}: {t} = {t}(b_{a}[j_{a}]);")
        k += 1
    for s in prog.scalars:
        body.append(f"  let v_{s}: {t} = scal_{cdt.name}({k}u);")
        k += _scalar_words(cdt)
    for tmp in prog.temps:
        body.append(f"  var v_{tmp}: {t};")
    for target, expr in prog.body:
        body.append(f"  v_{target} = {_ident(expr)};")
    for a in prog.writes:
        if a in low_arrays:
            body.append(f"  b_{a}[j_{a}] = wrap_{dt.name}({D.wgsl(dt)}(v_{a}));")
        else:
            body.append(f"  b_{a}[j_{a}] = v_{a};")
    return sig, "\n".join(decls) + "\n", "\n".join(body)


def group_source(prog: Any, dtype: Any, slots: int, skip: bool = False, bare: bool = False
                 ) -> tuple[str, str, str]:
    """As :func:`wgsl_source` for ``slots`` tensors in one dispatch (``_GROUP_TEMPLATE``):
    bindings ``slot * len(prog.arrays) + k``; words per slot: size, first workgroup, the
    arrays' offsets (none with ``bare``: every array starts its buffer); then the scalars
    (float32 and float64 arrays of ``dtype``); then, with ``skip``, the flag's element
    offset (binding ``slots * len(prog.arrays)``)."""
    dt = np.dtype(dtype)
    t = D.wgsl(dt)
    na = len(prog.arrays)
    sig = "".join("w" if a in prog.writes else "r" for a in prog.arrays) * slots
    decls = []
    for sl in range(slots):
        for n, a in enumerate(prog.arrays):
            access = "read_write" if a in prog.writes else "read"
            decls.append(f"@group(0) @binding({sl * na + n}) var<storage, {access}> "
                         f"b{sl}_{a}: array<{t}>;")
    per = 2 if bare else 2 + na
    body = []
    k = slots * per
    for sc in prog.scalars:
        body.append(f"  let v_{sc}: {t} = scal_{dt.name}({k}u);")
        k += _scalar_words(dt)
    if skip:
        sig += "r"
        decl, first = _skip_parts(slots * na, k)
        decls.append(decl)
        body.append(first)
    body.append("  var slot = 0u;")
    for sl in range(1, slots):
        body.append(f"  if (wg >= pw({sl * per + 1}u)) {{ slot = {sl}u; }}")
    body.append("  switch (slot) {")
    for sl in range(slots):
        w0 = sl * per
        case = "default" if sl == slots - 1 else f"case {sl}u"
        body.append(f"    {case}: {{")
        body.append(f"      let i = (wg - pw({w0 + 1}u)) * 256u + lid;")
        body.append(f"      if (i >= pw({w0}u)) {{ return; }}")
        for n, a in enumerate(prog.arrays):
            at = "i" if bare else f"pw({w0 + 2 + n}u) + i"
            body.append(f"      let j_{a} = {at};")
            body.append(f"      var v_{a}: {t} = b{sl}_{a}[j_{a}];")
        for tmp in prog.temps:
            body.append(f"      var v_{tmp}: {t};")
        for target, expr in prog.body:
            body.append(f"      v_{target} = {_ident(expr)};")
        for a in prog.writes:
            body.append(f"      b{sl}_{a}[j_{a}] = v_{a};")
        body.append("    }")
    body.append("  }")
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
        if _kernels._sources.get(_GROUP_TEMPLATE_NAME) is None:
            _kernels._sources[_GROUP_TEMPLATE_NAME] = _GROUP_TEMPLATE

    #: the ``skip`` flag is taken (read on the device)
    takes_skip = True

    #: float16/bfloat16 parameters and gradients with float32 state arrays are taken
    low_params = True

    def supports(self, dtype: Any) -> bool:
        dt = np.dtype(dtype)
        if dt in (D.float32, D.bfloat16):
            return True
        feature = {D.float64: "shader-f64", D.float16: "shader-f16"}.get(dt)
        return feature is not None and feature in _runtime.get().features

    def _kernel(self, prog: Any, dt: np.dtype, low_arrays: tuple[str, ...] = (),
                skip: bool = False) -> tuple[Any, str]:
        key = (prog.key, dt, low_arrays, skip)
        hit = self._kernels.get(key)
        if hit is None:
            sig, decls, body = wgsl_source(prog, dt, low_arrays, skip)
            dtypes = (dt, D.compute_dtype(dt)) if low_arrays else (dt,)
            kern = _kernels.kernel(_TEMPLATE_NAME, sig, dtypes, DECLS=decls, BODY=body)
            hit = self._kernels[key] = (kern, sig)
        return hit

    def __call__(self, prog: Any, tensors: list[tuple[Any, ...]],
                 scalars: tuple[float, ...], skip: Any = None) -> None:
        tensors = [arrs for arrs in tensors if arrs[0].size]
        if not tensors:
            return
        dt = np.dtype(tensors[0][0].dtype)
        cdt = D.compute_dtype(dt)
        # 16-bit parameters: their 16-bit arrays (parameter, gradient) and float32 states
        want = [dt if cdt == dt or a.dtype == dt else cdt for a in tensors[0]]
        low_arrays = tuple(a for a, w in zip(prog.arrays, want, strict=True)
                           if w == dt and cdt != dt)
        flag = []
        if skip is not None:
            flag = [skip if skip.dtype == D.float32 else astype_raw(skip, D.float32)]
        if 1 + len(prog.arrays) + _scalar_words(cdt) * len(prog.scalars) + len(flag) \
                > _MAX_WORDS:
            raise ValueError(f"multi_tensor_apply: program {prog.name} needs more than "
                             f"{_MAX_WORDS} immediate words")
        kern, sig = self._kernel(prog, dt, low_arrays, bool(flag))
        dynamic = isinstance(scalars, DynamicScalars)

        def encode(values: Any) -> list[int]:
            out: list[int] = []
            for v in values:
                out += words_for_scalar(v, cdt)[:_scalar_words(cdt)]
            return out

        swords = encode(scalars.values if dynamic else scalars)
        if not low_arrays:
            tensors = self._grouped(prog, dt, tensors, swords, scalars, encode, dynamic, flag)
        start = 1 + len(prog.arrays)
        for arrs in tensors:
            n = arrs[0].size
            bound: list[Any] = []
            back: list[tuple[Any, Any]] = []  # (original, copy) to write back
            seen: set[int] = set()
            for a, mode, w in zip(arrs, sig[:len(arrs)], want, strict=True):
                c = a
                if a.dtype != w:
                    c = astype_raw(a, w)
                elif not a._contig or a.size != n:
                    c = contiguous(a)
                if c._st.buf.uid in seen:  # the same buffer twice: give it its own copy
                    c = astype_raw(c, w)
                seen.add(c._st.buf.uid)
                if c is not a and mode == "w":
                    back.append((a, c))
                bound.append(c)
            if flag and flag[0]._st.buf.uid in seen:  # bound once: a copy of its own
                flag = [astype_raw(flag[0], D.float32)]
            words = [n, *(c._offset for c in bound), *swords, *(f._offset for f in flag)]
            REC.dispatch(kern, tuple(c._st.buf for c in [*bound, *flag]), words, groups_for(n),
                         dynamic=[(start, scalars, encode)] if dynamic else None)
            self.launches += 1
            for orig, c in back:
                copy_into(c, orig)

    def slots(self, prog: Any, dt: np.dtype, skip: bool = False, bare: bool = False) -> int:
        """How many tensors one dispatch of ``prog`` over ``dt`` updates: as many as the
        adapter's storage bindings per stage and the immediate words allow (one binding and
        one word fewer with a ``skip`` flag; with ``bare``, tensors whose arrays all start
        their buffers, no offset words)."""
        na = len(prog.arrays)
        per_stage = int(_runtime.get().limits.get("max-storage-buffers-per-shader-stage", 8))
        words = _MAX_WORDS - _scalar_words(dt) * len(prog.scalars) - skip
        per = 2 if bare else 2 + na
        return max(1, min(GROUP_MAX, (per_stage - skip) // na, words // per))

    def _grouped(self, prog: Any, dt: np.dtype, tensors: list, swords: list, scalars: Any,
                 encode: Any, dynamic: bool, flag: list) -> list:
        """Dispatch the tensors whose arrays are contiguous, of ``dt`` and in distinct
        buffers (the ``flag``'s included), :meth:`slots` at a time (those whose arrays all
        start their buffers, as parameters, gradients and states usually do, in groups
        without offset words, so more to a dispatch); return the others (for one dispatch
        each)."""
        skip = bool(flag)
        rest, clean, bare = [], [], []
        for arrs in tensors:
            n = arrs[0].size
            uids = {a._st.buf.uid for a in [*arrs, *flag]}
            if len(uids) == len(arrs) + skip and all(a.dtype == dt and a._contig
                                                     and a.size == n for a in arrs):
                (bare if all(a._offset == 0 for a in arrs) else clean).append(arrs)
            else:
                rest.append(arrs)
        for group, is_bare in ((bare, True), (clean, False)):
            rest += self._dispatch_groups(prog, dt, group, swords, scalars, encode, dynamic,
                                          flag, is_bare)
        return rest

    def _dispatch_groups(self, prog: Any, dt: np.dtype, clean: list, swords: list,
                         scalars: Any, encode: Any, dynamic: bool, flag: list,
                         bare: bool) -> list:
        """:meth:`_grouped`'s dispatches of the tensors ``clean``; returns those left alone
        (a group of one, or all where a group cannot hold two)."""
        skip = bool(flag)
        slots = self.slots(prog, dt, skip, bare)
        if slots < 2:
            return clean
        rest = []
        per = 2 if bare else 2 + len(prog.arrays)
        for g0 in range(0, len(clean), slots):
            group = clean[g0:g0 + slots]
            if len(group) == 1:
                rest.append(group[0])
                continue
            key = (prog.key, dt, "group", len(group), skip, bare)
            hit = self._kernels.get(key)
            if hit is None:
                gsig, decls, body = group_source(prog, dt, len(group), skip, bare)
                hit = self._kernels[key] = (_kernels.kernel(
                    _GROUP_TEMPLATE_NAME, gsig, (dt,), DECLS=decls, BODY=body), gsig)
            words: list[int] = []
            bufs: list[Any] = []
            first = 0
            for arrs in group:
                n = arrs[0].size
                words += [n, first] if bare else [n, first, *(a._offset for a in arrs)]
                bufs += [a._st.buf for a in arrs]
                first += groups_for(n)
            start = len(group) * per
            bufs += [f._st.buf for f in flag]
            REC.dispatch(hit[0], tuple(bufs), [*words, *swords, *(f._offset for f in flag)],
                         first,
                         dynamic=[(start, scalars, encode)] if dynamic else None)
            self.launches += 1
        return rest


# -- kernel("grad_norm") -------------------------------------------------------------------
#: arrays per dispatch (bindings): the immediates hold 8 words, then two per array (offset and
#: size), or one (the size) when every array starts its buffer
GRAD_NORM_ARRAYS = (_MAX_WORDS - 8) // 2
GRAD_NORM_BARE_ARRAYS = _MAX_WORDS - 8
#: bit of word 0 (the number of arrays) that marks a dispatch of arrays at offset 0
_BARE = 1 << 31
#: elements per workgroup (256 threads, 16 each)
GRAD_NORM_CHUNK = 4096
#: norm order -> (WGSL term of an element, combination of two terms, final expression)
_MAXMIN = "if (isnan_{{DT}}(a) || isnan_{{DT}}(b)) { return a + b; } return max(a, b);"
_NORMS = {
    1.0: ("abs(v)", "return a + b;", "total"),
    2.0: ("v * v", "return a + b;", "sqrt(total)"),
    float("inf"): ("abs(v)", _MAXMIN, "total"),
}


class WgpuGradNorm:
    """``kernel("grad_norm")`` (see ``vtl.backends.kernels.GradNormKernel``): the 1-, 2- and
    inf-norm of many float32 (float64 where the adapter has ``shader-f64``) arrays as one
    vector, and their scaling in place.

    WebGPU binds each array's buffer separately and a pipeline has a fixed number of
    bindings, so one dispatch takes up to :data:`GRAD_NORM_BARE_ARRAYS` arrays that start
    their buffers (their sizes travel as immediates), or :data:`GRAD_NORM_ARRAYS` others
    (offsets and sizes), each kind in its own groups (fewer where the adapter allows fewer
    storage buffers per shader stage): ``norm`` takes one dispatch per such group of arrays,
    each workgroup folding 4096 elements of one array into a partial (a fixed order:
    deterministic), and one more that folds the partials; ``clip_`` one dispatch per group,
    the factor computed on the device from the 0-d norm. Empty arrays are skipped; an array
    may have permuted axes (a transposed gradient) as long as it fills a range of its
    buffer. Declined: mixed dtypes, other strided views, arrays larger than one storage
    binding, and (``clip_``) arrays that overlap or share a buffer with the norm.
    ``launches`` counts the dispatches.
    """

    def __init__(self) -> None:
        self.launches = 0
        self._pipelines: dict[tuple, Any] = {}

    def supports(self, dtype: Any, norm_type: float) -> bool:
        dt = np.dtype(dtype)
        ok = dt == D.float32 or (dt == D.float64 and "shader-f64" in _runtime.get().features)
        return ok and float(norm_type) in _NORMS

    @staticmethod
    def _per_dispatch(bare: bool, extra: int = 1) -> int:
        """Arrays per dispatch: as many as the bindings (less ``extra`` of the kernel's own)
        and the words allow (one per array with ``bare``, arrays that start their buffers;
        else two)."""
        per_stage = int(_runtime.get().limits.get("max-storage-buffers-per-shader-stage", 8))
        words = GRAD_NORM_BARE_ARRAYS if bare else GRAD_NORM_ARRAYS
        return max(1, min(words, per_stage - extra))

    def _plan(self, arrays: list[tuple[Any, int]], extra: int = 1
              ) -> list[tuple[int, list[tuple[Any, int]], int, list[int], int]]:
        """The dispatches over ``arrays``: those that start their buffers in groups without
        offset words, then the others; each ``(k, arrays, word 0, words from 8 on,
        chunks)`` (:meth:`_groups`; ``k`` the pipeline's arrays)."""
        out = []
        for bare in (True, False):
            part = [x for x in arrays if (x[1] == 0) == bare]
            if part:
                k = self._per_dispatch(bare, extra)
                out += [(k, *g) for g in self._groups(part, k, bare)]
        return out

    def _arrays(self, arrays: list[Any]
                ) -> tuple[list[tuple[Any, int]], np.dtype] | None:
        """The non-empty arrays with the first element of the range each fills, and their
        dtype; ``None`` where the kernel declines."""
        arrays = [a for a in arrays if a.size]
        if not arrays:
            return None
        dt = np.dtype(arrays[0].dtype)
        if not self.supports(dt, 2.0):
            return None
        limit = _runtime.get().max_binding
        out = []
        for a in arrays:
            start = _dense_start(a)
            if a.dtype != dt or start is None or a._st.buf.cap > limit:
                return None
            out.append((a, start))
        return out, dt

    def _kernel(self, name: str, dt: np.dtype, k: int, norm_type: float = 0.0) -> Any:
        """The pipeline of ``name`` (``grad_norm`` and ``grad_norm_final`` for ``norm_type``,
        ``grad_clip``) over ``k`` arrays of ``dt`` (cached)."""
        key = (name, dt, k, norm_type)
        kern = self._pipelines.get(key)
        if kern is None:
            if name == "grad_norm_final":
                _, comb, final = _NORMS[norm_type]
                kern = _kernels.kernel(name, "rw", (dt,), T=D.wgsl(dt), DT=dt.name,
                                       COMB=comb, FINAL=final)
            elif name == "grad_norm":
                term, comb, _ = _NORMS[norm_type]
                kern = self._compile(name, dt, k, "read",
                                     "acc = comb(acc, term(ARR[off + e]));", TERM=term,
                                     COMB=comb)
            else:
                if dt == D.float32 and "shader-f64" in _runtime.get().features:
                    div = div_body()  # correctly rounded, as the portable path's division
                else:
                    div = "return x / y;"
                kern = self._compile(name, dt, k, "read_write",
                                     "let o = off + e; ARR[o] = ARR[o] * c;", DIV=div)
            self._pipelines[key] = kern
        return kern

    @staticmethod
    def _compile(name: str, dt: np.dtype, k: int, access: str, body: str,
                 tail: str | None = None, **subs: str) -> Any:
        """A pipeline over ``k`` arrays bound ``a0``.. with ``access``, then the bindings
        ``tail`` (default: one, writable when the arrays are read-only)."""
        decls = "\n".join(f"@group(0) @binding({j}) var<storage, {access}> a{j}: "
                          f"array<{D.wgsl(dt)}>;" for j in range(k))
        cases = "\n".join(
            f"    case {j}u: {{ for (var t = 0u; t < 16u; t++) {{ let e = base + t * 256u;"
            f" if (e < size) {{ {body.replace('ARR', f'a{j}')} }} }} }}" for j in range(k))
        if tail is None:
            tail = "w" if access == "read" else "r"
        sig = ("r" if access == "read" else "w") * k + tail
        return _kernels.kernel(name, sig, (dt,), DECLS=decls, CASES=cases, K=k, KM1=k - 1,
                               K1=k + 1, T=D.wgsl(dt), DT=dt.name,
                               CHUNKS=_kernels.source("grad_chunks"), **subs)

    @staticmethod
    def _groups(arrays: list[tuple[Any, int]], k: int, bare: bool
                ) -> list[tuple[list[tuple[Any, int]], int, list[int], int]]:
        """The arrays ``k`` at a time: each group's arrays, its word 0 (the number of
        arrays, with :data:`_BARE` for ``bare`` groups), its immediates words from word 8 on
        and its number of chunks (workgroups)."""
        out = []
        for i in range(0, len(arrays), k):
            grp = arrays[i:i + k]
            words: list[int] = []
            chunks = 0
            for a, start in grp:
                words += (a.size,) if bare else (start, a.size)
                chunks += -(-a.size // GRAD_NORM_CHUNK)
            out.append((grp, len(grp) | (_BARE if bare else 0), words, chunks))
        return out

    @staticmethod
    def _bufs(grp: list[tuple[Any, int]], k: int) -> list[Any]:
        """The buffers of a group, the first repeated in the bindings it does not fill."""
        bufs = [a._st.buf for a, _ in grp]
        return bufs + [bufs[0]] * (k - len(bufs))

    def norm(self, arrays: list[Any], norm_type: float) -> Any | None:
        norm_type = float(norm_type)
        got = self._arrays(arrays) if norm_type in _NORMS else None
        if got is None:
            return None
        arrays, dt = got
        groups = self._plan(arrays)
        part = empty((sum(g[4] for g in groups),), dt)
        pbuf = part._st.buf
        first = part._offset
        for k, grp, w0, words, chunks in groups:
            REC.dispatch(self._kernel("grad_norm", dt, k, norm_type),
                         (*self._bufs(grp, k), pbuf), [w0, first, 0, 0, 0, 0, 0, 0, *words],
                         chunks)
            first += chunks
        out = empty((), dt)
        fin = self._kernel("grad_norm_final", dt, 1, norm_type)
        REC.dispatch(fin, (pbuf, out._st.buf), [part.size, part._offset, out._offset], 1)
        self.launches += len(groups) + 1
        return out

    def unscale_(self, arrays: list[Any], inv_scale: Any, found: Any) -> bool:
        """``kernel("amp_unscale")``: multiply float32/float64 ``arrays`` in place by the
        0-d float32 ``inv_scale``, setting the 0-d float32 ``found`` to 1 where a product is
        not finite; one dispatch per group of arrays. ``False`` (nothing done) for arrays it
        does not take."""
        if not any(a.size for a in arrays):
            return True
        got = self._arrays(arrays)
        if got is None:
            return False
        arrays, dt = got
        for t in (inv_scale, found):
            if type(t) is not type(arrays[0][0]) or t.dtype != D.float32 or t.shape != ():
                return False
            if _overlap(arrays, t):
                return False
        if inv_scale._st.buf is found._st.buf:
            return False
        for k, grp, w0, words, chunks in self._plan(arrays, 2):
            key = ("amp_unscale", dt, k, 0.0)
            kern = self._pipelines.get(key)
            if kern is None:
                kern = self._pipelines[key] = self._compile(
                    "amp_unscale", dt, k, "read_write",
                    f"let o = off + e; let v = ARR[o] * c; ARR[o] = v; if (isnan_{dt.name}(v)"
                    f" || isinf_{dt.name}(v)) {{ flag[pw(2u)] = 1.0; }}", tail="rw")
            REC.dispatch(kern, (*self._bufs(grp, k), inv_scale._st.buf, found._st.buf),
                         [w0, inv_scale._offset, found._offset, 0, 0, 0, 0, 0, *words],
                         chunks)
            self.launches += 1
        return True

    def clip_(self, arrays: list[Any], norm: Any, max_norm: float) -> bool:
        if not any(a.size for a in arrays):
            return True  # nothing to scale
        got = self._arrays(arrays)
        if got is None:
            return False
        arrays, dt = got
        if norm.dtype != dt or norm.shape != () or _overlap(arrays, norm):
            return False
        scalars = [*words_for_scalar(max_norm, dt), *words_for_scalar(1e-6, dt)]
        nbuf = norm._st.buf
        for k, grp, w0, words, chunks in self._plan(arrays):
            REC.dispatch(self._kernel("grad_clip", dt, k), (*self._bufs(grp, k), nbuf),
                         [w0, norm._offset, *scalars, *words], chunks)
            self.launches += 1
        return True


def _dense_start(a: Any) -> int | None:
    """The first element of the range of its buffer that ``a`` fills, each element once (a
    contiguous array, or one with permuted axes), or ``None``."""
    if a._contig:
        return a._offset
    dims = sorted((t, s) for s, t in zip(a._shape, a._strides, strict=True) if s != 1)
    step = 1
    for t, s in dims:
        if t != step:
            return None
        step *= s
    return a._offset


def _overlap(arrays: list[tuple[Any, int]], norm: Any) -> bool:
    """Whether two of the ``arrays`` (each filling the range from its start) share elements,
    or one shares a buffer with ``norm``."""
    spans: dict[int, list[tuple[int, int]]] = {}
    for a, start in arrays:
        spans.setdefault(a._st.buf.uid, []).append((start, start + a.size))
    if norm._st.buf.uid in spans:
        return True
    for lst in spans.values():
        lst.sort()
        for (_, end), (start, _) in zip(lst, lst[1:], strict=False):
            if start < end:
                return True
    return False


def amp_update_scale(scale: Any, tracker: Any, found: Any, growth_factor: float,
                     backoff_factor: float, growth_interval: int) -> bool:
    """``kernel("amp_update_scale")`` (see ``vtl.backends.kernels.AmpUpdateScaleKernel``):
    one dispatch of one invocation, where the array operations of the portable rule take
    about fifteen. ``False`` (nothing done) for arrays it does not take."""
    arrays = (scale, tracker, found)
    if any(type(a) is not type(scale) or a.shape != () for a in arrays) \
            or (scale.dtype, tracker.dtype, found.dtype) != (D.float32, D.int32, D.float32) \
            or len({a._st.buf.uid for a in arrays}) != 3 \
            or not -2**31 <= growth_interval < 2**31:
        return False
    kern = _kernels.kernel("amp_update_scale", "wwr", ())
    REC.dispatch(kern, (scale._st.buf, tracker._st.buf, found._st.buf),
                 [scale._offset, tracker._offset, found._offset,
                  *(words_for_scalar(v, D.float32)[0] for v in (
                      growth_factor, backoff_factor, update_threshold(growth_factor))),
                  growth_interval & 0xFFFFFFFF], 1)
    return True
