"""The single-node fast paths of ``nn.functional`` (relu, linear, mse_loss), the vtl
namespace shortcut, ``Module.__call__`` without hooks, and the NumPy backend's fused
optimizer step (``multi_tensor_apply``)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import vtl
import vtl.nn.functional as F
from tests.helpers import assert_close, check_grad, check_grad_matches_numpy, to_numpy
from vtl import nn, optim
from vtl.nn.functional._utils import namespace
from vtl.optim import _programs

FLOATS = st.sampled_from([np.float32, np.float64])


def _arrays(dtype, shape):
    return hnp.arrays(dtype, shape, elements=st.floats(-4, 4, width=32))


def _grad2(f, *xs):
    """Second derivative through create_graph: d/dx sum(w * d/dx sum(f(x)))."""
    ts = [vtl.asarray(x, backend="numpy", requires_grad=True) for x in xs]
    g = vtl.autograd.grad(vtl.sum(f(*ts)), ts, create_graph=True, allow_unused=True)
    rng = np.random.default_rng(3)
    ws = [vtl.asarray(rng.standard_normal(x.shape)) for x in xs]
    total = sum(vtl.sum(gi * w) for gi, w in zip(g, ws, strict=True) if gi is not None)
    return [None if h is None else h.numpy()
            for h in vtl.autograd.grad(total, ts, allow_unused=True)], [w.numpy() for w in ws]


# -- namespace -------------------------------------------------------------------------------
def test_namespace_shortcut(backend):
    t = vtl.asarray([1.0, 2.0])
    assert namespace(t) is vtl
    assert namespace(None, t, 2.0, t) is vtl
    assert namespace(np.ones(2)) is not vtl
    with pytest.raises(TypeError):
        namespace(None, 1.0)


# -- relu ------------------------------------------------------------------------------------
@given(dtype=FLOATS, shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
       data=st.data())
def test_relu_values(backend, dtype, shape, data):
    x = data.draw(_arrays(dtype, shape))
    out = F.relu(vtl.asarray(x))
    assert_close(out, np.where(x <= 0, 0, x).astype(dtype))


def test_relu_special_values_and_one_node(backend):
    x = vtl.asarray(np.array([-1.0, -0.0, 0.0, 2.0, math.nan, -math.inf, math.inf],
                             dtype=np.float32), requires_grad=True)
    y = F.relu(x)
    assert y.grad_fn.name() == "ReluBackward"
    assert y.grad_fn.next_functions[0][0] is x
    v = to_numpy(y)
    np.testing.assert_array_equal(v[[0, 1, 2, 3, 5, 6]], [0, 0, 0, 2, 0, math.inf])
    assert math.isnan(v[4])
    assert not np.signbit(v[1])
    y.backward(vtl.ones_like(y))
    # PyTorch: 0 at 0 (and -0), the gradient passes through nan
    np.testing.assert_array_equal(to_numpy(x.grad), [0, 0, 0, 1, 1, 0, 1])


def test_relu_integer_input_keeps_dtype(backend):
    x = vtl.asarray(np.array([-2, 0, 3], dtype=np.int32))
    assert_close(F.relu(x), np.array([0, 0, 3], dtype=np.int32))


def test_relu_grad_finite_differences():
    x = np.array([[-1.5, 0.3, 2.0], [0.7, -0.2, -3.0]])
    check_grad(lambda t: F.relu(t) * t, x)


def test_relu_second_order():
    x = np.array([-1.5, 0.3, 2.0, -0.2, 1.1])
    (h,), (w,) = _grad2(lambda t: F.relu(t) ** 2, x)
    np.testing.assert_allclose(h, 2 * w * (x > 0))


def test_relu_grad_matches_numpy_backend(backend):
    check_grad_matches_numpy(lambda t: F.relu(t) * 3.0, backend, [[-1.0, 0.5], [2.0, -0.1]])


# -- linear ----------------------------------------------------------------------------------
@pytest.mark.parametrize("xshape", [(5, 4), (4,), (2, 3, 4), (0, 4)])
@pytest.mark.parametrize("bshape", [None, (3,), ()])
def test_linear_values(backend, xshape, bshape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xshape).astype(np.float32)
    w = rng.standard_normal((3, 4)).astype(np.float32)
    b = None if bshape is None else rng.standard_normal(bshape).astype(np.float32)
    out = F.linear(vtl.asarray(x), vtl.asarray(w), None if b is None else vtl.asarray(b))
    expected = x @ w.T + (0 if b is None else b)
    assert_close(out, expected.astype(np.float32), rtol=1e-5, atol=1e-5)


def test_linear_is_one_node(backend):
    x = vtl.asarray(np.ones((2, 4), np.float32), requires_grad=True)
    w = vtl.asarray(np.ones((3, 4), np.float32), requires_grad=True)
    b = vtl.asarray(np.ones(3, np.float32), requires_grad=True)
    y = F.linear(x, w, b)
    assert y.grad_fn.name() == "LinearBackward"
    assert [e for e, _ in y.grad_fn.next_functions] == [x, w, b]


@pytest.mark.parametrize("xshape", [(5, 4), (4,), (2, 3, 4)])
def test_linear_grad_finite_differences(xshape):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(xshape)
    w = rng.standard_normal((3, 4))
    b = rng.standard_normal(3)
    check_grad(lambda t, u, v: F.linear(t, u, v), x, w, b)
    check_grad(lambda t, u: F.linear(t, u), x, w)
    check_grad(lambda t, u, v: F.linear(t, u, v), x, w, np.float64(0.5))


@pytest.mark.parametrize("xshape", [(5, 4), (2, 3, 4)])
def test_linear_second_order_matches_composition(xshape):
    rng = np.random.default_rng(2)
    x, w, b = rng.standard_normal(xshape), rng.standard_normal((3, 4)), rng.standard_normal(3)

    def fused(t, u, v):
        return vtl.tanh(F.linear(t, u, v))

    def composed(t, u, v):
        return vtl.tanh(vtl.matmul(t, vtl.matrix_transpose(u)) + v)

    for f, c in ((fused, composed), (F.linear, lambda t, u, v: t @ vtl.matrix_transpose(u) + v)):
        a, _ = _grad2(f, x, w, b)
        e, _ = _grad2(c, x, w, b)
        for ai, ei in zip(a, e, strict=True):
            assert (ai is None) == (ei is None)
            if ai is not None:
                np.testing.assert_allclose(ai, ei, rtol=1e-10, atol=1e-12)


def test_linear_general_path_still_works(backend):
    x = vtl.asarray(np.ones((2, 4), np.float32))
    w64 = vtl.asarray(np.ones((3, 4), np.float64))
    assert F.linear(x, w64).dtype == vtl.float64  # mixed dtypes: promoted as before
    assert_close(F.linear(x, vtl.asarray(np.ones(4, np.float32))), np.full(2, 4, np.float32))
    with pytest.raises(ValueError, match="does not match"):
        F.linear(x, vtl.asarray(np.ones((3, 5), np.float32)))


def test_linear_grad_matches_numpy_backend(backend):
    rng = np.random.default_rng(4)
    check_grad_matches_numpy(lambda t, u, v: F.linear(t, u, v), backend,
                             rng.standard_normal((6, 4)), rng.standard_normal((3, 4)),
                             rng.standard_normal(3))


# -- mse_loss --------------------------------------------------------------------------------
@given(dtype=FLOATS, shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4),
       reduction=st.sampled_from(["mean", "sum", "none"]), data=st.data())
def test_mse_values(backend, dtype, shape, reduction, data):
    x = data.draw(_arrays(dtype, shape))
    y = data.draw(_arrays(dtype, shape))
    out = F.mse_loss(vtl.asarray(x), vtl.asarray(y), reduction=reduction)
    sq = (x.astype(np.float64) - y) ** 2
    expected = {"mean": sq.mean(), "sum": sq.sum(), "none": sq}[reduction]
    assert_close(out, np.asarray(expected).astype(dtype), rtol=1e-5, atol=1e-5)


def test_mse_one_node_and_errors(backend):
    x = vtl.asarray(np.ones((2, 3), np.float32), requires_grad=True)
    y = vtl.asarray(np.zeros((2, 3), np.float32))
    assert F.mse_loss(x, y).grad_fn.name() == "MseLossBackward"
    with pytest.raises(ValueError, match="reduction"):
        F.mse_loss(x, y, reduction="avg")
    with pytest.raises(ValueError, match="shape"):
        F.mse_loss(x, vtl.asarray(np.zeros((3, 2), np.float32)))


def test_mse_empty_mean_is_nan():
    with pytest.warns(RuntimeWarning):
        out = F.mse_loss(vtl.asarray(np.zeros((0, 3))), vtl.asarray(np.zeros((0, 3))))
    assert math.isnan(float(out))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_grad_finite_differences(reduction):
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    check_grad(lambda t, u: F.mse_loss(t, u, reduction=reduction), x, y)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_second_order(reduction):
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    (hx, hy), (wx, wy) = _grad2(lambda t, u: F.mse_loss(t, u, reduction=reduction), x, y)
    scale = 2.0 / x.size if reduction == "mean" else 2.0
    # d/dx sum(wx*gx + wy*gy) with gx = scale (x - y), gy = -gx
    np.testing.assert_allclose(hx, scale * (wx - wy))
    np.testing.assert_allclose(hy, -scale * (wx - wy))


def test_mse_grad_matches_numpy_backend(backend):
    rng = np.random.default_rng(7)
    check_grad_matches_numpy(lambda t, u: F.mse_loss(t, u), backend,
                             rng.standard_normal((5, 2)), rng.standard_normal((5, 2)))


# -- Module.__call__ -------------------------------------------------------------------------
def test_module_hooks_still_run_and_can_be_removed(backend):
    lin = nn.Linear(3, 2)
    x = vtl.ones((4, 3))
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: calls.append("pre"))
    h2 = lin.register_forward_hook(lambda m, args, out: out * 0.0)
    assert float(vtl.sum(vtl.abs(lin(x)))) == 0.0 and calls == ["pre"]
    h1.remove()
    h2.remove()
    assert float(vtl.sum(vtl.abs(lin(x)))) > 0.0 and calls == ["pre"]


def test_module_without_init_still_raises():
    class Bad(nn.Module):
        def __init__(self):
            pass

    with pytest.raises(RuntimeError, match="super"):
        Bad()(1)


# -- the NumPy backend's fused optimizer step ------------------------------------------------
def all_programs():
    """Every optimizer's update program, in every variant of its flags."""
    for m, f, n, w, x in itertools.product([False, True], repeat=5):
        if n and not m:
            continue
        yield _programs.sgd(momentum=m, first=f, nesterov=n, weight_decay=w, maximize=x)
    for a, w, d, x in itertools.product([False, True], repeat=4):
        yield _programs.adam(amsgrad=a, weight_decay=w, decoupled=d, maximize=x)
    for c, m, w, x in itertools.product([False, True], repeat=4):
        yield _programs.rmsprop(centered=c, momentum=m, weight_decay=w, maximize=x)
    for w, x in itertools.product([False, True], repeat=2):
        yield _programs.adagrad(weight_decay=w, maximize=x)
        yield _programs.adamax(weight_decay=w, maximize=x)
    for w, d, x in itertools.product([False, True], repeat=3):
        yield _programs.nadam(weight_decay=w, decoupled=d, maximize=x)
        yield _programs.radam(weight_decay=w, decoupled=d, maximize=x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ones", [False, True])
def test_numpy_kernel_equals_program_evaluate(dtype, ones):
    """In-place evaluation gives exactly Program.evaluate's values, leaves the gradient
    alone, and runs over several tensors (including 0-d and non-contiguous ones)."""
    kern = vtl.backends.get("numpy").kernel("multi_tensor_apply")
    assert kern is not None and kern.supports(np.dtype(dtype))
    rng = np.random.default_rng(8)
    for prog in all_programs():
        scalars = tuple(1.0 if ones and i % 2 else 0.3 + 0.1 * i
                        for i, _ in enumerate(prog.scalars))
        tensors, expected = [], []
        for shape in [(3, 4), (), (5,)]:
            # (small gradient averages keep centered RMSprop's variance positive)
            arrs = [np.array(np.abs(rng.standard_normal(shape)) * (0.1 if a == "ga" else 1.0)
                             + (0.0 if a == "ga" else 2.0), dtype=dtype)
                    for a in prog.arrays]
            if shape == (3, 4):
                arrs = [np.asfortranarray(a) for a in arrs]
            expected.append(prog.evaluate(np, [a.copy() for a in arrs], scalars))
            tensors.append(tuple(arrs))
        _assert_kernel_step(kern, prog, tensors, expected, scalars, dtype)


def _assert_kernel_step(kern, prog, tensors, expected, scalars, dtype):
    """``kern`` applied to ``tensors`` writes exactly ``expected`` (Program.evaluate's
    values, per tensor) and leaves the gradients alone."""
    grads = [t[prog.arrays.index("g")].copy() for t in tensors]
    kern(prog, tensors, scalars)
    for arrs, exp, g in zip(tensors, expected, grads, strict=True):
        np.testing.assert_array_equal(arrs[prog.arrays.index("g")], g)
        for name, e in zip(prog.writes, exp, strict=True):
            got = arrs[prog.arrays.index(name)]
            assert got.dtype == dtype
            np.testing.assert_array_equal(got, np.asarray(e, dtype=dtype),
                                          err_msg=f"{prog.name} {name}")


class _Spy:
    def __init__(self, kern):
        self.kern = kern
        self.calls = 0

    def supports(self, dtype):
        return self.kern.supports(dtype)

    def __call__(self, *args):
        self.calls += 1
        self.kern(*args)


@pytest.mark.parametrize("foreach", [None, False])
def test_numpy_fused_step_used_unless_foreach_false(monkeypatch, foreach):
    b = vtl.backends.get("numpy")
    spy = _Spy(b.kernel("multi_tensor_apply"))
    monkeypatch.setitem(b._kernels, "multi_tensor_apply", spy)
    p = vtl.asarray(np.ones(3, np.float32), backend="numpy", requires_grad=True)
    opt = optim.SGD([p], lr=0.1, momentum=0.9, foreach=foreach)
    for _ in range(3):
        p.grad = vtl.asarray(np.full(3, 0.5, np.float32), backend="numpy")
        opt.step()
    assert spy.calls == (3 if foreach is None else 0)
    np.testing.assert_allclose(p.numpy(), 1 - 0.1 * 0.5 * (1 + 1.9 + 2.71), rtol=1e-6)


@pytest.mark.parametrize("threads", ["1", "3"])
def test_numpy_kernel_pieces_and_threads_give_the_same_values(monkeypatch, threads):
    """Large contiguous tensors updated in pieces (here of 64 elements), spread over the
    thread pool, next to whole small and non-contiguous ones: exactly Program.evaluate's
    values, and the gradients untouched."""
    from vtl.backends.numpy import optim as _numpy_kernels

    monkeypatch.setattr(_numpy_kernels, "CHUNK", 64)
    monkeypatch.setattr(_numpy_kernels, "MIN_PIECE", 16)
    monkeypatch.setattr(_numpy_kernels, "PARALLEL_MIN", 0)
    monkeypatch.setenv("VTL_NUM_THREADS", threads)
    kern = vtl.backends.get("numpy").kernel("multi_tensor_apply")
    rng = np.random.default_rng(9)
    prog = _programs.adam(amsgrad=True, weight_decay=True, decoupled=False, maximize=False)
    scalars = tuple(0.3 + 0.1 * i for i, _ in enumerate(prog.scalars))
    tensors, expected = [], []
    for shape, fortran in [((1000,), False), ((37, 29), False), ((30, 7), True), ((), False),
                           ((65,), False)]:
        arrs = [np.array(np.abs(rng.standard_normal(shape)) + 1.0, dtype=np.float32)
                for _ in prog.arrays]
        if fortran:
            arrs = [np.asfortranarray(a) for a in arrs]
        expected.append(prog.evaluate(np, [a.copy() for a in arrs], scalars))
        tensors.append(tuple(arrs))
    _assert_kernel_step(kern, prog, tensors, expected, scalars, np.float32)
