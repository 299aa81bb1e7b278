"""Basic tensor usage: creation, arithmetic, broadcasting, reductions, matmul, devices."""

from _common import setup

import vtl

args = setup(__doc__)

a = vtl.asarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
print("a =", a.tolist(), "shape", a.shape, "dtype", a.dtype, "device", a.device)
print("zeros:", vtl.zeros((2, 2)).tolist(), " arange:", vtl.arange(5).tolist())
print("linspace:", vtl.linspace(0, 1, 5).tolist())
print("a * 2 + 1 =", (a * 2 + 1).tolist())
print("a + [10, 20, 30] (broadcast) =", (a + vtl.asarray([10.0, 20.0, 30.0])).tolist())
print("sum:", float(vtl.sum(a)), " mean over rows:", vtl.mean(a, axis=0).tolist())
print("max per row:", vtl.max(a, axis=1).tolist(), " argmax:", vtl.argmax(a, axis=1).tolist())
print("a @ a.T =", (a @ a.T).tolist())
print("exp(a)[0] =", [round(v, 3) for v in vtl.exp(a)[0].tolist()])
print("reshape(3, 2) =", a.reshape(3, 2).tolist(), " a[:, 1] =", a[:, 1].tolist())
print("where(a > 3, a, 0) =", vtl.where(a > 3, a, 0.0).tolist())
print("on the host as NumPy:", type(a.numpy()).__name__, a.numpy().dtype)
