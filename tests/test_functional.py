"""Function transforms: vtl.grad, value_and_grad, vjp, jvp, jacobian, hessian
(against closed forms and finite differences), nesting, and their errors."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, skip_unless_dtype

import vtl

S = vtl.sum


@pytest.fixture
def f64(backend):
    skip_unless_dtype(backend, "float64")
    return backend


def t64(values, requires_grad=False):
    return vtl.asarray(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


def cube_exp(x):
    """f(x) = sum(x^3 + exp(x) * x)."""
    return S(x * x * x + vtl.exp(x) * x)


def d_cube_exp(xn):
    return 3 * xn**2 + np.exp(xn) * (1 + xn)


def dd_cube_exp(xn):
    return 6 * xn + np.exp(xn) * (2 + xn)


def fd_jacobian(f, xn, eps=1e-6):
    """Central-difference Jacobian of a NumPy-in, NumPy-out function."""
    y0 = np.asarray(f(xn))
    jac = np.zeros(y0.shape + xn.shape)
    for idx in np.ndindex(*xn.shape):
        xp, xm = xn.copy(), xn.copy()
        xp[idx] += eps
        xm[idx] -= eps
        jac[(...,) + idx] = (np.asarray(f(xp)) - np.asarray(f(xm))) / (2 * eps)
    return jac


# ----------------------------------------------------------------------- grad
def test_grad_closed_form(f64):
    xn = np.array([0.5, -1.0, 2.0])
    x = t64(xn)
    g = vtl.grad(cube_exp)(x)
    assert_close(g, d_cube_exp(xn))
    assert not g.requires_grad and g.grad_fn is None
    assert not x.requires_grad and x.grad is None  # the argument is left alone


def test_grad_float32_and_shapes(backend):
    for shape in [(), (1,), (2, 3), (0,)]:
        xn = np.linspace(-1, 1, int(np.prod(shape))).reshape(shape).astype(np.float32)
        g = vtl.grad(lambda x: S(x * x))(vtl.asarray(xn))
        assert_close(g, 2 * xn)


def test_grad_argnums_int_and_tuple(f64):
    an, bn = np.array([1.0, 2.0]), np.array([3.0, -1.0])
    a, b = t64(an), t64(bn)

    def f(a, b, scale=1.0):
        return S(a * a * b) * scale

    assert_close(vtl.grad(f)(a, b), 2 * an * bn)
    assert_close(vtl.grad(f, argnums=1)(a, b), an**2)
    assert_close(vtl.grad(f, argnums=-1)(a, b), an**2)
    ga, gb = vtl.grad(f, argnums=(0, 1))(a, b, scale=2.0)
    assert_close(ga, 4 * an * bn)
    assert_close(gb, 2 * an**2)
    (gb_only,) = vtl.grad(f, argnums=(1,))(a, b)
    assert_close(gb_only, an**2)


def test_grad_has_aux(f64):
    xn = np.array([1.0, 2.0])

    def f(x):
        y = x * x
        return S(y), {"y": y, "n": 3}

    g, aux = vtl.grad(f, has_aux=True)(t64(xn))
    assert_close(g, 2 * xn)
    assert aux["n"] == 3
    assert_close(aux["y"], xn**2)
    assert aux["y"].grad_fn is None  # aux comes back detached
    (value, aux2), g2 = vtl.value_and_grad(f, has_aux=True)(t64(xn))
    assert_close(value, np.float64(5.0))
    assert_close(g2, 2 * xn)
    with pytest.raises(TypeError, match="has_aux"):
        vtl.grad(lambda x: S(x), has_aux=True)(t64(xn))


def test_value_and_grad(f64):
    xn = np.array([0.1, 0.7])
    v, g = vtl.value_and_grad(cube_exp)(t64(xn))
    assert_close(v, np.sum(xn**3 + np.exp(xn) * xn))
    assert_close(g, d_cube_exp(xn))
    assert v.grad_fn is None
    v, (ga, gb) = vtl.value_and_grad(lambda a, b: S(a * b), argnums=(0, 1))(t64(xn), t64([2, 3]))
    assert_close(ga, np.array([2.0, 3.0]))
    assert_close(gb, xn)


def test_grad_of_function_not_depending_on_input(backend):
    x = vtl.asarray([1.0, 2.0])
    c = vtl.asarray(3.0)
    assert_close(vtl.grad(lambda x: c * 2)(x), np.zeros(2, np.float32))
    assert_close(vtl.grad(lambda x, y: S(y * y), argnums=0)(x, x), np.zeros(2, np.float32))
    # the output depends on a constant only through a non-differentiable path
    g = vtl.grad(lambda x: S(vtl.astype(vtl.astype(x, vtl.int32), vtl.float32)))(x)
    assert_close(g, np.zeros(2, np.float32))


def test_grad_does_not_touch_requires_grad_arguments(backend):
    w = vtl.asarray([1.0, 2.0], requires_grad=True)
    g = vtl.grad(lambda w: S(w * w))(w)
    assert_close(g, np.array([2.0, 4.0], np.float32))
    assert w.grad is None


def test_grad_under_no_grad(backend):
    w = vtl.asarray([1.0, 2.0], requires_grad=True)
    with vtl.no_grad():
        g = vtl.grad(lambda w: S(w * w * w))(w)
    assert_close(g, np.array([3.0, 12.0], np.float32))
    assert g.grad_fn is None


def test_grad_errors(backend):
    x = vtl.asarray([1.0, 2.0])
    with pytest.raises(ValueError, match=r"single-element.*\(2,\)"):
        vtl.grad(lambda x: x * 2)(x)
    with pytest.raises(TypeError, match="floating-point.*int64"):
        vtl.grad(lambda x: S(x))(vtl.asarray([1, 2]))
    with pytest.raises(TypeError, match="vtl Tensors.*float"):  # a list's leaves are checked
        vtl.grad(lambda x: S(x))([1.0, 2.0])
    with pytest.raises(TypeError, match="vtl Tensors.*str"):
        vtl.grad(lambda x: S(x))("x")
    with pytest.raises(TypeError, match="must return a vtl Tensor.*float"):
        vtl.grad(lambda x: 1.0)(x)
    with pytest.raises(TypeError, match="real floating-point.*int64"):
        vtl.grad(lambda x: S(vtl.astype(x, vtl.int64)))(x)
    with pytest.raises(ValueError, match="out of range"):
        vtl.grad(lambda x: S(x), argnums=1)(x)
    with pytest.raises(ValueError, match="repeated"):
        vtl.grad(lambda x, y: S(x * y), argnums=(0, 0))(x, x)
    with pytest.raises(TypeError, match="argnums"):
        vtl.grad(lambda x: S(x), argnums="0")(x)


def test_grad_complex_output_refused(backend):
    skip_unless_dtype(backend, "complex64")
    z = vtl.asarray(np.array([1 + 1j], np.complex64))
    with pytest.raises(TypeError, match="real"):
        vtl.grad(lambda z: S(z * z))(z)


# ---------------------------------------------------------------------- nesting
def test_grad_of_grad(f64):
    xn = np.array([0.3])
    f = lambda x: S(x * x * x + vtl.exp(x) * x)  # noqa: E731
    d2 = vtl.grad(lambda x: S(vtl.grad(f)(x)))(t64(xn))
    assert_close(d2, dd_cube_exp(xn))
    # third derivative by triple nesting: 6 + e^x (3 + x)
    d3 = vtl.grad(lambda x: S(vtl.grad(lambda y: S(vtl.grad(f)(y)))(x)))(t64(xn))
    assert_close(d3, 6 + np.exp(xn) * (3 + xn))


def test_nested_grad_through_closure_mixed_partial(f64):
    # d/dx sum(grad_y sum(x^2 y^2)) = d/dx sum(2 x^2 y) = 4 x y
    xn, yn = np.array([1.0, 3.0]), np.array([2.0, 5.0])
    y0 = t64(yn)

    def inner(x):
        return vtl.grad(lambda y: S(x * x * y * y))(y0)

    g = vtl.grad(lambda x: S(inner(x)))(t64(xn))
    assert_close(g, 4 * xn * yn)
    assert g.grad_fn is None


def test_grad_result_differentiable_for_outer_tape(f64):
    # gradient penalty: w requires grad and is closed over; the transform's result must
    # stay connected to w so that backward() reaches it
    xn, wn = np.array([1.0, 2.0]), np.array([0.5, -1.5])
    w = t64(wn, requires_grad=True)
    g = vtl.grad(lambda x: S(x * x * w))(t64(xn))  # 2 x w
    assert g.requires_grad
    S(g * g).backward()  # d/dw sum(4 x^2 w^2) = 8 x^2 w
    assert_close(w.grad, 8 * xn**2 * wn)


def test_grad_argument_requiring_grad_keeps_graph(f64):
    wn = np.array([0.5, 2.0])
    w = t64(wn, requires_grad=True)
    g = vtl.grad(lambda w: S(w * w * w))(w)  # 3 w^2
    assert_close(g, 3 * wn**2)
    S(g).backward()
    assert_close(w.grad, 6 * wn)


# ---------------------------------------------------------------------- vjp / jvp
def test_vjp(f64):
    xn, yn = np.array([0.5, 1.5]), np.array([2.0, -1.0])

    def f(x, y):
        return vtl.exp(x) * y

    out, fn = vtl.vjp(f, t64(xn), t64(yn))
    assert_close(out, np.exp(xn) * yn)
    assert out.grad_fn is None
    v = np.array([1.0, 3.0])
    gx, gy = fn(t64(v))
    assert_close(gx, v * np.exp(xn) * yn)
    assert_close(gy, v * np.exp(xn))
    gx2, _ = fn(t64(2 * v))  # vjp_fn can be called again
    assert_close(gx2, 2 * v * np.exp(xn) * yn)
    with pytest.raises(ValueError, match="shape"):
        fn(t64([1.0, 2.0, 3.0]))


def test_vjp_tuple_outputs_and_aux(f64):
    xn = np.array([1.0, 2.0])
    out, fn, aux = vtl.vjp(lambda x: ((x * x, S(x)), "aux"), t64(xn), has_aux=True)
    assert aux == "aux"
    assert isinstance(out, tuple) and len(out) == 2
    (g,) = fn((t64([1.0, 1.0]), t64(2.0)))
    assert_close(g, 2 * xn + 2)
    with pytest.raises(ValueError, match="2 cotangent"):
        fn(t64([1.0, 1.0]))


def test_vjp_of_constant_function(backend):
    x = vtl.asarray([1.0, 2.0])
    out, fn = vtl.vjp(lambda x: vtl.ones((3,)), x)
    (g,) = fn(vtl.ones((3,)))
    assert_close(g, np.zeros(2, np.float32))


def test_jvp(f64):
    xn, tn = np.array([0.5, 1.5, -1.0]), np.array([1.0, -2.0, 0.5])

    def f(x):
        return vtl.exp(x) * x

    out, tan = vtl.jvp(f, (t64(xn),), (t64(tn),))
    assert_close(out, np.exp(xn) * xn)
    assert_close(tan, np.exp(xn) * (1 + xn) * tn)
    # a non-elementwise function: J t against finite differences
    m = np.array([[1.0, 2.0, 0.0], [0.5, -1.0, 3.0]])
    g = lambda x: vtl.matmul(t64(m), vtl.exp(x))  # noqa: E731
    _, tan = vtl.jvp(g, [t64(xn)], [t64(tn)])
    jac = fd_jacobian(lambda a: m @ np.exp(a), xn)
    assert_close(tan, jac @ tn, rtol=1e-6, atol=1e-8)


def test_jvp_two_primals_and_tuple_output(f64):
    an, bn = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    ta, tb = np.array([0.1, 0.2]), np.array([-1.0, 1.0])
    (p, s), (dp, ds) = vtl.jvp(lambda a, b: (a * b, S(a)), (t64(an), t64(bn)),
                               (t64(ta), t64(tb)))
    assert_close(p, an * bn)
    assert_close(dp, ta * bn + an * tb)
    assert_close(ds, np.float64(ta.sum()))


def test_jvp_constant_and_errors(backend):
    x = vtl.asarray([1.0, 2.0])
    out, tan = vtl.jvp(lambda x: vtl.ones((2,)) * 3, (x,), (vtl.ones((2,)),))
    assert_close(tan, np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="tangent shape"):
        vtl.jvp(lambda x: x, (x,), (vtl.ones((3,)),))
    with pytest.raises(ValueError, match="1 primals but 2 tangents"):
        vtl.jvp(lambda x: x, (x,), (x, x))
    with pytest.raises(TypeError, match="dtype"):
        vtl.jvp(lambda x: x, (x,), (vtl.asarray([1, 2]),))


def test_jvp_nested_in_grad(f64):
    # d/dx sum(J_f(x) t) with f = x^3 elementwise: sum(3 x^2 t) -> 6 x t
    xn, tn = np.array([1.0, -2.0]), np.array([0.5, 2.0])
    g = vtl.grad(lambda x: S(vtl.jvp(lambda y: y * y * y, (x,), (t64(tn),))[1]))(t64(xn))
    assert_close(g, 6 * xn * tn)


# ------------------------------------------------------------ jacobian / hessian
def test_jacobian_shape_and_values(f64):
    rng = np.random.default_rng(0)
    xn = rng.standard_normal((2, 3))
    m = rng.standard_normal((4, 3))

    def f(x):  # (2, 3) -> (2, 4)
        return vtl.matmul(vtl.exp(x) * x, vtl.matrix_transpose(t64(m)))

    jac = vtl.jacobian(f)(t64(xn))
    assert jac.shape == (2, 4, 2, 3)
    expected = fd_jacobian(lambda a: (np.exp(a) * a) @ m.T, xn)
    assert_close(jac, expected, rtol=1e-6, atol=1e-8)
    assert jac.grad_fn is None


def test_jacobian_scalar_and_elementwise(backend):
    xn = np.array([1.0, 2.0, 3.0], np.float32)
    jac = vtl.jacobian(lambda x: x * x)(vtl.asarray(xn))
    assert_close(jac, np.diag(2 * xn))
    jac = vtl.jacobian(lambda x: S(x * x))(vtl.asarray(xn))
    assert_close(jac, 2 * xn)
    jac = vtl.jacobian(lambda x: x[1] * 2)(vtl.asarray(xn))
    assert_close(jac, np.array([0.0, 2.0, 0.0], np.float32))


def test_jacobian_argnums_tuple_outputs_and_aux(f64):
    an, bn = np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0])

    def f(a, b):
        return (vtl.reshape(a, (2, 1)) * b, S(a)), "aux"

    (jab, js), aux = vtl.jacobian(f, argnums=(0, 1), has_aux=True)(t64(an), t64(bn))
    assert aux == "aux"
    ja, jb = jab
    assert ja.shape == (2, 3, 2) and jb.shape == (2, 3, 3)
    eye2, eye3 = np.eye(2), np.eye(3)
    assert_close(ja, np.einsum("ik,j->ijk", eye2, bn))
    assert_close(jb, np.einsum("i,jk->ijk", an, eye3))
    assert_close(js[0], np.ones(2))
    assert_close(js[1], np.zeros(3))


def test_jacobian_zero_size_and_constant(backend):
    x = vtl.asarray([1.0, 2.0])
    jac = vtl.jacobian(lambda x: x[0:0] * 2)(x)
    assert jac.shape == (0, 2)
    jac = vtl.jacobian(lambda x: vtl.ones((3,)))(x)
    assert_close(jac, np.zeros((3, 2), np.float32))
    jac = vtl.jacobian(lambda x: S(x))(vtl.zeros((0,)))
    assert jac.shape == (0,)
    # an integer-valued output has a zero Jacobian
    jac = vtl.jacobian(lambda x: vtl.astype(x, vtl.int32))(x)
    assert_close(jac, np.zeros((2, 2), np.float32))
    with pytest.raises(TypeError, match="must return a vtl Tensor"):
        vtl.jacobian(lambda x: [1.0])(x)


def test_hessian_closed_form_and_fd(f64):
    xn = np.array([0.2, -0.4, 1.1])
    h = vtl.hessian(cube_exp)(t64(xn))
    assert_close(h, np.diag(dd_cube_exp(xn)))
    # a non-separable function: f(x) = sum(exp(A x)); H = A^T diag(exp(A x)) A
    a = np.array([[1.0, 2.0, -1.0], [0.5, 0.0, 1.0]])

    def f(x):
        return S(vtl.exp(vtl.matmul(t64(a), x)))

    h = vtl.hessian(f)(t64(xn))
    assert h.shape == (3, 3)
    assert_close(h, a.T @ np.diag(np.exp(a @ xn)) @ a, rtol=1e-10)
    grad_np = lambda x: a.T @ np.exp(a @ x)  # noqa: E731
    assert_close(h, fd_jacobian(grad_np, xn), rtol=1e-6, atol=1e-8)
    assert_close(h, h.numpy().T)


def test_hessian_matrix_argument_and_argnums(f64):
    # f(X) = sum(X * X * c): H is diagonal over the flattened entries (2 c)
    cn = np.array([[1.0, 2.0], [3.0, 4.0]])
    h = vtl.hessian(lambda x: S(x * x * t64(cn)))(t64(np.ones((2, 2))))
    assert h.shape == (2, 2, 2, 2)
    assert_close(vtl.reshape(h, (4, 4)), np.diag(2 * cn.reshape(-1)))
    # f(a, b) = sum(a^2 b): H_aa = diag(2b), H_ab = diag(2a), H_bb = 0
    an, bn = np.array([1.0, 2.0]), np.array([3.0, 5.0])
    (haa, hab), (hba, hbb) = vtl.hessian(lambda a, b: S(a * a * b), argnums=(0, 1))(
        t64(an), t64(bn))
    assert_close(haa, np.diag(2 * bn))
    assert_close(hab, np.diag(2 * an))
    assert_close(hba, np.diag(2 * an))
    assert_close(hbb, np.zeros((2, 2)))


def test_grad_of_jacobian_is_differentiable(f64):
    # d/dx sum(J(x)) for f = x^2 (elementwise): J = diag(2x), sum = 2 sum(x) -> 2
    xn = np.array([1.0, 4.0])
    g = vtl.grad(lambda x: S(vtl.jacobian(lambda y: y * y)(x)))(t64(xn))
    assert_close(g, np.full(2, 2.0))


def test_transforms_leave_no_graph_on_inputs(backend):
    x = vtl.asarray([1.0, 2.0])
    for fn in (vtl.grad(lambda x: S(x * x)), vtl.jacobian(lambda x: x * x),
               vtl.hessian(lambda x: S(x * x * x))):
        r = fn(x)
        assert r.grad_fn is None and not r.requires_grad
    assert not x.requires_grad and x.grad is None and x.grad_fn is None
