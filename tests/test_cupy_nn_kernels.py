"""The CuPy backend's fused nn kernels (``vtl/backends/cupy/nn.py``).

Two layers of checks:

* on the host (always, given a C++20 compiler): the CUDA sources are compiled with a small
  emulation of the CUDA built-ins (a thread per CUDA thread, barriers for
  ``__syncthreads`` and the warp shuffles, blocks one after another) and driven through the
  real Python wrappers by a stand-in for the few CuPy functions they use; results are
  compared with NumPy, and the kernels also run inside the numpy backend to check the hooks
  of ``linear``/``relu``/``cross_entropy`` (values, gradients, launch counts);
* on a GPU (when the cupy backend is available): the kernels against the portable paths.

``nvcc``, when installed, also compiles every source variant for sm_90.
"""

from __future__ import annotations

import atexit
import ctypes
import itertools
import math
import shutil
import subprocess
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from nn_kernel_checks import (
    CE_SPECIAL_LOGITS,
    CE_SPECIAL_TARGETS,
    assert_same_training,
    backward_scaled,
    ce_case,
    ce_special_reference,
    check_ce_special_values,
    np_cross_entropy,
    scaled_grad,
    train,
)

import vtl
from vtl import nn
from vtl.backends.cupy import nn as K
from vtl.nn import functional as F

# -- the CUDA emulation on the host -------------------------------------------------------------

_SHIM = r"""
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>
using std::isfinite;
using std::isnan;
struct vtl_dim3 { unsigned x, y, z; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
static thread_local vtl_dim3 threadIdx, blockIdx;
static vtl_dim3 blockDim, gridDim;
static std::barrier<>* vtl_block_bar;
static std::barrier<>* vtl_warp_bar[64];
static unsigned long long vtl_slot[2048];
static inline unsigned vtl_tid() { return threadIdx.x + threadIdx.y * blockDim.x; }
static inline void __syncthreads() { vtl_block_bar->arrive_and_wait(); }
template <class V> static V vtl_shfl(V v, int src) {
  const unsigned tid = vtl_tid(), w = tid >> 5;
  unsigned long long bits = 0;
  std::memcpy(&bits, &v, sizeof(V));
  vtl_slot[tid] = bits;
  vtl_warp_bar[w]->arrive_and_wait();
  V r = v;
  if (src >= 0 && src < 32) std::memcpy(&r, &vtl_slot[w * 32 + src], sizeof(V));
  vtl_warp_bar[w]->arrive_and_wait();
  return r;
}
template <class V> static V __shfl_down_sync(unsigned, V v, int o) {
  const int lane = vtl_tid() & 31;
  return vtl_shfl(v, lane + o < 32 ? lane + o : -1);
}
template <class V> static V __shfl_sync(unsigned, V v, int src) { return vtl_shfl(v, src); }
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline double __longlong_as_double(long long i) {
  double d; std::memcpy(&d, &i, 8); return d;
}
static inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
template <class V> static V __shfl_xor_sync(unsigned, V v, int m) {
  return vtl_shfl(v, (int)((vtl_tid() & 31) ^ m));
}
// a grid of gx x gy blocks of bx x by threads: blocks one after another, a thread per CUDA thread
template <class F> static void vtl_launch(unsigned gx, unsigned gy, unsigned bx, unsigned by,
                                          F body) {
  blockDim = {bx, by, 1};
  gridDim = {gx, gy, 1};
  const unsigned n = bx * by;
  for (unsigned y = 0; y < gy; ++y)
    for (unsigned b = 0; b < gx; ++b) {
      std::barrier<> bar(n);
      vtl_block_bar = &bar;
      std::vector<std::unique_ptr<std::barrier<>>> wb;
      for (unsigned w = 0; w * 32 < n; ++w) {
        wb.emplace_back(new std::barrier<>(std::min(32u, n - w * 32)));
        vtl_warp_bar[w] = wb.back().get();
      }
      std::vector<std::thread> ts;
      for (unsigned t = 0; t < n; ++t) {
        ts.emplace_back([=] {
          blockIdx = {b, y, 0};
          threadIdx = {t % bx, t / bx, 0};
          body();
          vtl_warp_bar[t >> 5]->arrive_and_drop();  // exited threads do not hold barriers
          vtl_block_bar->arrive_and_drop();
        });
      }
      for (auto& th : ts) th.join();
    }
}
"""

_FLOAT = {"float": np.float32, "double": np.float64}
#: every float type of the kernels (``K.FLOAT_TYPES``) as a NumPy dtype
FLOAT_DTYPES = {**_FLOAT, "half": np.float16, "bfloat16": ml_dtypes.bfloat16}
_SCALAR = {"const long long": (np.int64, ctypes.c_longlong), "const int": (np.int32, ctypes.c_int)}
_CSCALAR = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}
#: the variants compiled for the host: (spec, float type, target type)
_VARIANTS = [(s, c, "int") for s in (K.BIAS_ADD, K.COL_SUM, K.COL_SUM_FINISH, K.RELU_BACKWARD)
             for c in _FLOAT] + [(K.RELU_BACKWARD4, "float", "int"),
                                 (K.CHANNEL_BIAS4, "float", "int"), (K.RELU4, "float", "int")] + [
    (s, c, tc) for s in (K.CROSS_ENTROPY, K.CROSS_ENTROPY_GRAD)
    for c, tc in (("float", "long long"), ("double", "long long"), ("float", "unsigned char"),
                  ("double", "int"))]
_TDT = {"long long": np.int64, "int": np.int32, "unsigned char": np.uint8}


#: C++ put at the top of each kernel's namespace in the host build: CUDA's float overloads of
#: the math functions the kernels call (the global ones of <cmath> take doubles)
_HOST_MATH = "using std::erfc; using std::exp; using std::sqrt; using std::tanh;\n"


def _host_unit(k: int, spec, ctype: str, tctype: str, prefix: str = "") -> str:
    name = f"{spec.name}_{k}"
    src = K.cuda_source(spec, ctype, tctype, name=name).replace('extern "C" ', "")
    params = ", ".join(f"{t} {n}" for t, n in spec.params)
    args = ", ".join(n for _, n in spec.params)
    return (f"namespace v{k} {{\n{prefix}{src}"
            f'extern "C" void launch_{k}(unsigned gx, unsigned gy, unsigned bx, unsigned by, '
            f"{params}) {{\n"
            f"  vtl_launch(gx, gy, bx, by, [=] {{ {name}({args}); }});\n}}\n}}\n")


