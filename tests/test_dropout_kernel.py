"""Fused dropout (``kernel("dropout")``, ``vtl/backends/cupy/random.py``) against the portable
path it replaces.

* On the host (given a C++20 compiler): the CUDA source is compiled with the emulation of
  the CUDA built-ins of ``test_cupy_nn_kernels`` and driven through the real
  ``CupyDropout`` wrapper by a stand-in for CuPy. Registered as the numpy backend's
  ``dropout`` kernel, ``F.dropout`` gives bit for bit the portable result and gradient from
  the same generator state, leaves the generator where the portable path leaves it, and
  runs as one graph node (second-order gradients too); the per-step words of a capture
  (read from memory) give the same bits.
* On a GPU (the cupy backend): the kernel against the portable path, and under
  ``vtl.compile``.
"""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest
from helpers import to_numpy, use_kernel
from test_cupy_nn_kernels import _SHIM, compile_host

import vtl
from vtl.backends._base import DynamicScalars
from vtl.backends._common.dropout import keep_threshold
from vtl.backends.cupy import random as R
from vtl.nn import functional as F

_EXTRA = r"""
static inline unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a * b) >> 32);
}
"""

_WORDS = ("unsigned b0, unsigned b1, unsigned b2, unsigned b3, unsigned key0, unsigned key1",
          "b0, b1, b2, b3, key0, key1")
_MEM = ("const unsigned* words", "words")


def _launcher(words_in_memory: bool) -> str:
    params, args = _MEM if words_in_memory else _WORDS
    return (f'extern "C" void launch(unsigned gx, unsigned bx, const T* x, T* y, long long n, '
            f"{params}, unsigned thr, A scale) {{ vtl_launch(gx, 1, bx, 1, [=] {{ "
            f"vtl_dropout(x, y, n, {args}, thr, scale); }}); }}\n")


class _HostFunction:
    def __init__(self, fn, dt, log):
        self.fn, self.dt, self.log = fn, dt, log

    def __call__(self, grid, block, args):
        (gx,), (bx,) = grid, block
        assert 1 <= gx <= 65536 and bx == 256
        conv = []
        for a in args:
            if isinstance(a, np.ndarray):
                assert a.flags.c_contiguous
                conv.append(ctypes.c_void_p(a.ctypes.data))
            elif type(a) is np.int64:
                conv.append(ctypes.c_longlong(int(a)))
            elif type(a) is np.uint32:
                conv.append(ctypes.c_uint(int(a)))
            else:
                assert type(a) is self.dt.type, type(a)
                conv.append((ctypes.c_float if self.dt == np.float32 else ctypes.c_double)(a))
        self.log.append("vtl_dropout")
        # a smaller grid than asked: the kernel's grid-stride loop covers the rest
        self.fn(ctypes.c_uint(min(gx, 3)), ctypes.c_uint(bx), *conv)


class FakeCupy:
    """The CuPy calls of ``CupyDropout`` on NumPy arrays; ``RawKernel`` builds for the host."""

    def __init__(self, tmp):
        self.tmp, self.built, self.log = tmp, {}, []

    def RawKernel(self, code, name):  # noqa: N802
        assert name == "vtl_dropout"
        lib = self.built.get(code)
        if lib is None:
            k = len(self.built)
            src = _SHIM + _EXTRA + code.replace('extern "C" ', "static ") + _launcher(
                "words[0]" in code)
            lib = self.built[code] = compile_host(self.tmp / f"d{k}.cpp", src)
        dt = np.dtype(np.float64 if "typedef double A;" in code else np.float32)
        return _HostFunction(lib.launch, dt, self.log)

    ascontiguousarray = staticmethod(np.ascontiguousarray)

    @staticmethod
    def empty_like(a):
        return np.full_like(a, np.nan)


@pytest.fixture(scope="module")
def fake_cupy(tmp_path_factory):
    return FakeCupy(tmp_path_factory.mktemp("dropout"))


@pytest.fixture(scope="module")
def host_kernel(fake_cupy):
    return R.CupyDropout(fake_cupy)


def _run(x, p, g, seed, **kw):
    vtl.random.seed(seed)
    t = vtl.asarray(x, requires_grad=True)
    out = F.dropout(t, p, **kw)
    out.backward(vtl.asarray(g))
    return out, to_numpy(out), to_numpy(t.grad), vtl.random.default_generator().get_state()


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16, "bfloat16"])
@pytest.mark.parametrize(("shape", "p"), [((7, 9), 0.5), ((1031,), 0.1), ((2, 3, 5), 0.9),
                                          ((4, 4), 1e-9), ((33,), 0.99999)])
def test_fused_dropout_is_the_portable_dropout(fake_cupy, host_kernel, dt, shape, p):
    dt = np.dtype(ml_dtypes.bfloat16) if dt == "bfloat16" else np.dtype(dt)
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(dt)
    g = rng.standard_normal(shape).astype(dt)
    with use_kernel("dropout", None):  # the portable path (the numpy backend has a kernel)
        _, ref, ref_grad, ref_state = _run(x, p, g, 21)
    fake_cupy.log.clear()
    with use_kernel("dropout", host_kernel):
        out, got, got_grad, state = _run(x, p, g, 21)
    assert out.grad_fn.name() == "DropoutBackward"
    assert fake_cupy.log == ["vtl_dropout", "vtl_dropout"]  # forward, backward
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(got_grad, ref_grad)
    assert state == ref_state


