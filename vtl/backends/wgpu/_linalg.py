"""matmul (a register-blocked tiled kernel), tensordot, vecdot and ``linalg``.

``linalg`` computes on the device: matmul, matrix_transpose, tensordot, vecdot,
vector_norm, matrix_norm (``'fro'``, 1, -1, inf, -inf), outer, diagonal, trace,
cross and matrix_power (n >= 0), and solve, inv, det and slogdet of float
matrices up to ``_lu.nmax`` (64 for float32; a batched LU in workgroup memory,
``_lu``). The other decompositions and solvers (cholesky, eigh, eigvalsh, pinv,
qr, svd, svdvals, matrix_rank, matrix_norm with ord 2/-2/'nuc', matrix_power with
n < 0, and solve/inv/det/slogdet of larger matrices) read their input back and compute
through host NumPy (``HOST_LINALG``), then upload the result.
"""

from __future__ import annotations

import types

from . import _coop, _kernels, _reduction
from . import _dtypes as D
from ._array import (
    WgpuArray,
    astype_raw,
    broadcast_shapes,
    c_strides,
    collapse,
    contiguous,
    empty,
    fresh,
    prod,
    view,
)
from ._elementwise import binary, unary
from ._manipulation import matrix_transpose, permute_dims, reshape
from ._recorder import REC

_TILE = 64
#: the matmul template's epilogue placeholders for a plain product (see ``_nn``)
PLAIN = {"DECL": "", "INIT": "", "ACC": "", "EPI": "v[c]", "TAIL": ""}
#: a product whose output tiles take fewer workgroups than ``SPLIT_GROUPS`` is computed in
#: slices of its depth, summed after (split-K), so that about ``SPLIT_TARGET`` workgroups run:
#: one workgroup would otherwise walk the whole depth of a deep product with a small output.
#: A slice is at least ``SPLIT_MIN_DEPTH`` deep, as each costs a pass over the output.
SPLIT_GROUPS, SPLIT_TARGET, SPLIT_MIN_DEPTH = 128, 512, 512
#: float32, float16 and bfloat16 products (the 16-bit ones computed in float32, rounded once)
#: with at least this many 128x128 output tiles (over the batch), filled to
#: at least ``BIG_MIN_FILL`` by the output, run the large-tile kernel (``matmul_big.wgsl``:
#: four times the multiply-adds per workgroup-memory read); the others the 64x64 one, which
#: fills the device with fewer rows and wastes less on a narrow output (64 columns).
BIG_MIN_TILES = 256
BIG_MIN_FILL = 0.75
#: a deep product with fewer large tiles than that runs the large-tile kernel over slices
#: of its depth (at least ``BIG_SPLIT_MIN_DEPTH`` each), ``BIG_MIN_TILES`` workgroups or
#: more in all, summed after: the weight gradients of linear layers (depth: the batch's rows)
BIG_SPLIT_MIN_DEPTH = 512
_BIG = 128
#: the dtypes of the large-tile kernel
_BIG_DTYPES = frozenset({D.float32, D.float16, D.bfloat16})


