"""``Sequential.summary``: an input shape without the batch axis gets a clear error."""

from __future__ import annotations

import io

import pytest

from vtl import nn


def _cnn() -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(4 * 4 * 4, 10))


def test_summary_without_batch_axis_names_the_shape_that_runs(backend):
    m = _cnn()
    with pytest.raises(ValueError, match=r"input_shape \(3, 8, 8\) does not fit the model") as info:
        m.summary((3, 8, 8))
    text = str(info.value)
    assert "layer '4' (Linear) rejected its input of shape (4, 16)" in text
    assert text.endswith("input_shape must include the batch axis: the model runs on "
                         "(1, 3, 8, 8), one sample of shape (3, 8, 8)")
    assert isinstance(info.value.__cause__, ValueError)  # the layer's own error, chained
    buf = io.StringIO()
    m.summary((1, 3, 8, 8), file=buf)
    assert "4 (Linear)" in buf.getvalue() and "(1, 10)" in buf.getvalue()


def test_summary_of_a_wrong_shape_recalls_the_batch_axis(backend):
    m = _cnn()
    with pytest.raises(ValueError, match=r"layer '0' \(Conv2d\) rejected its input of shape "
                                         r"\(2, 5, 8, 8\)") as info:
        m.summary((2, 5, 8, 8))  # 5 channels where the model takes 3: no batch axis fixes it
    assert str(info.value).endswith("input_shape must include the batch axis, e.g. "
                                    "(1, 3, 32, 32) for one 3x32x32 image")


def test_summary_runs_where_the_model_is(backend, other_backends):
    """A model moved to another backend than the default is summarised on its own device."""
    for other in other_backends:
        m = _cnn().to(other)
        buf = io.StringIO()
        m.summary((1, 3, 8, 8), file=buf)
        assert "(1, 10)" in buf.getvalue()
