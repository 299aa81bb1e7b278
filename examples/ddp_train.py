"""Data-parallel training: an MLP learns the bundled Digits on every rank of an MPI job.

Each rank trains a replica of the model on its own share of every epoch
(``DistributedSampler``); ``DistributedDataParallel`` averages the gradients
over the ranks after each backward, so the replicas stay identical. Progress
bars, printing and the checkpoint (``demo_out/digits_ddp.safetensors``, git-ignored;
``--out DIR`` to change) come from rank 0 only:

    mpiexec -n 2 python examples/ddp_train.py --backend numpy
    python examples/ddp_train.py --backend numpy      # also runs alone (world size 1)

Needs ``pip install vtl[distributed]`` and an MPI runtime (e.g. ``apt-get install
openmpi-bin``) for more than one rank; as root add ``--allow-run-as-root``.
"""

import os

from _common import OUT, report, setup

import vtl
import vtl.distributed as dist
from vtl import nn, optim

args = setup(__doc__.splitlines()[0], epochs=20, out=OUT)
epochs = 3 if args.quick else args.epochs

dist.init_process_group()  # rank and world size from mpiexec; a world of one without it
rank, world = dist.get_rank(), dist.get_world_size()
if rank == 0:
    print(f"world size: {world} ({dist.get_backend()})")

# one GPU per rank: CuPy tensors go to the GPU of this rank's local rank (NCCL needs that)
device = None
if args.backend == "cupy":
    device = f"cupy:{dist.get_local_rank() % vtl.backends.get('cupy').device_count()}"

vtl.random.seed(0)
train_set, test_set = vtl.datasets.Digits(train=True), vtl.datasets.Digits(train=False)
# 64 samples per step in all: each rank takes 64 / world of them
sampler = dist.DistributedSampler(train_set, seed=0)
train_loader = vtl.data.DataLoader(train_set, batch_size=max(1, 64 // world), sampler=sampler,
                                   device=device)
test_loader = vtl.data.DataLoader(test_set, batch_size=256, device=device)

net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
model = dist.DistributedDataParallel(net.to(device) if device else net)
optimizer = optim.Adam(model.parameters(), lr=2e-3)
loss_fn = nn.CrossEntropyLoss()

history = vtl.train.fit(model, train_loader, loss_fn, optimizer, epochs,
                        val_loader=test_loader, metrics=("accuracy",))
result = vtl.train.evaluate(model, test_loader, loss_fn, metrics=("accuracy",))
if rank == 0:
    report(history)  # the logged losses are means over all ranks' samples
    print(f"test accuracy: {result['accuracy']:.4f}")
    os.makedirs(args.out, exist_ok=True)
    ckpt = os.path.join(args.out, "digits_ddp.safetensors")
    vtl.save(model.module.state_dict(), ckpt)
    print(f"checkpoint: {ckpt}")
dist.destroy_process_group()
