"""Simple two-layer network, trained by hand: forward, loss, backward, optimizer step.

The upstream example's shape: a batch of 64 random inputs of size 1000, a hidden
layer of 100 ReLUs and 10 outputs regressed onto random targets with MSE.
"""

from _common import setup

import vtl
from vtl import nn, optim

args = setup(__doc__.splitlines()[0], steps=200)
steps = 50 if args.quick else args.steps

vtl.random.seed(0)
x = vtl.random.normal(size=(64, 1000))
y = vtl.random.normal(size=(64, 10))
model = nn.Sequential(nn.Linear(1000, 100), nn.ReLU(), nn.Linear(100, 10))
optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loss_fn = nn.MSELoss()
for step in range(steps):
    loss = loss_fn(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step == 0:
        print(f"initial loss: {loss.item():.4f}")
    elif step % max(1, steps // 5) == 0:
        print(f"step {step}: loss {loss.item():.4f}")
print(f"final loss: {loss_fn(model(x), y).item():.4f}")
