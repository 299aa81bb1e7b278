"""MNIST MLP: 784-128-10, Adam, with a checkpoint of the best epoch.

Real MNIST is read from $VTL_DATA/MNIST/raw (see datasets_mnist.py); without the
files the example trains on synthetic 28x28 data and says so.
"""

import os
import tempfile

from _common import mnist, report, setup

import vtl
from vtl import nn, optim

args = setup(__doc__.splitlines()[0], epochs=5)
epochs = 3 if args.quick else args.epochs

vtl.random.seed(0)
train = mnist(train=True, count=2000 if args.quick else None, flatten=True)
test = mnist(train=False, count=500 if args.quick else None, flatten=True)
model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
optimizer = optim.Adam(model.parameters(), lr=1e-3)
ckpt = os.path.join(tempfile.gettempdir(), "vtl_mnist_mlp.safetensors")
history = vtl.train.fit(
    model, vtl.data.DataLoader(train, batch_size=64, shuffle=True, seed=0),
    nn.CrossEntropyLoss(), optimizer, epochs,
    val_loader=vtl.data.DataLoader(test, batch_size=500),
    callbacks=[vtl.train.ModelCheckpoint(ckpt, monitor="val_accuracy", save_best_only=True)])
report(history)
best_epoch, best = history.best("val_accuracy", mode="max")
print(f"best test accuracy {best:.4f} at epoch {best_epoch}; checkpoint {ckpt}")
