"""Mixed precision, side by side with PyTorch in the same process:

* ``amp-step-transformer-<precision>``: a training step of a 2-layer Transformer encoder
  (d_model 512, 8 heads, feed-forward 2048, dropout 0.1, batch_first), sequence 256, batch
  32, mean-pooled to 10 classes, Adam, in float32 (``fp32``) and under
  ``autocast(dtype=bfloat16)`` (``bf16``); PyTorch runs the same step under
  ``torch.autocast``. ``extra_info["peak_mib"]`` is the step's peak device memory allocated
  above what was allocated before it (PyTorch's ``max_memory_allocated``, and for vtl the
  same measure of CuPy's pool: the blocks it had handed out and not taken back);
* ``amp-step-cnn-fp16``: a ResNet-style CNN step (two residual blocks with BatchNorm, 64
  and 128 channels, 32x32 inputs, batch 128) under ``autocast(dtype=float16)`` with a
  ``GradScaler``;
* ``amp-step-mlp-<precision>``: an MLP 784-1024-1024-10 step (ReLU, batch 256, Adam) in
  float32 (``fp32``) and under ``autocast(dtype=float16)`` with a ``GradScaler``
  (``fp16``): the float16 step against vtl's own float32 step;
* ``matmul-<dtype>-<n>``: one product of ``n x n`` matrices in bfloat16/float16, and in
  float32 with TF32 allowed (``set_float32_matmul_precision("high")`` on both sides).

Backends: cupy and wgpu on a GPU (PyTorch CUDA as the reference); ``VTL_BENCH_QUICK=1``
shrinks every size and also runs on the CPU (PyTorch CPU as the reference).
"""

from __future__ import annotations

import numpy as np
import pytest

import vtl
from benchmarks.conftest import QUICK, Ref, cases, count_launches_later, on_cpu, peak_mib
from benchmarks.cpu_models import resnet_block

#: (batch, sequence, d_model, heads, feed-forward)
TRANSFORMER = (2, 16, 32, 4, 64) if QUICK else (32, 256, 512, 8, 2048)
CNN_BATCH = 4 if QUICK else 128
MLP_BATCH = 4 if QUICK else 256
MATMUL = (64,) if QUICK else (4096, 8192)
CASES = cases(refs=("torch",), keep=lambda b: QUICK or not on_cpu(b))
LOW = {"bf16": "bfloat16", "fp16": "float16"}


def _torch_dev(impl: str) -> str:
    return "cuda" if impl.endswith("cuda") else "cpu"


def _encoder(m, torch: bool):
    batch, seq, d, heads, ff = TRANSFORMER

    class Encoder(m.Module):
        def __init__(self):
            super().__init__()
            layer = m.TransformerEncoderLayer(d, heads, ff, dropout=0.1, batch_first=True)
            kw = {"enable_nested_tensor": False} if torch else {}
            self.enc = m.TransformerEncoder(layer, 2, **kw)
            self.fc = m.Linear(d, 10)

        def forward(self, x):
            h = self.enc(x)
            return self.fc(h.mean(1) if torch else vtl.mean(h, axis=1))

    return Encoder()


def _cnn(m):
    Block = resnet_block(m)
    return m.Sequential(m.Conv2d(3, 64, 3, padding=1, bias=False), m.BatchNorm2d(64),
                        m.ReLU(), Block(64, 64, 1), Block(64, 128, 2),
                        m.AdaptiveAvgPool2d(1), m.Flatten(), m.Linear(128, 10))


def _mlp(m):
    return m.Sequential(m.Linear(784, 1024), m.ReLU(), m.Linear(1024, 1024), m.ReLU(),
                        m.Linear(1024, 10))


def _data(shape: tuple[int, ...], n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, *shape), dtype=np.float32), rng.integers(0, 10, n)


def _vtl_step(backend: str, net, x, y, low: str | None, scaler: bool, compiled: bool = False):
    x, y = vtl.asarray(x, backend=backend), vtl.asarray(y, backend=backend)
    return _step(vtl, backend, net.to(backend), x, y, low, scaler, compiled)


def _torch_step(torch, dev: str, net, x, y, low: str | None, scaler: bool):
    x, y = torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev)
    return _step(torch, dev, net.to(dev), x, y, low, scaler)


def _step(lib, dev: str, net, x, y, low: str | None, scaler: bool, compiled: bool = False):
    """The timed step, written once for ``lib`` (``vtl`` or ``torch``, whose names agree):
    Adam, cross-entropy under ``autocast(low)`` (off for ``None``), a ``GradScaler`` when
    ``scaler``; ``dev`` is the backend or the PyTorch device; ``compiled``: through
    ``vtl.compile``."""
    opt = lib.optim.Adam(net.parameters(), lr=1e-4)
    sc = lib.amp.GradScaler(dev) if scaler else None
    dt = None if low is None else getattr(lib, low)

    def step(x, y):
        opt.zero_grad()
        with lib.autocast(dev, dtype=dt or lib.float16, enabled=dt is not None):
            loss = lib.nn.functional.cross_entropy(net(x), y)
        if sc is None:
            loss.backward()
            opt.step()
        else:
            sc.scale(loss).backward()
            sc.step(opt)
            sc.update()
        return loss

    f = vtl.compile(step) if compiled else step
    return lambda: f(x, y)