def host_args(args, dt, views: bool = False) -> list:
    """A host-built kernel's ``ctypes`` arguments from a CuPy launch's: arrays (C-contiguous;
    with ``views``, 4-d strided views too) as pointers, NumPy integers as C integers, other
    scalars as the kernel's ``T`` (``dt``: float32 or float64)."""
    conv = []
    for a in args:
        if isinstance(a, np.ndarray):
            assert a.flags.c_contiguous or (views and a.ndim == 4)
            conv.append(ctypes.c_void_p(a.ctypes.data))
        elif type(a) is np.int32:
            conv.append(ctypes.c_int(int(a)))
        elif type(a) is np.int64:
            conv.append(ctypes.c_longlong(int(a)))
        elif type(a) is np.uint32:
            conv.append(ctypes.c_uint(int(a)))
        else:
            assert type(a) is dt.type, type(a)
            conv.append((ctypes.c_float if dt == np.float32 else ctypes.c_double)(a))
    return conv


_FLAGS = ("-std=c++20", "-O1", "-pthread", "-fPIC")
#: compiler -> the directory of its precompiled :data:`_SHIM` (``None``: it builds none)
_PCH: dict[str, Path | None] = {}


def _precompiled_shim(cxx: str) -> Path | None:
    """A directory holding :data:`_SHIM` as ``vtl_shim.h`` and GCC's precompiled form of it,
    built once a process: the C++20 headers it includes take half of each kernel's build."""
    if cxx not in _PCH:
        d = None
        if Path(cxx).name.startswith("g++"):
            d = Path(tempfile.mkdtemp(prefix="vtl-host-shim-"))
            atexit.register(shutil.rmtree, d, True)
            (d / "vtl_shim.h").write_text(_SHIM)
            r = subprocess.run([cxx, *_FLAGS, "-x", "c++-header", "-o", str(d / "vtl_shim.h.gch"),
                                str(d / "vtl_shim.h")], capture_output=True, text=True)
            d = None if r.returncode else d
        _PCH[cxx] = d
    return _PCH[cxx]


def compile_host(cpp, source: str):
    """``source`` (C++20 with :data:`_SHIM`'s emulation) written to ``cpp`` and loaded as a
    shared library built beside it; skips the test without a C++20 compiler."""
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    extra: list[str] = []
    pch = _precompiled_shim(cxx) if source.startswith(_SHIM) else None
    if pch is not None:
        source = '#include "vtl_shim.h"\n' + source[len(_SHIM):]
        extra = [f"-I{pch}"]
    cpp.write_text(source)
    so = cpp.with_suffix(".so")
    r = subprocess.run([cxx, *_FLAGS, *extra, "-shared", "-o", str(so), str(cpp)],
                       capture_output=True, text=True)
    if r.returncode:
        if "barrier" in r.stderr and "No such file" in r.stderr:
            pytest.skip("the C++ compiler lacks <barrier>")
        raise AssertionError(r.stderr[-4000:])
    return ctypes.CDLL(str(so))


def build_host_lib(d, variants, prefix: str = ""):
    """The host build of ``variants`` (``(spec, float type, target type)``; ``launch_{k}``
    runs the k-th), compiled in ``d``; skips the test without a C++20 compiler."""
    units = [_host_unit(k, *v, prefix=prefix) for k, v in enumerate(variants)]
    # the kernels use T/A/TI typedefs inside their namespace; the shim's globals outside
    return compile_host(d / "k.cpp", _SHIM + "\n".join(units))


@pytest.fixture(scope="module")
def host_lib(tmp_path_factory):
    return build_host_lib(tmp_path_factory.mktemp("cupy_nn_host"), _VARIANTS)


class _Dev:
    id = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_DEV = _Dev()


class _HostKernel:
    """A RawKernel stand-in: checks the argument types against the spec (a pointer may be
    an array or an ``np.uint64`` address), then runs the host build of the same source."""

    def __init__(self, fn, spec, ctype, tctype, log):
        self.fn, self.spec, self.log = fn, spec, log
        self.dt, self.tdt = np.dtype(FLOAT_DTYPES[ctype]), _TDT.get(tctype)
        self.adt = K.compute_dtype(self.dt)

    def __call__(self, grid, block, args):
        assert len(args) == len(self.spec.params), self.spec.name
        gx, gy = (*grid, 1)[:2]
        assert len(grid) <= 2 and 1 <= gx < 2**31 and 1 <= gy <= 65535
        bx, by = (*block, 1)[:2]
        assert bx * by <= 1024
        conv = []
        for (ptype, pname), a in zip(self.spec.params, args, strict=True):
            if ptype.endswith("*") or "* " in ptype:
                base = ptype.replace("const ", "").split("*")[0].strip()
                want = {"T": self.dt, "A": self.adt, "TI": self.tdt, "long long": np.int64,
                        "double": np.float64, "float": np.float32, "float4": np.float32,
                        "uint4": self.dt, "uint2": self.dt}[base]
                if type(a) is np.uint64:  # an address, as CuPy passes it
                    conv.append(ctypes.c_void_p(int(a)))
                    continue
                assert isinstance(a, np.ndarray) and a.dtype == want, (pname, a)
                conv.append(ctypes.c_void_p(a.ctypes.data))
            elif ptype == "const A":
                assert type(a) is self.adt.type, (pname, type(a))
                conv.append(_CSCALAR[self.adt](a))
            else:
                want, cty = _SCALAR[ptype]
                assert type(a) is want, (pname, type(a))
                conv.append(cty(int(a)))
        self.log.append(self.spec.name)
        self.fn(ctypes.c_uint(gx), ctypes.c_uint(gy), ctypes.c_uint(bx), ctypes.c_uint(by),
                *conv)


