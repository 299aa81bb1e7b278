"""``benchmarks/cpu_tiling.py``: its tiling variants cover every image once and are undone
after each timing."""

from __future__ import annotations

import pytest

from benchmarks import cpu_tiling
from vtl.backends.numpy import conv


@pytest.mark.parametrize("n", [0, 1, 5, 16, 32, 33])
def test_at_least_so_many_tiles_cover_the_images_once(n):
    tiles = cpu_tiling._tiles_at_least(16)(n, 10)  # images small enough for one tile
    assert [i for a, e in tiles for i in range(a, e)] == list(range(n))
    assert all(0 < e - a <= -(-n // 16) for a, e in tiles)  # at most n/16 images, rounded up


def test_variants_are_undone(monkeypatch):
    shipped = {k: getattr(conv, k) for k in ("TILE", "WINOGRAD_TILE", "_tiles", "_pool_run",
                                              "ONE_BLAS_THREAD")}
    for attrs in cpu_tiling.variants().values():
        with cpu_tiling.patched(attrs):
            for k, v in attrs.items():
                assert getattr(conv, k) is v
        assert {k: getattr(conv, k) for k in shipped} == shipped
