"""vtl.autograd.detect_anomaly: backward stops at the first rule whose gradient holds nan
or inf, naming the op and where it was recorded; off, backward is unchanged."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import to_numpy

import vtl
from vtl.autograd import graph


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # divisions by zero on purpose
        yield


def test_names_the_op_and_the_line(backend):
    x = vtl.asarray([0.0, 4.0], requires_grad=True)
    with vtl.autograd.detect_anomaly():
        y = vtl.log(x) * 0.0  # log'(0) = inf; times 0: nan
        with pytest.raises(RuntimeError, match=r"backward of LogBackward returned (nan|inf) "
                                               r"values in its gradient for input 0") as err:
            vtl.sum(y).backward()
    assert "test_anomaly.py" in str(err.value)  # where the op was recorded
    assert not vtl.autograd.is_anomaly_enabled() and not graph.anomaly_traces


def test_nan_is_told_apart_from_inf(backend):
    x = vtl.asarray([-1.0, 4.0], requires_grad=True)
    with vtl.autograd.detect_anomaly():
        with pytest.raises(RuntimeError, match="SqrtBackward returned nan"):
            vtl.sum(vtl.sqrt(x)).backward()


def test_finite_backward_is_unchanged(backend):
    x = vtl.asarray([1.0, 2.0, 3.0], requires_grad=True)

    @vtl.autograd.detect_anomaly()
    def run():
        vtl.sum(vtl.exp(x) * x).backward()

    run()
    np.testing.assert_allclose(to_numpy(x.grad), np.exp([1, 2, 3]) * (1 + np.array([1, 2, 3])),
                               rtol=1e-6)
    x.grad = None
    vtl.autograd.set_detect_anomaly(True)
    try:
        vtl.autograd.grad(vtl.sum(x * x), [x])  # the functional form is checked too
    finally:
        vtl.autograd.set_detect_anomaly(False)
    # off: a nan gradient goes through silently, as in PyTorch
    z = vtl.asarray([-1.0], requires_grad=True)
    vtl.sum(vtl.sqrt(z)).backward()
    assert np.isnan(to_numpy(z.grad)).all()