class FakeCupy:
    """The CuPy functions the wrappers call, on NumPy arrays, with RawKernels run on the
    host build of their sources."""

    ndarray = np.ndarray

    class cuda:  # noqa: N801 - mirrors cupy.cuda
        @staticmethod
        def Device(index=0):  # noqa: N802
            return _DEV

    def __init__(self, lib, variants=None):
        self.log: list[str] = []
        self._by_src = {}
        for k, (spec, c, tc) in enumerate(_VARIANTS if variants is None else variants):
            src = K.cuda_source(spec, c, tc)
            self._by_src[src] = _HostKernel(getattr(lib, f"launch_{k}"), spec, c, tc, self.log)

    def RawKernel(self, src, name):  # noqa: N802
        kern = self._by_src.get(src)
        if kern is None:
            pytest.skip(f"{name} variant not compiled for the host")
        assert kern.spec.name == name
        return kern

    def ElementwiseKernel(self, *a):  # noqa: N802
        pytest.skip("ElementwiseKernels run on the GPU only")

    def dot(self, a, b):
        self.log.append("dot")
        return np.ascontiguousarray(np.dot(a, b))

    def maximum(self, a, b, out=None):
        self.log.append("maximum")
        return np.maximum(a, b, out=out)

    def sum(self, a, axis=None):
        self.log.append("sum")
        return np.asarray(np.sum(a, axis=axis))

    def empty(self, shape, dtype):
        return np.full(shape, np.nan if np.dtype(dtype).kind == "f" else 77, dtype)

    def zeros(self, shape, dtype):
        return np.zeros(shape, dtype)

    ascontiguousarray = staticmethod(np.ascontiguousarray)
    asnumpy = staticmethod(np.array)


def _fake(lib, monkeypatch):
    cp = FakeCupy(lib)
    for cls in (K.CupyNN, K.CupyCrossEntropy):
        monkeypatch.setattr(cls, "_device_of", staticmethod(lambda a: _DEV))
    return cp, K.CupyNN(cp), K.CupyCrossEntropy(cp)


@pytest.fixture
def host(host_lib, monkeypatch):
    return _fake(host_lib, monkeypatch)


def _tol(dt):
    return {"rtol": 1e-5, "atol": 1e-6} if dt == np.float32 else {"rtol": 1e-12, "atol": 1e-13}


# -- linear ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (5, 7, 3), (33, 9, 70)])
def test_linear_on_the_host(host, dt, m, k, n):
    cp, nnk, _ = host
    rng = np.random.default_rng(m + k + n)
    x, w, b = (rng.standard_normal(s).astype(dt) for s in ((m, k), (n, k), (n,)))
    ref = x.astype(np.float64) @ w.T.astype(np.float64) + b
    np.testing.assert_allclose(nnk.linear(x, w, b), ref, **_tol(dt))
    np.testing.assert_allclose(nnk.linear(x, w, None), ref - b, **_tol(dt))
    # strided operands: a transposed input, a transposed weight, a strided bias
    xt = np.ascontiguousarray(x.T).T
    wt = np.ascontiguousarray(w.T).T
    bb = np.repeat(b, 3)[::3]
    cp.log.clear()
    np.testing.assert_allclose(nnk.linear(xt, wt, bb), ref, **_tol(dt))
    assert cp.log == ["dot", "vtl_bias_add"]


