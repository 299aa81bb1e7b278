"""Plain backward (no ``create_graph``): gradients travel between nodes as raw arrays
through the raw rules of binary functions, 2-D ``matmul`` and ``mean``, mixed with
nodes that only have a Tensor rule. Checked against NumPy oracles and against the
same backward with ``create_graph=True`` (which runs the Tensor rules only)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, check_grad, skip_unless_dtype

import vtl


def leaf(values, dtype=np.float32):
    return vtl.asarray(np.asarray(values, dtype=dtype), requires_grad=True)


def _grads(ts):
    return [t.grad.numpy().copy() for t in ts]


def _mlp(params, x, y):
    h = x
    for i in range(len(params) // 2):
        h = h @ params[2 * i] + params[2 * i + 1]
        if i < len(params) // 2 - 1:
            h = vtl.maximum(h, 0.0)
    return vtl.mean((h - y) ** 2)


def test_plain_backward_equals_create_graph_backward(backend):
    rng = np.random.default_rng(0)
    shapes = [(5, 4), (4,), (4, 3), (3,)]
    ps = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    xs = rng.standard_normal((6, 5)).astype(np.float32)
    ys = rng.standard_normal((6, 3)).astype(np.float32)
    results = []
    for create_graph in (False, True):
        params = [leaf(p) for p in ps]
        loss = _mlp(params, vtl.asarray(xs), vtl.asarray(ys))
        loss.backward(create_graph=create_graph)
        results.append(_grads(params))
    for a, b in zip(*results, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_mlp_gradients_by_finite_differences():
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((4, 3))
    ys = rng.standard_normal((4, 2))

    def f(w1, b1, w2, b2):
        return _mlp([w1, b1, w2, b2], vtl.asarray(xs), vtl.asarray(ys))

    check_grad(f, rng.standard_normal((3, 5)), rng.standard_normal(5),
               rng.standard_normal((5, 2)), rng.standard_normal(2))


def test_one_gradient_for_two_leaves_gives_each_its_own_storage(backend):
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (a + b).backward(vtl.asarray([1.0, 1.0]))
    assert_close(a.grad, np.ones(2, np.float32))
    assert_close(b.grad, np.ones(2, np.float32))
    with vtl.no_grad():
        a.grad[...] = 5.0
    assert_close(b.grad, np.ones(2, np.float32))


def test_root_gradient_is_copied_into_a_leaf(backend):
    x = leaf([1.0, 2.0])
    g = vtl.asarray([3.0, 4.0])
    (x + 1.0).backward(g)
    with vtl.no_grad():
        g[...] = 0.0
    assert_close(x.grad, np.array([3.0, 4.0], np.float32))


def test_same_leaf_twice_accumulates(backend):
    x = leaf([1.0, -2.0])
    vtl.sum(x + x).backward()
    assert_close(x.grad, np.full(2, 2.0, np.float32))
    vtl.sum(x - x * 3.0).backward()  # a second backward adds to the existing .grad
    assert_close(x.grad, np.full(2, 0.0, np.float32))


def test_retained_gradient_does_not_share_storage_with_a_leaf_gradient(backend):
    x = leaf([1.0, 2.0, 3.0])
    y = x + 1.0  # its raw rule passes the gradient through unchanged
    y.retain_grad()
    vtl.sum(y * 2.0).backward()
    assert_close(y.grad, np.full(3, 2.0, np.float32))
    assert_close(x.grad, np.full(3, 2.0, np.float32))
    with vtl.no_grad():
        x.grad[...] = -1.0
    assert_close(y.grad, np.full(3, 2.0, np.float32))


def test_intermediate_hook_changes_the_gradient_of_raw_rules_below(backend):
    x = vtl.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    w = leaf(np.ones((3, 2)))
    h = x @ w
    seen = []
    h.register_hook(lambda g: seen.append(g.shape) or g * 3.0)
    vtl.mean(h).backward()
    assert seen == [(2, 2)]
    expected = 3.0 * x.numpy().T @ np.full((2, 2), 0.25, np.float32)
    assert_close(w.grad, expected)


def test_leaf_hook_sees_the_sum_of_its_gradients(backend):
    x = leaf([1.0, 2.0])
    seen = []
    x.register_hook(lambda g: seen.append(g.numpy().copy()))
    vtl.sum(x * 2.0 + x).backward()
    assert len(seen) == 1
    np.testing.assert_allclose(seen[0], [3.0, 3.0])
    assert_close(x.grad, np.full(2, 3.0, np.float32))


def test_in_place_change_of_a_saved_tensor_is_caught(backend):
    x = vtl.asarray(np.ones((2, 3), np.float32))
    w = leaf(np.ones((3, 2)))
    loss = vtl.mean(x @ w)
    with vtl.no_grad():
        w[...] = 2.0
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        loss.backward()


def test_backward_twice_needs_retain_graph(backend):
    a, b = leaf([1.0, 2.0]), leaf([0.5, 0.5])
    loss = vtl.mean(vtl.maximum(a, b) ** 2)
    loss.backward(retain_graph=True)
    first = a.grad.numpy().copy()
    loss.backward()
    assert_close(a.grad, 2 * first)
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()


def test_broadcasting_and_dtype_reduction_in_raw_rules(backend):
    a = leaf(np.arange(3).reshape(3, 1))
    b = leaf(np.arange(4).reshape(1, 4), dtype=np.float64) if _has_f64(backend) else None
    if b is None:
        pytest.skip("the backend has no float64")
    c = leaf([[1.0, 2.0, 3.0, 4.0]])
    vtl.sum((a - b) * c + vtl.maximum(a, c)).backward()
    assert a.grad.dtype == vtl.float32 and b.grad.dtype == vtl.float64
    cn = c.numpy()
    an = a.numpy()
    assert_close(a.grad, (cn.sum() + (an > cn).sum(axis=1, keepdims=True)
                          + 0.5 * (an == cn).sum(axis=1, keepdims=True)).astype(np.float32))
    assert_close(b.grad, -3.0 * cn.astype(np.float64))
    expected_c = (an - b.numpy()).sum(axis=0, keepdims=True) + (an < cn).sum(
        axis=0, keepdims=True) + 0.5 * (an == cn).sum(axis=0, keepdims=True)
    assert_close(c.grad, expected_c.astype(np.float32))


def _has_f64(backend):
    return "float64" in vtl.__array_namespace_info__().dtypes(device=vtl.Device(backend))


def test_maximum_and_minimum_split_ties(backend):
    x = leaf([1.0, 2.0, 3.0])
    vtl.sum(vtl.maximum(x, 2.0)).backward()
    assert_close(x.grad, np.array([0.0, 0.5, 1.0], np.float32))
    y = leaf([1.0, 2.0, 3.0])
    vtl.sum(vtl.minimum(2.0, y)).backward()
    assert_close(y.grad, np.array([1.0, 0.5, 0.0], np.float32))


def test_pow_with_a_tensor_exponent_falls_back_to_the_tensor_rule(backend):
    base, ex = leaf([1.0, 2.0]), leaf([2.0, 3.0])
    vtl.sum(base ** ex + base ** 3.0).backward()
    b, e = base.numpy(), ex.numpy()
    assert_close(base.grad, (e * b ** (e - 1) + 3 * b ** 2).astype(np.float32), rtol=1e-5)
    assert_close(ex.grad, (b ** e * np.log(b)).astype(np.float32), rtol=1e-5)


def test_nodes_with_several_outputs_in_plain_backward(backend):
    x = leaf(np.arange(6).reshape(3, 2))
    r0, r1, r2 = vtl.unstack(x, axis=0)
    vtl.sum(r0 * 2.0 + r2).backward()
    assert_close(x.grad, np.array([[2, 2], [0, 0], [1, 1]], np.float32))



def _forks_and_joins(a, b):
    """Chains, forks and joins of raw-rule nodes, a node with several outputs in the
    middle and a node reached twice from one op."""
    h = a * 2.0
    u = vtl.exp(h) + h  # h forks, joins at the add
    v = u * h  # reaches h along a third path
    w = vtl.maximum(v, u) - b * v
    p0, p1, p2 = vtl.unstack(w, axis=0)
    q = p0 * p2 + p1 * p1  # the same output of unstack twice in one op
    return vtl.sum(q * q) + vtl.mean(w * h)


def test_forks_and_joins_in_plain_backward(backend):
    """Nodes reached along several paths run after all of them: plain backward (which
    hands a chain's gradient straight to the next node and queues only where paths fork)
    equals the backward through Tensor rules and finite differences."""
    rng = np.random.default_rng(5)
    av = rng.uniform(-0.5, 0.5, (3, 4)).astype(np.float32)
    bv = rng.uniform(-0.5, 0.5, (4,)).astype(np.float32)
    results = []
    for create_graph in (False, True):
        a, b = leaf(av), leaf(bv)
        _forks_and_joins(a, b).backward(create_graph=create_graph)
        results.append(_grads([a, b]))
    for got, want in zip(*results, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    if backend == "numpy":
        check_grad(_forks_and_joins, av, bv)

def test_leaf_gradient_from_a_view_owns_its_storage(backend):
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    vtl.sum(x).backward()  # sum's rule broadcasts the output gradient (a view)
    with vtl.no_grad():
        x.grad[0, 0] = 7.0
    assert_close(x.grad, np.array([[7.0, 1.0], [1.0, 1.0]], np.float32))


def test_leaf_gradients_through_reshapes_own_their_storage(backend):
    """A reshaped view of the root gradient, of another leaf's gradient or of a gradient
    the user passed as a view is copied before it becomes a ``.grad``; a reshaped view of
    a fresh result (a rule's own) is kept as it is."""
    x, y = leaf(np.ones((2, 3), np.float32)), leaf(np.ones(6, np.float32))
    g = vtl.asarray(np.arange(6, dtype=np.float32))
    (vtl.reshape(x, (6,)) + y).backward(g)
    with vtl.no_grad():
        x.grad[0, 0] = 7.0
    assert_close(g, np.arange(6, dtype=np.float32))
    assert_close(y.grad, np.arange(6, dtype=np.float32))
    # the root gradient a view itself: a reshape of it is a view of its owner
    owner = vtl.asarray(np.arange(6, dtype=np.float32))
    z = leaf(np.ones((3, 2), np.float32))
    vtl.reshape(z, (2, 3)).backward(vtl.reshape(owner, (2, 3)))
    with vtl.no_grad():
        z.grad[0, 0] = 9.0
    assert_close(owner, np.arange(6, dtype=np.float32))
    # two leaves reshaped from one gradient: each its own
    a, b = leaf(np.ones((2, 2), np.float32)), leaf(np.ones(4, np.float32))
    s = vtl.exp(vtl.reshape(a, (4,))) * 0.0 + vtl.reshape(b, (2, 2)).mT.reshape((4,))
    vtl.sum(s * vtl.asarray(np.arange(4, dtype=np.float32))).backward()
    with vtl.no_grad():
        a.grad[...] = 5.0
    assert_close(b.grad, np.array([0.0, 2.0, 1.0, 3.0], np.float32))
    # one fresh gradient reaching two leaves as reshaped views of all of it: one is copied
    a, b = leaf(np.ones((2, 2), np.float32)), leaf(np.ones((4, 1), np.float32))
    vtl.sum((vtl.reshape(a, (4,)) + vtl.reshape(b, (4,))) * vtl.asarray(
        np.arange(4, dtype=np.float32))).backward()
    with vtl.no_grad():
        a.grad[...] = 5.0
    assert_close(b.grad, np.arange(4, dtype=np.float32).reshape(4, 1))
    # disjoint pieces of one fresh gradient may stay pieces of it, each a leaf's own
    p, q = leaf(np.ones(3, np.float32)), leaf(np.ones(2, np.float32))
    vtl.sum(vtl.concat([p, q]) * vtl.asarray(np.arange(5, dtype=np.float32))).backward()
    with vtl.no_grad():
        p.grad[...] = -1.0
    assert_close(q.grad, np.array([3.0, 4.0], np.float32))
    assert_close(p.grad, -np.ones(3, np.float32))


def test_known_all_false():
    from vtl.backends import get
    from vtl.backends._base import Backend

    np_backend = get("numpy")
    assert np_backend.known_all_false(np.zeros(3, bool))
    assert not np_backend.known_all_false(np.array([False, True]))
    assert not Backend.known_all_false(np_backend, np.zeros(3, bool))  # base: "not known"


@pytest.mark.parametrize("reduce", ["sum", "mean", "sum-axis"])
def test_large_reduction_gradients_spread_as_views(backend, reduce):
    """The gradient of a large reduction of an intermediate result may travel as a read-only
    broadcast view (no filled copy): the gradients equal the small-array path's, and a
    leaf's ``.grad`` is always its own writable array."""
    rng = np.random.default_rng(4)
    xs = rng.standard_normal((300, 400))
    x = vtl.asarray(xs, requires_grad=True)
    w = vtl.asarray(rng.standard_normal(400), requires_grad=True)
    y = vtl.tanh(x * w)  # an intermediate of 120000 elements
    y.retain_grad()
    out = {"sum": lambda t: vtl.sum(t), "mean": lambda t: vtl.mean(t),
           "sum-axis": lambda t: vtl.sum(vtl.sum(t, axis=0) ** 2)}[reduce](y)
    out.backward()
    t = np.tanh(xs * w.numpy())
    up = {"sum": np.ones_like(t), "mean": np.full_like(t, 1 / t.size),
          "sum-axis": np.broadcast_to(2 * t.sum(axis=0), t.shape)}[reduce]
    np.testing.assert_allclose(y.grad.numpy(), up, rtol=1e-12)
    if backend == "numpy":  # NumPy gives read-only broadcast views
        assert 0 in y.grad._data.strides and not y.grad._data.flags.writeable
    dz = up * (1 - t ** 2)
    np.testing.assert_allclose(x.grad.numpy(), dz * w.numpy(), rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(w.grad.numpy(), (dz * xs).sum(axis=0), rtol=1e-7, atol=1e-9)
    for leaf_t in (x, w):
        g = leaf_t.grad
        g += 1.0  # its own memory: in-place updates work and touch nothing else
    vtl.sum(x * 0.0).backward()  # a leaf's gradient from a reduction: a writable array
    x.grad += 1.0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numpy_column_sums(dtype):
    """The NumPy backend sums the rows of a 2-D float array (a bias gradient) with one
    matrix-vector product: equal to np.sum within rounding, for any layout, and other
    reductions keep np.add.reduce."""
    from vtl.backends import get

    b = get("numpy")
    rng = np.random.default_rng(5)
    a = rng.standard_normal((37, 6)).astype(dtype)
    tol = 1e-5 if dtype == "float32" else 1e-12
    for arr in (a, np.asfortranarray(a), a[::2], a.T.copy().T, a[:, ::3],
                np.broadcast_to(a[0], (9, 6)), a[:1], np.zeros((0, 6), dtype)):
        got = b.sum_axes(arr, 0)
        assert got.dtype == arr.dtype and got.shape == arr.shape[1:]
        np.testing.assert_allclose(got, arr.sum(axis=0), rtol=tol, atol=tol)
    got = b.sum_axes(a, 0, True)
    assert got.shape == (1, 6)
    ints = np.arange(12, dtype=np.int32).reshape(4, 3)
    np.testing.assert_array_equal(b.sum_axes(ints, 0), ints.sum(axis=0))
    nonfinite = np.array([[np.inf, 1.0], [-np.inf, np.nan]], dtype)
    with np.errstate(invalid="ignore"):  # inf - inf, as np.sum
        np.testing.assert_array_equal(b.sum_axes(nonfinite, 0), [np.nan, np.nan])


def _bad_rule_graph():
    x = leaf([1.0, 2.0, 3.0])
    y = x * 2.0
    y._grad_fn.raw = lambda vjp, gd: (gd[:2], None)  # a broken raw rule: wrong shape
    return x, vtl.sum(y)


def test_raw_rule_results_checked_when_asked(monkeypatch):
    """With ``graph.check_raw_rules`` (on in this test suite) a raw rule's gradient of the
    wrong shape is an internal error naming the node; a training step leaves the check
    off, and then gives the same gradients as with it."""
    from vtl.autograd import graph

    monkeypatch.setattr(graph, "check_raw_rules", True)
    x, loss = _bad_rule_graph()
    with pytest.raises(RuntimeError, match="MultiplyBackward produced a gradient of shape"):
        loss.backward()
    rng = np.random.default_rng(6)
    ps = [rng.standard_normal(s).astype(np.float32) for s in [(5, 4), (4,), (4, 3), (3,)]]
    xs = rng.standard_normal((6, 5)).astype(np.float32)
    ys = rng.standard_normal((6, 3)).astype(np.float32)
    grads = []
    for check in (True, False):
        monkeypatch.setattr(graph, "check_raw_rules", check)
        params = [leaf(p) for p in ps]
        _mlp(params, vtl.asarray(xs), vtl.asarray(ys)).backward()
        grads.append(_grads(params))
    for a, b in zip(*grads, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("on_leaf", [True, False])
def test_hook_may_not_change_a_gradients_shape_or_type(backend, on_leaf):
    x = leaf([1.0, 2.0, 3.0])
    t = x if on_leaf else x * 1.0
    t.register_hook(lambda g: g[:2])
    with pytest.raises(ValueError, match="changed the gradient from shape"):
        vtl.sum(t * t).backward()
    x = leaf([1.0, 2.0, 3.0])
    t = x if on_leaf else x * 1.0
    t.register_hook(lambda g: g.numpy())
    with pytest.raises(TypeError, match="expected a vtl.Tensor or None"):
        vtl.sum(t * t).backward()
    x = leaf([1.0, 2.0, 3.0])
    t = x if on_leaf else x * 1.0
    t.register_hook(lambda g: vtl.astype(g, vtl.float64))
    with pytest.raises(ValueError, match="dtype float64"):
        vtl.sum(t * t).backward()


def _scalar_losses(a, b):
    """Scalar losses that start backward in different ways: from a node that passes the
    gradient 1 straight to two leaves, through a hook on the loss, and from a retained
    loss gradient."""
    yield "add", a[0] + b  # the seed reaches both leaves unchanged
    yield "sum", vtl.sum(a * b)
    loss = vtl.mean(a * a) * b
    loss.register_hook(lambda g: g * 3.0)
    yield "hook", loss
    loss = vtl.sum(a) * b
    loss.retain_grad()
    yield "retain", loss


@pytest.mark.parametrize("case", ["add", "sum", "hook", "retain"])
def test_scalar_loss_backward_equals_explicit_gradient(backend, case):
    """``loss.backward()`` of a real scalar (its own start, without the general seed)
    gives what ``loss.backward(ones)`` gives: the leaves' gradients, the loss's hooks and
    retained gradient, and a ``.grad`` of its own for every leaf."""
    results = []
    for explicit in (False, True):
        a, b = leaf([0.5, -1.5, 2.0]), leaf(1.25)
        loss = dict(_scalar_losses(a, b))[case]
        loss.backward(vtl.ones_like(loss) if explicit else None)
        assert a.grad._data is not b.grad._data
        results.append(_grads([a, b]) + ([loss.grad.numpy()] if case == "retain" else []))
    for got, want in zip(*results, strict=True):
        np.testing.assert_array_equal(got, want)
    c, d = leaf(0.5), leaf(1.25)
    (c + d).backward()  # the gradient 1 reaches both leaves as the same array
    with vtl.no_grad():
        c.grad += 1.0  # ... yet each .grad has storage of its own
    assert_close(c.grad, np.float32(2.0))
    assert_close(d.grad, np.float32(1.0))


def test_scalar_loss_backward_frees_or_retains_the_graph(backend):
    a = leaf([1.0, 2.0])
    loss = vtl.sum(a * a)
    loss.backward(retain_graph=True)
    loss.backward()  # accumulates
    assert_close(a.grad, np.array([4.0, 8.0], np.float32))
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()
    assert vtl.is_grad_enabled()  # restored after the error
    vtl.sum(a * a).backward()
    assert vtl.is_grad_enabled() and not a.grad.requires_grad


@pytest.mark.parametrize("op", ["add", "subtract"])
@pytest.mark.parametrize("bias_shape", [(4,), (1, 4), (3, 1), (3, 4)])
@pytest.mark.parametrize("bias_dtype", ["float32", "float64"])
def test_broadcast_operand_gradients(backend, op, bias_shape, bias_dtype):
    """The gradient of the broadcast operand of ``x + b`` / ``x - b`` (a bias added to every
    row, and other broadcasts) is the output gradient summed back to ``b``'s shape and
    cast to its dtype."""
    if bias_dtype == "float64":
        skip_unless_dtype(backend, "float64")
    rng = np.random.default_rng(6)
    xv = rng.standard_normal((3, 4)).astype(np.float32)
    bv = rng.standard_normal(bias_shape).astype(bias_dtype)
    gv = rng.standard_normal((3, 4))
    x, b = leaf(xv), leaf(bv, bias_dtype)
    out = (vtl.add if op == "add" else vtl.subtract)(x, b)
    vtl.sum(out * vtl.asarray(gv.astype(bias_dtype))).backward()
    want = gv if op == "add" else -gv
    if len(bias_shape) == 1:
        want = want.sum(axis=0)
    else:
        want = want.sum(axis=tuple(i for i, s in enumerate(bias_shape) if s == 1), keepdims=True)
    assert b.grad.dtype == b.dtype and b.grad.shape == b.shape
    assert x.grad.dtype == x.dtype
    np.testing.assert_allclose(b.grad.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), gv, rtol=1e-5, atol=1e-6)
