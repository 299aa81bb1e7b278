"""Multiclass classification of the real Iris data (bundled): 4 features, 3 species."""

from _common import report, setup

import vtl
from vtl import nn, optim

args = setup(__doc__, epochs=100)
epochs = 30 if args.quick else args.epochs

vtl.random.seed(0)
train, test = vtl.datasets.Iris(train=True), vtl.datasets.Iris(train=False)
print(f"Iris: {len(train)} train / {len(test)} test flowers, classes {train.classes}")
mean, std = vtl.mean(train.data, axis=0), vtl.std(train.data, axis=0)   # standardise
train = vtl.data.TensorDataset((train.data - mean) / std, train.targets)
test = vtl.data.TensorDataset((test.data - mean) / std, test.targets)

model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3))
history = vtl.train.fit(model, vtl.data.DataLoader(train, batch_size=16, shuffle=True, seed=0),
                        nn.CrossEntropyLoss(), optim.Adam(model.parameters(), lr=0.01), epochs,
                        val_loader=vtl.data.DataLoader(test, batch_size=64))
report(history)
x, y = test.tensors
with vtl.no_grad():
    out = model(x)
print(f"test accuracy: {vtl.metrics.accuracy(out, y):.3f}")
print("confusion matrix (rows: true species):")
print(vtl.metrics.confusion_matrix(out, y, num_classes=3).numpy())