@pytest.mark.parametrize("row_phases", [1, 3, 100])
def test_bias_add_grid_on_the_host(host, monkeypatch, row_phases):
    """The bias kernel's grid: two blocks of columns, and fewer row phases than rows (each
    thread walks its column down the rows), as many, or more."""
    cp, nnk, _ = host
    assert K._bias_grid(4096, 2048) == (8, 1024) and K._bias_grid(3, 10) == (1, 3)
    assert K._bias_grid(10**6, 10) == (1, 8192) and K._bias_grid(2, 10**7) == (39063, 1)
    monkeypatch.setattr(K, "_bias_grid", lambda rows, cols: (-(-cols // 256), row_phases))
    rng = np.random.default_rng(9)
    x, w, b = (rng.standard_normal(s) for s in ((7, 4), (300, 4), (300,)))
    cp.log.clear()
    got = nnk.linear(x, w, b, relu=True)
    assert cp.log == ["dot", "vtl_bias_add"]
    np.testing.assert_allclose(got, np.maximum(x @ w.T + b, 0), rtol=1e-12, atol=1e-13)
    assert (got == 0).any() and (got > 0).any()


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_linear_relu_on_the_host(host, dt):
    """The ReLU in the bias's launch: ``maximum(x @ w.T + b, 0)``, nan passing through."""
    cp, nnk, _ = host
    rng = np.random.default_rng(3)
    x, w, b = (rng.standard_normal(s).astype(dt) for s in ((33, 9), (70, 9), (70,)))
    x[4, 2] = np.nan
    plain = nnk.linear(x, w, b)
    cp.log.clear()
    got = nnk.linear(x, w, b, relu=True)
    assert cp.log == ["dot", "vtl_bias_add"]
    np.testing.assert_array_equal(got, np.maximum(plain, 0))
    assert np.isnan(got[4]).all() and (got == 0).any() and (got > 0).any()
    cp.log.clear()
    got = nnk.linear(x, w, None, relu=True)
    assert cp.log == ["dot", "maximum"]
    np.testing.assert_array_equal(got, np.maximum(nnk.linear(x, w, None), 0))


def test_linear_declines_what_it_does_not_handle(host):
    _, nnk, _ = host
    x, w = np.ones((2, 3), np.float32), np.ones((4, 3), np.float32)
    assert nnk.linear(np.ones((2, 3), np.int32), np.ones((4, 3), np.int32), None) is None
    assert nnk.linear(x, w, np.float32(1.0)) is None  # not an array
    assert nnk.linear(x, w, np.ones((), np.float32)) is None  # a 0-d bias
    assert nnk.linear(x, w, np.ones((4,), np.float64)) is None
    assert nnk.linear(x, np.ones((4, 3), np.float64), None) is None
    assert nnk.linear(np.ones((0, 3), np.float32), w, None) is None
    assert nnk.linear(x, np.ones((4, 2), np.float32), None) is None
    assert nnk.linear(x.astype(np.complex64), w.astype(np.complex64), None) is None


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(("m", "n_out", "n_in"), [(1, 1, 1), (64, 10, 12), (37, 70, 5)])
def test_linear_grad_weight_on_the_host(host, dt, m, n_out, n_in):
    cp, nnk, _ = host
    rng = np.random.default_rng(m * n_out)
    g = rng.standard_normal((m, n_out)).astype(dt)
    x = rng.standard_normal((m, n_in)).astype(dt)
    cp.log.clear()
    gw, gb = nnk.linear_grad_weight(g, x, True)
    assert cp.log == ["dot", "vtl_col_sum"]
    np.testing.assert_allclose(gw, g.T.astype(np.float64) @ x, **_tol(dt))
    np.testing.assert_allclose(gb, g.astype(np.float64).sum(0), **_tol(dt))
    assert gb.dtype == dt and gb.shape == (n_out,)
    gw2, gb2 = nnk.linear_grad_weight(g, x, False)
    assert gb2 is None
    np.testing.assert_allclose(gw2, gw, **_tol(dt))
    # a strided (transposed) gradient
    gs = np.ascontiguousarray(g.T).T
    _, gb3 = nnk.linear_grad_weight(gs, x, True)
    np.testing.assert_allclose(gb3, gb, **_tol(dt))


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(("m", "n"), [(5, 3), (6, 40), (50, 70), (33, 1)])
def test_column_sums_in_slabs(host, monkeypatch, dt, m, n):
    """Rows split into slabs: a second launch adds the slabs' double sums in order."""
    cp, nnk, _ = host
    monkeypatch.setattr(K, "COL_SUM_SLAB_ROWS", 2)
    monkeypatch.setattr(K, "COL_SUM_BLOCKS", 7)
    rng = np.random.default_rng(m * n)
    g, x = rng.standard_normal((m, n)).astype(dt), rng.standard_normal((m, 2)).astype(dt)
    cp.log.clear()
    _, gb = nnk.linear_grad_weight(g, x, True)
    assert cp.log == ["dot", "vtl_col_sum", "vtl_col_sum_finish"]
    assert gb.dtype == dt and gb.shape == (n,)
    np.testing.assert_allclose(gb, g.astype(np.float64).sum(0), **_tol(dt))
    _, gb_t = nnk.linear_grad_weight(np.ascontiguousarray(g.T).T, x, True)  # strided
    np.testing.assert_array_equal(gb_t, gb)


def test_linear_grad_weight_declines(host):
    _, nnk, _ = host
    g = np.ones((6, 3), np.float32)
    assert nnk.linear_grad_weight(g, np.ones((6, 2), np.float64), True) is None
    assert nnk.linear_grad_weight(g, np.ones((5, 2), np.float32), True) is None


# -- relu backward -------------------------------------------------------------------------------

@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(("n", "offset"), [(1, 0), (7, 0), (300, 0), (300, 1), (1028, 0)])
def test_relu_backward_on_the_host(host, dt, n, offset):
    cp, nnk, _ = host
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n + offset).astype(dt)[offset:]  # offset: not 16-byte aligned
    special = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-40]
    x[: min(n, 6)] = special[: min(n, 6)]
    x[-min(n, 6):] = special[: min(n, 6)]  # in the last float4 too
    g = rng.standard_normal(n).astype(dt)
    cp.log.clear()
    got = nnk.relu_backward(x.reshape(1, n), g.reshape(1, n))
    vec = dt == np.float32 and n % 4 == 0 and offset == 0
    assert cp.log == ["vtl_relu_backward4" if vec else "vtl_relu_backward"]
    want = np.where(x <= 0, 0, g)  # nan in x passes g through, as the portable path
    np.testing.assert_array_equal(got, want.reshape(1, n))
    assert not np.signbit(got.reshape(n)[x <= 0]).any()  # +0.0 where x <= 0 (also -0.0)
    assert nnk.relu_backward(x, g.astype(np.float32 if dt == np.float64 else np.float64)) \
        is None
    assert nnk.relu_backward(x.reshape(1, n), g) is None  # shapes differ
    assert nnk.relu_backward(np.ones(3, np.int32), np.ones(3, np.int32)) is None


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(("n", "offset"), [(8, 0), (300, 0), (300, 1), (7, 0), (1028, 0)])
def test_relu_on_the_host(host, dt, n, offset):
    cp, nnk, _ = host
    x = np.random.default_rng(n).standard_normal(n + offset).astype(dt)[offset:]
    special = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-40, -1e-40]
    x[:7] = special[: min(n, 7)]
    x[-7:] = special[: min(n, 7)]
    cp.log.clear()
    got = nnk.relu(x.reshape(2, -1) if n % 2 == 0 else x)
    if not (dt == np.float32 and n % 4 == 0 and offset == 0):
        assert got is None and cp.log == []  # CuPy's maximum serves
        return
    assert cp.log == ["vtl_relu4"]
    want = np.maximum(x, 0)  # nan stays nan, -0.0 gives +0.0
    np.testing.assert_array_equal(got.reshape(-1).view(np.uint32), want.view(np.uint32))


# -- a convolution's bias ------------------------------------------------------------------------

@pytest.mark.parametrize(("shape", "offset", "runs"), [
    ((2, 3, 4, 4), 0, True), ((1, 5, 2, 2, 3), 0, True), ((3, 7, 8), 0, True),
    ((2, 3, 3, 3), 0, False),  # 9 elements per channel: not whole float4s
    ((2, 3, 4, 4), 1, False),  # not 16-byte aligned
])
def test_channel_bias_on_the_host(host, shape, offset, runs):
    cp, _, _ = host
    rng = np.random.default_rng(len(shape))
    n = int(np.prod(shape))
    y = rng.standard_normal(n + offset).astype(np.float32)[offset:].reshape(shape)
    b = rng.standard_normal(shape[1]).astype(np.float32)
    want = y + b.reshape((1, -1) + (1,) * (len(shape) - 2))
    cp.log.clear()
    assert K.channel_bias_(K._Kernels(cp), y, b) is runs
    if runs:
        assert cp.log == ["vtl_channel_bias4"]
        np.testing.assert_array_equal(y, want)
    else:
        assert cp.log == []
    assert not K.channel_bias_(K._Kernels(cp), y.astype(np.float64), b.astype(np.float64))


# -- cross-entropy -----------------------------------------------------------------------------

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(("m", "c", "dt", "tdt"), [
    *((m, c, dt, tdt) for m, c in ((1, 1), (7, 3), (40, 10), (5, 70))
      for dt, tdt in ((np.float32, np.int64), (np.float64, np.int32), (np.float32, np.uint8))),
    (300, 3, np.float32, np.int64)])  # more rows than threads in the block
