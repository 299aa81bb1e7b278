"""Training steps of the CPU model families of :mod:`benchmarks.cpu_models` (VGG-style CNN,
ResNet-style CNN with BatchNorm, LSTM, GRU, Transformer encoder, MLP): vtl on the numpy
backend against PyTorch CPU in the same process, both at :data:`THREADS` threads
(``VTL_BENCH_THREADS``, default 2; NumPy's BLAS follows ``OMP_NUM_THREADS``, which
``make bench`` or the caller sets). Group ``cpu-step-<model>``; ``report.py`` prints the
vtl/torch-cpu ratios. ``VTL_BENCH_QUICK=1`` shrinks every batch to 2.

``python -m benchmarks.cpu_models`` prints the same ratios with the two libraries' steps
interleaved round by round (steadier on a machine shared with other work).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from benchmarks import cpu_models as cm
from benchmarks.conftest import QUICK, _require, _selected, torch_or_skip

THREADS = int(os.environ.get("VTL_BENCH_THREADS", "2"))

pytestmark = pytest.mark.skipif("numpy" not in _selected(), reason="numpy backend deselected")


@pytest.fixture(autouse=True)
def _threads():
    """Both libraries at :data:`THREADS` threads for the case, restored afterwards."""
    import vtl
    from vtl.backends._common import threads

    old = threads._limit
    vtl.set_num_threads(THREADS)
    try:
        import torch
    except ImportError:
        torch = None
    t_old = torch.get_num_threads() if torch is not None else None
    if torch is not None:
        torch.set_num_threads(THREADS)
    yield
    threads._limit = old
    if torch is not None:
        torch.set_num_threads(t_old)


@pytest.mark.parametrize("impl", ["vtl", "torch-cpu"])
@pytest.mark.parametrize("model", list(cm.SPECS))
def test_cpu_step(benchmark, model, impl):
    benchmark.group = f"cpu-step-{model}-b{2 if QUICK else cm.SPECS[model][0]}-numpy"
    n = 2 if QUICK else None
    if impl == "vtl":
        _require("numpy")
        _, step = cm.vtl_step(model, n)
    else:
        _, step = cm.torch_step(torch_or_skip("cpu"), model, n)
    step()  # optimizer state, caches, scratch buffers outside the timing
    assert np.isfinite(float(step()))
    benchmark.extra_info["threads"] = THREADS
    benchmark(step)


@pytest.mark.parametrize("model", list(cm.SPECS))
def test_cpu_step_matches_pytorch(model):
    """vtl and PyTorch compute the same loss from the same weights (a batch of 2; the
    Transformer in eval mode, without dropout)."""
    torch = pytest.importorskip("torch")
    tnet, _ = cm.torch_step(torch, model, 2)
    state = {k: v.detach().numpy().copy() for k, v in tnet.state_dict().items()}
    import vtl
    from vtl import nn

    vnet, _ = cm.vtl_step(model, 2, state)
    if model == "transformer":
        tnet.eval()
        vnet.eval()
    xs, ys = cm.batch(model, 2)
    tl = torch.nn.functional.cross_entropy(tnet(torch.from_numpy(xs)), torch.from_numpy(ys))
    vl = nn.functional.cross_entropy(vnet(vtl.asarray(xs, backend="numpy")),
                                     vtl.asarray(ys, backend="numpy"))
    np.testing.assert_allclose(float(vl), float(tl.detach()), rtol=2e-4)
