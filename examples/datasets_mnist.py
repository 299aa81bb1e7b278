"""MNIST loading: shapes, dtypes, classes and one DataLoader batch.

Put the four IDX files (train/t10k images and labels, .gz is fine) in $VTL_DATA/MNIST/raw
or pass download=True to vtl.datasets.MNIST; without them this example uses synthetic
digits of the same shape.
"""

from _common import mnist, setup

import vtl

args = setup(__doc__.splitlines()[0])

train = mnist(train=True, count=1000 if args.quick else None)
test = mnist(train=False, count=200 if args.quick else None)
x, y = train.tensors
print(f"train: {len(train)} images {tuple(x.shape[1:])} {x.dtype}, labels {y.dtype}")
print(f"test: {len(test)} images")
print(f"pixel range: [{float(vtl.min(x)):.1f}, {float(vtl.max(x)):.1f}]")
counts = vtl.unique_counts(y)
print("images per class:", dict(zip(counts.values.tolist(), counts.counts.tolist(), strict=True)))
loader = vtl.data.DataLoader(train, batch_size=32, shuffle=True, seed=0)
xb, yb = next(iter(loader))
print(f"one batch: x {tuple(xb.shape)}, y {tuple(yb.shape)}; {len(loader)} batches per epoch")
