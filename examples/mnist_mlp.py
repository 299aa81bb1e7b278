"""MNIST MLP: 784-128-10, Adam, with a checkpoint of the best epoch.

Real MNIST is read from $VTL_DATA/MNIST/raw (see datasets_mnist.py); without the
files the example trains on synthetic 28x28 data and says so. The checkpoint goes
to demo_out/ (git-ignored; ``--out DIR`` to change).
"""

import os

from _common import OUT, mnist, report, setup

import vtl
from vtl import nn, optim

args = setup(__doc__.splitlines()[0], epochs=5, out=OUT)
epochs = 3 if args.quick else args.epochs

vtl.random.seed(0)
train = mnist(train=True, count=1000 if args.quick else None, flatten=True)
test = mnist(train=False, count=200 if args.quick else None, flatten=True)
print(f"{len(train)} train / {len(test)} test images")
model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
optimizer = optim.Adam(model.parameters(), lr=1e-3)
os.makedirs(args.out, exist_ok=True)
ckpt = os.path.join(args.out, "mnist_mlp_best.safetensors")
history = vtl.train.fit(
    model, vtl.data.DataLoader(train, batch_size=64, shuffle=True, seed=0),
    nn.CrossEntropyLoss(), optimizer, epochs,
    val_loader=vtl.data.DataLoader(test, batch_size=500),
    callbacks=[vtl.train.ModelCheckpoint(ckpt, monitor="val_accuracy", save_best_only=True)])
report(history)
best_epoch, best = history.best("val_accuracy", mode="max")
print(f"test accuracy: {history['val_accuracy'][-1]:.4f}")
print(f"best test accuracy {best:.4f} at epoch {best_epoch}; checkpoint {ckpt}")
