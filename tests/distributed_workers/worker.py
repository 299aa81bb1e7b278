"""Worker of tests/test_distributed.py, run under ``mpiexec -n N``: ``python worker.py MODE DIR``.

Each mode checks its results with asserts (NumPy oracles) on every rank and
prints ``MODE ok rank R`` at the end; a failing rank prints a traceback.
"""

from __future__ import annotations

import io
import os
import sys
import time

import numpy as np

import vtl
import vtl.distributed as dist
from vtl import nn, optim

MODE, OUT = sys.argv[1], sys.argv[2]


def close(a, b, tol=0.0):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
    assert np.allclose(a, b, rtol=tol, atol=tol) if tol else np.array_equal(a, b), (a, b)


def local(rank, dtype):
    x = np.arange(6).reshape(2, 3) * (rank + 1) - 2 * rank
    return x.astype(dtype)


def collectives(rank, n):
    for dtype in ("float32", "float64", "int32", "int64", "float16", "bfloat16"):
        low = dtype in ("float16", "bfloat16")  # reduced in float32 and rounded once
        allx = np.stack([local(r, "float64" if low else dtype) for r in range(n)])
        for op, ref in (("sum", allx.sum(0)), ("max", allx.max(0)), ("min", allx.min(0)),
                        ("prod", allx.prod(0))):
            t = vtl.asarray(local(rank, dtype))
            buf = t._data
            assert dist.all_reduce(t, op=op) is t
            close(t.numpy(), ref.astype(dtype))
            assert t._data is buf  # in place in the NumPy buffer
        if dtype.startswith("float"):
            t = vtl.asarray(local(rank, dtype))
            dist.all_reduce(t, op="mean")
            close(t.numpy(), (allx.sum(0) / n).astype(dtype), 1e-2 if low else 1e-6)
        # a non-contiguous view of a bigger tensor: the base sees the result
        base = vtl.asarray(local(rank, dtype))
        v = base.T
        dist.all_reduce(v)
        close(v.numpy(), allx.sum(0).T.astype(dtype))
        src = n - 1
        t = vtl.asarray(local(rank, dtype))
        dist.broadcast(t, src)
        close(t.numpy(), local(src, dtype))
        outs = [vtl.zeros((2, 3), dtype=t.dtype) for _ in range(n)]
        dist.all_gather(outs, vtl.asarray(local(rank, dtype)))
        for r in range(n):
            close(outs[r].numpy(), local(r, dtype))
        cat = vtl.zeros((2 * n, 3), dtype=t.dtype)
        dist.all_gather_into_tensor(cat, vtl.asarray(local(rank, dtype)))
        close(cat.numpy(), np.concatenate([local(r, dtype) for r in range(n)]))
        big = np.stack([local(rank, dtype) + k for k in range(n)])  # (n, 2, 3) on each rank
        allbig = np.stack([np.stack([local(r, dtype) + k for k in range(n)])
                           for r in range(n)])
        out = vtl.zeros((2, 3), dtype=t.dtype)
        dist.reduce_scatter_tensor(out, vtl.asarray(big.reshape(2 * n, 3)))
        close(out.numpy(), allbig.sum(0)[rank].reshape(2, 3).astype(dtype))
        out = vtl.zeros((2, 3), dtype=t.dtype)
        dist.reduce_scatter(out, [vtl.asarray(b) for b in big], op="max")
        close(out.numpy(), allbig.max(0)[rank].astype(dtype))
    b = vtl.asarray([rank == 0, True, False])
    dist.all_reduce(b, op="max")
    close(b.numpy(), np.array([True, True, False]))
    b = vtl.asarray([rank == 0, True, False])
    dist.all_reduce(b, op="min")
    close(b.numpy(), np.array([n == 1, True, False]))
    c = vtl.asarray(np.array([1 + 2j, rank * 1j], dtype=np.complex128))
    dist.all_reduce(c)
    close(c.numpy(), np.array([n * (1 + 2j), sum(range(n)) * 1j]))
    # a scalar under autograd: the collective records no graph and bumps the version
    w = vtl.asarray(float(rank), requires_grad=True)
    v0 = w._version
    with vtl.no_grad():
        dist.all_reduce(w)
    assert w._version == v0 + 1 and w.grad_fn is None
    assert float(w) == sum(range(n))
    dist.barrier()