def test_cross_entropy_on_the_host(host, reduction, m, c, dt, tdt):
    cp, _, ce = host
    rng = np.random.default_rng(m * c)
    x, t = ce_case(rng, m, c, dt, tdt)
    if c > 40:  # a large logit away from lane 0: exp overflows unless the row max is right
        x[::2, 45] += 200 if dt == np.float32 else 1000
    assert ce.supports(x, t)
    cp.log.clear()
    loss, saved = ce.fwd(x, t, reduction, -100)
    assert cp.log == ["vtl_cross_entropy"]  # one launch
    want, gwant = np_cross_entropy(x, t.astype(np.int64), reduction)
    np.testing.assert_allclose(loss, want, **_tol(dt))
    assert loss.dtype == dt and loss.shape == ((m,) if reduction == "none" else ())
    v = rng.standard_normal(m).astype(dt) if reduction == "none" else np.asarray(1.5, dt)
    gx = ce.grad(x, t, saved, v, reduction, -100)
    assert cp.log == ["vtl_cross_entropy", "vtl_cross_entropy_grad"]
    np.testing.assert_allclose(gx, scaled_grad(gwant, v, reduction), **_tol(dt))
    assert gx.shape == (m, c) and gx.dtype == dt
    ce.check_pending()  # valid targets: nothing to report


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_two_launches_strided_and_ignore_index(host, monkeypatch, reduction):
    cp, _, ce = host
    monkeypatch.setattr(K, "CE_ONE_BLOCK", 16)
    rng = np.random.default_rng(8)
    xb = rng.standard_normal((9, 70)).astype(np.float32)
    x = xb.T[::2]  # (35, 9), both strides non-unit
    tb = rng.integers(0, 9, 70)
    tb[::7] = 3
    tb[::5] = 8  # the ignore index
    t = tb[::2]
    cp.log.clear()
    loss, saved = ce.fwd(x, t, reduction, 8)
    assert cp.log == ["vtl_cross_entropy"] * 2
    want, gwant = np_cross_entropy(x, t, reduction, ignore_index=8)
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-6)
    g = np.ones(35, np.float32)[::1] if reduction == "none" else np.asarray(1.0, np.float32)
    np.testing.assert_allclose(ce.grad(x, t, saved, g, reduction, 8), gwant, rtol=1e-5,
                               atol=1e-6)
    if reduction == "none":  # a strided upstream gradient
        g2 = np.arange(70, dtype=np.float32)[::2]
        np.testing.assert_allclose(ce.grad(x, t, saved, g2, reduction, 8),
                                   gwant * g2[:, None], rtol=1e-5, atol=1e-5)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_cross_entropy_special_values_and_all_ignored_on_the_host(host):
    _, _, ce = host
    x = CE_SPECIAL_LOGITS
    got, _ = ce.fwd(x, CE_SPECIAL_TARGETS, "none", -100)
    np.testing.assert_allclose(got, ce_special_reference(), rtol=1e-6, equal_nan=True)
    loss, saved = ce.fwd(x[:2], np.array([-100, -100]), "mean", -100)
    assert math.isnan(float(loss))  # 0/0, as PyTorch and the portable path
    loss, _ = ce.fwd(x[:2], np.array([-100, -100]), "sum", -100)
    assert float(loss) == 0.0
    gx = ce.grad(x[:2], np.array([-100, -100]), saved, np.asarray(1.0, np.float32), "mean",
                 -100)
    np.testing.assert_array_equal(gx, np.zeros((2, 3), np.float32))


def test_cross_entropy_bad_targets_are_reported_lazily(host):
    cp, _, ce = host
    x = np.zeros((5, 3), np.float32)
    t = np.array([0, -100, 7, -2, 1])
    loss, saved = ce.fwd(x, t, "mean", -100)
    assert math.isnan(float(loss))  # never a read out of bounds
    assert ce.pending == {0}
    gx = ce.grad(x, t, saved, np.asarray(1.0, np.float32), "mean", -100)
    assert np.isnan(gx[2:4]).all() and np.isfinite(gx[[0, 1, 4]]).all()
    ce.fwd(x, np.array([0, 1, 2, 9, 1]), "none", -100)  # a second failing call
    with pytest.raises(IndexError, match=r"cross_entropy\(\): target 7 is out of bounds for 3 "
                                         "classes"):
        ce.check_pending()  # names the first bad target of the first failing call
    assert not ce.pending
    ce.check_pending()  # reported once; the buffer was cleared
    tm = np.zeros(300, np.int64)
    tm[[261, 5]] = [9, 7]  # one thread sees rows 5 and 261; the first bad row is named
    ce.fwd(np.zeros((300, 3), np.float32), tm, "sum", -100)
    with pytest.raises(IndexError, match="target 7 is out of bounds for 3 classes"):
        ce.check_pending()
    tm[[5, 261]] = [0, 0]
    tm[200] = 4  # found by a thread of the upper half of the block
    ce.fwd(np.zeros((300, 3), np.float32), tm, "none", -100)
    with pytest.raises(IndexError, match="target 4 is out of bounds for 3 classes"):
        ce.check_pending()
    ce.fwd(x, np.array([0, 1, 2, 1, -5]), "sum", -5)  # -5 ignored: fine
    ce.check_pending()
    ce.fwd(x, np.array([0, 1, 2, 1, 3]), "sum", 3 + (1 << 70))  # an unrepresentable ignore
    with pytest.raises(IndexError, match="target 3 is out of bounds for 3"):
        ce.check_pending()


def test_cross_entropy_supports_and_known_ranges(host):
    _, _, ce = host
    x = np.zeros((4, 3), np.float32)
    assert ce.supports(x, np.zeros(4, np.int8))
    assert not ce.supports(x, np.zeros(4, np.uint64))
    assert not ce.supports(x, np.zeros(3, np.int64))
    assert not ce.supports(x.astype(np.complex64), np.zeros(4, np.int64))
    assert not ce.supports(np.zeros((0, 3), np.float32), np.zeros(0, np.int64))
    assert not ce.supports(np.zeros((4, 0), np.float32), np.zeros(4, np.int64))
    assert not ce.supports(x[None], np.zeros(4, np.int64))
    # known ranges of uploads decide eager checks; unknown ranges are left to the kernel
    up = np.array([0, 1, 2, 1])
    K.note_upload(up, up)
    assert K.known_range(up) == (0, 2, None)
    assert ce.targets_valid(up, 3, -100) is True
    assert ce.targets_valid(up, 2, -100) is None
    assert ce.targets_valid(np.array([0, 5]), 3, -100) is True  # no range: the kernel checks
    pad = np.array([-100, 0, 2, -100])
    K.note_upload(pad, pad)
    assert K.known_range(pad) == (-100, 2, 0)
    assert ce.targets_valid(pad, 3, -100) is True
    assert ce.targets_valid(pad, 3, -1) is None
    allpad = np.array([-1, -1])
    K.note_upload(allpad, allpad)
    assert ce.targets_valid(allpad, 3, -1) is True
    key = id(up)
    del up
    assert key not in K._KNOWN  # forgotten with the array


