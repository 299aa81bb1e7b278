"""``benchmarks/cpu_blas.py``: a line per product with a time at each thread count asked
for, and PyTorch's beside it where PyTorch is installed."""

from __future__ import annotations

import re

from benchmarks import cpu_blas


def test_prints_a_line_per_product(capsys, monkeypatch):
    monkeypatch.setattr(cpu_blas, "PRODUCTS", {"small": (8, 16, 4), "wide": (2, 3, 64)})
    cpu_blas.main(["--threads", "1,2", "--seconds", "0.001"])
    lines = capsys.readouterr().out.strip().splitlines()
    rows = [ln for ln in lines if ln.startswith(("small", "wide"))]
    assert len(rows) == 2
    for row, shape in zip(rows, ("8x16x4", "2x3x64"), strict=True):
        fields = row.split()
        assert shape in fields
        times = fields[fields.index(shape) + 1:]
        columns = 2 if cpu_blas._set_blas_threads() is not None else 1
        assert len(times) == columns + 1  # and PyTorch's, or "-"
        assert all(float(t) > 0 for t in times[:columns])
        assert re.fullmatch(r"[\d.]+|-", times[-1])
