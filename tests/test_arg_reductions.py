"""``vtl/backends/_arg_reductions.first_arg_extreme`` (the cupy namespace's argmax/argmin)
against NumPy's argmax/argmin, run here on NumPy's own namespace."""

from __future__ import annotations

import array_api_compat.numpy as xp
import numpy as np
import pytest

from vtl.backends._common.arg_reductions import first_arg_extreme


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "bool"])
@pytest.mark.parametrize("fn", ["argmax", "argmin"])
def test_first_arg_extreme_is_numpys(fn, dtype):
    rng = np.random.default_rng(3)
    if dtype == "bool":
        vals = np.array([False, True])
    elif dtype == "int32":
        vals = np.array([-3, 0, 2, 7, np.iinfo(np.int32).min, np.iinfo(np.int32).max])
    else:
        tiny = np.finfo(dtype).smallest_subnormal
        vals = np.array([-0.0, 0.0, np.inf, -np.inf, tiny, -tiny, 1.0, -1.0, np.nan,
                         np.finfo(dtype).max, -np.finfo(dtype).max])
    for _ in range(30):
        x = rng.choice(vals, size=(5, 6, 4)).astype(dtype)
        for axis in (None, 0, 1, 2, -1):
            for keepdims in (False, True):
                got = first_arg_extreme(xp, x, axis, keepdims, fn == "argmax")
                want = getattr(np, fn)(x, axis=axis, keepdims=keepdims)
                assert got.shape == want.shape and got.dtype == np.int64
                np.testing.assert_array_equal(got, want)
    for pair in ([-0.0, 0.0], [0.0, -0.0], [np.nan, np.inf, np.nan], [2.0, 2.0, 2.0]):
        if dtype.startswith("float"):
            x = np.array(pair, dtype)
            assert int(first_arg_extreme(xp, x, None, False, fn == "argmax")) \
                == int(getattr(np, fn)(x))


def test_order_keys_sort_as_the_floats():
    """The integer keys order every float as NumPy compares them (signed zeros equal, the
    subnormals apart from zero), nan the extreme either way."""
    from vtl.backends._common.arg_reductions import _order_keys

    for dtype in ("float16", "float32", "float64"):
        f = np.finfo(dtype)
        vals = np.array([-np.inf, -f.max, -1.0, -f.smallest_normal, -f.smallest_subnormal,
                         -0.0, 0.0, f.smallest_subnormal, f.smallest_normal, 1.0, f.max,
                         np.inf], dtype)
        keys = _order_keys(xp, vals, True)
        assert (np.diff(keys.astype(np.int64)) > 0).sum() == len(vals) - 2  # one tie: zeros
        assert keys[5] == keys[6]
        nans = np.array([np.nan, -np.nan], dtype)
        assert (_order_keys(xp, nans, True) > keys.max()).all()
        assert (_order_keys(xp, nans, False) < keys.min()).all()


def test_first_arg_extreme_of_an_empty_axis():
    with pytest.raises(ValueError, match="empty axis"):
        first_arg_extreme(xp, np.zeros((3, 0)), 1, False, True)
    got = first_arg_extreme(xp, np.zeros((0, 4)), 1, False, True)
    assert got.shape == (0,)