# -- the hooks of nn.functional, with these kernels inside the numpy backend -------------------

@pytest.fixture
def numpy_with_kernels(host_lib, monkeypatch):
    """The numpy backend equipped with the host build of the CuPy nn kernels."""
    cp, nnk, ce = _fake(host_lib, monkeypatch)
    b = vtl.backends.get("numpy")
    kernels = dict(b._kernels, linear=nnk.linear, linear_grad_weight=nnk.linear_grad_weight,
                   relu_backward=nnk.relu_backward, cross_entropy=ce)
    monkeypatch.setattr(b, "_kernels", kernels)
    return cp, nnk, ce


def _mlp_run(steps=3, seed=0, batch=12):
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((batch, 20)).astype(np.float32)
    ys = rng.integers(0, 5, batch)
    ys[3] = -100
    vtl.random.seed(1)
    net = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 8), nn.ReLU(),
                        nn.Linear(8, 5))
    return train(net, vtl.asarray(xs, backend="numpy"), vtl.asarray(ys, backend="numpy"), steps)


def test_mlp_training_with_the_kernels_matches_the_portable_path(host_lib, monkeypatch):
    ref = _mlp_run()
    cp, nnk, ce = _fake(host_lib, monkeypatch)
    b = vtl.backends.get("numpy")
    monkeypatch.setattr(b, "_kernels", dict(
        b._kernels, linear=nnk.linear, linear_grad_weight=nnk.linear_grad_weight,
        relu_backward=nnk.relu_backward, cross_entropy=ce))
    _mlp_run(steps=1)
    # one step: 3 linear (gemm + bias) + 1 loss | 1 loss gradient + 3 weight gradients
    # (gemm + column sums) + 2 input gradients (gemm) + 2 relu gradients
    assert nnk.launches + ce.launches == 6 + 1 + 1 + 6 + 2 + 2
    assert cp.log.count("vtl_cross_entropy") == 1
    assert_same_training(_mlp_run(), ref, {"rtol": 1e-5}, {"rtol": 1e-4, "atol": 1e-5})


def test_hooks_give_the_portable_values_and_gradients(numpy_with_kernels):
    cp, _, _ = numpy_with_kernels
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 6)).astype(np.float64)  # 3-D input: rows flattened
    w = rng.standard_normal((4, 6))
    b = rng.standard_normal(4)
    t = np.array([0, 3, -100, 1, 2, 2])
    res = []
    for use in (True, False):
        b_ = vtl.backends.get("numpy")
        kern = dict(b_._kernels)
        if not use:
            for k in ("linear", "linear_grad_weight", "relu_backward", "cross_entropy"):
                b_._kernels.pop(k)
        cp.log.clear()
        ts = [vtl.asarray(a, requires_grad=True, backend="numpy") for a in (x, w, b)]
        h = F.relu(F.linear(*ts))
        loss = F.cross_entropy(vtl.reshape(h, (6, 4)), vtl.asarray(t, backend="numpy"),
                               reduction="sum")
        loss.backward()
        res.append([loss.numpy()] + [a.grad.numpy() for a in ts])
        assert ("vtl_cross_entropy" in cp.log) is use
        b_._kernels.clear()
        b_._kernels.update(kern)
    for a, c in zip(*res, strict=True):
        np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-13)
    # create_graph: the differentiable rules, also with the kernels installed
    xt = vtl.asarray(rng.standard_normal((6, 4)), requires_grad=True, backend="numpy")
    loss = F.cross_entropy(xt, vtl.asarray(t, backend="numpy"))
    (g,) = vtl.autograd.grad(loss, [xt], create_graph=True)
    np.testing.assert_allclose(g.numpy(), np_cross_entropy(xt.numpy(), t, "mean")[1], rtol=1e-12,
                               atol=1e-14)


def test_bad_targets_through_cross_entropy(numpy_with_kernels):
    _, _, ce = numpy_with_kernels
    x = vtl.asarray(np.zeros((4, 3), np.float32), backend="numpy")
    # uploaded targets: a recorded range showing a bad one means an eager check
    bad = np.array([0, 1, 3, 0])
    K.note_upload(bad, bad)
    with pytest.raises(IndexError, match="target 3 is out of bounds for 3 classes"):
        F.cross_entropy(x, vtl.asarray(bad, backend="numpy"))
    # no known range: the call does not sync; the kernel's report is raised later
    loss = F.cross_entropy(x, vtl.asarray(np.array([0, -2, 1, 5]), backend="numpy"))
    assert ce.pending
    with pytest.raises(IndexError, match="target -2 is out of bounds for 3 classes"):
        ce.check_pending()
    assert math.isnan(float(loss))


# -- nvcc: every source variant compiles for the GPU ---------------------------------------------

