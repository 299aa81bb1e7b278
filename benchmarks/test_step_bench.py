"""Training steps of eight networks on the GPU backends, eager and captured
(``vtl.compile``), side by side with PyTorch CUDA eager in the same process:

* ``mlp``: 784-1024-1024-10 (ReLU), batch 256;
* ``cnn``: the CIFAR-style network of ``examples/cifar10_cnn.py`` (three conv3x3+ReLU+
  maxpool2 blocks, 64/128/256 channels, two linear layers), batch 128;
* ``lstm``: LSTM 128 -> 256 over 32 steps, the last hidden state to 10 classes, batch 64;
* ``transformer``: a 2-layer Transformer encoder (d_model 256, 4 heads, feed-forward
  1024, dropout 0.1), sequence 128, batch 32, mean-pooled to 10 classes;
* ``gpt``: a 4-layer GPT-style causal decoder (pre-norm, exact GELU, token and position
  embeddings, d_model 256, 4 heads, feed-forward 1024, dropout 0.1, vocabulary 4096),
  sequence 128, batch 16, next-token cross-entropy over every position;
* ``resnet18``: a CIFAR ResNet-18 (a 3x3 stem, four stages of two basic blocks with
  BatchNorm, 64/128/256/512 channels, 1x1 projections where a stage halves the image,
  global average pooling), 32x32 inputs, batch 128;
* ``encoder4``: a 4-layer Transformer encoder (d_model 512, 8 heads, feed-forward 2048,
  dropout 0.1), sequence 256, batch 32, mean-pooled to 10 classes;
* ``lstm2``: a 2-layer LSTM 128 -> 256 over 64 steps, the last hidden state to 10 classes,
  batch 64.

The last three are the step-level sizes the kernels are aimed at; the first five are
smaller steps where the host's share of the time is larger.

Each step: ``zero_grad``, forward, cross-entropy, backward, ``clip_grad_norm_(1.0)``, Adam,
a cosine learning-rate schedule. Groups ``step-<model>-<backend>`` time eager vtl,
``step-<model>-compiled-<backend>`` the captured step; PyTorch eager is the reference of
both. ``extra_info`` holds the time to issue 10 steps without waiting next to the total
with the final wait (``issue_ms``, ``total_ms`` per step; issue below total means the host
runs ahead of the GPU), the device launches per step (``kernels``: CUDA kernels and copies
through CUPTI for vtl on cupy and for PyTorch, dispatches for vtl on wgpu), and for captured
wgpu steps the dispatches of a replay and the host time per dispatch. ``VTL_BENCH_QUICK=1``
shrinks the batch to 4.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

import vtl
from benchmarks.conftest import QUICK, Ref, _require, _selected, count_launches_later, torch_or_skip
from benchmarks.cpu_models import resnet_block

BATCH = {"mlp": 256, "cnn": 128, "lstm": 64, "transformer": 32, "gpt": 16, "resnet18": 128,
         "encoder4": 32, "lstm2": 64}
SHAPES = {"mlp": (784,), "cnn": (3, 32, 32), "lstm": (32, 128), "transformer": (128, 256),
          "gpt": (128,), "resnet18": (3, 32, 32), "encoder4": (256, 512), "lstm2": (64, 128)}
#: the GPT model's vocabulary
VOCAB = 4096


def _models(m, torch: bool):
    """Builders of the five networks with the module namespace ``m`` (vtl.nn or torch.nn)."""

    class Lstm(m.Module):
        def __init__(self, layers: int = 1):
            super().__init__()
            self.rnn = m.LSTM(128, 256, num_layers=layers, batch_first=True)
            self.fc = m.Linear(256, 10)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.fc(out[:, -1, :])

    class Encoder(m.Module):
        def __init__(self, d: int = 256, heads: int = 4, layers: int = 2):
            super().__init__()
            layer = m.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, batch_first=True)
            kw = {"enable_nested_tensor": False} if torch else {}
            self.enc = m.TransformerEncoder(layer, layers, **kw)
            self.fc = m.Linear(d, 10)

        def forward(self, x):
            h = self.enc(x)
            return self.fc(h.mean(1) if torch else vtl.mean(h, axis=1))

    class Gpt(m.Module):
        def __init__(self):
            super().__init__()
            d, t = 256, SHAPES["gpt"][0]
            self.tok, self.pos = m.Embedding(VOCAB, d), m.Embedding(t, d)
            layer = m.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, activation="gelu",
                                              batch_first=True, norm_first=True)
            kw = {"enable_nested_tensor": False} if torch else {}
            self.blocks = m.TransformerEncoder(layer, 4, **kw)
            self.ln, self.head = m.LayerNorm(d), m.Linear(d, VOCAB)

        def forward(self, idx):
            t = idx.shape[1]
            h = self.tok(idx) + self.pos.weight[:t]
            mask = m.Transformer.generate_square_subsequent_mask(t, device=idx.device)
            h = self.blocks(h, mask=mask, is_causal=True)
            return self.head(self.ln(h)).reshape(-1, VOCAB)  # (batch * t, vocabulary)

    def cnn():
        return m.Sequential(
            m.Conv2d(3, 64, 3, padding=1), m.ReLU(), m.MaxPool2d(2),
            m.Conv2d(64, 128, 3, padding=1), m.ReLU(), m.MaxPool2d(2),
            m.Conv2d(128, 256, 3, padding=1), m.ReLU(), m.MaxPool2d(2),
            m.Flatten(), m.Linear(256 * 4 * 4, 256), m.ReLU(), m.Linear(256, 10))

    def resnet18():
        Block = resnet_block(m)
        layers = [m.Conv2d(3, 64, 3, padding=1, bias=False), m.BatchNorm2d(64), m.ReLU()]
        cin = 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
            cin = cout
        layers += [m.AdaptiveAvgPool2d(1), m.Flatten(), m.Linear(512, 10)]
        return m.Sequential(*layers)

    return {
        "mlp": lambda: m.Sequential(m.Linear(784, 1024), m.ReLU(), m.Linear(1024, 1024),
                                    m.ReLU(), m.Linear(1024, 10)),
        "cnn": cnn, "lstm": Lstm, "transformer": Encoder, "gpt": Gpt,
        "resnet18": resnet18, "encoder4": lambda: Encoder(512, 8, 4),
        "lstm2": lambda: Lstm(2),
    }


def _batch(model: str) -> tuple[np.ndarray, np.ndarray]:
    n = 4 if QUICK else BATCH[model]
    rng = np.random.default_rng(0)
    if model == "gpt":  # token ids, and the next token of every position
        t = SHAPES["gpt"][0]
        return rng.integers(0, VOCAB, (n, t)), rng.integers(0, VOCAB, n * t)
    return rng.standard_normal((n, *SHAPES[model]), dtype=np.float32), rng.integers(0, 10, n)


def _vtl_step(model: str, backend: str, compiled: bool):
    from vtl import nn, optim

    vtl.random.seed(0)
    net = _models(nn, False)[model]().to(backend)
    opt = optim.Adam(net.parameters(), lr=1e-3)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=1000)
    xs, ys = _batch(model)
    x, y = vtl.asarray(xs, backend=backend), vtl.asarray(ys, backend=backend)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        sched.step()
        return loss

    f = vtl.compile(step) if compiled else step
    return lambda: f(x, y), f


def _torch_step(torch, model: str):
    torch.manual_seed(0)
    net = _models(torch.nn, True)[model]().cuda()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=1000)
    xs, ys = _batch(model)
    x, y = torch.from_numpy(xs).cuda(), torch.from_numpy(ys).cuda()

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        sched.step()
        return loss

    return step


def _params() -> list:
    out = []
    for b in _selected():
        if b == "numpy" and not QUICK:
            continue  # PyTorch CPU comparisons of these networks: benchmarks/test_train_bench.py
        for mode in ("eager", "compiled"):
            for impl in ("vtl", "torch-cuda"):
                out.append(pytest.param(b, mode, impl, id=f"{b}-{mode}-{impl}"))
    return out


@pytest.mark.parametrize("model", list(BATCH))
@pytest.mark.parametrize(("backend", "mode", "impl"), _params())
def test_step(benchmark, model, backend, mode, impl):
    benchmark.group = f"step-{model}{'-compiled' if mode == 'compiled' else ''}-{backend}"
    if impl == "vtl":
        _require(backend)
        run, f = _vtl_step(model, backend, mode == "compiled")
        sync = vtl.backends.get(backend).synchronize
    else:
        torch = torch_or_skip("cuda")
        run, f = _torch_step(torch, model), None
        sync = Ref(backend, impl).sync
    for _ in range(3):  # state, compilation, capture
        run()
    sync()
    t0 = time.perf_counter()
    for _ in range(10):
        loss = run()
    t1 = time.perf_counter()
    sync()
    t2 = time.perf_counter()
    assert np.isfinite(float(loss))
    benchmark.extra_info["issue_ms"] = round((t1 - t0) / 10 * 1e3, 4)
    benchmark.extra_info["total_ms"] = round((t2 - t0) / 10 * 1e3, 4)
    count_launches_later(benchmark, backend, impl, run, sync)
    if impl == "vtl" and mode == "compiled" and backend == "wgpu":
        entry = next(iter(f._entries.values()))
        n = len(entry.capture._list)
        benchmark.extra_info["dispatches"] = n
        benchmark.extra_info["us_per_dispatch"] = round((t1 - t0) / 10 / n * 1e6, 2)

    def timed():
        out = run()
        sync()
        return out

    benchmark(timed)
