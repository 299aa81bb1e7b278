"""The backend registry, default-backend selection, devices and transfers."""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import vtl
from tests.helpers import assert_close
from vtl import backends


def test_numpy_always_available():
    assert backends.available()["numpy"] is None
    assert "numpy" in backends.available_names()


def test_available_reports_reason_for_each_backend():
    info = backends.available()
    assert set(info) >= {"numpy", "cupy", "wgpu"}
    for name, reason in info.items():
        if name not in backends.available_names():
            assert isinstance(reason, str) and reason


def test_unknown_backend_is_value_error_listing_known():
    with pytest.raises(ValueError, match="numpy"):
        vtl.set_backend("tpu")
    with pytest.raises(ValueError, match="known backends"):
        vtl.ones(3, backend="tpu")


def test_unavailable_backend_is_runtime_error_with_reason():
    missing = [n for n, r in backends.available().items() if r is not None]
    if not missing:
        pytest.skip("every backend is available here")
    with pytest.raises(RuntimeError, match="not available"):
        vtl.ones(3, backend=missing[0])
    with pytest.raises(RuntimeError, match="not available"):
        vtl.set_backend(missing[0])


def test_default_backend_and_context_manager():
    assert vtl.get_backend() == "numpy"
    with vtl.use_backend("numpy"):
        assert vtl.ones(2).device == vtl.Device("numpy", 0)
    assert vtl.get_backend() == "numpy"


def test_set_backend_changes_default(backend):
    prev = vtl.get_backend()
    vtl.set_backend(backend)
    try:
        assert vtl.zeros(2).device.backend_name == backend
    finally:
        vtl.set_backend("numpy")
    del prev


def test_env_variable_selects_default(tmp_path):
    import subprocess
    import sys

    code = "import vtl; print(vtl.get_backend(), vtl.ones(1).device)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**__import__("os").environ, "VTL_BACKEND": "numpy"}, check=True)
    assert out.stdout.split() == ["numpy", "numpy:0"]


def test_import_never_fails_with_bad_env():
    import subprocess
    import sys

    code = "import vtl\ntry:\n    vtl.ones(1)\nexcept ValueError as e:\n    print('VE', e)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**__import__("os").environ, "VTL_BACKEND": "nope"}, check=True)
    assert out.stdout.startswith("VE")


def test_device_objects():
    d = vtl.Device("cupy", 0)
    assert str(d) == "cupy:0" and repr(d) == "Device('cupy:0')"
    assert d is vtl.Device("cupy", 0)
    assert d == "cupy:0" and d != vtl.Device("cupy", 1)
    assert hash(d) == hash(vtl.Device("cupy", 0))
    with pytest.raises(ValueError, match="unknown device"):
        vtl.ones(2, device="tpu:0")


def test_tensor_device_and_repr(backend):
    x = vtl.asarray([[1.0, 2.0], [3.0, 4.0]])
    assert x.device.backend_name == backend
    r = repr(x)
    assert "float32" in r and f"{backend}:0" in r and "3." in r


def test_mixed_devices_raise(backend, other_backends):
    if not other_backends:
        pytest.skip("needs two backends")
    a = vtl.ones(3)
    b = vtl.ones(3, backend=other_backends[0])
    with pytest.raises(ValueError, match="different devices"):
        a + b
    with pytest.raises(ValueError, match="different devices"):
        vtl.matmul(vtl.ones((2, 2)), vtl.ones((2, 2), backend=other_backends[0]))


def test_to_device_roundtrip_and_grad(backend):
    x = vtl.asarray([1.0, 2.0, 3.0], backend="numpy", requires_grad=True)
    y = x.to(backend)
    assert y.device.backend_name == backend
    assert_close(y, np.array([1.0, 2.0, 3.0], dtype=np.float32))
    vtl.sum(y * y).backward()
    assert x.grad.device == vtl.Device("numpy", 0)
    assert_close(x.grad, np.array([2.0, 4.0, 6.0], dtype=np.float32))
    assert x.to_device(x.device) is x


