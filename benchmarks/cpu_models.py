"""Training steps of six model families on the CPU: vtl's numpy backend side by side with
PyTorch CPU in one process, at the same thread count.

* ``vgg``: a VGG-style CNN, four conv3x3+ReLU layers (32, 32, 64, 64 channels) with a
  2x2 max pool after the second and the fourth, Linear(4096, 256)+ReLU, Linear(256, 10);
  3x32x32 inputs, batch 32;
* ``resnet``: a ResNet-style CNN with BatchNorm: a conv3x3(3->32)+BN+ReLU stem, three
  basic residual blocks (32, 64/stride 2, 128/stride 2; 1x1 conv+BN shortcuts where the
  shape changes), global average pool, Linear(128, 10); 3x32x32 inputs, batch 16;
* ``lstm``: LSTM 128 -> 256 over 32 steps, the last hidden state to 10 classes, batch 32;
* ``gru``: the same with a GRU;
* ``transformer``: a 2-layer Transformer encoder (d_model 256, 4 heads, feed-forward
  1024, dropout 0.1, batch_first), sequence 128, mean-pooled to 10 classes, batch 8;
* ``mlp``: 784-1024-1024-10 with ReLU, batch 64.

Each step: ``zero_grad``, forward, cross-entropy, backward, Adam (lr 1e-3). Random data of
the real shapes. ``benchmarks/test_cpu_models_bench.py`` runs them under pytest-benchmark;
``python -m benchmarks.cpu_models [--threads 2] [--rounds 7] [model ...]`` prints the
vtl/PyTorch ratios, the two libraries' steps interleaved round by round (best of the
rounds), which keeps the ratio honest on a machine shared with other work.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

if __name__ == "__main__":  # NumPy's BLAS reads its thread count when it loads
    import sys

    _n = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv[:-1] else "2"
    for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_v, _n)
    import vtl  # noqa: F401 - before NumPy, as a script that imports vtl first (vtl/_openblas.py)

import numpy as np  # noqa: E402

#: model -> (batch, input shape without the batch)
SPECS: dict[str, tuple[int, tuple[int, ...]]] = {
    "vgg": (32, (3, 32, 32)),
    "resnet": (16, (3, 32, 32)),
    "lstm": (32, (32, 128)),
    "gru": (32, (32, 128)),
    "transformer": (8, (128, 256)),
    "mlp": (64, (784,)),
}



def resnet_block(m: Any) -> Any:
    """The basic residual block of the module namespace ``m`` (vtl.nn or torch.nn): two 3x3
    convolutions with batch norm, the input added back through a 1x1 convolution with batch
    norm where the block changes the shape."""

    class Block(m.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.c1 = m.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.b1 = m.BatchNorm2d(cout)
            self.c2 = m.Conv2d(cout, cout, 3, padding=1, bias=False)
            self.b2 = m.BatchNorm2d(cout)
            self.relu = m.ReLU()
            self.short = None
            if stride != 1 or cin != cout:
                self.short = m.Sequential(m.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                          m.BatchNorm2d(cout))

        def forward(self, x: Any) -> Any:
            h = self.relu(self.b1(self.c1(x)))
            h = self.b2(self.c2(h))
            return self.relu(h + (x if self.short is None else self.short(x)))

    return Block

def build(m: Any, model: str, torch: bool) -> Any:
    """The network ``model`` made of the module namespace ``m`` (``vtl.nn`` or
    ``torch.nn``)."""
    if model == "vgg":
        return m.Sequential(
            m.Conv2d(3, 32, 3, padding=1), m.ReLU(), m.Conv2d(32, 32, 3, padding=1), m.ReLU(),
            m.MaxPool2d(2),
            m.Conv2d(32, 64, 3, padding=1), m.ReLU(), m.Conv2d(64, 64, 3, padding=1), m.ReLU(),
            m.MaxPool2d(2),
            m.Flatten(), m.Linear(64 * 8 * 8, 256), m.ReLU(), m.Linear(256, 10))
    if model == "resnet":
        Block = resnet_block(m)
        return m.Sequential(
            m.Conv2d(3, 32, 3, padding=1, bias=False), m.BatchNorm2d(32), m.ReLU(),
            Block(32, 32, 1), Block(32, 64, 2), Block(64, 128, 2),
            m.AdaptiveAvgPool2d(1), m.Flatten(), m.Linear(128, 10))
    if model in ("lstm", "gru"):
        cell = m.LSTM if model == "lstm" else m.GRU

        class Rnn(m.Module):
            def __init__(self) -> None:
                super().__init__()
                self.rnn = cell(128, 256, batch_first=True)
                self.fc = m.Linear(256, 10)

            def forward(self, x: Any) -> Any:
                out, _ = self.rnn(x)
                return self.fc(out[:, -1, :])

        return Rnn()
    if model == "transformer":
        class Encoder(m.Module):
            def __init__(self) -> None:
                super().__init__()
                layer = m.TransformerEncoderLayer(256, 4, 1024, dropout=0.1, batch_first=True)
                kw = {"enable_nested_tensor": False} if torch else {}
                self.enc = m.TransformerEncoder(layer, 2, **kw)
                self.fc = m.Linear(256, 10)

            def forward(self, x: Any) -> Any:
                return self.fc(self.enc(x).mean(1))

        return Encoder()
    if model == "mlp":
        return m.Sequential(m.Linear(784, 1024), m.ReLU(), m.Linear(1024, 1024), m.ReLU(),
                            m.Linear(1024, 10))
    raise ValueError(f"unknown model {model!r}; expected one of {', '.join(SPECS)}")


def batch(model: str, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Random float32 inputs and int64 class labels of ``model``'s shapes."""
    size, shape = SPECS[model]
    rng = np.random.default_rng(0)
    n = size if n is None else n
    return rng.standard_normal((n, *shape), dtype=np.float32), rng.integers(0, 10, n)


