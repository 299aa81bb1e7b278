"""Test helpers: NumPy oracles, tolerances per dtype and finite-difference
gradient checks."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

import vtl


def supported_dtypes(backend: str, kind: Any = None) -> dict[str, Any]:
    """Dtypes the backend's default device supports (name -> dtype), by ``kind``."""
    return vtl.__array_namespace_info__().dtypes(device=vtl.Device(backend, 0), kind=kind)


def skip_unless_dtype(backend: str, dtype: Any) -> None:
    """Skip the calling test when ``backend`` lacks ``dtype``."""
    import pytest

    name = np.dtype(dtype).name
    if name not in supported_dtypes(backend):
        pytest.skip(f"{backend} does not support {name}")


def to_numpy(x: Any) -> np.ndarray:
    """Host copy of a Tensor (or pass-through for NumPy data)."""
    if isinstance(x, vtl.Tensor):
        return x.numpy()
    return np.asarray(x)


def tol(dtype: Any) -> dict[str, float]:
    """Default comparison tolerances for a dtype."""
    dt = np.dtype(dtype)
    if dt in (np.float32, np.complex64):
        return {"rtol": 2e-5, "atol": 1e-6}
    if dt in (np.float64, np.complex128):
        return {"rtol": 1e-10, "atol": 1e-12}
    return {"rtol": 0, "atol": 0}


def assert_close(actual: Any, expected: Any, *, rtol: float | None = None,
                 atol: float | None = None, check_dtype: bool = True) -> None:
    """Compare a Tensor with a NumPy oracle: values (nan/inf/-0.0 aware), shape, dtype."""
    a = to_numpy(actual)
    e = np.asarray(expected)
    assert a.shape == e.shape, f"shape {a.shape} != expected {e.shape}"
    if check_dtype:
        assert a.dtype == e.dtype, f"dtype {a.dtype} != expected {e.dtype}"
    t = tol(a.dtype)
    np.testing.assert_allclose(
        a, e, rtol=t["rtol"] if rtol is None else rtol, atol=t["atol"] if atol is None else atol,
        equal_nan=True,
    )


def numeric_grad(f: Callable[..., Any], inputs: Sequence[np.ndarray], v: np.ndarray,
                 eps: float = 1e-6) -> list[np.ndarray]:
    """Central differences of ``sum(f(*inputs) * v)`` with respect to each input."""
    grads = []
    for i, x in enumerate(inputs):
        g = np.zeros_like(x)
        flat = x.reshape(-1)
        gflat = g.reshape(-1)
        for j in range(flat.size):
            orig = flat[j]
            flat[j] = orig + eps
            plus = np.sum(to_numpy(f(*_wrap(inputs))) * v)
            flat[j] = orig - eps
            minus = np.sum(to_numpy(f(*_wrap(inputs))) * v)
            flat[j] = orig
            gflat[j] = (plus - minus) / (2 * eps)
        grads.append(g)
        del i
    return grads


def _wrap(inputs: Sequence[np.ndarray]) -> list[vtl.Tensor]:
    return [vtl.asarray(x.copy(), backend="numpy") for x in inputs]


def check_grad(f: Callable[..., Any], *inputs: Any, eps: float = 1e-6, rtol: float = 1e-5,
               atol: float = 1e-6, seed: int = 0) -> None:
    """Finite-difference check (float64, numpy backend) of every input's gradient.

    ``f`` takes Tensors and returns a Tensor; ``inputs`` are NumPy arrays (or
    anything ``np.asarray`` accepts) cast to float64.
    """
    rng = np.random.default_rng(seed)
    xs = [np.array(x, dtype=np.float64, order="C") for x in inputs]
    out = f(*_wrap(xs))
    v = rng.standard_normal(to_numpy(out).shape)
    ts = [vtl.asarray(x.copy(), backend="numpy", requires_grad=True) for x in xs]
    y = f(*ts)
    analytic = vtl.autograd.grad(vtl.sum(y * vtl.asarray(v, backend="numpy")), ts,
                                 allow_unused=True)
    numeric = numeric_grad(f, xs, v, eps)
    for k, (a, n) in enumerate(zip(analytic, numeric, strict=True)):
        a = np.zeros_like(n) if a is None else to_numpy(a)
        np.testing.assert_allclose(a, n, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {k} disagrees with "
                                   "finite differences")


