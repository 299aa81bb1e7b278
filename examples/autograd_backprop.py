"""Autograd: build an expression, call backward(), read .grad, then descend on it."""

from _common import setup

import vtl

args = setup(__doc__)

# f(x, y) = x * y + sin(x);  df/dx = y + cos(x),  df/dy = x
x = vtl.asarray(2.0, requires_grad=True)
y = vtl.asarray(3.0, requires_grad=True)
f = x * y + vtl.sin(x)
f.backward()
print(f"f = {float(f):.4f}")
print(f"df/dx = {float(x.grad):.4f} (by hand: {3 + float(vtl.cos(vtl.asarray(2.0))):.4f})")
print(f"df/dy = {float(y.grad):.4f} (by hand: 2.0000)")

# the same with the functional API, and a second derivative
g = vtl.grad(lambda t: t**3)(vtl.asarray(2.0))
h = vtl.grad(vtl.grad(lambda t: t**3))(vtl.asarray(2.0))
print(f"d/dt t^3 at 2 = {float(g):.1f}, second derivative = {float(h):.1f}")

# gradient descent on a least-squares problem: w -> [2, -3]
X = vtl.random.normal(size=(64, 2))
target = X @ vtl.asarray([2.0, -3.0])
w = vtl.zeros(2, requires_grad=True)
steps = 20 if args.quick else 100
for step in range(steps):
    loss = vtl.mean((X @ w - target) ** 2)
    if step == 0:
        print(f"initial loss: {float(loss):.4f}")
    loss.backward()
    with vtl.no_grad():
        w -= 0.1 * w.grad
    w.grad = None
print(f"final loss: {float(vtl.mean((X @ w - target) ** 2)):.4f}")
print("w =", [round(v, 3) for v in w.tolist()], "(expect [2, -3])")
