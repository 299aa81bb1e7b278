"""The layout of ``vtl.backends``: one package per backend with the same file names for the
same job, no backend importing another, one kernel lookup and every kernel following its
contract in ``vtl.backends.kernels``; and the ``philox`` kernels against the portable
generator."""

from __future__ import annotations

import ast
import ctypes
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import to_numpy

import vtl
from vtl.backends import kernels as K
from vtl.random import philox_words

ROOT = Path(vtl.__file__).resolve().parent / "backends"
BACKENDS = ("numpy", "cupy", "wgpu")
#: the files a backend package may hold besides its private modules (``_*.py``)
JOBS = {"__init__.py", "backend.py", "namespace.py", "linalg.py", "conv.py", "pool.py",
        "nn.py", "rnn.py", "optim.py", "random.py", "scatter.py", "checks.py", "capture.py",
        "blas.py", "casts.py", "cudnn.py", "cudnn_attention.py", "attention.py"}


def _imports(path: Path) -> list[str]:
    """The absolute module names ``path`` imports (relative imports resolved)."""
    pkg = path.relative_to(ROOT.parent.parent).with_suffix("").parts[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = list(pkg[:len(pkg) - node.level + 1]) if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            if node.module is None:
                out += [f"{mod}.{a.name}" for a in node.names]
            else:
                out.append(mod)
    return out


@pytest.mark.parametrize("name", BACKENDS)
def test_no_backend_package_imports_another(name):
    others = [f"vtl.backends.{o}" for o in BACKENDS if o != name]
    for path in (ROOT / name).glob("*.py"):
        for mod in _imports(path):
            assert not any(mod == o or mod.startswith(o + ".") for o in others), \
                f"{path.name} of the {name} backend imports {mod}"


@pytest.mark.parametrize("name", BACKENDS)
def test_backend_packages_share_file_names(name):
    files = {p.name for p in (ROOT / name).glob("*.py") if not p.name.startswith("_")}
    assert "backend.py" in files
    if name != "wgpu":  # the wgpu package is also a standalone library with its own modules
        assert files <= JOBS, sorted(files - JOBS)
    else:
        assert {"conv.py", "pool.py", "nn.py", "rnn.py", "optim.py", "random.py"} <= files


def test_shared_code_imports_no_backend_package():
    for path in (ROOT / "_common").glob("*.py"):
        for mod in _imports(path):
            assert not any(mod.startswith(f"vtl.backends.{b}") for b in BACKENDS), (path, mod)


def test_importing_vtl_imports_no_backend_runtime():
    code = ("import sys, vtl; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cupy', 'wgpu') "
            "or m.startswith(('vtl.backends.cupy', 'vtl.backends.wgpu'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_every_kernel_name_has_a_contract_with_a_docstring():
    assert len(K.KERNELS) == 24
    for name, contract in K.KERNELS.items():
        assert contract.__doc__ and f'"{name}"' in contract.__doc__, name
        assert K._methods(contract), name


def test_registered_kernels_follow_their_contracts(backend):
    b = vtl.backends.get(backend)
    names = b.kernel_names
    assert names and set(names) <= set(K.KERNELS)
    for name in names:
        kern = b.kernel(name)
        assert isinstance(kern, K.KERNELS[name]), name
    assert "philox" in names  # every built-in backend draws its random words in one kernel


def test_kernel_lookup_and_registration_errors():
    b = vtl.backends.get("numpy")
    with pytest.raises(ValueError, match="unknown kernel name 'conv3d'"):
        b.kernel("conv3d")
    with pytest.raises(ValueError, match="unknown kernel name"):
        b.register_kernel("conv3d", object())

    class Half:
        def supports(self, dtype):
            return True

        def forward(self, *args):
            return None

    with pytest.raises(TypeError, match=r"Conv2dKernel \(missing: backward\)"):
        b.register_kernel("conv2d", Half())
    assert b.kernel("conv2d") is not None  # the failed registration changed nothing


# -- philox ----------------------------------------------------------------------------------
CASES = [(1, 0), (4, 3), (7, 2**32 - 1), (13, 2**64 - 3), (1001, 2**96 + 2**32 - 5),
         (64, 2**128 - 2)]


@pytest.mark.parametrize("n, counter", CASES)
def test_philox_kernel_equals_the_portable_words(backend, n, counter):
    import array_api_compat.numpy as xp

    b = vtl.backends.get(backend)
    key = (0x1234ABCD, 0xFEDC0987)
    got = b.to_host(b.kernel("philox")(n, key, counter, 0))
    want = philox_words(xp, n, key, counter)
    assert got.dtype == np.uint32 and got.shape == (n,)
    np.testing.assert_array_equal(got, want)


def test_philox_kernel_of_no_words(backend):
    kern = vtl.backends.get(backend).kernel("philox")
    out = kern(0, (1, 2), 5, 0)
    assert tuple(out.shape) == (0,)


def test_generator_draws_the_same_numbers_with_and_without_the_kernel(backend, monkeypatch):
    b = vtl.backends.get(backend)
    fused = [to_numpy(f(size=(3, 5), backend=backend)) for f in (
        vtl.random.Generator(9).uniform, vtl.random.Generator(9).normal)]
    monkeypatch.delitem(b._kernels, "philox")
    portable = [to_numpy(f(size=(3, 5), backend=backend)) for f in (
        vtl.random.Generator(9).uniform, vtl.random.Generator(9).normal)]
    for a, p in zip(fused, portable, strict=True):
        np.testing.assert_array_equal(a, p)


_SHIM = """
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
struct Dim { unsigned int x; };
static Dim blockIdx, blockDim, threadIdx, gridDim;
static unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a * b) >> 32);
}
extern "C" void set_grid(unsigned b, unsigned bd, unsigned t, unsigned gd) {
  blockIdx.x = b; blockDim.x = bd; threadIdx.x = t; gridDim.x = gd;
}
"""


def test_cupy_philox_source_on_the_host(tmp_path):
    """The CUDA source of the cupy kernel, compiled as C++ for the CPU over a simulated
    grid, gives the portable words."""
    import array_api_compat.numpy as xp

    from vtl.backends.cupy.random import cuda_source

    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    (tmp_path / "k.cpp").write_text(_SHIM + cuda_source() + cuda_source(
        "vtl_philox_mem", words_in_memory=True))
    lib = tmp_path / "k.so"
    subprocess.run([cxx, "-O1", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "k.cpp")],
                   check=True, capture_output=True)
    so = ctypes.CDLL(str(lib))
    fn = so.vtl_philox
    u32 = ctypes.c_uint
    fn.argtypes = [ctypes.c_void_p, ctypes.c_longlong, ctypes.c_longlong, u32, u32, u32, u32,
                   u32, u32]
    mem = so.vtl_philox_mem  # the words of a captured draw, read from memory
    mem.argtypes = [ctypes.c_void_p, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_void_p]
    key = (0x1234ABCD, 0xFEDC0987)
    for n, counter in CASES:
        nblocks = -(-n // 4)
        limbs = [(counter >> (32 * k)) & 0xFFFFFFFF for k in range(4)]
        words = np.array([*limbs, *key], dtype=np.uint32)
        want = philox_words(xp, n, key, counter)
        for kern, tail in ((fn, (*limbs, *key)), (mem, (words.ctypes.data,))):
            out = np.zeros(n, dtype=np.uint32)
            for blk in range(2):  # grid of 2 blocks of 3 threads, striding over the blocks
                for t in range(3):
                    so.set_grid(blk, 3, t, 2)
                    kern(out.ctypes.data, n, nblocks, *tail)
            np.testing.assert_array_equal(out, want, err_msg=str(n))
