"""More PyTorch idioms that port unchanged: ``vtl.einsum``; PyTorch's ``dim=``/``keepdim=``
(and ``dims=``, ``shifts=``, ``unbiased=``) beside the standard's names on the namespace
functions, and ``axis=`` on ``F.softmax`` & co.; ``inplace=True`` and the ``relu_`` forms in
``vtl.nn.functional`` and the layers; ``vtl.mode``/``Tensor.mode``, ``half``/``bfloat16`` and
the casts. NumPy is the oracle (``numpy.einsum``, PyTorch's documented formulas written in
NumPy); PyTorch's own results where it is installed."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
from helpers import assert_close, check_grad, to_numpy
from hypothesis import given
from hypothesis import strategies as st

import vtl
import vtl.nn.functional as F
from vtl import nn

RNG = np.random.default_rng(11)


def _torch():
    return pytest.importorskip("torch")


def _rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# -- einsum -------------------------------------------------------------------------------
EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),  # implicit output: ik
    ("ba", [(2, 3)]),  # implicit output sorts: ab, a transpose
    ("Ba,ab", [(2, 3), (3, 2)]),  # uppercase sorts first
    ("ii", [(3, 3)]),  # trace
    ("ii->i", [(3, 3)]),  # diagonal
    ("iji->j", [(2, 3, 2)]),
    ("iij,jk->ik", [(2, 2, 3), (3, 4)]),
    ("ij->", [(2, 3)]),
    ("ij->j", [(2, 3)]),
    ("i,i", [(4,), (4,)]),
    ("i,j->ij", [(2,), (3,)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bij,bkj->bik", [(2, 3, 4), (2, 5, 4)]),
    ("...ij,...jk", [(5, 1, 2, 3), (4, 3, 2)]),  # ellipses broadcast, aligned from the right
    ("...ij,...jk->...ik", [(2, 3), (4, 3, 2)]),
    ("i...->...", [(2, 3, 4)]),
    ("abc,cd,de->ae", [(2, 3, 4), (4, 5), (5, 6)]),
    ("ijk,ikl,jlm->m", [(2, 3, 4), (2, 4, 5), (3, 5, 6)]),
    ("i,i,i->", [(4,), (4,), (4,)]),
    ("ij,ij->ij", [(2, 1), (2, 3)]),  # size-one axes broadcast
    ("ij,jk", [(2, 1), (3, 4)]),
    (",ij->ij", [(), (2, 3)]),
    ("ab,ab->", [(0, 2), (0, 2)]),
    ("ij,jk->ik", [(2, 0), (0, 3)]),
    (" i j , j k -> i k ", [(2, 3), (3, 4)]),  # spaces are ignored
]


@pytest.mark.parametrize("eq,shapes", EINSUM_CASES, ids=[c[0] for c in EINSUM_CASES])
def test_einsum_matches_numpy(backend, eq, shapes):
    arrs = [_rand(*s) for s in shapes]
    got = vtl.einsum(eq, *[vtl.asarray(a) for a in arrs])
    want = np.einsum(eq, *[a.astype(np.float64) for a in arrs]).astype(np.float32)
    assert_close(got, want, rtol=1e-4, atol=1e-5)
    assert got.device == vtl.Device(backend)


def test_einsum_operand_list_and_dtypes(backend):
    a, b = _rand(2, 3), _rand(3, 4)
    got = vtl.einsum("ij,jk", [vtl.asarray(a), vtl.asarray(b)])
    assert_close(got, np.einsum("ij,jk", a, b), rtol=1e-5, atol=1e-6)
    ia = RNG.integers(-3, 4, (2, 3)).astype(np.int32)
    ib = RNG.integers(-3, 4, (3,)).astype(np.int32)
    r = vtl.einsum("ij,j->i", vtl.asarray(ia), vtl.asarray(ib))
    assert_close(r, np.einsum("ij,j->i", ia, ib))  # integers keep their dtype
    assert_close(vtl.einsum("ii", vtl.asarray(ia[:, :2])), np.einsum("ii", ia[:, :2]))


def test_einsum_sums_an_ellipsis_the_output_leaves_out(backend):
    """``'...i->i'`` sums the ``...`` axes (PyTorch; NumPy refuses the equation)."""
    x = _rand(2, 3, 4)
    assert_close(vtl.einsum("...i->i", vtl.asarray(x)), x.sum(axis=(0, 1)), rtol=1e-5,
                 atol=1e-6)
    assert_close(vtl.einsum("a...b->a", vtl.asarray(x)), x.sum(axis=(1, 2)), rtol=1e-5,
                 atol=1e-6)


_POOL = "abcd"


@st.composite
def _equations(draw):
    sizes = {c: draw(st.integers(1, 3)) for c in _POOL}
    n_ops = draw(st.integers(1, 3))
    terms = [draw(st.lists(st.sampled_from(_POOL), min_size=1, max_size=3)) for _ in range(n_ops)]
    shapes = []
    for t in terms:  # a size-one axis now and then (it broadcasts)
        shapes.append(tuple(1 if draw(st.integers(0, 5)) == 0 else sizes[c] for c in t))
    # repeated letters within a term take a diagonal: they need equal sizes
    shapes = [tuple(sizes[c] if t.count(c) > 1 else s for c, s in zip(t, sh, strict=True))
              for t, sh in zip(terms, shapes, strict=True)]
    eq = ",".join("".join(t) for t in terms)
    if draw(st.booleans()):
        used = sorted({c for t in terms for c in t})
        out = draw(st.permutations(used))[: draw(st.integers(0, len(used)))]
        eq += "->" + "".join(out)
    return eq, shapes


@given(case=_equations(), seed=st.integers(0, 2**16))
def test_einsum_random_equations(backend, case, seed):
    eq, shapes = case
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal(s) for s in shapes]
    try:
        want = np.einsum(eq, *arrs)
    except ValueError:  # NumPy refuses some broadcasts of a repeated letter
        return
    dt = vtl.float64 if backend == "numpy" else vtl.float32
    got = vtl.einsum(eq, *[vtl.asarray(a, dtype=dt) for a in arrs])
    assert to_numpy(got).shape == want.shape, eq
    np.testing.assert_allclose(to_numpy(got), want, rtol=1e-4, atol=1e-4, err_msg=eq)


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iji->j", [(2, 3, 2)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("...ij,...jk", [(2, 1, 2, 3), (3, 3, 2)]),
    ("ij,ij->", [(2, 3), (2, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)]),
    ("ij,ij->ij", [(2, 1), (2, 3)]),
    ("i,j->ij", [(2,), (3,)]),
    ("...i->i", [(2, 2, 3)]),
])
def test_einsum_gradients(eq, shapes):
    check_grad(lambda *ts: vtl.einsum(eq, *ts), *[RNG.standard_normal(s) for s in shapes])


def test_einsum_second_order():
    """A gradient of einsum is differentiable again (create_graph)."""
    b = RNG.standard_normal((3, 2))

    def grad_of(a):
        a = a if a.requires_grad else a.detach().requires_grad_(True)
        y = vtl.sum(vtl.einsum("ij,jk->ik", a, vtl.asarray(b)) ** 3)
        return vtl.autograd.grad(y, [a], create_graph=True)[0]

    check_grad(grad_of, RNG.standard_normal((2, 3)), rtol=1e-4)


def test_einsum_gradient_on_backend(backend):
    a = vtl.asarray(_rand(2, 3), requires_grad=True)
    b = vtl.asarray(_rand(3, 3), requires_grad=True)
    vtl.sum(vtl.einsum("ij,jj->ij", a, b)).backward()
    assert_close(a.grad, np.broadcast_to(np.diag(to_numpy(b)), (2, 3)), rtol=1e-5, atol=1e-6)
    gb = np.zeros((3, 3), np.float32)
    gb[np.arange(3), np.arange(3)] = to_numpy(a).sum(axis=0)
    assert_close(b.grad, gb, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("eq,shapes,match", [
    ("ij,jk", [(2, 3)], "2 operand term"),
    ("ij", [(2, 3), (3,)], "1 operand term"),
    ("i1", [(2, 3)], "invalid subscript '1'"),
    ("i.j", [(2, 3)], "'...'"),
    ("...i...", [(2, 3)], "'...'"),
    ("ij->i->j", [(2, 3)], "at most one '->'"),
    ("ij-i", [(2, 3)], "at most one '->'"),
    ("ijk", [(2, 3)], "2 dimension"),
    ("i", [(2, 3)], "no '...'"),
    ("ij->ii", [(2, 3)], "'i' appears more than once"),
    ("ij->k", [(2, 3)], "'k' does not appear"),
    ("ij,jk", [(2, 3), (4, 5)], "'j' has size 3 in operand 0 and size 4"),
    ("ii", [(2, 3)], "repeated in operand 0"),
])
def test_einsum_errors(eq, shapes, match):
    with pytest.raises(ValueError, match=match):
        vtl.einsum(eq, *[vtl.ones(s) for s in shapes])


def test_einsum_type_errors():
    with pytest.raises(TypeError, match="equation string"):
        vtl.einsum(vtl.ones((2,)), [0])
    with pytest.raises(TypeError, match="operand 1"):
        vtl.einsum("i,i", vtl.ones((2,)), np.ones(2))
    with pytest.raises(ValueError, match="at least one operand"):
        vtl.einsum("i")


def test_einsum_matches_pytorch():
    torch = _torch()
    for eq, shapes in EINSUM_CASES + [("...i->i", [(2, 3, 4)])]:
        arrs = [_rand(*s) for s in shapes]
        ours = to_numpy(vtl.einsum(eq, *[vtl.asarray(a) for a in arrs]))
        theirs = torch.einsum(eq, *[torch.from_numpy(a) for a in arrs]).numpy()
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5, err_msg=eq)


# -- PyTorch's dim= beside the standard's axis= -------------------------------------------------
X = np.array([[3.0, -1.0, 2.0, 2.0], [0.5, 4.0, -2.0, 1.0], [1.0, 1.0, 0.0, -3.0]], np.float32)

# (function, torch-style kwargs, the same call in the standard's names)
ALIASED = [
    ("sum", {"dim": 1, "keepdim": True}, {"axis": 1, "keepdims": True}),
    ("sum", {"dim": (0, 1)}, {"axis": (0, 1)}),
    ("prod", {"dim": 0}, {"axis": 0}),
    ("mean", {"dim": -1, "keepdim": True}, {"axis": -1, "keepdims": True}),
    ("std", {"dim": 1, "unbiased": True}, {"axis": 1, "correction": 1}),
    ("var", {"dim": 0, "unbiased": False, "keepdim": True},
     {"axis": 0, "correction": 0, "keepdims": True}),
    ("max", {"keepdim": True}, {"keepdims": True}),
    ("argmax", {"dim": 1, "keepdim": True}, {"axis": 1, "keepdims": True}),
    ("argmin", {"dim": 0}, {"axis": 0}),
    ("cumulative_sum", {"dim": 1}, {"axis": 1}),
    ("cumulative_prod", {"dim": 0}, {"axis": 0}),
    ("flip", {"dims": (0, 1)}, {"axis": (0, 1)}),
    ("argsort", {"dim": 0}, {"axis": 0}),
    ("diff", {"dim": 0}, {"axis": 0}),
    ("expand_dims", {"dim": 1}, {"axis": 1}),
    ("unstack", {"dim": 1}, {"axis": 1}),
    ("repeat", {"dim": 1}, {"axis": 1}),
]


@pytest.mark.parametrize("name,torch_kw,std_kw", ALIASED,
                         ids=[f"{a[0]}-{'-'.join(a[1])}" for a in ALIASED])
def test_namespace_functions_take_dim(backend, name, torch_kw, std_kw):
    fn = getattr(vtl, name)
    x = vtl.asarray(X)
    args = (2,) if name == "repeat" else ()
    got, want = fn(x, *args, **torch_kw), fn(x, *args, **std_kw)
    if isinstance(want, tuple):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(to_numpy(g), to_numpy(w))
    else:
        np.testing.assert_array_equal(to_numpy(got), to_numpy(want))


def test_more_functions_take_torch_names(backend):
    x, b = vtl.asarray(X), vtl.asarray(X > 0)
    eq = np.testing.assert_array_equal
    eq(to_numpy(vtl.any(b, dim=1, keepdim=True)), np.any(X > 0, axis=1, keepdims=True))
    eq(to_numpy(vtl.all(b, dim=0)), np.all(X > 0, axis=0))
    eq(to_numpy(vtl.count_nonzero(b, dim=1)), np.count_nonzero(X > 0, axis=1))
    eq(to_numpy(vtl.concat([x, x], dim=1)), np.concatenate([X, X], axis=1))
    eq(to_numpy(vtl.stack([x, x], dim=-1)), np.stack([X, X], axis=-1))
    eq(to_numpy(vtl.squeeze(vtl.asarray(X[:, :1]), dim=1)), X[:, 0])
    eq(to_numpy(vtl.roll(x, shifts=1, dims=1)), np.roll(X, 1, axis=1))
    eq(to_numpy(vtl.roll(x, shifts=(1, 2), dims=(0, 1))), np.roll(X, (1, 2), axis=(0, 1)))
    eq(to_numpy(vtl.permute_dims(x, dims=(1, 0))), X.T)
    idx = vtl.asarray(np.argsort(X, axis=1))
    eq(to_numpy(vtl.take_along_axis(x, idx, dim=1)), np.sort(X, axis=1))
    assert_close(vtl.vecdot(x, x, dim=-1), np.sum(X * X, axis=-1), rtol=1e-6)
    assert_close(vtl.tensordot(x, x, dims=([1], [1])), X @ X.T, rtol=1e-5, atol=1e-5)


def test_max_min_sort_with_dim_return_named_tuples(backend):
    t = vtl.asarray(X, requires_grad=True)
    r = vtl.max(t, dim=1)
    assert type(r).__name__ == "max" and r._fields == ("values", "indices")
    np.testing.assert_array_equal(to_numpy(r.values), X.max(axis=1))
    np.testing.assert_array_equal(to_numpy(r.indices), X.argmax(axis=1))
    v, i = vtl.min(t, dim=0, keepdim=True)
    np.testing.assert_array_equal(to_numpy(v), X.min(axis=0, keepdims=True))
    np.testing.assert_array_equal(to_numpy(i), X.argmin(axis=0)[None])
    np.testing.assert_array_equal(to_numpy(vtl.max(t, axis=1)), X.max(axis=1))  # standard
    s = vtl.sort(t, dim=1, descending=True)
    assert type(s).__name__ == "sort"
    np.testing.assert_array_equal(to_numpy(s.values), -np.sort(-X, axis=1))
    np.testing.assert_array_equal(to_numpy(s.indices), np.argsort(-X, axis=1, kind="stable"))
    np.testing.assert_array_equal(to_numpy(vtl.sort(t, axis=0)), np.sort(X, axis=0))
    vtl.sum(vtl.max(t, dim=1).values).backward()  # the gradient reaches the chosen elements
    onehot = np.zeros_like(X)
    onehot[np.arange(3), X.argmax(axis=1)] = 1
    np.testing.assert_array_equal(to_numpy(t.grad), onehot)
    with pytest.raises(TypeError, match="takes one dim"):
        vtl.max(t, dim=(0, 1))


def test_aliases_are_differentiable(backend):
    t = vtl.asarray(X, requires_grad=True)
    vtl.sum(vtl.mean(t, dim=1, keepdim=True) * vtl.asarray([[1.0], [2.0], [3.0]])).backward()
    assert_close(t.grad, np.repeat(np.array([[1.0], [2.0], [3.0]], np.float32) / 4, 4, axis=1))


def test_std_var_keep_the_standards_correction():
    """``vtl.std``/``vtl.var`` default to ``correction=0`` (the standard); PyTorch's default is
    1 (``unbiased=True``), which the ``Tensor`` methods keep."""
    x = vtl.asarray(X)
    assert_close(vtl.var(x, dim=1), X.var(axis=1, ddof=0), rtol=1e-6)
    assert_close(vtl.var(x, dim=1, unbiased=True), X.var(axis=1, ddof=1), rtol=1e-6)
    assert_close(x.var(dim=1), X.var(axis=1, ddof=1), rtol=1e-6)
    with pytest.raises(TypeError, match="correction= and unbiased="):
        vtl.std(x, correction=1, unbiased=True)
    with pytest.raises(TypeError, match="unbiased must be a bool"):
        vtl.std(x, unbiased=1)


@pytest.mark.parametrize("call,match", [
    (lambda x: vtl.sum(x, axis=0, dim=1), "axis= and dim="),
    (lambda x: vtl.mean(x, keepdims=True, keepdim=True), "keepdims= and keepdim="),
    (lambda x: vtl.concat([x, x], axis=0, dim=0), "axis= and dim="),
    (lambda x: vtl.squeeze(x), r"missing required argument 'axis' \(or dim=\)"),
    (lambda x: vtl.roll(x, dims=0), r"'shift' \(or shifts=\)"),
    (lambda x: vtl.roll(x, 1, shifts=1), "shift= and shifts="),
    (lambda x: vtl.flip(x, axis=0, dims=0), "axis= and dims="),
    (lambda x: F.softmax(x, 1, axis=0), "dim= and axis="),
])
def test_both_names_or_neither_is_a_type_error(call, match):
    with pytest.raises(TypeError, match=match):
        call(vtl.asarray(X))


def test_signatures_keep_the_standard():
    """The standard's parameters keep their names, kinds and defaults; the aliases come last,
    keyword-only."""
    sig = inspect.signature(vtl.sum)
    assert list(sig.parameters) == ["x", "axis", "dtype", "keepdims", "dim", "keepdim"]
    assert sig.parameters["x"].kind is inspect.Parameter.POSITIONAL_ONLY
    assert sig.parameters["dim"].kind is inspect.Parameter.KEYWORD_ONLY
    sq = inspect.signature(vtl.squeeze).parameters
    assert sq["axis"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert sq["axis"].default is inspect.Parameter.empty  # still required by the standard
    assert vtl.squeeze(vtl.ones((2, 1)), 1).shape == (2,)  # positional, as before
    assert "dim=" in vtl.sum.__doc__ and vtl.sum.__name__ == "sum"
    assert vtl.sum.__wrapped__.__module__ == "vtl._ops.statistical"


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "softmin"])
def test_softmax_family_takes_dim_and_axis(backend, name):
    fn = getattr(F, name)
    x = vtl.asarray(X)
    want = to_numpy(fn(x, dim=1))
    np.testing.assert_array_equal(to_numpy(fn(x, axis=1)), want)
    np.testing.assert_array_equal(to_numpy(fn(x, 1)), want)
    z = X - X.max(axis=1, keepdims=True)
    sm = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    oracle = {"softmax": sm, "log_softmax": np.log(sm),
              "softmin": np.exp(-X + X.min(axis=1, keepdims=True)) /
              np.exp(-X + X.min(axis=1, keepdims=True)).sum(axis=1, keepdims=True)}[name]
    np.testing.assert_allclose(want, oracle, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fn(X.astype(np.float64), axis=0), fn(X.astype(np.float64), dim=0))


def test_logsumexp_takes_axis_and_keepdims(backend):
    x = vtl.asarray(X)
    want = np.log(np.exp(X.astype(np.float64)).sum(axis=1, keepdims=True))
    assert_close(F.logsumexp(x, axis=1, keepdims=True), want.astype(np.float32), rtol=1e-6)
    assert_close(F.logsumexp(x, dim=1, keepdim=True), want.astype(np.float32), rtol=1e-6)


def test_logsumexp_over_an_empty_axis_is_minus_inf(backend):
    """As PyTorch: the log of an empty sum, -inf, with the shape of the other axes; the
    gradient reaches the (empty) input; no warnings."""
    x = vtl.asarray(np.zeros((3, 0), np.float32), requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = F.logsumexp(x, dim=1)
        assert_close(y, np.full(3, -np.inf, np.float32))
        assert F.logsumexp(x, dim=1, keepdim=True).shape == (3, 1)
        assert float(F.logsumexp(x)) == -np.inf
        assert F.logsumexp(vtl.asarray(np.zeros((0, 3), np.float32)), dim=1).shape == (0,)
        vtl.sum(y).backward()
    assert x.grad.shape == (3, 0)


def test_tensor_methods_take_dim(backend):
    t = vtl.asarray(X)
    eq = np.testing.assert_array_equal
    eq(to_numpy(t.sum(dim=1)), X.sum(axis=1))
    eq(to_numpy(t.any(1)), np.any(X > 0, axis=1) | np.any(X < 0, axis=1))
    eq(to_numpy(vtl.asarray(X > 0).all(dim=0, keepdim=True)), np.all(X > 0, axis=0)[None])
    eq(to_numpy(t.cumsum(1)), np.cumsum(X, axis=1))
    eq(to_numpy(t.cumprod(dim=0)), np.cumprod(X, axis=0))
    eq(to_numpy(vtl.cumsum(t, 0)), np.cumsum(X, axis=0))
    eq(to_numpy(vtl.cumprod(t, dim=1)), np.cumprod(X, axis=1))
    eq(to_numpy(t.flip(0)), X[::-1])
    eq(to_numpy(t.flip([0, 1])), X[::-1, ::-1])
    eq(to_numpy(t.roll(1, 1)), np.roll(X, 1, axis=1))
    eq(to_numpy(t.roll([1, -1], [0, 1])), np.roll(X, (1, -1), axis=(0, 1)))
    eq(to_numpy(t.roll(2)), np.roll(X, 2))


def test_dim_aliases_match_pytorch():
    torch = _torch()
    x, tx = vtl.asarray(X), torch.from_numpy(X)
    for name, kw in (("sum", {"dim": 1, "keepdim": True}), ("mean", {"dim": 0}),
                     ("std", {"dim": 1, "unbiased": True}), ("argmax", {"dim": 1}),
                     ("flip", {"dims": (0,)}), ("roll", {"shifts": 1, "dims": 1})):
        ours = getattr(vtl, name)(x, **kw)
        theirs = getattr(torch, name)(tx, **kw)
        np.testing.assert_allclose(to_numpy(ours), theirs.numpy(), rtol=1e-6, err_msg=name)
    for name in ("max", "min", "sort"):
        ours, theirs = getattr(vtl, name)(x, dim=1), getattr(torch, name)(tx, dim=1)
        np.testing.assert_array_equal(to_numpy(ours.values), theirs.values.numpy())
        np.testing.assert_array_equal(to_numpy(ours.indices), theirs.indices.numpy())


# -- inplace= -------------------------------------------------------------------------------
_ACTS = {
    "relu": (F.relu, {}),
    "relu6": (F.relu6, {}),
    "leaky_relu": (F.leaky_relu, {"negative_slope": 0.2}),
    "elu": (F.elu, {"alpha": 0.7}),
    "selu": (F.selu, {}),
    "celu": (F.celu, {"alpha": 1.3}),
    "hardtanh": (F.hardtanh, {"min_val": -0.5, "max_val": 2.0}),
    "hardsigmoid": (F.hardsigmoid, {}),
    "hardswish": (F.hardswish, {}),
    "silu": (F.silu, {}),
    "mish": (F.mish, {}),
    "threshold": (F.threshold, {"threshold": 0.3, "value": -2.0}),
}
A = (np.linspace(-4.0, 4.0, 12).reshape(3, 4) + 0.05).astype(np.float32)
A.flags.writeable = False  # vtl.tensor copies it (vtl.asarray would share its memory)


@pytest.mark.parametrize("name", list(_ACTS))
def test_inplace_activation_writes_into_the_input(backend, name):
    fn, kw = _ACTS[name]
    want = to_numpy(fn(vtl.tensor(A), **kw))
    t = vtl.tensor(A)
    v0 = t._version
    out = fn(t, **kw, inplace=True)
    assert out is t and t._version == v0 + 1
    np.testing.assert_array_equal(to_numpy(t), want)


@pytest.mark.parametrize("name", list(_ACTS))
def test_inplace_activation_keeps_autograd_right(backend, name):
    """On a non-leaf, the in-place form gives the gradient of the out-of-place one."""
    fn, kw = _ACTS[name]
    c = vtl.asarray(_rand(3, 4))
    grads = []
    for inplace in (False, True):
        a = vtl.tensor(A, requires_grad=True)
        b = a * 1.5
        out = fn(b, **kw, inplace=inplace)
        assert (out is b) == inplace
        vtl.sum(out * c).backward()
        grads.append(to_numpy(a.grad))
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-6, atol=1e-7)


def test_inplace_rules(backend):
    a = vtl.tensor(A, requires_grad=True)
    with pytest.raises(RuntimeError, match="in-place relu on a leaf tensor that requires grad"):
        F.relu(a, inplace=True)
    with pytest.raises(RuntimeError, match="leaf"):
        F.dropout(a, 0.5, inplace=True)
    with vtl.no_grad():  # allowed outside grad mode, as in PyTorch
        F.elu_(a)
    np.testing.assert_allclose(to_numpy(a), np.where(A > 0, A, np.expm1(A)), rtol=1e-6)
    b = vtl.tensor(A, requires_grad=True)
    y = vtl.exp(b)  # exp saves its output for backward ...
    F.relu_(y)  # ... which an in-place op then changes
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        vtl.sum(y).backward()
    i = vtl.asarray(np.array([-2, 3], np.int32))
    assert F.relu(i, inplace=True) is i and to_numpy(i).tolist() == [0, 3]
    with pytest.raises(TypeError, match="change the dtype"):
        F.leaky_relu(i, 0.5, inplace=True)


def test_underscore_forms(backend):
    for name, kw in (("relu_", {}), ("elu_", {"alpha": 0.5}), ("leaky_relu_", {}),
                     ("hardtanh_", {"min_val": -1.5}), ("celu_", {}), ("selu_", {}),
                     ("threshold_", {"threshold": 0.0, "value": 7.0})):
        base = getattr(F, name[:-1])
        want = to_numpy(base(vtl.tensor(A), **kw))
        t = vtl.tensor(A)
        assert getattr(F, name)(t, **kw) is t, name
        np.testing.assert_array_equal(to_numpy(t), want, err_msg=name)
        assert name in F.__all__


def test_inplace_on_plain_arrays():
    x = A.astype(np.float64)
    assert F.relu(x, inplace=True) is x and (x >= 0).all()
    x = A.astype(np.float64)
    F.hardtanh_(x)
    np.testing.assert_array_equal(x, np.clip(A.astype(np.float64), -1, 1))
    ro = A.astype(np.float64)
    ro.flags.writeable = False
    with pytest.raises(TypeError, match=r"relu\(inplace=True\): cannot write into the input"):
        F.relu(ro, inplace=True)
    ints = np.array([-1, 2])
    with pytest.raises(TypeError, match="cannot be written into the input"):
        F.leaky_relu(ints, inplace=True)


_MODULES = [
    (nn.ReLU, (), F.relu, {}),
    (nn.ReLU6, (), F.relu6, {}),
    (nn.SELU, (), F.selu, {}),
    (nn.SiLU, (), F.silu, {}),
    (nn.Mish, (), F.mish, {}),
    (nn.Hardsigmoid, (), F.hardsigmoid, {}),
    (nn.Hardswish, (), F.hardswish, {}),
    (nn.LeakyReLU, (0.3,), F.leaky_relu, {"negative_slope": 0.3}),
    (nn.ELU, (0.5,), F.elu, {"alpha": 0.5}),
    (nn.CELU, (0.5,), F.celu, {"alpha": 0.5}),
    (nn.Hardtanh, (-2.0, 2.0), F.hardtanh, {"min_val": -2.0, "max_val": 2.0}),
    (nn.Threshold, (0.1, 20.0), F.threshold, {"threshold": 0.1, "value": 20.0}),
]


@pytest.mark.parametrize("cls,args,fn,kw", _MODULES, ids=[m[0].__name__ for m in _MODULES])
def test_modules_inplace(backend, cls, args, fn, kw):
    want = to_numpy(fn(vtl.tensor(A), **kw))
    t = vtl.tensor(A)
    out = cls(*args)(t)
    assert out is not t
    m = cls(*args, inplace=True)
    assert "inplace=True" in repr(m)
    assert m(t) is t
    np.testing.assert_array_equal(to_numpy(t), want)


def test_dropout_inplace(backend):
    for fn, shape in ((F.dropout, (4, 6)), (F.dropout1d, (2, 3, 4)), (F.dropout2d, (2, 3, 2, 2)),
                      (F.dropout3d, (2, 3, 1, 2, 2)), (F.alpha_dropout, (4, 6))):
        x = (np.abs(RNG.standard_normal(shape)) + 0.5).astype(np.float32)
        g = vtl.random.Generator(3)
        want = to_numpy(fn(vtl.tensor(x), 0.5, True, generator=g))
        g = vtl.random.Generator(3)
        t = vtl.tensor(x)
        assert fn(t, 0.5, True, True, generator=g) is t, fn.__name__
        np.testing.assert_allclose(to_numpy(t), want, rtol=1e-6, err_msg=fn.__name__)
        t = vtl.tensor(x)
        assert fn(t, 0.5, False, True) is t  # eval mode: untouched
        np.testing.assert_array_equal(to_numpy(t), x)
    # gradients through an in-place dropout: the kept elements get 1 / (1 - p)
    a = vtl.asarray(np.ones((4, 8), np.float32), requires_grad=True)
    b = a * 1.0
    F.dropout(b, 0.25, True, True)
    vtl.sum(b).backward()
    kept = to_numpy(b) != 0
    np.testing.assert_allclose(to_numpy(a.grad), kept / 0.75, rtol=1e-6)
    d = nn.Dropout(0.5, inplace=True)
    t = vtl.ones((8,))
    assert d(t) is t and set(np.unique(to_numpy(t))) <= {0.0, 2.0}
    d.eval()
    assert d(t) is t


def test_inplace_matches_pytorch():
    torch = _torch()
    for name, (fn, kw) in _ACTS.items():
        t = vtl.tensor(A)
        tt = torch.from_numpy(A.copy())
        fn(t, **kw, inplace=True)
        getattr(torch.nn.functional, name)(tt, **kw, inplace=True)
        np.testing.assert_allclose(to_numpy(t), tt.numpy(), rtol=1e-6, atol=1e-6, err_msg=name)


# -- mode, casts ------------------------------------------------------------------------------
def _np_mode(x: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's ``mode`` in NumPy: the smallest of the most frequent values of each slice and
    the index of its last occurrence."""
    xm = np.moveaxis(x, axis, -1)
    vals = np.empty(xm.shape[:-1], x.dtype)
    idx = np.empty(xm.shape[:-1], np.int64)
    for pos in np.ndindex(*xm.shape[:-1]):
        row = xm[pos]
        u, c = np.unique(row, return_counts=True)
        best = u[c == c.max()].min()
        vals[pos] = best
        idx[pos] = np.nonzero(row == best)[0][-1]
    return vals, idx


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_mode(backend, dim, dtype):
    x = RNG.integers(0, 4, (3, 7)).astype(dtype)
    v, i = vtl.mode(vtl.asarray(x), dim)
    wv, wi = _np_mode(x, dim)
    np.testing.assert_array_equal(to_numpy(v), wv)
    np.testing.assert_array_equal(to_numpy(i), wi)
    r = vtl.asarray(x).mode(dim, keepdim=True)
    assert type(r).__name__ == "mode" and r._fields == ("values", "indices")
    np.testing.assert_array_equal(to_numpy(r.values), np.expand_dims(wv, dim))
    np.testing.assert_array_equal(to_numpy(r.indices), np.expand_dims(wi, dim))
    np.testing.assert_array_equal(to_numpy(vtl.mode(vtl.asarray(x), axis=dim).values), wv)


