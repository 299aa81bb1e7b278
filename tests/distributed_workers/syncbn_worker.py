"""Worker of tests/test_nn_rest.py, run under ``mpiexec -n N``: ``python syncbn_worker.py``.

Every rank holds its slice of one global batch (uneven slices: rank ``r`` has ``r + 2``
rows); SyncBatchNorm on the slices must give the slice of BatchNorm on the whole batch
(outputs, input gradients, running statistics) and the sum over ranks of the parameter
gradients must equal the whole-batch gradients. Prints ``syncbn ok rank R``.
"""

from __future__ import annotations

import numpy as np

import vtl
import vtl.distributed as dist
from vtl import nn


def main() -> None:
    dist.init_process_group()
    rank, n = dist.get_rank(), dist.get_world_size()
    rows = [r + 2 for r in range(n)]
    rng = np.random.default_rng(5)
    x_all = rng.standard_normal((sum(rows), 3, 4))
    v_all = rng.standard_normal(x_all.shape)
    lo = sum(rows[:rank])
    sl = slice(lo, lo + rows[rank])

    ref = nn.BatchNorm1d(3, momentum=0.3).double()
    with vtl.no_grad():
        ref.weight[...] = vtl.asarray([1.5, -0.5, 2.0])
        ref.bias[...] = vtl.asarray([0.1, 0.2, -0.3])
    sync = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm1d(3, momentum=0.3)))
    sync = sync.double()
    sync.load_state_dict({"0." + k: v for k, v in ref.state_dict().items()})

    xr = vtl.asarray(x_all, requires_grad=True)
    yr = ref(xr)
    vtl.sum(yr * vtl.asarray(v_all)).backward()
    for _ in range(2):  # twice: the running statistics follow
        xs = vtl.asarray(x_all[sl], requires_grad=True)
        ys = sync(xs)
        vtl.sum(ys * vtl.asarray(v_all[sl])).backward()
    ref(vtl.asarray(x_all))

    np.testing.assert_allclose(ys.numpy(), yr.numpy()[sl], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(xs.grad.numpy(), xr.grad.numpy()[sl], rtol=1e-9, atol=1e-11)
    bn = sync[0]
    for name in ("weight", "bias"):
        g = dist.all_reduce(getattr(bn, name).grad, "sum").numpy() / 2  # two backward calls
        np.testing.assert_allclose(g, getattr(ref, name).grad.numpy(), rtol=1e-9, atol=1e-11)
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(getattr(bn, name).numpy(), getattr(ref, name).numpy(),
                                   rtol=1e-10, atol=1e-12)
    assert int(bn.num_batches_tracked) == 2
    print(f"syncbn ok rank {rank}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