def split_depth(groups: int, K: int) -> int:
    """The depth of each slice of a split-K product of ``groups`` output tiles and depth
    ``K``, or 0 for one pass."""
    if groups >= SPLIT_GROUPS or K < 2 * SPLIT_MIN_DEPTH:
        return 0
    slices = -(-SPLIT_TARGET // groups)
    depth = max(SPLIT_MIN_DEPTH, -(-K // (slices * 16)) * 16)
    return depth if depth < K else 0


_MATMUL_KERNELS: dict = {}
_REAL = frozenset(D.ALL) - {D.bool_} - {dt for dt in D.ALL if D.kind(dt) == "c"}


def cols_contiguous(sa: tuple, sb: tuple) -> tuple[bool, bool]:
    """Whether the columns of A (strides ``sa``, rows then depth) and of B (``sb``, depth then
    columns) are their contiguous axis: the matmul kernel then loads them down the columns."""
    return sa[0] == 1 and sa[1] != 1, sb[0] == 1 and sb[1] != 1


def filled_big_tiles(dt, M: int, N: int) -> int:
    """The 128x128 tiles of an ``M`` x ``N`` product of ``dt`` where the large-tile kernel
    takes the dtype and the output fills them to ``BIG_MIN_FILL``, else 0 (never for float16
    products on cooperative matrices: theirs has 64x64 tiles)."""
    if dt not in _BIG_DTYPES or (dt == D.float16 and _coop.available()):
        return 0
    t = -(-M // _BIG) * -(-N // _BIG)
    return t if M * N >= BIG_MIN_FILL * t * _BIG * _BIG else 0


def big_tiles(dt, M: int, N: int, batch: int = 1) -> bool:
    """Whether the ``M`` x ``N`` product(s) of ``dt`` run the large-tile kernel."""
    t = filled_big_tiles(dt, M, N)
    return t > 0 and t * batch >= BIG_MIN_TILES


def big_split_depth(dt, M: int, N: int, K: int) -> int:
    """The depth of each slice of an ``M`` x ``N`` product of depth ``K`` that runs the
    large-tile kernel in depth slices (its tiles filled, too few of them for
    ``BIG_MIN_TILES``, ``K`` deep enough for the slices that make up the number), or 0."""
    t = filled_big_tiles(dt, M, N)
    if t == 0 or t >= BIG_MIN_TILES:
        return 0
    slices = -(-BIG_MIN_TILES // t)
    depth = -(-K // (slices * 16)) * 16
    return depth if depth >= BIG_SPLIT_MIN_DEPTH else 0


# The large-tile kernel's share of each thread in the A and B tiles (matmul_big.wgsl): four
# elements one at a time down the operand's contiguous axis through the loaders, or one
# vec4 of that axis where big_reads allows (a quarter of the loads): its setup, the fetch
# of the tile at depth kt into ra/rb, and their store into workgroup memory.
def _scalar_share(x: str) -> tuple[str, str, str]:
    """Operand ``x`` ('a' or 'b') through its loader: thread lid loads the elements (i + j*di,
    kt + d + j*dd), j = 0..3, of the tile's 128-wide axis i and depth d, neighbouring threads
    down the operand's contiguous axis (``wide``: the 128-wide one)."""
    r, t = f"r{x}", x.upper() + "s"
    wide, first = ("ACOLS", "m0") if x == "a" else ("!BCOLS", "n0")
    loads = []
    for j in ("", " + 1u * ", " + 2u * ", " + 3u * "):
        i = f"{x}first{j and j + f'd{x}i'}"
        k = f"kt + {x}d{j and j + f'd{x}d'}"
        loads.append(f"load_a(aBase, sAm, sAk, M, K, {i}, {k})" if x == "a"
                     else f"load_b(bBase, sBk, sBn, N, K, {k}, {i})")
    setup = (f"  let {x}i = select(lid / 8u, lid % 128u, {wide});\n"
             f"  let {x}d = select(lid % 8u, lid / 128u, {wide});\n"
             f"  let d{x}i = select(32u, 0u, {wide});\n"
             f"  let d{x}d = select(0u, 2u, {wide});\n"
             f"  let {x}first = {first} + {x}i;\n"
             f"  let {x}w = {x}d * 33u + {x}i / 4u;\n"
             f"  let {x}j = {x}i % 4u;\n"
             f"  let {x}step = d{x}d * 33u + d{x}i / 4u;\n"
             f"  var {r} = vec4<{{{{C}}}}>();")
    fetch = f"      {r} = vec4<{{{{C}}}}>(" + ",\n                       ".join(loads) + ");"
    store = "\n".join(f"    {t}[{x}w{'' if c == 0 else f' + {c}u * {x}step'}][{x}j] = {r}.{v};"
                      for c, v in enumerate("xyzw"))
    return setup, fetch, store


def _vec_share(x: str, across: bool) -> tuple[str, str, str]:
    """Operand ``x`` ('a' or 'b') read a vec4 at a time: ``across``, four depths of one of
    the tile's rows (A's k contiguous) or columns (B's k contiguous), else four of its rows
    (A's m contiguous) or columns (B's n contiguous) at one depth."""
    r, t, arr = f"r{x}", x.upper() + "s", x.upper()
    base, size, sk, so, first = (("aBase", "M", "sAk", "sAm", "m0") if x == "a"
                                 else ("bBase", "N", "sBk", "sBn", "n0"))
    if across:  # row i (lid / 2) of the tile, depths q .. q + 3 (q = 0 or 4): four stores
        setup = f"  let {x}i = lid / 2u;\n  let {x}q = (lid % 2u) * 4u;\n  var {r} = vec4<f32>();"
        fetch = (f"      {r} = vec4<f32>();\n"
                 f"      if ({first} + {x}i < {size} && kt + {x}q < K) {{ {r} = {arr}[u32("
                 f"{base} + i32({first} + {x}i) * {so} + i32(kt + {x}q)) / 4u]; }}")
        store = "\n".join(f"    {t}[({x}q + {c}u) * 33u + {x}i / 4u][{x}i % 4u] = {r}.{v};"
                          for c, v in enumerate("xyzw"))
    else:  # depth k (lid / 32) of the tile, rows q .. q + 3 (q = (lid % 32) * 4): one store
        setup = (f"  let {x}k = lid / 32u;\n  let {x}q = (lid % 32u) * 4u;\n"
                 f"  var {r} = vec4<f32>();")
        fetch = (f"      {r} = vec4<f32>();\n"
                 f"      if ({first} + {x}q < {size} && kt + {x}k < K) {{ {r} = {arr}[u32("
                 f"{base} + i32({first} + {x}q) + i32(kt + {x}k) * {sk}) / 4u]; }}")
        store = f"    {t}[{x}k * 33u + {x}q / 4u] = {r};"
    return setup, fetch, store


def big_reads(dt, layout: tuple[bool, bool], M: int, N: int, K: int, sa: tuple[int, int],
              sb: tuple[int, int], offsets_a: tuple[int, ...], offsets_b: tuple[int, ...]
              ) -> tuple[bool, bool]:
    """Whether the large-tile kernel reads A and B four float32 elements at a time (a
    quarter of the loads; a standalone probe of the kernel's layout on an H100 ran 4096^3
    at 35.8 TFLOP/s against 32.3 one element at a time): the operand's contiguous axis of
    unit stride and a multiple of 4 long, its other stride and its offsets (``offsets_*``:
    the first element's and the batch strides) multiples of 4."""
    if dt != D.float32:
        return False, False
    (acols, bcols), (sam, sak), (sbk, sbn) = layout, sa, sb
    va = (sam == 1 and M % 4 == 0 and sak % 4 == 0) if acols else \
        (sak == 1 and K % 4 == 0 and sam % 4 == 0)
    vb = (sbk == 1 and K % 4 == 0 and sbn % 4 == 0) if bcols else \
        (sbn == 1 and N % 4 == 0 and sbk % 4 == 0)
    return (va and all(o % 4 == 0 for o in offsets_a),
            vb and all(o % 4 == 0 for o in offsets_b))


def matmul_kernel(dt, layout: tuple[bool, bool], sig: str = "rrw",
                  epi: dict = PLAIN, out=None, big: bool = False,
                  load: tuple[str, ...] = ("matmul_load_a", "matmul_load_b"),
                  label: str | None = None, consts: tuple[tuple[str, int], ...] = (),
                  vec: tuple[bool, bool] = (False, False),
                  store: str = "matmul_store", b_fetch: tuple[str, str] | None = None
                  ) -> _kernels.Kernel:
    """The matmul kernel of ``dt`` for operands laid out as ``layout`` (``cols_contiguous``)
    with the epilogue ``epi`` and the bindings ``sig``: ``'rrw'`` for the plain product, one
    more binding for an epilogue of ``_nn`` (each has its own ``sig``). ``out``: the
    dtype of the results (and row sums), ``dt`` unless given (float32 partials of 16-bit
    products that are summed before they are rounded). ``big``: the 128x128-tile kernel
    (its grid is ``tiles(.., big=True)``), for the plain and the bias epilogues. ``load``:
    the WGSL sources of the operands' ``load_a``/``load_b`` (the implicit-GEMM convolution
    gathers its operands with its own), ``label`` the kernel's name in dispatch logs and
    ``consts`` the values of the loaders' own placeholders (compile-time constants).
    ``vec``: the large-tile kernel reads A, B four elements at a time (:func:`big_reads`;
    the default loaders only). ``store``: the WGSL source of ``out_at``, where a result
    goes (the convolutions fold their images into the product's columns). ``b_fetch``: the
    large-tile kernel's fetch of its B elements by the loaders' own code instead of four
    ``load_b`` calls (:func:`matmul_subs`)."""
    out = dt if out is None else out
    vec = vec if big else (False, False)
    if b_fetch is not None and not big:
        raise ValueError("matmul_kernel: b_fetch is the large-tile kernel's")
    key = (dt, layout, sig, out, big, epi["EPI"], epi["DECL"], epi.get("KEND"), load, label,
           consts, vec, store, b_fetch)
    k = _MATMUL_KERNELS.get(key)
    if k is None:
        name, extra = "matmul_big" if big else "matmul", {}
        # float16 on cooperative matrices (64x64 tiles, as the "matmul" grid), for epilogues
        # that only map each result (the row sums' accumulate into registers of their own)
        if dt == D.float16 and not big and not (epi["INIT"] or epi["ACC"] or epi["TAIL"]):
            coop = _coop.spelling()
            if coop is not None:
                name, extra = "matmul_coop", {"LD": coop[0], "ST": coop[1]}
        k = _MATMUL_KERNELS[key] = _kernels.kernel(
            name, sig, (dt,) if out == dt else (dt, out), label=label,
            **matmul_subs(dt, layout, epi, out, load, consts, vec, store, b_fetch), **extra)
    return k


def matmul_subs(dt, layout: tuple[bool, bool], epi: dict = PLAIN, out=None,
                load: tuple[str, ...] = ("matmul_load_a", "matmul_load_b"),
                consts: tuple[tuple[str, int], ...] = (),
                vec: tuple[bool, bool] = (False, False),
                store: str = "matmul_store", b_fetch: tuple[str, str] | None = None) -> dict:
    """The placeholders the matmul templates share (see :func:`matmul_kernel`): types,
    operand loaders, words, epilogue, layout, the loaders' constants, the large-tile
    kernel's operand reads (``vec``) and the results' places (``store``). ``b_fetch``:
    ``(setup, fetch)``, WGSL that the large-tile kernel runs after its setup of B's share
    and in place of its fetch (filling ``rb`` for the step at depth ``kt``; the share's
    ``bfirst``, ``bd`` and the loaders' functions in scope)."""
    out = dt if out is None else out
    shares = {}
    for x, v, across in (("A", vec[0], not layout[0]), ("B", vec[1], layout[1])):
        part = _vec_share(x.lower(), across) if v else _scalar_share(x.lower())
        shares.update({f"{x}_SETUP": part[0], f"{x}_FETCH": part[1], f"{x}_STORE": part[2],
                       f"T{x}": "vec4<f32>" if v else D.wgsl(dt)})
    if b_fetch is not None:
        shares["B_SETUP"] += "\n" + b_fetch[0]
        shares["B_FETCH"] = b_fetch[1]
    skip = {"matmul_load_a"} if vec[0] else set()
    skip |= {"matmul_load_b"} if vec[1] else set()
    return dict(**shares, T=D.wgsl(dt), D=dt.name,
                LOAD="\n".join(_kernels.source(f) for f in (*load, store) if f not in skip),
                ARGS=_kernels.source("matmul_args"), O=D.wgsl(out), OD=out.name,
                **{"KEND": "K", **epi},
                C="f32" if D.wgsl(dt) == "f16" else D.wgsl(dt),
                ACOLS="true" if layout[0] else "false",
                BCOLS="true" if layout[1] else "false", **dict(consts))


def tiles(M: int, N: int, big: bool) -> tuple[int, int]:
    """The workgroup grid ``(x, y)`` of an ``M`` x ``N`` product."""
    t = _BIG if big else _TILE
    return -(-N // t), -(-M // t)


def split_plan(dt, M: int, N: int, K: int) -> tuple[int, bool]:
    """``(depth, big)`` of an ``M`` x ``N`` product of depth ``K`` computed in depth slices
    (:func:`split_product`): the large tiles where they are filled but too few
    (:func:`big_split_depth`), else the small ones where they are too few
    (:func:`split_depth`); depth 0 where one pass serves."""
    big = big_tiles(dt, M, N)
    if big:
        return 0, True
    depth = big_split_depth(dt, M, N, K)
    if depth:
        return depth, True
    gx, gy = tiles(M, N, False)
    return split_depth(gx * gy, K), False


def matmul2d(a: WgpuArray, b: WgpuArray) -> WgpuArray:
    """``a @ b`` of non-empty 2-D arrays of one real dtype (any strides)."""
    M, K = a._shape
    N = b._shape[1]
    dt = a._dtype
    depth, big = split_plan(dt, M, N, K)
    if depth:
        return split_product(a, b, depth, big=big)[0]
    gx, gy = tiles(M, N, big)
    out = fresh((M, N), dt, M * N, D.itemsize(dt))
    layout = cols_contiguous(a._strides, b._strides)
    vec = big_reads(dt, layout, M, N, K, a._strides, b._strides, (a._offset,), (b._offset,)) \
        if big else (False, False)
    REC.dispatch(matmul_kernel(dt, layout, big=big, vec=vec),
                 (a._st.buf, b._st.buf, out._st.buf),
                 [M, N, K, a._offset, b._offset, 0, 0, *a._strides, 0, *b._strides], gx, gy)
    return out


#: the bias of each output column (binding 3, words 12 and 13: its offset and stride), added
#: by the first depth slice of :func:`split_product` only
COL_BIAS_FIRST = {
    **PLAIN, "DECL": "@group(0) @binding(3) var<storage, read> Bias: array<{{T}}>;",
    "EPI": "v[c] + select({{C}}(0), {{C}}(Bias[pw(12u) + (col + c) * pw(13u)]), b == 0u)",
}


def split_product(a: WgpuArray, b: WgpuArray, depth: int, rowsum: dict | None = None,
                  big: bool = False, bias: WgpuArray | None = None
                  ) -> tuple[WgpuArray, WgpuArray | None]:
    """``(a @ b, the row sums of a or None)`` of 2-D arrays as products of depth slices of
    ``depth`` (a batch of the matmul kernel, plus one for the rest), summed after: a deep
    product with few output tiles then fills the device. ``rowsum``: the row-sum epilogue of
    ``_nn`` (binding 3, per slice at word 12 + slice * M; the 64x64 kernel only). ``big``:
    the large-tile kernel. ``bias``: a 1-D array of ``N`` added to every row (by the first
    slice; not with ``rowsum``)."""
    if rowsum is not None and bias is not None:
        raise ValueError("split_product: a bias and row sums take the same binding")
    M, K = a._shape
    N = b._shape[1]
    dt = a._dtype
    full, rest = divmod(K, depth)
    parts = full + (rest > 0)
    sam, sak = a._strides
    sbk, sbn = b._strides
    # 16-bit products keep float32 partials, summed and then rounded once
    pdt = D.float32 if dt in (D.float16, D.bfloat16) else dt
    acc = empty((parts, M, N), pdt)
    layout = cols_contiguous(a._strides, b._strides)
    bufs: tuple = (a._st.buf, b._st.buf, acc._st.buf)
    if rowsum is not None:
        if big:
            raise ValueError("split_product: the large-tile kernel has no row-sum epilogue")
        k = matmul_kernel(dt, layout, "rrww", rowsum, out=pdt)
        rs = empty((parts, M), pdt)
        bufs += (rs._st.buf,)
    else:  # the large tiles read four elements at a time where every slice's offsets allow
        vec = big_reads(dt, layout, M, N, rest or depth, a._strides, b._strides,
                        (a._offset, depth * sak), (b._offset, depth * sbk)) \
            if big else (False, False)
        k = matmul_kernel(dt, layout, out=pdt, big=big, vec=vec)
    gx, gy = tiles(M, N, big)
    nw = 12 if rowsum is None else 13
    words = [M, N, depth, a._offset, b._offset, 0, depth * sak, sam, sak, depth * sbk, sbk,
             sbn, 0]
    if bias is None:
        REC.dispatch(k, bufs, words[:nw], gx, gy, full)
    else:  # the first slice adds it (the rest's dispatch, slice 0 of its own, does not)
        REC.dispatch(matmul_kernel(dt, layout, "rrwr", COL_BIAS_FIRST, out=pdt, big=big,
                                   vec=vec), (*bufs, bias._st.buf),
                     [*words[:12], bias._offset, bias._strides[0]], gx, gy, full)
    if rest:
        words = [M, N, rest, a._offset + full * depth * sak, b._offset + full * depth * sbk,
                 full * M * N, 0, sam, sak, 0, sbk, sbn, full * M]
        REC.dispatch(k, bufs, words[:nw], gx, gy, 1)
    return sum_slices(acc, dt), None if rowsum is None else sum_slices(rs, dt)


def sum_slices(acc: WgpuArray, dt) -> WgpuArray:
    """The sum over the first axis of depth slices' partial results ``acc`` (in the compute
    dtype; one slice is the result itself), rounded to ``dt`` once."""
    out = reshape(acc, acc.shape[1:]) if acc.shape[0] == 1 \
        else _reduction.sum(acc, axis=0, dtype=acc.dtype)
    return out if out.dtype == dt else astype_raw(out, dt)


#: the epilogue of :func:`matmul_into` that adds the product to what the view holds
_ACCUMULATE = {**PLAIN, "EPI": "v[c] + {{C}}(C[out_at(b, row, col + c, M, N)])"}


def matmul_into(a: WgpuArray, b: WgpuArray, out: WgpuArray, accumulate: bool = False,
                epi: dict | None = None, extra: tuple = (), words: tuple = ()) -> bool:
    """``out[...] = a @ b`` (``accumulate``: ``out[...] += a @ b``) in place, one dispatch:
    ``a`` ``(B, M, K)`` and ``b`` ``(B, K, N)`` at any strides, ``out`` a ``(B, M, N)``
    view of another buffer whose columns are adjacent (a slice of a larger array). Returns
    ``False``, having done nothing, where that does not apply. ``epi``: an epilogue of the
    matmul templates in place of the plain store (not with ``accumulate``), reading the
    read-only bindings from 3 on over the buffers ``extra`` and its ``words`` from word 14
    on (a batch of at most 65535 products: one dispatch)."""
    if not (type(a) is type(b) is type(out) is WgpuArray) or (a.ndim, b.ndim, out.ndim) != (
            3, 3, 3):
        return False
    if epi is not None and (accumulate or a._shape[0] > 65535
                            or any(x is out._st.buf for x in extra)):
        return False
    dt = out._dtype
    nb, M, K = a._shape
    N = b._shape[2]
    sob, som, son = out._strides
    if a._dtype is not dt or b._dtype is not dt or dt not in _REAL or D.kind(dt) == "c" \
            or b._shape[:2] != (nb, K) or out._shape != (nb, M, N) or 0 in (nb, M, N, K) \
            or (son != 1 and N > 1) or min(sob, som) < 0 \
            or out._st.buf is a._st.buf or out._st.buf is b._st.buf:
        return False
    sab, sbb = (a._strides[0], b._strides[0]) if nb > 1 else (0, 0)
    big = big_tiles(dt, M, N, nb)
    layout = cols_contiguous(a._strides[1:], b._strides[1:])
    vec = big_reads(dt, layout, M, N, K, a._strides[1:], b._strides[1:], (a._offset, sab),
                    (b._offset, sbb)) if big else (False, False)
    if epi is None:
        epi = _ACCUMULATE if accumulate else PLAIN
    k = matmul_kernel(dt, layout, "rrw" + "r" * len(extra), epi, big=big, vec=vec,
                      store="matmul_store_strided")
    gx, gy = tiles(M, N, big)
    for b0 in range(0, nb, 65535):
        REC.dispatch(k, (a._st.buf, b._st.buf, out._st.buf, *extra),
                     [M, N, K, a._offset + b0 * sab, b._offset + b0 * sbb,
                      out._offset + b0 * sob, sab, *a._strides[1:], sbb, *b._strides[1:],
                      sob, som, *words], gx, gy, min(65535, nb - b0))
    return True


def _arr(x, fname: str) -> WgpuArray:
    if not isinstance(x, WgpuArray):
        raise TypeError(f"{fname}() expected a WgpuArray, got {type(x).__name__}")
    return x


def matmul(x1: WgpuArray, x2: WgpuArray, /) -> WgpuArray:
    """Matrix product with NumPy's 1-D and batch-broadcasting rules."""
    if type(x1) is WgpuArray and type(x2) is WgpuArray and len(x1._shape) == 2 \
            and len(x2._shape) == 2 and x1._dtype is x2._dtype and x1._dtype in _REAL:
        M, K = x1._shape
        K2, N = x2._shape
        if K == K2 and M and N and K:
            return matmul2d(x1, x2)
    a = _arr(x1, "matmul")
    b = _arr(x2, "matmul")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul(): 0-d arrays are not allowed; use multiply")
    dt = D.result_type(a.dtype, b.dtype)
    if dt == D.bool_:
        raise TypeError("matmul(): boolean arrays are not supported")
    a = a if a.dtype == dt else astype_raw(a, dt)
    b = b if b.dtype == dt else astype_raw(b, dt)
    if D.kind(dt) == "c":
        from ._complex import matmul as matmul_complex

        return matmul_complex(a, b, matmul)
    va, vb = a.ndim == 1, b.ndim == 1
    if va:
        a = view(a, (1, a.shape[0]), (0, a._strides[0]), a._offset)
    if vb:
        b = view(b, (b.shape[0], 1), (b._strides[0], 0), b._offset)
    M, K = a.shape[-2:]
    K2, N = b.shape[-2:]
    if K != K2:
        raise ValueError(
            f"matmul(): shapes {x1.shape} and {x2.shape} do not align ({K} != {K2})"
        )
    bshape = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    nb = prod(bshape)

    def batch_strides(x):
        pad = len(bshape) - (x.ndim - 2)
        return tuple(
            0 if i < pad or x.shape[i - pad] == 1 else x._strides[i - pad]
            for i in range(len(bshape))
        )

    sa, sb = batch_strides(a), batch_strides(b)
    cshape, (ca, cb) = collapse(bshape, sa, sb)
    if len(cshape) > 1:
        a = contiguous(view(a, bshape + (M, K), sa + a._strides[-2:], a._offset))
        b = contiguous(view(b, bshape + (K, N), sb + b._strides[-2:], b._offset))
        ca, cb = (M * K,), (K * N,)
    sab = ca[0] if ca else 0
    sbb = cb[0] if cb else 0
    if nb == 1 and M and N and K:  # one product (1-D operands, batch axes of size 1)
        a2 = view(a, (M, K), a._strides[-2:], a._offset)
        out = reshape(matmul2d(a2, view(b, (K, N), b._strides[-2:], b._offset)),
                      bshape + (M, N))
    else:
        out = _product(a, b, bshape, nb, M, N, K, sab, sbb, dt)
    if va and vb:
        return reshape(out, bshape)
    if va:
        return reshape(out, bshape + (N,))
    if vb:
        return reshape(out, bshape + (M,))
    return out


def _product(a, b, bshape, nb, M, N, K, sab, sbb, dt) -> WgpuArray:
    """The batched product of ``matmul`` (``nb`` entries of ``a`` and ``b`` ``sab`` and
    ``sbb`` elements apart) by :func:`matmul_into` a new array."""
    out = empty(bshape + (M, N), dt)
    if out.size:
        if K == 0:
            from ._creation import fill_view

            fill_view(out, 0)
        else:
            if not matmul_into(view(a, (nb, M, K), (sab, *a._strides[-2:]), a._offset),
                               view(b, (nb, K, N), (sbb, *b._strides[-2:]), b._offset),
                               view(out, (nb, M, N), (M * N, N, 1), out._offset)):
                raise RuntimeError(f"matmul(): no kernel for {dt} products")  # not reached
    return out


def tensordot(x1: WgpuArray, x2: WgpuArray, /, *, axes=2) -> WgpuArray:
    a = _arr(x1, "tensordot")
    b = _arr(x2, "tensordot")
    if isinstance(axes, int):
        if axes < 0:
            raise ValueError("tensordot(): axes must be non-negative")
        ax_a = list(range(a.ndim - axes, a.ndim))
        ax_b = list(range(axes))
    else:
        ax_a, ax_b = ([axes[0]] if isinstance(axes[0], int) else list(axes[0]),
                      [axes[1]] if isinstance(axes[1], int) else list(axes[1]))
        ax_a = [x % a.ndim for x in ax_a]
        ax_b = [x % b.ndim for x in ax_b]
    if len(ax_a) != len(ax_b):
        raise ValueError("tensordot(): axes lists must have the same length")
    for i, j in zip(ax_a, ax_b, strict=False):
        if a.shape[i] != b.shape[j]:
            raise ValueError(f"tensordot(): shape mismatch on axes {i} and {j}")
    free_a = [i for i in range(a.ndim) if i not in ax_a]
    free_b = [i for i in range(b.ndim) if i not in ax_b]
    ka = prod(a.shape[i] for i in ax_a)
    am = reshape(permute_dims(a, free_a + ax_a), (prod(a.shape[i] for i in free_a), ka))
    bm = reshape(permute_dims(b, ax_b + free_b), (ka, prod(b.shape[i] for i in free_b)))
    out = matmul(am, bm)
    return reshape(out, tuple(a.shape[i] for i in free_a) + tuple(b.shape[i] for i in free_b))


def vecdot(x1: WgpuArray, x2: WgpuArray, /, *, axis: int = -1) -> WgpuArray:
    from ._reduction import sum as _sum

    a = _arr(x1, "vecdot")
    b = _arr(x2, "vecdot")
    n = max(a.ndim, b.ndim)
    if not -n <= axis < 0 and not 0 <= axis < n:
        raise IndexError(f"vecdot(): axis {axis} out of bounds")
    sa = a.shape[axis] if -a.ndim <= axis < a.ndim else None
    sb = b.shape[axis] if -b.ndim <= axis < b.ndim else None
    if sa != sb:
        raise ValueError(f"vecdot(): sizes along axis {axis} differ ({sa} and {sb})")
    dt = D.result_type(a.dtype, b.dtype)
    if D.kind(a.dtype) == "c":  # the standard conjugates the first argument
        a = unary("conj", a)
    return _sum(binary("multiply", a, b), axis=axis, dtype=dt)


def vector_norm(x: WgpuArray, /, *, axis=None, keepdims: bool = False, ord=2) -> WgpuArray:
    from ._reduction import max as _max
    from ._reduction import min as _min
    from ._reduction import sum as _sum

    x = _arr(x, "vector_norm")
    if D.kind(x.dtype) == "c":
        x = unary("abs", x)
    if D.kind(x.dtype) != "f":
        x = astype_raw(x, D.float32)
    if ord == 0:
        nz = binary("not_equal", x, 0.0)
        return _sum(astype_raw(nz, x.dtype), axis=axis, keepdims=keepdims)
    ax = unary("abs", x)
    if ord == 2:
        return unary("sqrt", _sum(binary("multiply", ax, ax), axis=axis, keepdims=keepdims))
    if ord == 1:
        return _sum(ax, axis=axis, keepdims=keepdims)
    if ord == float("inf"):
        return _max(ax, axis=axis, keepdims=keepdims)
    if ord == float("-inf"):
        return _min(ax, axis=axis, keepdims=keepdims)
    p = float(ord)
    return binary("pow", _sum(binary("pow", ax, p), axis=axis, keepdims=keepdims), 1.0 / p)


def outer(x1: WgpuArray, x2: WgpuArray, /) -> WgpuArray:
    return binary("multiply", reshape(x1, (-1, 1)), reshape(x2, (1, -1)))


def diagonal(x: WgpuArray, /, *, offset: int = 0) -> WgpuArray:
    x = _arr(x, "diagonal")
    r, c = x.shape[-2:]
    s0, s1 = x._strides[-2:]
    if offset >= 0:
        n = max(0, min(r, c - offset))
        off = x._offset + offset * s1
    else:
        n = max(0, min(r + offset, c))
        off = x._offset - offset * s0
    return view(x, x.shape[:-2] + (n,), x._strides[:-2] + (s0 + s1,), off)


def trace(x: WgpuArray, /, *, offset: int = 0, dtype=None) -> WgpuArray:
    from ._reduction import sum as _sum

    return _sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)


def matrix_norm(x: WgpuArray, /, *, keepdims: bool = False, ord="fro") -> WgpuArray:
    from ._reduction import max as _max
    from ._reduction import min as _min
    from ._reduction import sum as _sum

    x = _arr(x, "matrix_norm")
    if ord in (2, -2, "nuc"):
        return _host("matrix_norm")(x, keepdims=keepdims, ord=ord)
    if D.kind(x.dtype) == "c":
        x = unary("abs", x)
    if D.kind(x.dtype) != "f":
        x = astype_raw(x, D.float32)
    ax = unary("abs", x)
    if ord == "fro":
        return unary("sqrt", _sum(binary("multiply", ax, ax), axis=(-2, -1), keepdims=keepdims))
    inf = float("inf")
    if ord in (1, -1, inf, -inf):
        red_axis, other = (-2, -1) if ord in (1, -1) else (-1, -2)
        s = _sum(ax, axis=red_axis, keepdims=True)
        out = (_max if ord in (1, inf) else _min)(s, axis=other, keepdims=True)
        return out if keepdims else reshape(out, x.shape[:-2])
    raise ValueError(f"matrix_norm(): unsupported ord {ord!r}")


def cross(x1: WgpuArray, x2: WgpuArray, /, *, axis: int = -1) -> WgpuArray:
    from ._manipulation import concat, moveaxis

    a = _arr(x1, "cross")
    b = _arr(x2, "cross")
    if a.shape[axis] != 3 or b.shape[axis] != 3:
        raise ValueError(f"cross(): axis {axis} must have size 3 in both arrays")
    a = moveaxis(a, axis, -1)
    b = moveaxis(b, axis, -1)

    def c(x, i):
        return view(x, x.shape[:-1] + (1,), x._strides, x._offset + i * x._strides[-1])

    parts = [binary("subtract", binary("multiply", c(a, i), c(b, j)),
                    binary("multiply", c(a, j), c(b, i)))
             for i, j in ((1, 2), (2, 0), (0, 1))]
    nd = max(a.ndim, b.ndim)
    parts = [reshape(p, (1,) * (nd - p.ndim) + p.shape) for p in parts]
    return moveaxis(concat(parts, axis=-1), -1, axis)


def matrix_power(x: WgpuArray, n: int, /) -> WgpuArray:
    x = _arr(x, "matrix_power")
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"matrix_power(): expected a stack of square matrices, got {x.shape}")
    n = int(n)
    if n < 0:
        return _host("matrix_power")(x, n)
    if n == 0:
        from ._creation import eye
        from ._manipulation import broadcast_to

        e = eye(x.shape[-1], dtype=x.dtype)
        return contiguous(broadcast_to(e, x.shape))
    result = None
    base = x
    while n:
        if n & 1:
            result = base if result is None else matmul(result, base)
        n >>= 1
        if n:
            base = matmul(base, base)
    return result if result is not x else contiguous_copy(x)


def contiguous_copy(x: WgpuArray) -> WgpuArray:
    from ._array import copy_into

    out = empty(x.shape, x.dtype)
    copy_into(x, out)
    return out


#: linalg functions computed through host NumPy (see the module docstring)
HOST_LINALG = ("cholesky", "det", "eigh", "eigvalsh", "inv", "matrix_rank", "pinv", "qr",
               "slogdet", "solve", "svd", "svdvals")


def _host(name: str):
    """``name`` from the standard-conforming NumPy linalg, applied through host memory."""

    def fn(*args, **kwargs):
        import array_api_compat.numpy as hnp

        from ._array import from_numpy, to_numpy

        conv = [to_numpy(a) if isinstance(a, WgpuArray) else a for a in args]
        kw = {k: to_numpy(v) if isinstance(v, WgpuArray) else v for k, v in kwargs.items()}
        res = getattr(hnp.linalg, name)(*conv, **kw)
        if isinstance(res, tuple):
            return type(res)(*(from_numpy(r) for r in res))
        return from_numpy(res)

    fn.__name__ = name
    fn.__doc__ = f"``linalg.{name}`` (computed through host NumPy)."
    fn.__signature__ = host_signature(("x1", "x2") if name == "solve" else ("x",),
                                      _HOST_KWARGS.get(name, {}))
    return fn


#: keyword-only parameters (and defaults) of the host-computed functions, as the standard
_HOST_KWARGS = {"cholesky": {"upper": False}, "matrix_rank": {"rtol": None},
                "pinv": {"rtol": None}, "qr": {"mode": "reduced"},
                "svd": {"full_matrices": True}}


def host_signature(positional: tuple, keywords: dict):
    """The standard's signature ``(positional..., /, *, keywords...)`` for a host wrapper."""
    import inspect

    p = inspect.Parameter
    return inspect.Signature([p(n, p.POSITIONAL_ONLY) for n in positional]
                             + [p(k, p.KEYWORD_ONLY, default=v) for k, v in keywords.items()])


linalg = types.SimpleNamespace(
    matmul=matmul, matrix_transpose=matrix_transpose, tensordot=tensordot, vecdot=vecdot,
    vector_norm=vector_norm, outer=outer, diagonal=diagonal, trace=trace,
    matrix_norm=matrix_norm, cross=cross, matrix_power=matrix_power,
    **{name: _host(name) for name in HOST_LINALG},
)

from . import _lu  # noqa: E402

linalg.solve, linalg.inv, linalg.det, linalg.slogdet = _lu.solve, _lu.inv, _lu.det, _lu.slogdet
_unused = c_strides