def test_mode_edge_cases(backend):
    v, i = vtl.mode(vtl.asarray(2.5))
    assert float(v) == 2.5 and int(i) == 0 and v.shape == ()
    v, i = vtl.mode(vtl.asarray([0.5, np.nan, np.nan]))  # NaNs never equal each other
    assert float(v) == 0.5 and int(i) == 0
    v, i = vtl.mode(vtl.asarray([-0.0, 0.0, 1.0]))  # -0.0 == 0.0
    assert float(v) == 0.0 and int(i) == 1
    with pytest.raises(ValueError, match="size 0"):
        vtl.mode(vtl.ones((2, 0)))
    with pytest.raises(IndexError):
        vtl.mode(vtl.ones((2, 3)), 2)
    with pytest.raises(TypeError, match="int for dim"):
        vtl.mode(vtl.ones((2, 3)), 0.5)
    t = vtl.asarray([[1.0, 2.0, 1.0], [3.0, 3.0, 4.0]], requires_grad=True)
    vtl.sum(t.mode(1).values).backward()
    np.testing.assert_array_equal(to_numpy(t.grad), [[0, 0, 1], [0, 1, 0]])


def test_mode_matches_pytorch():
    torch = _torch()
    x = RNG.integers(0, 5, (6, 9)).astype(np.float32)
    for dim in (0, 1):
        ours, theirs = vtl.mode(vtl.asarray(x), dim), torch.mode(torch.from_numpy(x), dim)
        np.testing.assert_array_equal(to_numpy(ours.values), theirs.values.numpy())
        np.testing.assert_array_equal(to_numpy(ours.indices), theirs.indices.numpy())


def test_half_and_bfloat16_cast():
    t = vtl.ones((2,))
    assert t.half().dtype == vtl.float16 and t.bfloat16().dtype == vtl.bfloat16
    assert t.half().float().dtype == vtl.float32


def test_casts_view_and_size(backend):
    t = vtl.asarray(np.arange(6.0).reshape(2, 3))
    assert t.float().dtype == vtl.float32 and t.long().dtype == vtl.int64
    assert t.int().dtype == vtl.int32 and t.bool().dtype == vtl.bool
    if "float64" in vtl.__array_namespace_info__().dtypes(device=t.device):
        assert t.double().dtype == vtl.float64
    assert t.view(3, 2).shape == (3, 2) and t.view((6,)).shape == (6,)
    assert t.size == 6 and t.shape[1] == 3 and t.numel() == 6  # size: the standard's attribute


@pytest.mark.parametrize("name", ["mode", "cumsum", "cumprod", "flip", "roll", "half",
                                  "bfloat16", "any", "all"])
def test_new_methods_are_declared(name):
    from vtl._tensor_methods import TensorMethods

    fn = vars(TensorMethods)[name]
    assert inspect.isfunction(fn) and fn.__doc__
    assert list(inspect.signature(fn).parameters)[0] == "self"

