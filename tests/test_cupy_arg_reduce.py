"""The cupy backend's argmax/argmin kernels (``vtl/backends/cupy/_arg_reduce.py``).

On the host (given a C++20 compiler): the CUDA sources compiled with the CUDA emulation of
the nn kernels' tests and driven through the real ``ArgReduce`` by a stand-in for the CuPy
functions it calls, against NumPy's ``argmax``/``argmin`` on values that tell the rules
apart (ties, nans, signed zeros, subnormals, infinities), every axis, both kernel shapes
(a thread per row; several blocks per row and their fold). On a GPU: the same against
NumPy through ``vtl.argmax``/``vtl.argmin``.
"""

from __future__ import annotations

import ctypes
import itertools

import ml_dtypes
import numpy as np
import pytest
from test_cupy_nn_kernels import _SHIM, compile_host

import vtl
from vtl.backends.cupy import _arg_reduce as A

DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16,
          "bfloat16": ml_dtypes.bfloat16, "int32": np.int32, "int64": np.int64,
          "uint8": np.uint8, "bool": np.bool_}
#: each kernel's C parameter types (pointers passed as void* by the host wrappers)
_CPARAMS = {
    "vtl_arg_rows": ("const V*", "long long", "long long", "int", "long long*"),
    "vtl_arg_blocks": ("const V*", "long long", "int", "int", "K*", "long long*",
                       "long long*"),
    "vtl_arg_fold": ("const K*", "const long long*", "long long", "int", "long long*"),
}
_KERNELS = tuple(_CPARAMS)
_CT = {"long long": ctypes.c_longlong, "int": ctypes.c_int}
_HOST_BITS = """
static inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }
static inline long long __double_as_longlong(double d) {
  long long i; std::memcpy(&i, &d, 8); return i;
}
"""


def _unit(k: int, name: str) -> str:
    src = A.arg_source(name).replace('extern "C" ', "")
    out = [f"namespace a{k} {{\n{src}"]
    for kern, types in _CPARAMS.items():
        params = ", ".join(f"{'void*' if t.endswith('*') else t} p{i}"
                           for i, t in enumerate(types))
        args = ", ".join(f"({t})p{i}" for i, t in enumerate(types))
        out.append(f'extern "C" void launch_{k}_{kern}(unsigned gx, unsigned bx, {params}) {{\n'
                   f"  vtl_launch(gx, 1, bx, 1, [=] {{ {kern}({args}); }});\n}}\n")
    out.append("}\n")
    return "".join(out)


@pytest.fixture(scope="module")
def host_lib(tmp_path_factory):
    """The host build, with blocks of 32 threads (the emulation runs a thread per CUDA
    thread) while the module's tests run."""
    block = A._BLOCK
    A._BLOCK = 32
    try:
        d = tmp_path_factory.mktemp("cupy_arg_host")
        src = _SHIM + _HOST_BITS + "".join(_unit(k, n) for k, n in enumerate(DTYPES))
        yield compile_host(d / "k.cpp", src)
    finally:
        A._BLOCK = block


class _Ctx:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Arr(np.ndarray):
    @property
    def device(self):  # noqa: D401 - CuPy's array.device is a context manager
        return _Ctx()


class _Function:
    def __init__(self, lib, k, name, log):
        self.fn, self.name, self.log = getattr(lib, f"launch_{k}_{name}"), name, log

    def __call__(self, grid, block, args):
        types = _CPARAMS[self.name]
        assert len(args) == len(types)
        conv = []
        for t, a in zip(types, args, strict=True):
            if t.endswith("*"):
                assert isinstance(a, np.ndarray) and a.flags.c_contiguous
                conv.append(ctypes.c_void_p(a.ctypes.data))
            else:
                assert type(a) is (np.int64 if t == "long long" else np.int32), (self.name, a)
                conv.append(_CT[t](int(a)))
        self.log.append((self.name, grid[0]))
        self.fn(ctypes.c_uint(grid[0]), ctypes.c_uint(block[0]), *conv)


class _Module:
    def __init__(self, lib, k, log):
        self.lib, self.k, self.log = lib, k, log

    def get_function(self, name):
        return _Function(self.lib, self.k, name, self.log)


