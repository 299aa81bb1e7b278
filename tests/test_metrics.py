"""vtl.metrics against NumPy oracles written from the definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import vtl
from tests.helpers import assert_close
from vtl import metrics as M


def _np_confusion(t: np.ndarray, p: np.ndarray, c: int) -> np.ndarray:
    cm = np.zeros((c, c), dtype=np.int64)
    for ti, pi in zip(t, p, strict=True):
        cm[ti, pi] += 1
    return cm


def _np_prf(cm: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    tp = np.diag(cm).astype(np.float64)
    pp, sup = cm.sum(0), cm.sum(1)
    prec = np.divide(tp, pp, out=np.zeros_like(tp), where=pp > 0)
    rec = np.divide(tp, sup, out=np.zeros_like(tp), where=sup > 0)
    d = prec + rec
    f1 = np.divide(2 * prec * rec, d, out=np.zeros_like(tp), where=d > 0)
    return prec, rec, f1


@st.composite
def scores_and_labels(draw):
    n = draw(st.integers(1, 40))
    c = draw(st.integers(2, 6))
    # distinct scores per row so argmax/top-k have no ties
    scores = np.stack([draw(st.permutations(range(c))) for _ in range(n)]).astype(np.float32)
    scores += draw(hnp.arrays(np.float32, (n, c), elements=st.floats(0, 0.5, width=32)))
    labels = draw(hnp.arrays(np.int64, (n,), elements=st.integers(0, c - 1)))
    return scores, labels


@given(data=scores_and_labels())
def test_accuracy_and_confusion(backend, data):
    s, t = data
    out, tgt = vtl.asarray(s), vtl.asarray(t)
    pred = s.argmax(1)
    assert M.accuracy(out, tgt) == pytest.approx(np.mean(pred == t))
    assert M.accuracy(vtl.asarray(pred), tgt) == pytest.approx(np.mean(pred == t))
    cm = M.confusion_matrix(out, tgt)
    assert_close(cm, _np_confusion(t, pred, s.shape[1]))
    assert cm.device == out.device


@given(data=scores_and_labels(), k=st.integers(1, 6))
def test_top_k_accuracy(backend, data, k):
    s, t = data
    k = min(k, s.shape[1])
    topk = np.argsort(-s, axis=1)[:, :k]
    expected = np.mean([t[i] in topk[i] for i in range(len(t))])
    assert M.top_k_accuracy(vtl.asarray(s), vtl.asarray(t), k) == pytest.approx(expected)
    if k == 1:
        assert M.top_k_accuracy(vtl.asarray(s), vtl.asarray(t), 1) == pytest.approx(
            M.accuracy(vtl.asarray(s), vtl.asarray(t)))


@given(data=scores_and_labels())
def test_precision_recall_f1(backend, data):
    s, t = data
    c = s.shape[1]
    pred = s.argmax(1)
    cm = _np_confusion(t, pred, c)
    prec, rec, f1 = _np_prf(cm)
    out, tgt = vtl.asarray(s), vtl.asarray(t)
    p_, r_, f_ = M.precision_recall_f1(out, tgt, average=None)
    for got, want in ((p_, prec), (r_, rec), (f_, f1)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    assert M.precision(out, tgt) == pytest.approx(prec.mean(), abs=1e-6)
    assert M.recall(out, tgt) == pytest.approx(rec.mean(), abs=1e-6)
    assert M.f1_score(out, tgt) == pytest.approx(f1.mean(), abs=1e-6)
    w = cm.sum(1) / cm.sum()
    assert M.f1_score(out, tgt, average="weighted") == pytest.approx((f1 * w).sum(), abs=1e-6)
    acc = np.mean(pred == t)
    for fn in (M.precision, M.recall, M.f1_score):  # micro == accuracy for single-label data
        assert fn(out, tgt, average="micro") == pytest.approx(acc, abs=1e-6)


def test_prf_zero_division_and_known_values(backend):
    # class 2 is never predicted and never true: all its ratios are 0 (zero_division=0)
    t = vtl.asarray([0, 0, 1, 1, 1])
    p = vtl.asarray([0, 1, 1, 1, 0])
    cm = M.confusion_matrix(p, t, num_classes=3)
    assert cm.numpy().tolist() == [[1, 1, 0], [1, 2, 0], [0, 0, 0]]
    prec = M.precision(p, t, num_classes=3, average=None).numpy()
    np.testing.assert_allclose(prec, [0.5, 2 / 3, 0.0], rtol=1e-6)
    rec = M.recall(p, t, num_classes=3, average=None).numpy()
    np.testing.assert_allclose(rec, [0.5, 2 / 3, 0.0], rtol=1e-6)
    assert M.confusion_matrix(p, t).shape == (2, 2)


def test_metrics_ignore_the_graph(backend):
    s = vtl.asarray([[2.0, 1.0], [0.0, 3.0]], requires_grad=True)
    t = vtl.asarray([0, 0])
    assert M.accuracy(s * 2, t) == 0.5
    assert M.mean_squared_error(s, vtl.zeros((2, 2))) == pytest.approx(14 / 4)


# GPUs may flush float32 subnormals to zero, so they are left out.
_FINITE = st.floats(-100, 100, width=32, allow_subnormal=False)


@given(y=hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                    elements=_FINITE),
       data=st.data())
def test_regression_errors(backend, y, data):
    yt = data.draw(hnp.arrays(np.float32, y.shape, elements=_FINITE))
    a, b = vtl.asarray(y), vtl.asarray(yt)
    d = y.astype(np.float64) - yt
    assert_close(M.squared_error(a, b), (d * d).astype(np.float32), rtol=1e-5, atol=1e-3)
    assert_close(M.absolute_error(a, b), np.abs(d).astype(np.float32), rtol=1e-5, atol=1e-4)
    assert M.mean_squared_error(a, b) == pytest.approx(np.mean(d * d), rel=1e-4, abs=1e-3)
    assert M.mse(a, b) == M.mean_squared_error(a, b)
    assert M.mean_absolute_error(a, b) == pytest.approx(np.mean(np.abs(d)), rel=1e-4, abs=1e-4)
    den = np.maximum(np.abs(y), np.abs(yt)).astype(np.float64)
    rel = np.where(den == 0, 0.0, np.abs(d) / np.where(den == 0, 1, den))
    assert_close(M.relative_error(a, b), rel.astype(np.float32), rtol=1e-5, atol=1e-6)
    assert M.mean_relative_error(a, b) == pytest.approx(rel.mean(), rel=1e-4, abs=1e-6)


def test_relative_error_special_cases(backend):
    r = M.relative_error(vtl.asarray([1.0, -1.0, 0.0, 0.0, 3.0]),
                         vtl.asarray([1.0, 1.0, 0.0, 2.0, 4.0])).numpy()
    # opposite signs are maximally wrong (2), not exact as in VTL's original formula
    np.testing.assert_allclose(r, [0.0, 2.0, 0.0, 1.0, 0.25], rtol=1e-6)
    assert math.isnan(M.mean_squared_error(vtl.zeros((0,)), vtl.zeros((0,))))


def test_metric_lookup_and_errors(backend):
    assert M.get("accuracy") is M.accuracy
    assert M.get("mse") is M.mean_squared_error
    assert M.get(len) is len
    with pytest.raises(ValueError, match="unknown metric"):
        M.get("bogus")
    s, t = vtl.asarray([[0.1, 0.9]]), vtl.asarray([1])
    with pytest.raises(ValueError, match="average"):
        M.precision(s, t, average="sample")
    with pytest.raises(ValueError, match="k must be"):
        M.top_k_accuracy(s, t, 0)
    with pytest.raises(ValueError, match="exceeds"):
        M.top_k_accuracy(s, t, 3)
    with pytest.raises(ValueError, match="samples"):
        M.accuracy(s, vtl.asarray([1, 0]))
    with pytest.raises(TypeError, match="integer class labels"):
        M.accuracy(s, vtl.asarray([1.0]))
    with pytest.raises(TypeError, match="1-D output"):
        M.accuracy(vtl.asarray([0.5]), t)
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 2\)"):
        M.confusion_matrix(vtl.asarray([0, 3]), vtl.asarray([0, 1]), num_classes=2)
    with pytest.raises(ValueError, match="do not broadcast"):
        M.mean_squared_error(vtl.zeros((2,)), vtl.zeros((3,)))
    assert math.isnan(M.accuracy(vtl.zeros((0, 3)), vtl.zeros((0,), dtype=vtl.int64)))
