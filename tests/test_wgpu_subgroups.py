"""The row-wise kernels' reductions on subgroups (``wgsl/math/subgroup_reduce.wgsl``)
against the workgroup-memory ones they replace and against NumPy: softmax, log_softmax,
layer_norm and rms_norm forward and backward, and attention, in processes that force either
form (the form is chosen once per process)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
xp = pytest.importorskip("vtl.backends.wgpu")
if not xp.is_available():
    pytest.skip("no WebGPU adapter", allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# rows of 1 to 5000 elements: segments narrower than, as wide as and wider than a subgroup,
# and rows longer than a workgroup holds in registers; the results saved as .npy files
_SCRIPT = r"""
import sys, numpy as np, vtl
import vtl.backends.wgpu as xp
F = vtl.nn.functional
print(xp.runtime_info()["row_reductions"])
r = np.random.default_rng(11)
out = {}
for n in (1, 7, 16, 33, 100, 512, 1030, 5000):
    a = r.standard_normal((19, n)).astype(np.float32) * 3 + 1
    g = r.standard_normal((19, n)).astype(np.float32)
    w = r.standard_normal(n).astype(np.float32)
    for name in ("softmax", "log_softmax", "layer_norm", "rms_norm"):
        x = vtl.asarray(a, backend="wgpu", requires_grad=True)
        wt = vtl.asarray(w, backend="wgpu", requires_grad=True)
        if name in ("softmax", "log_softmax"):
            y = getattr(F, name)(x, dim=-1)
        else:
            y = getattr(F, name)(x, (n,), wt)
        y.backward(vtl.asarray(g, backend="wgpu"))
        out[f"{name}-{n}-y"] = y.numpy()
        out[f"{name}-{n}-dx"] = x.grad.numpy()
q = vtl.asarray(r.standard_normal((2, 3, 300, 16)).astype(np.float32), backend="wgpu",
                requires_grad=True)
o = F.scaled_dot_product_attention(q, q, q, is_causal=True)
o.backward(vtl.ones_like(o))
out["sdpa-y"], out["sdpa-dq"] = o.numpy(), q.grad.numpy()
np.savez(sys.argv[1], **out)
"""


def _run(mode: str, path) -> tuple[str, dict]:
    env = dict(os.environ, VTL_WGPU_SUBGROUP_REDUCE=mode)
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(path)], env=env, cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    with np.load(path) as f:
        return out.stdout.strip().splitlines()[-1], dict(f)


def _reference(a: np.ndarray, w: np.ndarray, g: np.ndarray, name: str) -> tuple:
    """``(y, dx)`` in float64."""
    a, w, g = (t.astype(np.float64) for t in (a, w, g))
    n = a.shape[1]
    if name in ("softmax", "log_softmax"):
        e = np.exp(a - a.max(1, keepdims=True))
        p = e / e.sum(1, keepdims=True)
        if name == "softmax":
            return p, p * (g - (g * p).sum(1, keepdims=True))
        return np.log(p), g - p * g.sum(1, keepdims=True)
    mu = a.mean(1, keepdims=True) if name == "layer_norm" else 0.0
    d = a - mu
    r = 1 / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5 if name == "layer_norm"
                    else (a * a).mean(1, keepdims=True) + np.finfo(np.float32).eps)
    xh = d * r
    gw = g * w
    c1 = gw.mean(1, keepdims=True) if name == "layer_norm" else 0.0
    dx = r * (gw - c1 - xh * (gw * xh).mean(1, keepdims=True))
    assert n == a.shape[1]
    return xh * w, dx


def test_row_kernels_on_subgroups_match_workgroup_memory_and_numpy(tmp_path):
    how0, tree = _run("0", tmp_path / "tree.npz")
    how1, sub = _run("1", tmp_path / "sub.npz")
    assert how0.startswith("workgroup memory")
    if not how1.startswith("subgroups of"):
        pytest.skip(f"this adapter's subgroups are not used: {how1}")
    assert tree.keys() == sub.keys()
    for key in tree:
        np.testing.assert_allclose(sub[key], tree[key], rtol=2e-5, atol=2e-5, err_msg=key)
    r = np.random.default_rng(11)
    for n in (1, 7, 16, 33, 100, 512, 1030, 5000):
        a = r.standard_normal((19, n)).astype(np.float32) * 3 + 1
        g = r.standard_normal((19, n)).astype(np.float32)
        w = r.standard_normal(n).astype(np.float32)
        for name in ("softmax", "log_softmax", "layer_norm", "rms_norm"):
            y, dx = _reference(a, w, g, name)
            np.testing.assert_allclose(sub[f"{name}-{n}-y"], y, rtol=1e-4, atol=2e-5,
                                       err_msg=f"{name} {n}")
            np.testing.assert_allclose(sub[f"{name}-{n}-dx"], dx, rtol=1e-4, atol=5e-5,
                                       err_msg=f"{name} {n} grad")


def test_subgroup_form_by_default_only_on_nvidia():
    from vtl.backends.wgpu import _runtime, _subgroups

    status = xp.runtime_info()["row_reductions"]
    mode = os.environ.get("VTL_WGPU_SUBGROUP_REDUCE", "").strip()
    nvidia = _runtime.get().info.get("vendor_id") in _subgroups.DEFAULT_VENDORS
    if mode == "0":
        assert status == "workgroup memory (VTL_WGPU_SUBGROUP_REDUCE=0)"
    elif mode != "1" and not nvidia:
        assert status == ("workgroup memory (subgroups by default only on NVIDIA adapters; "
                          "VTL_WGPU_SUBGROUP_REDUCE=1 asks for them)")
    else:
        assert status.startswith(("subgroups of", "workgroup memory ("))