def staged(rank, n):
    """wgpu tensors go through host memory and MPI; the result is back on the device."""
    vtl.set_backend("wgpu")
    for dtype in ("float32",):  # the staging does not depend on the dtype; keep it short
        allx = np.stack([local(r, dtype) for r in range(n)])
        t = vtl.asarray(local(rank, dtype))
        dist.all_reduce(t, op="max")
        assert t.device == vtl.Device("wgpu", 0)
        close(t.numpy(), allx.max(0))
        t = vtl.asarray(local(rank, dtype))
        dist.broadcast(t, 1)
        close(t.numpy(), local(1, dtype))
        cat = vtl.zeros((2 * n, 3), dtype=t.dtype)
        dist.all_gather_into_tensor(cat, vtl.asarray(local(rank, dtype)))
        close(cat.numpy(), np.concatenate(list(allx)))
    t = vtl.asarray(local(rank, "float32"))
    dist.all_reduce(t, op="mean")
    close(t.numpy(), allx.mean(0).astype("float32"), 1e-6)
    m = dist.DistributedDataParallel(nn.Linear(3, 2))
    vtl.sum(m(vtl.asarray(local(rank, "float32"))) ** 2).backward()
    g = m.module.weight.grad
    allg = vtl.zeros((n, 2, 3))
    dist.all_gather_into_tensor(allg, g[None])
    assert np.array_equal(allg.numpy()[0], allg.numpy()[-1])  # every rank: the same mean


def make_model(seed, unused=False):
    vtl.random.seed(seed)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(5, 8)
            self.b = nn.Linear(8, 3)
            self.c = nn.Linear(8, 3) if unused else None

        def forward(self, x):
            return self.b(vtl.tanh(self.a(x)))

    return Net().to(dtype=vtl.float64)


def batch(step):
    g = np.random.default_rng(step)
    return g.standard_normal((8, 5)), g.standard_normal((8, 3))


def train(model, steps, rank, n, scale=1.0, micro=1, sync=None):
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for s in range(steps):
        x, y = batch(s)
        rows = np.array_split(np.arange(8), n)[rank]
        parts = np.array_split(rows, micro)
        opt.zero_grad()
        for k, p in enumerate(parts):
            ctx = model.no_sync() if (sync is not None and k < micro - 1) else _null()
            with ctx:
                out = model(vtl.asarray(x[p]))
                loss = scale * vtl.mean((out - vtl.asarray(y[p])) ** 2)
                loss.backward()
        opt.step()
    return {k: v.numpy() for k, v in model.state_dict().items()}


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return None