class FakeCupy:
    """The CuPy functions ``ArgReduce`` calls, on NumPy arrays, with the kernels of the
    host build."""

    def __init__(self, lib):
        self.lib, self.log = lib, []
        self._by_src = {A.arg_source(n): k for k, n in enumerate(DTYPES)}

    def RawModule(self, code):  # noqa: N802
        return _Module(self.lib, self._by_src[code], self.log)

    @staticmethod
    def ascontiguousarray(a):
        return np.ascontiguousarray(a).view(_Arr)

    @staticmethod
    def moveaxis(a, src, dst):
        return np.moveaxis(a, src, dst)

    @staticmethod
    def empty(shape, dtype):
        return np.empty(shape, dtype=dtype).view(_Arr)


def _values(name: str, shape, rng) -> np.ndarray:
    """Values with ties, and for floats nans, signed zeros, subnormals and infinities."""
    dt = DTYPES[name]
    if name == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dt).kind in "iu":
        info = np.iinfo(dt)
        pool = np.array([info.min, info.max, 0, 1, 2, 3], dtype=dt)
        return rng.choice(pool, shape)
    tiny = {"float32": 1e-45, "float64": 5e-324, "float16": 6e-8, "bfloat16": 1e-40}[name]
    pool = np.array([0.0, -0.0, tiny, -tiny, 1.5, -1.5, np.inf, -np.inf, 2.0, -3.0],
                    dtype=np.float64)
    x = rng.choice(pool, shape)
    x[rng.random(shape) < 0.02] = np.nan
    return x.astype(dt)


def _numpy(x: np.ndarray, axis, keepdims, largest):
    xs = x.astype(np.float32) if x.dtype == ml_dtypes.bfloat16 else x
    f = np.argmax if largest else np.argmin
    return f(xs, axis=axis, keepdims=keepdims)


@pytest.mark.parametrize("name", list(DTYPES))
def test_host_build_gives_numpys_answers(host_lib, monkeypatch, name):
    monkeypatch.setattr(A, "_MIN_PER_BLOCK", 32)  # several blocks per row on small rows
    monkeypatch.setattr(A, "_TARGET_BLOCKS", 6)
    cp = FakeCupy(host_lib)
    kern = A.ArgReduce(cp)
    rng = np.random.default_rng(7)
    for shape in ((5,), (3, 200), (400,), (2, 3, 150), (4, 1)):
        x = _values(name, shape, rng)
        for axis, largest in itertools.product([None, *range(x.ndim)], (True, False)):
            keepdims = axis == 0
            got = kern(x.view(_Arr), axis, keepdims, largest)
            want = _numpy(x, axis, keepdims, largest)
            assert got.shape == np.shape(want), (shape, axis, keepdims)
            np.testing.assert_array_equal(np.asarray(got), want,
                                          err_msg=f"{name} {shape} {axis} {largest}")
    kinds = {k for k, _ in cp.log}
    assert kinds == set(_KERNELS)  # a thread per row, blocks, and their fold all ran


def test_plan():
    assert A.plan(128, 10) == ("rows", 1)
    assert A.plan(1, 1 << 24) == ("blocks", 1024)
    assert A.plan(4096, 4096) == ("blocks", 1)
    assert A.plan(2, 1 << 14) == ("blocks", 4)


def test_unsupported_dtypes_and_empty_arrays_are_declined(host_lib):
    kern = A.ArgReduce(FakeCupy(host_lib))
    assert kern(np.zeros(3, np.uint64).view(_Arr), None, False, True) is None
    assert kern(np.zeros((0, 3), np.float32).view(_Arr), 1, False, True) is None
    assert kern(np.zeros((), np.float32).view(_Arr), 0, False, True) is None


@pytest.mark.parametrize("name", ["float32", "float64", "float16", "bfloat16", "int32"])
def test_gpu_matches_numpy(cupy_backend, name):
    rng = np.random.default_rng(3)
    for shape in ((7,), (64, 10), (3, 70000), (1 << 20,)):
        x = _values(name, shape, rng)
        t = vtl.asarray(x, device="cupy")
        for axis in (None, -1, 0):
            for fn, largest in ((vtl.argmax, True), (vtl.argmin, False)):
                np.testing.assert_array_equal(fn(t, axis=axis).numpy(),
                                              _numpy(x, axis, False, largest))
