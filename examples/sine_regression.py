"""Regression: an MLP fits y = sin(x) from noisy samples."""

import math

from _common import report, setup

import vtl
from vtl import nn, optim

args = setup(__doc__, epochs=200)
epochs = 40 if args.quick else args.epochs

vtl.random.seed(0)
train = vtl.datasets.synthetic.sine(512, noise=0.05, seed=0)
loader = vtl.data.DataLoader(train, batch_size=64, shuffle=True, seed=0)
model = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
history = vtl.train.fit(model, loader, nn.MSELoss(), optim.Adam(model.parameters(), lr=0.01),
                        epochs, metrics=("mae",))
report(history)
grid = vtl.reshape(vtl.linspace(-math.pi, math.pi, 7), (7, 1))
with vtl.no_grad():
    pred = model(grid)
print("x       sin(x)  model")
for xv, pv in zip(grid[:, 0].tolist(), pred[:, 0].tolist(), strict=True):
    print(f"{xv:+.3f}  {math.sin(xv):+.3f}  {pv:+.3f}")
print(f"max error on the grid: {vtl.metrics.absolute_error(pred, vtl.sin(grid)).max().item():.3f}")
