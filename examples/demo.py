"""`make demo`: an MLP learns the bundled 8x8 Digits (1797 images, 10 classes).

Trains 64-128-10 with Adam for 30 epochs (batch 64) with live progress bars,
prints the test accuracy, saves a checkpoint and the learning curve:

    python examples/demo.py --backend numpy      # or cupy, wgpu
"""

import os

from _common import OUT, report, setup

import vtl
from vtl import nn, optim

args = setup(__doc__.splitlines()[0], epochs=30, out=OUT)
epochs = 3 if args.quick else args.epochs

vtl.random.seed(0)
train_set, test_set = vtl.datasets.Digits(train=True), vtl.datasets.Digits(train=False)
print(f"Digits: {len(train_set)} train / {len(test_set)} test images, 64 pixels each")
train_loader = vtl.data.DataLoader(train_set, batch_size=64, shuffle=True, seed=0)
test_loader = vtl.data.DataLoader(test_set, batch_size=256)

model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
optimizer = optim.Adam(model.parameters(), lr=2e-3)
loss_fn = nn.CrossEntropyLoss()

history = vtl.train.fit(model, train_loader, loss_fn, optimizer, epochs,
                        val_loader=test_loader, metrics=("accuracy",))
report(history)
result = vtl.train.evaluate(model, test_loader, loss_fn, metrics=("accuracy", "f1"))
print(f"test accuracy: {result['accuracy']:.4f} (macro F1 {result['f1']:.4f})")

os.makedirs(args.out, exist_ok=True)
ckpt = os.path.join(args.out, "digits.safetensors")
vtl.save_checkpoint(ckpt, model, optimizer, epoch=epochs, metrics=result)
print(f"checkpoint: {ckpt}")
try:
    print(f"learning curve: {history.plot(os.path.join(args.out, 'learning_curve.png'))}")
except ImportError as exc:
    print(f"learning curve skipped: {exc}")
