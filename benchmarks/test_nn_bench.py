"""nn layer benchmarks: Conv2d forward + backward on a [64, 3, 32, 32] input
with 64 filters 3x3 (padding 1) and on ResNet-style 3x3 layers (64 channels at 32x32,
256 at 8x8; on wgpu by implicit GEMM and by im2col), LSTM steps (one LSTMCell step and a
16-step LSTM sequence, batch 64, 128 -> 256), and softmax, log_softmax, layer_norm and erf
of a (4096, 1024) tensor, forward + backward.

References: PyTorch on the CPU for the numpy backend, PyTorch on CUDA (TF32
off) for the accelerator backends cupy and wgpu (skipped where not available).
Aim (numpy backend): within 2x of PyTorch CPU. ``VTL_BENCH_QUICK=1`` uses batch 4.
"""

from __future__ import annotations

import numpy as np
import pytest

import vtl
from benchmarks.conftest import QUICK, Ref, cases, synchronize
from vtl import nn

BATCH = 4 if QUICK else 64
CASES = cases(refs=("torch",))


def _torch_device(backend: str, impl: str):
    r = Ref(backend, impl)
    return r.xp, r.device


def _torch_sync(torch, device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _load(tm, vm, backend: str) -> None:
    vm.load_state_dict({k: v.detach().cpu().numpy() for k, v in tm.state_dict().items()})


def _conv_step(backend: str, impl: str, xs: np.ndarray, out_channels: int, bias: bool):
    """Forward + backward of a 3x3, padding-1 convolution of ``xs`` (input and weight
    gradients), synchronized: vtl on ``backend`` or the reference ``impl``."""
    cin = xs.shape[1]
    if impl == "vtl":
        vtl.random.manual_seed(0)
        m = nn.Conv2d(cin, out_channels, 3, padding=1, bias=bias).to(backend)
        x = vtl.asarray(xs, backend=backend, requires_grad=True)

        def run():
            m.zero_grad()
            x.grad = None
            vtl.sum(m(x)).backward()
            synchronize(backend)

        return run
    torch, dev = _torch_device(backend, impl)
    tm = torch.nn.Conv2d(cin, out_channels, 3, padding=1, bias=bias).to(dev)
    tx = torch.tensor(xs, device=dev, requires_grad=True)

    def run():
        tm.zero_grad()
        tx.grad = None
        tm(tx).sum().backward()
        _torch_sync(torch, dev)

    return run


@pytest.mark.parametrize(("backend", "impl"), CASES)
def test_conv2d_forward_backward(benchmark, backend, impl):
    benchmark.group = f"conv2d-{BATCH}x3x32x32-64f3x3-fwd-bwd-{backend}"
    xs = np.random.default_rng(0).standard_normal((BATCH, 3, 32, 32)).astype(np.float32)
    run = _conv_step(backend, impl, xs, 64, True)
    run()  # kernel compilation and caches outside the timing
    benchmark(run)


#: ResNet-style 3x3 layers (channels, image size): CIFAR ResNets' widest early layer and a
#: late one (#25's kernel-level aim)
RESNET_LAYERS = [(64, 32), (256, 8)]
#: vtl's wgpu convolution by its implicit-GEMM kernels (default) and by im2col
_WGPU_PATHS = [pytest.param(*c.values, p, id=f"{c.id}-{p}" if p else c.id) for c in CASES
               for p in (("implicit", "im2col") if tuple(c.values) == ("wgpu", "vtl") else ("",))]


@pytest.mark.parametrize(("channels", "size"), RESNET_LAYERS)
@pytest.mark.parametrize(("backend", "impl", "path"), _WGPU_PATHS)
def test_conv2d_resnet_layer(benchmark, monkeypatch, backend, impl, path, channels, size):
    """A ResNet 3x3 layer (stride 1, padding 1, no bias) forward + backward, input and weight
    gradients; on wgpu both convolution paths."""
    # the default path is compared with the references; the reference path has its own group
    benchmark.group = (f"conv2d-{BATCH}x{channels}x{size}x{size}-{channels}f3x3-fwd-bwd"
                       f"{'-im2col' if path == 'im2col' else ''}-{backend}")
    if path:
        from vtl.backends.wgpu.conv import WgpuConv2d

        monkeypatch.setattr(WgpuConv2d, "implicit", path == "implicit")
    xs = np.random.default_rng(0).standard_normal((BATCH, channels, size, size))
    run = _conv_step(backend, impl, xs.astype(np.float32), channels, False)
    run()
    benchmark(run)


@pytest.mark.parametrize(("backend", "impl"), CASES)
def test_lstm_cell_step(benchmark, backend, impl):
    """One LSTMCell step, forward + backward (batch 64, 128 -> 256)."""
    benchmark.group = f"lstmcell-step-b{BATCH}-128-256-fwd-bwd-{backend}"
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((BATCH, 128)).astype(np.float32)
    hs = rng.standard_normal((BATCH, 256)).astype(np.float32)
    if impl == "vtl":
        m = nn.LSTMCell(128, 256).to(backend)
        x, h = vtl.asarray(xs, backend=backend), vtl.asarray(hs, backend=backend)

        def run():
            m.zero_grad()
            h1, c1 = m(x, (h, h))
            vtl.sum(h1 * c1).backward()
            synchronize(backend)

    else:
        torch, dev = _torch_device(backend, impl)
        tm = torch.nn.LSTMCell(128, 256).to(dev)
        tx, th = torch.tensor(xs, device=dev), torch.tensor(hs, device=dev)

        def run():
            tm.zero_grad()
            h1, c1 = tm(tx, (th, th))
            (h1 * c1).sum().backward()
            _torch_sync(torch, dev)

    run()  # kernel compilation and caches outside the timing
    benchmark(run)


@pytest.mark.parametrize(("backend", "impl"), CASES)
def test_lstm_sequence(benchmark, backend, impl):
    """nn.LSTM over 16 steps, forward + backward (batch 64, 128 -> 256)."""
    benchmark.group = f"lstm-seq16-b{BATCH}-128-256-fwd-bwd-{backend}"
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((16, BATCH, 128)).astype(np.float32)
    if impl == "vtl":
        m = nn.LSTM(128, 256).to(backend)
        x = vtl.asarray(xs, backend=backend)

        def run():
            m.zero_grad()
            vtl.sum(m(x)[0]).backward()
            synchronize(backend)

    else:
        torch, dev = _torch_device(backend, impl)
        tm = torch.nn.LSTM(128, 256).to(dev)
        tx = torch.tensor(xs, device=dev)

        def run():
            tm.zero_grad()
            tm(tx)[0].sum().backward()
            _torch_sync(torch, dev)

    run()  # kernel compilation and caches outside the timing
    benchmark(run)


ELEMENTWISE_ROWS = (4 if QUICK else 4096, 1024)


def _rowwise(lib, op: str, x, w, b):
    """``op`` of the rows of ``x`` with the functions of ``lib`` (vtl or torch)."""
    if op == "erf":
        return lib.erf(x)
    if op == "layer_norm":
        return lib.nn.functional.layer_norm(x, (x.shape[-1],), w, b)
    return getattr(lib.nn.functional, op)(x, dim=-1)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layer_norm", "erf"])
@pytest.mark.parametrize(("backend", "impl"), CASES)
def test_rowwise_and_special(benchmark, backend, impl, op):
    """softmax/log_softmax over the last axis, layer_norm (weight and bias) and erf of a
    (4096, 1024) float32 tensor, forward + backward (the backends' ``softmax``,
    ``layer_norm`` and ``special`` kernels)."""
    benchmark.group = f"{op}-{ELEMENTWISE_ROWS[0]}x{ELEMENTWISE_ROWS[1]}-fwd-bwd-{backend}"
    rng = np.random.default_rng(4)
    xs = rng.standard_normal(ELEMENTWISE_ROWS).astype(np.float32)
    ws, bs = (rng.standard_normal(ELEMENTWISE_ROWS[1]).astype(np.float32) for _ in range(2))
    if impl == "vtl":
        x, w, b = (vtl.asarray(a, backend=backend, requires_grad=True) for a in (xs, ws, bs))
        g = vtl.ones_like(x)

        def run():
            x.grad = w.grad = b.grad = None
            _rowwise(vtl, op, x, w, b).backward(g)
            synchronize(backend)

    else:
        torch, dev = _torch_device(backend, impl)
        tx, tw, tb = (torch.tensor(a, device=dev, requires_grad=True) for a in (xs, ws, bs))
        tg = torch.ones_like(tx)

        def run():
            tx.grad = tw.grad = tb.grad = None
            _rowwise(torch, op, tx, tw, tb).backward(tg)
            _torch_sync(torch, dev)

    run()
    benchmark(run)


def test_benchmark_layers_agree_with_pytorch():
    """The two implementations of each case compute the same thing."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    tm, vm = torch.nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(3, 4, 3, padding=1)
    _load(tm, vm, "numpy")
    np.testing.assert_allclose(vm(vtl.asarray(xs)).numpy(), tm(torch.tensor(xs)).detach().numpy(),
                               rtol=1e-4, atol=1e-5)
    seq = rng.standard_normal((3, 2, 5)).astype(np.float32)
    tl, vl = torch.nn.LSTM(5, 6), nn.LSTM(5, 6)
    _load(tl, vl, "numpy")
    np.testing.assert_allclose(vl(vtl.asarray(seq))[0].numpy(),
                               tl(torch.tensor(seq))[0].detach().numpy(), rtol=1e-4, atol=1e-5)