def test_words_read_from_memory_give_the_same_bits(host_kernel):
    x = np.random.default_rng(4).standard_normal(4097).astype(np.float32)
    words = (0xFFFFFFFE, 0xFFFFFFFF, 7, 0, 0x1234ABCD, 0xFEDC0987)  # a carry across words
    eager = host_kernel.forward(x, 0.3, words)
    dyn = DynamicScalars(words, "uint32")
    dyn.where = np.asarray(words, np.uint32)
    np.testing.assert_array_equal(host_kernel.forward(x, 0.3, dyn), eager)
    assert 0.6 < np.mean(eager != 0) < 0.8
    kept = eager != 0
    np.testing.assert_array_equal(eager[kept], x[kept] * np.float32(1 / 0.7))


def test_keep_threshold_matches_the_float_comparison():
    w = np.arange(0, 2 ** 24, 997, dtype=np.uint32)
    for p in (0.1, 0.5, 1 / 3, 1e-7, 0.9999999, 2.0 ** -24, 1 - 2.0 ** -24):
        u = w.astype(np.float32) * np.float32(2.0 ** -24)
        np.testing.assert_array_equal(w >= keep_threshold(p), u >= np.float32(p), str(p))


def test_declines_and_portable_cases(fake_cupy, host_kernel):
    assert host_kernel.forward(np.ones(4, np.complex64), 0.5, (0,) * 6) is None
    assert host_kernel.forward(np.ones(4, np.float32), 0.0, (0,) * 6) is None
    x = np.random.default_rng(5).standard_normal((3, 8)).astype(np.float32)
    with use_kernel("dropout", host_kernel):
        fake_cupy.log.clear()
        vtl.random.seed(1)
        a = to_numpy(F.dropout(vtl.asarray(x), 1.0))  # p = 1: zeros, no draw
        b = to_numpy(F.dropout2d(vtl.asarray(x[None]), 0.5))  # a mask of another shape
        c = to_numpy(F.dropout(vtl.asarray(x), 0.5, training=False))
        assert fake_cupy.log == []
        np.testing.assert_array_equal(a, 0.0)
        assert b.shape == (1, 3, 8)
        np.testing.assert_array_equal(c, x)
        y = vtl.asarray(x.copy())
        vtl.random.seed(2)
        F.dropout(y, 0.5, inplace=True)
        assert fake_cupy.log == ["vtl_dropout"]
    vtl.random.seed(2)
    with use_kernel("dropout", None):
        np.testing.assert_array_equal(to_numpy(y), to_numpy(F.dropout(vtl.asarray(x), 0.5)))


def test_second_order_gradients(host_kernel):
    x = np.random.default_rng(6).standard_normal((5, 6))

    def hvp():
        vtl.random.seed(8)
        t = vtl.asarray(x, requires_grad=True)
        y = F.dropout(t * t, 0.4)
        (gx,) = vtl.autograd.grad(vtl.sum(y * y), [t], create_graph=True)
        (h,) = vtl.autograd.grad(vtl.sum(gx), [t])
        return to_numpy(gx), to_numpy(h)

    with use_kernel("dropout", None):
        ref = hvp()
    with use_kernel("dropout", host_kernel):
        got = hvp()
    for a, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(a, r, rtol=1e-12)


def test_gpu_kernel_matches_portable():
    if "cupy" not in vtl.backends.available_names():
        pytest.skip("needs the cupy backend")
    be = vtl.backends.get("cupy")
    assert be.kernel("dropout") is not None
    x = np.random.default_rng(7).standard_normal((64, 1001)).astype(np.float32)

    def run():
        vtl.random.seed(5)
        t = vtl.asarray(x, device="cupy", requires_grad=True)
        out = F.dropout(t, 0.2)
        vtl.sum(out * out).backward()
        return out.grad_fn.name(), to_numpy(out), to_numpy(t.grad)

    name, *fused = run()
    assert name == "DropoutBackward"
    with use_kernel("dropout", None, "cupy"):
        name, *ref = run()
    assert name != "DropoutBackward"
    for a, r in zip(fused, ref, strict=True):
        np.testing.assert_array_equal(a, r)

    # captured: each replay draws fresh bits, the same as eager steps
    t = vtl.asarray(x, device="cupy", requires_grad=True)
    step = vtl.compile(lambda t: F.dropout(t, 0.5) * 1.0)
    vtl.random.seed(11)
    captured = [to_numpy(step(t)) for _ in range(3)]
    vtl.random.seed(11)
    eager = [to_numpy(F.dropout(t, 0.5) * 1.0) for _ in range(3)]
    for a, r in zip(captured, eager, strict=True):
        np.testing.assert_array_equal(a, r)
    assert not np.array_equal(captured[1], captured[2])