def ddp(rank, n):
    ref = train(make_model(0), 5, 0, 1)
    for cap in (25.0, 1e-4):  # one bucket, then one bucket per parameter
        m = make_model(0 if rank == 0 else 100 + rank)  # broadcast must fix other ranks' init
        d = dist.DistributedDataParallel(m, bucket_cap_mb=cap)
        assert len(d.buckets) == (1 if cap > 1 else 4)
        got = train(d, 5, rank, n)
        for k, v in ref.items():
            close(got["module." + k], v, 1e-10)
    # gradient accumulation with no_sync: 2 micro-batches per step, the mean-loss of
    # each micro-batch summed = 2 x the full-batch mean loss
    ref2 = train(make_model(0), 3, 0, 1, scale=2.0)
    d = dist.DistributedDataParallel(make_model(0))
    got = train(d, 3, rank, n, micro=2, sync=True)
    for k, v in ref2.items():
        close(got["module." + k], v, 1e-10)
    # an unused parameter stalls its bucket: clear error at the next forward ...
    d = dist.DistributedDataParallel(make_model(0, unused=True))
    x = vtl.asarray(np.ones((2, 5)))
    vtl.sum(d(x)).backward()
    try:
        d(x)
    except RuntimeError as e:
        assert "c.weight" in str(e) and "find_unused_parameters" in str(e), e
    else:
        raise AssertionError("no error for the unused parameter")
    # ... which sync_gradients() or find_unused_parameters=True avoids
    d = dist.DistributedDataParallel(make_model(0, unused=True), find_unused_parameters=True)
    vtl.sum(d(x) * (rank + 1)).backward()
    g = d.module.b.weight.grad.numpy().copy()
    d2 = dist.DistributedDataParallel(make_model(0, unused=True))
    vtl.sum(d2(x)).backward()
    d2.sync_gradients()
    close(d2.module.b.weight.grad.numpy() * (n + 1) / 2, g, 1e-10)
    close(d.module.c.weight.grad.numpy(), np.zeros((3, 8)))  # unused: zeros
    # DistributedSampler: the ranks' shares of an epoch cover the data exactly once
    for n_items in (10, 11):
        s = dist.DistributedSampler(n_items, seed=3, drop_last=False)
        mine = vtl.asarray(s.indices(epoch=2))
        allv = vtl.zeros((len(s) * n,), dtype=mine.dtype)
        dist.all_gather_into_tensor(allv, mine)
        vals = allv.numpy()
        assert set(vals.tolist()) == set(range(n_items))
        assert len(vals) - len(set(vals.tolist())) == (-n_items) % n


def fit(rank, n):
    from vtl.data import DataLoader, TensorDataset

    g = np.random.default_rng(0)
    x = g.standard_normal((40, 5)).astype(np.float32)
    y = (x.sum(1) > 0).astype(np.int64)
    ds = TensorDataset(vtl.asarray(x), vtl.asarray(y))
    vtl.random.seed(0)
    model = dist.DistributedDataParallel(nn.Sequential(nn.Linear(5, 8), nn.ReLU(),
                                                       nn.Linear(8, 2)))
    loader = DataLoader(ds, batch_size=5, sampler=dist.DistributedSampler(ds, seed=1))
    opt = optim.SGD(model.parameters(), lr=0.1)
    ck = vtl.train.ModelCheckpoint(os.path.join(OUT, "ck{epoch}.safetensors"))
    err, sys.stderr = sys.stderr, io.StringIO()
    try:
        hist = vtl.train.fit(model, loader, nn.CrossEntropyLoss(), opt, 3, callbacks=[ck],
                             progress=True)
        bars = sys.stderr.getvalue()
    finally:
        sys.stderr = err
    assert ("epoch 3/3" in bars) == (rank == 0), bars
    dist.barrier()
    assert sorted(os.listdir(OUT)) == [f"ck{e}.safetensors" for e in (1, 2, 3)]
    losses = vtl.asarray(np.array(hist["loss"], dtype=np.float64))
    allv = vtl.zeros((n * 3,), dtype=vtl.float64)
    dist.all_gather_into_tensor(allv, losses)
    close(allv.numpy()[:3], allv.numpy()[3:6])  # every rank logs the global mean


def timeout(rank, n):
    if rank == 1:
        sys.exit(0)  # leaves early; rank 0's next collective cannot complete
    t = vtl.ones(3)
    t0 = time.monotonic()
    try:
        dist.all_reduce(t)
    except dist.DistributedTimeoutError as e:
        print(f"caught after {time.monotonic() - t0:.1f} s: {e}", flush=True)
        raise


if __name__ == "__main__":
    dist.init_process_group(timeout=1.5 if MODE == "timeout" else 30)
    r, size = dist.get_rank(), dist.get_world_size()
    globals()[MODE](r, size)
    print(f"{MODE} ok rank {r}", flush=True)
    dist.destroy_process_group()