def test_every_variant_compiles_with_nvcc(tmp_path):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    units = []
    for k, (spec, c, tc) in enumerate(itertools.product(
            K.SPECS, K.FLOAT_TYPES, ("int", "long long", "unsigned char"))):
        if tc != "int" and spec not in (K.CROSS_ENTROPY, K.CROSS_ENTROPY_GRAD):
            continue
        units.append(f"namespace v{k} {{\n" + K.cuda_source(spec, c, tc, name=f"k{k}")
                     .replace('extern "C" ', "") + "}\n")
    (tmp_path / "k.cu").write_text("\n".join(units))
    r = subprocess.run([nvcc, "-arch=sm_90", "--ptx", "-o", str(tmp_path / "k.ptx"),
                        str(tmp_path / "k.cu")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]


def test_gelu_and_special_elementwise_bodies_compile_with_nvcc(tmp_path):
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    units = []
    bodies = [*K.GELU_BODIES.values(), *K.SPECIAL_GRAD_BODIES.values()]
    for i, (body, c) in enumerate(itertools.product(bodies, K.CTYPES.values())):
        units.append(f"namespace g{i} {{ typedef {c} T; __global__ void k(const T* X, "
                     f"const T* G, T* Y) {{ const int i = threadIdx.x; const T x = X[i]; "
                     f"const T g = G[i]; (void)g; T y; {body} Y[i] = y; }} }}\n")
    (tmp_path / "k.cu").write_text("\n".join(units))
    r = subprocess.run([nvcc, "-arch=sm_90", "--ptx", "-o", str(tmp_path / "k.ptx"),
                        str(tmp_path / "k.cu")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]


# -- on the GPU --------------------------------------------------------------------------------

def _portable(b, monkeypatch):
    """Remove the nn kernels from the backend ``b`` (the portable paths run)."""
    kern = {k: v for k, v in b._kernels.items()
            if k not in ("linear", "linear_grad_weight", "relu_backward", "cross_entropy")}
    monkeypatch.setattr(b, "_kernels", kern)


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_gpu_mlp_step_matches_the_portable_path_and_numpy(cupy_backend, monkeypatch, dt):
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((16, 20)).astype(dt)
    ys = rng.integers(0, 5, 16)
    ys[2] = -100
    results = []
    for be, fused in (("numpy", False), ("cupy", True), ("cupy", False)):
        with monkeypatch.context() as mp:
            if not fused:
                _portable(cupy_backend, mp)
            vtl.random.seed(1)
            net = nn.Sequential(nn.Linear(20, 12), nn.ReLU(), nn.Linear(12, 5)).to(be)
            net = net.to(getattr(vtl, dt))
            results.append(train(net, vtl.asarray(xs, backend=be),
                                 vtl.asarray(ys, backend=be), 3))
    tol = {"rtol": 1e-4, "atol": 1e-5} if dt == "float32" else {"rtol": 1e-10, "atol": 1e-12}
    for other in results[1:]:
        assert_same_training(other, results[0], tol, tol)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (70, 33, 130), (128, 784, 256)])
def test_gpu_linear_kernels(cupy_backend, dt, m, k, n):
    cp = cupy_backend._cupy
    nnk = cupy_backend._kernels["linear"].__self__
    rng = np.random.default_rng(m + n)
    x, w, b = (rng.standard_normal(s).astype(dt) for s in ((m, k), (n, k), (n,)))
    tol = _tol(dt) if dt == np.float64 else {"rtol": 1e-4, "atol": 1e-3}
    x64, w64, b64 = (a.astype(np.float64) for a in (x, w, b))
    launches = nnk.launches
    got = nnk.linear(cp.asarray(x), cp.asarray(w), cp.asarray(b))
    assert nnk.launches - launches == 2
    np.testing.assert_allclose(cp.asnumpy(got), x64 @ w64.T + b64, **tol)
    xt = cp.asarray(np.ascontiguousarray(x.T)).T
    bb = cp.asarray(np.repeat(b, 2))[::2]
    np.testing.assert_allclose(cp.asnumpy(nnk.linear(xt, cp.asarray(w), bb)),
                               x64 @ w64.T + b64, **tol)
    g = rng.standard_normal((m, n)).astype(dt)
    gw, gb = nnk.linear_grad_weight(cp.asarray(g), cp.asarray(x), True)
    np.testing.assert_allclose(cp.asnumpy(gw), g.T.astype(np.float64) @ x64, **tol)
    np.testing.assert_allclose(cp.asnumpy(gb), g.astype(np.float64).sum(0), **tol)
    gs = cp.asarray(np.ascontiguousarray(g.T)).T
    np.testing.assert_allclose(cp.asnumpy(nnk.linear_grad_weight(gs, cp.asarray(x), True)[1]),
                               g.astype(np.float64).sum(0), **tol)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_gpu_relu_backward(cupy_backend, dt):
    cp = cupy_backend._cupy
    relu_bwd = cupy_backend._kernels["relu_backward"]
    rng = np.random.default_rng(5)
    x = rng.standard_normal((40, 33)).astype(dt)
    x[0, :5] = [0.0, -0.0, np.nan, np.inf, -np.inf]
    g = rng.standard_normal((40, 33)).astype(dt)
    want = np.where(x <= 0, 0, g)
    np.testing.assert_array_equal(cp.asnumpy(relu_bwd(cp.asarray(x), cp.asarray(g))), want)
    xs, gs = cp.asarray(x)[:, ::2], cp.asarray(g).T.copy().T[:, ::2]  # strided: ElementwiseKernel
    np.testing.assert_array_equal(cp.asnumpy(relu_bwd(xs, gs)), want[:, ::2])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(("m", "c"), [(1, 1), (7, 3), (128, 10), (300, 300), (5000, 20)])
@pytest.mark.parametrize(("dt", "tdt"), [(np.float32, np.int64), (np.float64, np.int32),
                                         (np.float32, np.uint8), (np.float64, np.int8)])
