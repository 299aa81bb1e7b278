"""vtl's namespace and autograd on ``backend="wgpu"`` (opt-in while the backend is incomplete)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
xp = pytest.importorskip("vtl.backends.wgpu")
if not xp.is_available():
    pytest.skip("no WebGPU adapter", allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent("""
    import numpy as np
    import vtl

    assert vtl.backends.available()["wgpu"] is None
    rng = np.random.default_rng(0)
    xh = rng.standard_normal((4, 3)).astype(np.float32)
    wh = rng.standard_normal(3).astype(np.float32)
    grads = {}
    for b in ("numpy", "wgpu"):
        x = vtl.asarray(xh, backend=b)
        w = vtl.asarray(wh, backend=b, requires_grad=True)
        loss = vtl.sum(vtl.exp(x @ w) * 2.0 - w[0])
        loss.backward()
        grads[b] = (float(loss), w.grad.to("numpy")._data)
        assert w.grad.device == vtl.Device(b, 0)
    assert abs(grads["numpy"][0] - grads["wgpu"][0]) < 1e-4 * abs(grads["numpy"][0])
    np.testing.assert_allclose(grads["wgpu"][1], grads["numpy"][1], rtol=1e-4, atol=1e-5)
    t = vtl.ones((2, 2), backend="wgpu")
    assert t.device == vtl.Device("wgpu", 0)
    assert (t + 1).to("numpy")._data.tolist() == [[2.0, 2.0], [2.0, 2.0]]
    print("OK")
""")


def test_vtl_ops_and_autograd_on_wgpu_backend():
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-3000:]
