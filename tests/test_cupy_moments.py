"""The cupy backend's fused ``var`` (``vtl/backends/cupy/_moments.py``): on the host (given
a C++20 compiler) the CUDA sources compiled under the CUDA emulation of the nn kernels'
tests and driven through ``Moments`` by a stand-in for CuPy, against NumPy's two-pass
``var`` in float64, over all axes and trailing ones, with one block per row and with
slices and their folds; on a GPU, ``vtl.var``/``vtl.std`` against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from test_cupy_nn_kernels import _DEV, FakeCupy, build_host_lib

import vtl
from vtl.backends.cupy import _moments as M

_VARIANTS = [(spec, c, "int") for spec in (M.VAR_PASS, M.VAR_FOLD) for c in ("float", "double")]


@pytest.fixture(scope="module")
def host_lib(tmp_path_factory):
    return build_host_lib(tmp_path_factory.mktemp("cupy_moments_host"), _VARIANTS)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_var_on_the_host(host_lib, monkeypatch, dt):
    monkeypatch.setattr(M, "_MIN_PER_BLOCK", 100)  # slices on small rows too
    monkeypatch.setattr(M, "_TARGET_BLOCKS", 8)
    cp = FakeCupy(host_lib, _VARIANTS)
    monkeypatch.setattr(M.Moments, "_device_of", staticmethod(lambda a: _DEV))
    cp.ndarray = np.ndarray
    kern = M.Moments(cp)
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((3, 4, 250)) * 5 + 1e3).astype(dt)  # a large mean
    tol = 1e-5 if dt == np.float32 else 1e-12
    for axis, corr, keep in ((None, 0.0, False), (-1, 1.0, False), ((1, 2), 0.0, True),
                             (2, 0.0, True)):
        got = kern.var(x, axis, corr, keep)
        want = np.var(x.astype(np.float64), axis=axis, ddof=corr, keepdims=keep)
        assert got.dtype == dt and got.shape == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=tol)
    names = {n for n in cp.log}
    assert names == {"vtl_var_pass", "vtl_var_fold"}
    assert kern.var(x, 0, 0.0, False) is None  # a leading axis: the staged path
    assert kern.var(x.astype(np.float16), None, 0.0, False) is None


@pytest.mark.parametrize("shape", [(4096, 4096), (3, 70000), (1 << 20,)])
def test_gpu_var_and_std_match_numpy(cupy_backend, shape):
    rng = np.random.default_rng(1)
    xs = (rng.standard_normal(shape) * 3 + 100).astype(np.float32)
    t = vtl.asarray(xs, device="cupy")
    for axis in (None, -1):
        np.testing.assert_allclose(vtl.var(t, axis=axis).numpy(),
                                   np.var(xs.astype(np.float64), axis=axis), rtol=1e-5)
        np.testing.assert_allclose(vtl.std(t, axis=axis, correction=1).numpy(),
                                   np.std(xs.astype(np.float64), axis=axis, ddof=1),
                                   rtol=1e-5)


def test_sources_compile_with_nvcc(tmp_path):
    import shutil
    import subprocess

    from vtl.backends.cupy import nn as K

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not installed")
    units = [f"namespace m{i} {{\n" + K.cuda_source(spec, c, tc, name=f"k{i}")
             .replace('extern "C" ', "") + "}\n" for i, (spec, c, tc) in enumerate(_VARIANTS)]
    (tmp_path / "k.cu").write_text("\n".join(units))
    r = subprocess.run([nvcc, "-arch=sm_90", "--ptx", "-o", str(tmp_path / "k.ptx"),
                        str(tmp_path / "k.cu")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]


def test_axes_split():
    split = M.axes_split
    assert split(3, None, leading=False) == 0 and split(3, None, leading=True) == 3
    assert split(3, -1, leading=False) == 2 and split(3, (1, 2), leading=False) == 1
    assert split(3, (2, -2), leading=False) == 1
    assert split(3, 0, leading=True) == 1 and split(3, (1, 0), leading=True) == 2
    assert split(3, 1, leading=False) is None and split(3, 1, leading=True) is None
    assert split(3, (0, 0), leading=True) is None  # an axis twice
    assert split(3, 3, leading=True) is None and split(3, -4, leading=False) is None
    assert split(3, True, leading=True) is None and split(3, [0], leading=True) is None