def check_grad_matches_numpy(f: Callable[..., Any], backend: str, *inputs: Any,
                             dtype: Any = np.float32, rtol: float = 1e-4,
                             atol: float = 1e-5, seed: int = 0) -> None:
    """The gradients on ``backend`` equal those on the numpy backend."""
    rng = np.random.default_rng(seed)
    xs = [np.array(x, dtype=dtype) for x in inputs]
    results = []
    for b in ("numpy", backend):
        ts = [vtl.asarray(x, backend=b, requires_grad=True) for x in xs]
        y = f(*ts)
        if not results:
            v = rng.standard_normal(y.shape).astype(y.dtype)
        gs = vtl.autograd.grad(vtl.sum(y * vtl.asarray(v, backend=b)), ts, allow_unused=True)
        results.append([None if g is None else to_numpy(g) for g in gs])
    for a, b_ in zip(*results, strict=True):
        if a is None or b_ is None:
            assert a is None and b_ is None
            continue
        np.testing.assert_allclose(b_, a, rtol=rtol, atol=atol)


# -- hypothesis strategies shared by the namespace tests ---------------------------------
MIXED_DTYPES = ["float32", "float64", "int32", "int64", "uint8", "bool", "complex64"]


def draw_dtype(data: Any, backend: str, names: Sequence[str] = MIXED_DTYPES) -> np.dtype:
    """Draw one of ``names`` that ``backend`` supports."""
    from hypothesis import strategies as st

    usable = [d for d in names if d in supported_dtypes(backend)]
    return np.dtype(data.draw(st.sampled_from(usable), label="dtype"))


def draw_array(data: Any, dtype: Any, shape: tuple[int, ...] | None = None, min_dims: int = 0,
               max_dims: int = 4, min_side: int = 0) -> np.ndarray:
    """Draw a NumPy array of ``dtype`` (finite, moderate values for floats)."""
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp

    dtype = np.dtype(dtype)
    if shape is None:
        shape = data.draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims,
                                           min_side=min_side, max_side=4), label="shape")
    if dtype.kind == "f":
        elems = st.floats(-100, 100, width=32)
    elif dtype.kind == "c":
        elems = st.complex_numbers(max_magnitude=100, width=64)
    else:
        elems = None
    return data.draw(hnp.arrays(dtype, shape, elements=elems), label="x")


def small_mlp(seed: int = 0) -> Any:
    """A 3-4-2 MLP with weights drawn from ``seed`` (for checkpoint and state tests)."""
    from vtl import nn

    vtl.random.seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def train_steps(model: Any, opt: Any, sched: Any = None, steps: int = 3) -> None:
    """``steps`` optimizer (and scheduler) steps of ``model`` on a fixed batch of 5 rows."""
    x = vtl.asarray(np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3))
    for _ in range(steps):
        loss = vtl.sum(model(x) ** 2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()


@contextlib.contextmanager
def use_kernel(name: str, kern: Any, backend: str = "numpy") -> Iterator[None]:
    """Register ``kern`` as ``backend``'s kernel ``name`` for the ``with`` block (a host build
    of another backend's kernel, run behind the real glue; ``None``: no such kernel, so the
    portable path runs), then restore it."""
    be = vtl.backends.get(backend)
    be._ensure()  # the backend registers its own kernels when it loads: load it first
    saved = be._kernels.get(name)
    if kern is None:
        be._kernels.pop(name, None)
    else:
        be._kernels[name] = kern
    try:
        yield
    finally:
        if saved is None:
            be._kernels.pop(name, None)
        else:
            be._kernels[name] = saved


def assert_replays_draw_like_eager(compiled: list, eager: list) -> None:
    """``compiled`` and ``eager`` (lists of per-step lists of arrays, the first each step's
    output, then the generator's state after the steps) agree bit for bit, and the steps'
    outputs differ from one another (each replay drew fresh random bits)."""
    assert compiled[-1] == eager[-1]
    for got, ref in zip(compiled[:-1], eager[:-1], strict=True):
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_array_equal(a, b)
    outs = [r[0] for r in compiled[:-1]]
    assert all(not np.array_equal(a, b) for a, b in zip(outs[:-1], outs[1:], strict=True))
