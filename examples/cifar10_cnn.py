"""CIFAR-10 CNN (the upstream architecture): three conv3x3(pad 1)+ReLU+maxpool2 blocks
with 64, 128 and 256 channels, then Linear(4096, 256)+ReLU and Linear(256, 10); Adam 1e-3.

Real CIFAR-10 is read from $VTL_DATA/cifar-10-batches-py (or -bin); without it the
example trains on synthetic 3x32x32 images and says so. The defaults (the first 2000
training images, 3 epochs) take about half a minute on two CPU cores; pass
``--train-count 50000 --test-count 10000 --epochs 20`` for a real CIFAR-10 run.
"""

from _common import cifar10, report, setup

import vtl
from vtl import nn, optim

args = setup(__doc__.splitlines()[0], epochs=3, train_count=2000, test_count=500)
epochs = args.epochs  # --quick trains as long, on fewer images
train = cifar10(train=True, count=128 if args.quick else args.train_count)
test = cifar10(train=False, count=64 if args.quick else args.test_count)
print(f"{len(train)} train / {len(test)} test images of shape {tuple(train.tensors[0].shape[1:])}")

vtl.random.seed(0)
model = nn.Sequential(
    nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(128, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(256 * 4 * 4, 256), nn.ReLU(), nn.Linear(256, 10),
)
print(f"parameters: {model.num_parameters():,}")
history = vtl.train.fit(
    model, vtl.data.DataLoader(train, batch_size=16 if args.quick else 64, shuffle=True, seed=0,
                               drop_last=True),
    nn.CrossEntropyLoss(), optim.Adam(model.parameters(), lr=1e-3), epochs,
    val_loader=vtl.data.DataLoader(test, batch_size=100), metrics=("accuracy", "top5"))
report(history)
print(f"test accuracy: {history['val_accuracy'][-1]:.4f}, top-5: {history['val_top5'][-1]:.4f}")