def _case(benchmark, model: str, backend: str, impl: str, precision: str, mode: str
          ) -> tuple[Ref, str | None]:
    """``(reference, low dtype or None)`` of a step case, its benchmark group set; skipped
    where the backend lacks the dtype."""
    suffix = "-compiled" if mode == "compiled" else ""
    benchmark.group = f"amp-step-{model}-{precision}{suffix}-{backend}"
    ref = Ref(backend, impl)
    low = LOW.get(precision)
    if low is not None and not ref.supports(low):
        pytest.skip(f"{backend} has no {low}")
    return ref, low


def _time(benchmark, backend: str, impl: str, ref: Ref, step) -> None:
    for _ in range(3):
        step()
    ref.sync()
    peak = peak_mib(backend, impl, step)
    if peak is not None:
        benchmark.extra_info["peak_mib"] = round(peak, 1)
    count_launches_later(benchmark, backend, impl, step, ref.sync)

    def timed():
        out = step()
        ref.sync()
        return out

    loss = benchmark(timed)
    assert np.isfinite(float(loss))


@pytest.mark.parametrize("mode", ["eager", "compiled"])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize(("backend", "impl"), CASES)
def test_amp_transformer_step(benchmark, backend, impl, precision, mode):
    """The Transformer step; ``compiled``: vtl's step through ``vtl.compile`` against the
    same eager PyTorch step."""
    ref, low = _case(benchmark, "transformer", backend, impl, precision, mode)
    batch, seq, d, _, _ = TRANSFORMER
    x, y = _data((seq, d), batch)
    if impl == "vtl":
        vtl.random.seed(0)
        step = _vtl_step(backend, _encoder(vtl.nn, False), x, y, low, False,
                         mode == "compiled")
    else:
        torch = ref.xp
        torch.manual_seed(0)
        step = _torch_step(torch, _torch_dev(impl), _encoder(torch.nn, True), x, y, low,
                           False)
    _time(benchmark, backend, impl, ref, step)


@pytest.mark.parametrize("mode", ["eager", "compiled"])
@pytest.mark.parametrize(("backend", "impl"), CASES)
def test_amp_cnn_step(benchmark, backend, impl, mode):
    """The CNN step under float16 autocast with a GradScaler; ``compiled`` as in
    :func:`test_amp_transformer_step`."""
    benchmark.group = f"amp-step-cnn-fp16{'-compiled' if mode == 'compiled' else ''}-{backend}"
    ref = Ref(backend, impl)
    if not ref.supports("float16"):
        pytest.skip(f"{backend} has no float16")
    x, y = _data((3, 32, 32), CNN_BATCH)
    if impl == "vtl":
        vtl.random.seed(0)
        step = _vtl_step(backend, _cnn(vtl.nn), x, y, "float16", True, mode == "compiled")
    else:
        torch = ref.xp
        torch.manual_seed(0)
        step = _torch_step(torch, _torch_dev(impl), _cnn(torch.nn), x, y, "float16", True)
    _time(benchmark, backend, impl, ref, step)


@pytest.mark.parametrize("mode", ["eager", "compiled"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize(("backend", "impl"), CASES)
def test_amp_mlp_step(benchmark, backend, impl, precision, mode):
    """The MLP step, float32 or under float16 autocast with a GradScaler; ``compiled`` as in
    :func:`test_amp_transformer_step`."""
    ref, low = _case(benchmark, "mlp", backend, impl, precision, mode)
    x, y = _data((784,), MLP_BATCH)
    if impl == "vtl":
        vtl.random.seed(0)
        step = _vtl_step(backend, _mlp(vtl.nn), x, y, low, low is not None,
                         mode == "compiled")
    else:
        torch = ref.xp
        torch.manual_seed(0)
        step = _torch_step(torch, _torch_dev(impl), _mlp(torch.nn), x, y, low, low is not None)
    _time(benchmark, backend, impl, ref, step)


@pytest.mark.parametrize("n", MATMUL)
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32-tf32"])
@pytest.mark.parametrize(("backend", "impl"), CASES)
def test_matmul_low_precision(benchmark, backend, impl, dtype, n):
    benchmark.group = f"matmul-{dtype}-{n}-{backend}"
    ref = Ref(backend, impl)
    name = dtype.split("-")[0]
    if not ref.supports(name):
        pytest.skip(f"{backend} has no {name}")
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    tf32 = dtype.endswith("tf32")
    if impl == "vtl":
        xa, xb = (vtl.astype(vtl.asarray(m, backend=backend), getattr(vtl, name))
                  for m in (a, b))
        before = vtl.get_float32_matmul_precision()

        def run():
            vtl.set_float32_matmul_precision("high" if tf32 else "highest")
            try:
                return vtl.matmul(xa, xb)
            finally:
                vtl.set_float32_matmul_precision(before)
    else:
        torch = ref.xp
        xa, xb = (ref.asarray(m).to(getattr(torch, name)) for m in (a, b))

        def run():
            before = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = tf32
            try:
                return xa @ xb
            finally:
                torch.backends.cuda.matmul.allow_tf32 = before

    run()
    ref.sync()
    benchmark.extra_info["TFLOP/s"] = None

    def timed():
        out = run()
        ref.sync()
        return out

    benchmark(timed)
    median = benchmark.stats.stats.median if benchmark.stats else None
    if median:
        benchmark.extra_info["TFLOP/s"] = round(2 * n**3 / median / 1e12, 3)
