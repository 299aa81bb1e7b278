"""Vandermonde matrix by broadcasting, slicing it, and fitting a polynomial with it."""

from _common import setup

import vtl

args = setup(__doc__)

x = vtl.asarray([1.0, 2.0, 3.0, 4.0, 5.0])
powers = vtl.arange(4, dtype=vtl.float32)            # 0, 1, 2, 3
V = x[:, None] ** powers[None, :]                     # V[i, j] = x_i ** j
print("Vandermonde matrix V[i, j] = x_i ** j:")
for row in V.tolist():
    print("   ", [int(v) for v in row])
print("column 2 (squares):", V[:, 2].tolist())
print("rows 1..3, columns 1..2:", V[1:4, 1:3].tolist())
print("every other row, reversed columns:", V[::2, ::-1].tolist())
print("last row:", V[-1].tolist(), " element V[3, 3]:", float(V[3, 3]))

# least squares: the coefficients of y = 1 - 2x + 0.5x^3 from 5 samples, through the QR
# factorisation V = QR (R c = Q^T y); the normal equations V^T V c = V^T y would square V's
# condition number (about 1e3 here), too much for float32
y = 1 - 2 * x + 0.5 * x**3
Q, R = vtl.linalg.qr(V)
coef = vtl.linalg.solve(R, Q.T @ y)
print("fitted coefficients (expect 1, -2, 0, 0.5):",
      [round(c, 4) + 0.0 for c in coef.tolist()])
