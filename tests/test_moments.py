"""``vtl/backends/_moments.two_pass_var`` (the cupy namespace's ``var``/``std`` for large
arrays) is NumPy's variance algorithm: with NumPy's own mean and sum it gives np.var's values
bit for bit, over axes, keepdims, corrections (also past the count) and dtypes."""

from __future__ import annotations

import numpy as np
import pytest

from vtl.backends._common.moments import two_pass_var


@pytest.mark.filterwarnings("ignore:Degrees of freedom")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2), (2,), (0, 1, 2), -1])
@pytest.mark.parametrize("correction", [0, 1, 1.5, 7, 50])
@pytest.mark.parametrize("keepdims", [False, True])
def test_two_pass_var_is_numpys_var(dtype, axis, correction, keepdims):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((5, 6, 7)) * 100 + 3).astype(dtype)
    x[1, 2, 3] = np.float32(1e6)
    with np.errstate(divide="ignore", invalid="ignore"):
        got = two_pass_var(np.mean, np.sum, x, axis, correction, keepdims)
        want = np.var(x, axis=axis, ddof=correction, keepdims=keepdims)
    assert np.asarray(got).dtype == want.dtype and np.shape(got) == want.shape
    np.testing.assert_array_equal(got, want)  # inf where the count is at most correction


def test_two_pass_var_keeps_nan_and_inf():
    x = np.array([[1.0, np.nan, 2.0], [np.inf, 1.0, 0.0], [3.0, 4.0, 5.0]])
    with np.errstate(invalid="ignore"):
        got = two_pass_var(np.mean, np.sum, x, 1, 0, False)
        want = np.var(x, axis=1)
    np.testing.assert_array_equal(got, want)