def test_numpy_interop():
    x = vtl.asarray([1.0, 2.0])
    assert np.asarray(x).dtype == np.float32
    assert x.numpy().tolist() == [1.0, 2.0]
    # NumPy defers to Tensor for operators
    r = np.float32(2.0) * x
    assert isinstance(r, vtl.Tensor)


def test_gpu_tensor_refuses_implicit_numpy(other_backends):
    gpu = [b for b in other_backends if b != "numpy"]
    if not gpu:
        pytest.skip("no GPU backend available")
    t = vtl.ones(3, backend=gpu[0])
    with pytest.raises(TypeError, match="numpy"):
        np.asarray(t)
    assert t.numpy().tolist() == [1.0, 1.0, 1.0]


def test_dlpack_roundtrip(backend):
    x = vtl.arange(6, dtype=vtl.float32)
    y = vtl.from_dlpack(x)
    assert_close(y, np.arange(6, dtype=np.float32))
    if backend == "numpy":
        z = np.from_dlpack(x)
        assert z.tolist() == list(range(6))


def test_array_namespace_info(backend):
    info = vtl.__array_namespace_info__()
    devs = info.devices()
    assert vtl.Device(backend, 0) in devs
    assert info.default_dtypes(device=vtl.Device(backend, 0))["real floating"] == vtl.float32
    assert "float32" in info.dtypes(device=vtl.Device(backend, 0))
    assert set(info.dtypes(kind="integral")) == {
        "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
    assert info.capabilities()["boolean indexing"] is True
    with pytest.raises(ValueError, match="unknown dtype kind"):
        info.dtypes(kind="floaty")


def test_array_api_compat_sees_vtl(backend):
    import array_api_compat

    x = vtl.ones(3)
    assert array_api_compat.array_namespace(x) is vtl
    assert x.__array_namespace__(api_version="2024.12") is vtl
    with pytest.raises(ValueError, match="unsupported array API version"):
        x.__array_namespace__(api_version="1999.01")


@pytest.mark.parametrize(("name", "extra"), [("cupy", "cuda"), ("wgpu", "wgpu")])
def test_a_missing_runtime_names_the_install(monkeypatch, name, extra):
    b = backends.get(name)
    monkeypatch.setattr(b, "_probed", True)
    monkeypatch.setattr(b, "_error", f"ModuleNotFoundError: No module named '{name}'")
    with pytest.raises(RuntimeError, match=re.escape(f"pip install -e '.[{extra}]'")):
        vtl.set_backend(name)
    monkeypatch.setattr(b, "_error", "RuntimeError: no WebGPU adapter found")
    with pytest.raises(RuntimeError, match="not available") as info:
        vtl.set_backend(name)
    assert "pip install" not in str(info.value)  # installed, but no device: no install hint


def test_asarray_of_a_runtime_array_loads_its_backend():
    """An array of a runtime whose backend has not been used yet (no tensor made on it)
    becomes a tensor on that backend, and NumPy data never loads another backend."""
    if "wgpu" not in backends.available_names():
        pytest.skip("needs the wgpu backend")
    code = ("import sys, numpy as np, vtl\n"
            "t = vtl.asarray(np.ones(2))\n"
            "assert not any(m.startswith(('cupy', 'vtl.backends.wgpu')) for m in sys.modules)\n"
            "import vtl.backends.wgpu as w\n"
            "t = vtl.asarray(w.asarray([1.0, 2.0]))\n"
            "print(t.device, t.tolist())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "wgpu:0 [1.0, 2.0]"


def test_a_kernel_asked_for_before_anything_else_loads_the_backend():
    """``kernel(name)`` on a backend nothing has used yet loads its runtime (where the
    kernels are registered) instead of answering ``None``, which would send the caller down
    the portable path; an unknown name is still a ``ValueError``."""
    from vtl.backends.numpy.backend import NumpyBackend

    fresh = NumpyBackend()
    assert fresh.kernel("multi_tensor_apply") is not None
    with pytest.raises(ValueError, match="unknown kernel name"):
        NumpyBackend().kernel("no_such_kernel")