def vtl_step(model: str, n: int | None = None, state: dict | None = None
             ) -> tuple[Any, Callable[[], Any]]:
    """``(net, step)``: the vtl network on the numpy backend and one Adam training step."""
    import vtl
    from vtl import nn, optim

    vtl.random.seed(0)
    net = build(nn, model, False)
    if state is not None:
        net.load_state_dict(state)
    opt = optim.Adam(net.parameters(), lr=1e-3)
    xs, ys = batch(model, n)
    x, y = vtl.asarray(xs, backend="numpy"), vtl.asarray(ys, backend="numpy")

    def step() -> Any:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss

    return net, step


def torch_step(torch: Any, model: str, n: int | None = None) -> tuple[Any, Callable[[], Any]]:
    """``(net, step)``: the PyTorch network on the CPU and one Adam training step."""
    torch.manual_seed(0)
    net = build(torch.nn, model, True)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    xs, ys = batch(model, n)
    x, y = torch.from_numpy(xs), torch.from_numpy(ys)

    def step() -> Any:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return net, step


def set_threads(n: int) -> None:
    """Both libraries at ``n`` threads (vtl's kernels; PyTorch's intra-op pool). NumPy's
    BLAS takes ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS`` when it loads: set them before
    importing NumPy (``main`` does)."""
    import torch

    import vtl

    vtl.set_num_threads(n)
    torch.set_num_threads(n)


def _best(fn: Callable[[], Any], reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def compare(model: str, rounds: int = 7, min_time: float = 0.3) -> dict[str, float]:
    """Best-of-``rounds`` step times (ms) of vtl and PyTorch, interleaved round by round."""
    import torch

    _, vs = vtl_step(model)
    _, ts = torch_step(torch, model)
    for _ in range(2):  # optimizer state, caches, scratch buffers
        vs()
        ts()
    t = time.perf_counter()
    vs()
    reps = max(1, int(min_time / max(time.perf_counter() - t, 1e-4)))
    best_v = best_t = float("inf")
    for _ in range(rounds):
        best_v = min(best_v, _best(vs, reps))
        best_t = min(best_t, _best(ts, reps))
    return {"vtl_ms": best_v * 1e3, "torch_ms": best_t * 1e3, "ratio": best_v / best_t}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="*", default=list(SPECS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    set_threads(args.threads)
    print(f"{'model':12s} {'vtl ms':>9s} {'torch ms':>9s} {'vtl/torch':>9s}  "
          f"({args.threads} threads)")
    for model in args.models:
        r = compare(model, args.rounds)
        print(f"{model:12s} {r['vtl_ms']:9.2f} {r['torch_ms']:9.2f} {r['ratio']:9.2f}",
              flush=True)


if __name__ == "__main__":
    main()