def test_gpu_cross_entropy_matches_the_portable_path(cupy_backend, monkeypatch, reduction, m, c,
                                                     dt, tdt):
    rng = np.random.default_rng(m + c)
    x, t = ce_case(rng, m, c, dt, tdt, high=min(c, 100))
    ce = cupy_backend._kernels["cross_entropy"]
    v = rng.standard_normal(m).astype(dt)
    res = []
    for fused in (True, False):
        with monkeypatch.context() as mp:
            if not fused:
                _portable(cupy_backend, mp)
            launches = ce.launches
            xt = vtl.asarray(x, backend="cupy", requires_grad=True)
            loss = F.cross_entropy(xt, vtl.asarray(t.astype(np.int64 if not fused else tdt),
                                                   backend="cupy"), reduction=reduction)
            one = m * c <= K.CE_ONE_BLOCK and m <= K.CE_ONE_BLOCK_ROWS
            assert (ce.launches - launches == (1 if one else 2)) is fused
            backward_scaled(loss, v, reduction, "cupy")
            res.append((loss.numpy(), xt.grad.numpy()))
    want, gwant = np_cross_entropy(x, t.astype(np.int64), reduction)
    tol = {"rtol": 1e-5, "atol": 1e-6} if dt == np.float32 else {"rtol": 1e-11, "atol": 1e-13}
    np.testing.assert_allclose(res[0][0], want, **tol)
    np.testing.assert_allclose(res[0][0], res[1][0], **tol)
    np.testing.assert_allclose(res[0][1], res[1][1], **tol)
    np.testing.assert_allclose(res[0][1], scaled_grad(gwant, v, reduction), **tol)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_gpu_cross_entropy_special_values_strides_and_errors(cupy_backend):
    cp = cupy_backend._cupy
    check_ce_special_values("cupy")
    # strided logits and targets (raw CuPy views through the kernel)
    ce = cupy_backend._kernels["cross_entropy"]
    rng = np.random.default_rng(1)
    xb = rng.standard_normal((9, 70)).astype(np.float64)
    tb = rng.integers(0, 9, 70)
    loss, saved = ce.fwd(cp.asarray(xb).T[::2], cp.asarray(tb)[::2], "mean", -100)
    w, gw = np_cross_entropy(xb.T[::2], tb[::2], "mean")
    np.testing.assert_allclose(float(loss), w, rtol=1e-12)
    g = ce.grad(cp.asarray(xb).T[::2], cp.asarray(tb)[::2], saved, cp.asarray(1.0), "mean",
                -100)
    np.testing.assert_allclose(cp.asnumpy(g), gw, rtol=1e-11, atol=1e-14)
    # targets computed on the device: no sync in the call, the error at the next read
    x4 = vtl.asarray(np.zeros((4, 3), np.float32), backend="cupy")
    tdev = vtl.asarray([0, 1, 2, 1], backend="cupy") + 2
    loss = F.cross_entropy(x4, tdev)
    with pytest.raises(IndexError, match="target 3 is out of bounds for 3 classes"):
        float(loss)
    assert math.isnan(float(loss))  # reported once
    # uploaded bad targets: the eager check raises in the call
    with pytest.raises(IndexError, match="target 3 is out of bounds for 3 classes"):
        F.cross_entropy(x4, vtl.asarray([0, 1, 3, 0], backend="cupy"))
    assert not ce.pending or ce.check_pending() is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_bodies_on_the_host(tmp_path, dtype):
    """The CuPy GELU kernel bodies compiled as C++ for the CPU against the portable formulas."""
    import ctypes

    from vtl.nn.functional.activation import _gelu, _gelu_grad

    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    ctype = K.CTYPES[np.dtype(dtype)]
    funcs = []
    for (which, form), body in K.GELU_BODIES.items():
        funcs.append(
            f'extern "C" void gelu_{which}_{form}(const T* X, const T* G, T* Y, long n) {{\n'
            f"  for (long i = 0; i < n; ++i) {{ const T x = X[i]; const T g = G[i]; T y;\n"
            f"    (void)g; {body}\n    Y[i] = y; }}\n}}\n")
    src = (f"#include <cmath>\nusing std::erfc; using std::exp; using std::tanh;\n"
           f"typedef {ctype} T;\n" + "".join(funcs))
    (tmp_path / "g.cpp").write_text(src)
    lib = tmp_path / "g.so"
    subprocess.run([cxx, "-O1", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "g.cpp")],
                   check=True, capture_output=True)
    so = ctypes.CDLL(str(lib))
    x = np.concatenate([np.linspace(-12, 12, 241), [-1e4, -30.0, 0.0, 30.0, 1e4]]).astype(dtype)
    g = np.linspace(-1, 1, x.size).astype(dtype)
    # (the tanh form's 1 + tanh and 1 - tanh^2 cancel where |x| is large: libm's last bits
    # of tanh then show; absolute differences stay at the dtype's epsilon)
    tol = {"rtol": 2e-6, "atol": 1e-6} if dtype == np.float32 else {"rtol": 1e-13, "atol": 1e-13}
    for (which, form) in K.GELU_BODIES:
        y = np.empty_like(x)
        getattr(so, f"gelu_{which}_{form}")(x.ctypes.data_as(ctypes.c_void_p),
                                            g.ctypes.data_as(ctypes.c_void_p),
                                            y.ctypes.data_as(ctypes.c_void_p),
                                            ctypes.c_long(x.size))
        with np.errstate(all="ignore"):
            want = _gelu(np, x, form) if which == "fwd" else _gelu_grad(np, x, g, form)
        np.testing.assert_allclose(y, want, **tol, err_msg=f"{which} {form}")


# -- softmax ---------------------------------------------------------------------------------

_SOFTMAX_VARIANTS = [(K.SOFTMAX, c, "int") for c in FLOAT_DTYPES]


@pytest.fixture(scope="module")
def softmax_lib(tmp_path_factory):
    return build_host_lib(tmp_path_factory.mktemp("cupy_softmax_host"), _SOFTMAX_VARIANTS)


def _np_softmax(x: np.ndarray, log: bool) -> np.ndarray:
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    z = x - m
    s = np.sum(np.exp(z), axis=-1, keepdims=True)
    return z - np.log(s) if log else np.exp(z) / s


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("ctype", list(FLOAT_DTYPES))
def test_softmax_on_the_host(softmax_lib, monkeypatch, ctype):
    """The warp-per-row softmax/log_softmax kernel and its gradients against NumPy's float64
    formulas (special rows included), driven through ``CupySoftmax``."""
    cp = FakeCupy(softmax_lib, _SOFTMAX_VARIANTS)
    monkeypatch.setattr(K.CupySoftmax, "_device_of", staticmethod(lambda a: _DEV))
    kern = K.CupySoftmax(cp)
    dt = np.dtype(FLOAT_DTYPES[ctype])
    rng = np.random.default_rng(5)
    x = rng.standard_normal((11, 45)) * 3
    x[1] = -np.inf
    x[2, 3] = np.inf
    x[3, 7] = np.nan
    x = x.astype(dt)
    g = rng.standard_normal((11, 45)).astype(dt)
    xw = x.astype(np.float64)
    eps = {"float": 1e-6, "double": 1e-14}.get(ctype, 8 * float(np.finfo(np.float16).eps)
                                              if ctype == "half" else 2.0**-6)
    for log in (False, True):
        y = kern.forward(x, log)
        assert y.dtype == dt and y.shape == x.shape
        np.testing.assert_allclose(y.astype(np.float64), _np_softmax(xw, log), rtol=eps,
                                   atol=eps, equal_nan=True)
        yw = y.astype(np.float64)
        gw = g.astype(np.float64)
        want = gw - np.exp(yw) * gw.sum(-1, keepdims=True) if log else \
            yw * (gw - (gw * yw).sum(-1, keepdims=True))
        dx = kern.backward(y, g, log)
        ok = np.isfinite(want)
        np.testing.assert_allclose(dx.astype(np.float64)[ok], want[ok], rtol=4 * eps,
                                   atol=4 * eps)
    assert cp.log == ["vtl_softmax"] * 4
    assert kern.forward(np.ones((2, 3), np.int32), False) is None
    assert kern.backward(y, g[:, :3], False) is None
