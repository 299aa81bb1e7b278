"""Scatter plot (PNG) of the two-spirals data set, coloured by class.

Writes demo_out/scatter.png (git-ignored; ``--out FILE`` to change). Needs matplotlib
(pip install 'vtl[plot]').
"""

import os

from _common import OUT, setup

import vtl

args = setup(__doc__.splitlines()[0], out=os.path.join(OUT, "scatter.png"))

data = vtl.datasets.synthetic.two_spirals(200 if args.quick else 1000, noise=0.05, seed=0)
x, y = (t.numpy() for t in data.tensors)
print(f"{len(x)} points, classes {sorted(set(y.tolist()))}")
try:
    from matplotlib.figure import Figure
except ImportError:
    print("matplotlib is missing: pip install 'vtl[plot]' to draw the plot")
    raise SystemExit(0) from None
fig = Figure(figsize=(5, 5))
ax = fig.subplots()
points = ax.scatter(x[:, 0], x[:, 1], c=y, cmap="coolwarm", s=8)
ax.set_title("two spirals")
ax.set_aspect("equal")
fig.colorbar(points, ax=ax, label="class")
os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
fig.savefig(args.out, dpi=100)
print(f"wrote {os.path.abspath(args.out)}")
