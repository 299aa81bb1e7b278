"""vtl.amp.GradScaler: the scale sequence of PyTorch's rule for a scripted overflow pattern
(a NumPy oracle of ``_amp_update_scale_``, and torch.amp.GradScaler where importable),
skipped steps, unscale_, errors, state_dict, no host reads before step()."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import to_numpy

import vtl
import vtl.nn.functional as F
from vtl import nn, optim

PATTERN = [0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0]


def _oracle(pattern, init_scale, growth_factor, backoff_factor, growth_interval):
    """PyTorch's ``_amp_update_scale_`` (aten/src/ATen/native/cuda/AmpKernels.cu) in NumPy
    float32: (scale, growth tracker) after each step."""
    scale, tracker = np.float32(init_scale), 0
    out = []
    for bad in pattern:
        if bad:
            scale = np.float32(scale * np.float32(backoff_factor))
            tracker = 0
        else:
            succ = tracker + 1
            if succ == growth_interval:
                grown = np.float32(scale * np.float32(growth_factor))
                if np.isfinite(grown):
                    scale = grown
                tracker = 0
            else:
                tracker = succ
        out.append((float(scale), tracker))
    return out


def _run_vtl(pattern, **kw):
    w = nn.Parameter(vtl.ones(3))
    opt = optim.SGD([w], lr=0.1)
    sc = vtl.amp.GradScaler(**kw)
    out, weights = [], []
    for bad in pattern:
        opt.zero_grad()
        loss = vtl.sum(w * (float("inf") if bad else 1.0))
        sc.scale(loss).backward()
        sc.step(opt)
        sc.update()
        out.append((sc.get_scale(), sc._get_growth_tracker()))
        weights.append(to_numpy(w).copy())
    return out, weights, sc


KW = {"init_scale": 2.0**4, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 3}


def test_scale_sequence_matches_pytorchs_rule(backend):
    got, weights, _ = _run_vtl(PATTERN, **KW)
    assert got == _oracle(PATTERN, **KW)
    # steps with inf gradients are skipped; the others apply lr * 1
    expect, w = [], 1.0
    for bad in PATTERN:
        if not bad:
            w = np.float32(w - np.float32(0.1))
        expect.append(w)
    np.testing.assert_allclose([x[0] for x in weights], expect, rtol=1e-6)


@pytest.mark.filterwarnings("ignore:overflow encountered in scalar multiply")
def test_growth_stops_at_float32s_range(backend):
    got, _, _ = _run_vtl([0] * 6, init_scale=2.0**126, growth_factor=4.0, backoff_factor=0.5,
                         growth_interval=1)
    assert got == _oracle([0] * 6, 2.0**126, 4.0, 0.5, 1)
    assert got[-1][0] == 2.0**126  # 2**128 is not finite in float32: kept


def test_against_torch():
    torch = pytest.importorskip("torch")
    w = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.SGD([w], lr=0.1)
    sc = torch.amp.GradScaler("cpu", **KW)
    want = []
    for bad in PATTERN:
        opt.zero_grad()
        sc.scale((w * (float("inf") if bad else 1.0)).sum()).backward()
        sc.step(opt)
        sc.update()
        want.append((sc.get_scale(), sc._get_growth_tracker(), w.detach().numpy().copy()))
    with vtl.use_backend("numpy"):
        got, weights, mine = _run_vtl(PATTERN, **KW)
    assert got == [(s, t) for s, t, _ in want]
    for a, (_, _, b) in zip(weights, want, strict=True):
        np.testing.assert_array_equal(a, b)
    assert mine.state_dict() == sc.state_dict()


def test_unscale_then_clip_and_nan(backend):
    w = nn.Parameter(vtl.asarray([3.0, 4.0]))
    opt = optim.SGD([w], lr=1.0)
    sc = vtl.amp.GradScaler(init_scale=8.0)
    sc.scale(vtl.sum(w * w)).backward()
    np.testing.assert_allclose(to_numpy(w.grad), [48.0, 64.0])
    sc.unscale_(opt)
    np.testing.assert_allclose(to_numpy(w.grad), [6.0, 8.0])
    vtl.nn.utils.clip_grad_norm_([w], 5.0)
    sc.step(opt)
    sc.update()
    np.testing.assert_allclose(to_numpy(w), [0.0, 0.0], atol=1e-5)
    opt.zero_grad()
    sc.scale(vtl.sum(w * float("nan"))).backward()
    before = to_numpy(w).copy()
    assert sc.step(opt) is None  # skipped
    sc.update()
    np.testing.assert_array_equal(to_numpy(w), before)
    assert sc.get_scale() == 4.0


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_errors_as_pytorch():
    w = nn.Parameter(vtl.ones(2))
    opt = optim.SGD([w], lr=0.1)
    sc = vtl.amp.GradScaler()
    with pytest.raises(AssertionError):
        sc.update()  # nothing scaled yet
    sc.scale(vtl.sum(w)).backward()
    sc.unscale_(opt)
    with pytest.raises(RuntimeError, match="already been called"):
        sc.unscale_(opt)
    sc.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        sc.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        sc.unscale_(opt)
    with pytest.raises(RuntimeError, match="Closure"):
        sc.step(opt, closure=lambda: None)
    sc.update()
    h = nn.Parameter(vtl.ones(2, dtype=vtl.float16))
    o2 = optim.SGD([h], lr=0.1)
    sc.scale(vtl.sum(h)).backward()
    with pytest.raises(ValueError, match="unscale FP16 gradients"):
        sc.unscale_(o2)
    with pytest.raises(ValueError, match="growth_factor"):
        vtl.amp.GradScaler(growth_factor=1.0)


def test_bfloat16_gradients_are_unscaled(backend):
    h = nn.Parameter(vtl.ones(2, dtype=vtl.bfloat16))
    opt = optim.SGD([h], lr=0.5)
    sc = vtl.amp.GradScaler(init_scale=1024.0)
    out = sc.scale(vtl.sum(h * 3.0))
    assert out.dtype == vtl.bfloat16
    out.backward()
    sc.step(opt)
    assert h.grad.dtype == vtl.bfloat16
    np.testing.assert_array_equal(to_numpy(h.grad).astype(np.float32), [3.0, 3.0])
    np.testing.assert_array_equal(to_numpy(h).astype(np.float32), [-0.5, -0.5])


def test_disabled_and_state_dict(backend):
    w = nn.Parameter(vtl.ones(2))
    opt = optim.SGD([w], lr=0.1)
    off = vtl.amp.GradScaler(enabled=False)
    loss = vtl.sum(w)
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}
    loss.backward()
    off.step(opt)
    off.update()
    np.testing.assert_allclose(to_numpy(w), [0.9, 0.9])
    _, _, sc = _run_vtl([0, 1, 0], **KW)
    sd = sc.state_dict()
    assert sd == {"scale": 8.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                  "growth_interval": 3, "_growth_tracker": 1}
    other = vtl.amp.GradScaler()
    other.load_state_dict(sd)
    assert other.get_scale() == 8.0 and other._get_growth_tracker() == 1
    with pytest.raises(RuntimeError, match="empty"):
        other.load_state_dict({})


def test_amp_training_step_with_float16_autocast(backend):
    if "float16" not in vtl.__array_namespace_info__().dtypes():
        pytest.skip("no float16")
    vtl.random.seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = optim.Adam(m.parameters(), lr=0.05)
    sc = vtl.amp.GradScaler()
    rng = np.random.default_rng(0)
    x = vtl.asarray(rng.standard_normal((32, 4)).astype(np.float32))
    y = vtl.asarray((rng.standard_normal(32) > 0).astype(np.int64))
    losses = []
    for _ in range(25):
        with vtl.autocast(dtype=vtl.float16):
            loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        sc.scale(loss).backward()
        sc.step(opt)
        sc.update()
        losses.append(float(loss))
    assert losses[-1] < losses[0]
    assert all(p.dtype == vtl.float32 for p in m.parameters())


def test_no_host_read_before_step(backend, monkeypatch):
    """scale(), backward and unscale_() read nothing back; step() reads one flag per
    device; update() reads nothing."""
    b = vtl.backends.get(backend)
    w = nn.Parameter(vtl.ones(3))
    opt = optim.SGD([w], lr=0.1)
    sc = vtl.amp.GradScaler()
    reads = []
    orig = type(b).to_host

    def counted(self, raw):
        reads.append(1)
        return orig(self, raw)

    # the user's reads and vtl's own flag reads (each one transfer)
    monkeypatch.setattr(type(b), "to_host", counted)
    monkeypatch.setattr(type(b), "read_flag", counted)
    sc.scale(vtl.sum(w * w)).backward()
    sc.unscale_(opt)
    assert reads == []
    sc.step(opt)
    assert len(reads) == 1
    sc.update()
    assert len(reads) == 1
