"""Margin, ranking, embedding, multi-label and CTC losses: NumPy transcriptions of
PyTorch's documented formulas (loops, not vectorised, so they are independent of the
implementation), a brute-force CTC oracle that enumerates every alignment, float64
finite-difference gradients, the modules, the errors, array-api-strict arrays and,
where it is installed, PyTorch itself."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from helpers import assert_close, check_grad, check_grad_matches_numpy, to_numpy

import vtl
import vtl.nn.functional as F
from vtl import nn

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # pragma: no cover - torch is optional
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

REDUCTIONS = ["mean", "sum", "none"]


def _reduce(x, reduction):
    x = np.asarray(x, dtype=np.float64)
    return {"mean": np.mean, "sum": np.sum, "none": lambda a: a}[reduction](x)


def _np(x):
    return vtl.asarray(x, backend="numpy")


# -- NumPy oracles: PyTorch's documented formulas ------------------------------------------
def np_margin_ranking(x1, x2, y, margin=0.0):
    return np.maximum(0.0, -y * (x1 - x2) + margin)


def np_hinge_embedding(x, y, margin=1.0):
    x, y = np.broadcast_arrays(x, y)
    out = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        if y[i] == 1:
            out[i] = x[i]
        elif y[i] == -1:
            out[i] = max(0.0, margin - x[i])
        else:  # PyTorch's kernel adds both terms for other targets
            out[i] = x[i] + max(0.0, margin - x[i])
    return out


def np_cosine_embedding(x1, x2, y, margin=0.0):
    cos = (x1 * x2).sum(-1) / np.sqrt(((x1 * x1).sum(-1) + 1e-12) * ((x2 * x2).sum(-1) + 1e-12))
    return np.where(y == 1, 1 - cos, np.where(y == -1, np.maximum(0.0, cos - margin), 0.0))


def np_pdist(x, y, p=2.0, eps=1e-6):
    return np.linalg.norm(x - y + eps, ord=p, axis=-1)


def np_triplet(a, p, n, margin=1.0, pn=2.0, eps=1e-6, swap=False):
    dp, dn = np_pdist(a, p, pn, eps), np_pdist(a, n, pn, eps)
    if swap:
        dn = np.minimum(dn, np_pdist(p, n, pn, eps))
    return np.maximum(margin + dp - dn, 0.0)


def np_multi_margin(x, y, p=1, margin=1.0, w=None):
    x2 = x.reshape(-1, x.shape[-1] if x.ndim else 1)
    y2 = np.asarray(y).reshape(-1)
    out = np.zeros(len(y2))
    c = x2.shape[1]
    for n in range(len(y2)):
        for i in range(c):
            if i == y2[n]:
                continue
            h = max(0.0, margin - x2[n, y2[n]] + x2[n, i]) ** p
            out[n] += h * (1.0 if w is None else w[y2[n]])
    return (out / c).reshape(np.shape(y))


def np_multilabel_margin(x, y):
    x2, y2 = x.reshape(-1, x.shape[-1]), y.reshape(-1, x.shape[-1])
    out = np.zeros(len(x2))
    c = x2.shape[1]
    for n in range(len(x2)):
        targets = []
        for v in y2[n]:
            if v < 0:
                break
            targets.append(v)
        for j in targets:
            for i in range(c):
                if i not in targets:
                    out[n] += max(0.0, 1 - (x2[n, j] - x2[n, i]))
    out /= c
    return out if x.ndim == 2 else out[0]


def np_multilabel_soft_margin(x, y, w=None):
    ls = -np.logaddexp(0, -x)  # log sigmoid(x)
    lsn = -np.logaddexp(0, x)  # log sigmoid(-x)
    loss = -(y * ls + (1 - y) * lsn)
    if w is not None:
        loss = loss * w
    return loss.mean(-1)


def np_ctc_brute(lp, target, blank=0):
    """``-log sum_paths prod_t p[t, path_t]`` over every path of ``len(lp)`` frames whose
    collapse (merge repeats, then drop blanks) is ``target``."""
    t_len, c = lp.shape
    total = 0.0
    for path in itertools.product(range(c), repeat=t_len):
        collapsed = [k for i, k in enumerate(path) if i == 0 or k != path[i - 1]]
        if [k for k in collapsed if k != blank] == list(target):
            total += math.exp(sum(lp[t, k] for t, k in enumerate(path)))
    return -math.log(total) if total > 0 else math.inf


def np_ctc(lp, targets, il, tl, blank=0, reduction="mean", zero_infinity=False):
    """Per-sample brute force over ``(T, N, C)`` log-probs and padded targets."""
    losses = np.array([np_ctc_brute(lp[:il[n], n], targets[n][:tl[n]], blank)
                       for n in range(lp.shape[1])])
    if zero_infinity:
        losses = np.where(np.isinf(losses), 0.0, losses)
    if reduction == "mean":
        return np.mean(losses / np.maximum(np.asarray(tl), 1))
    return _reduce(losses, reduction)


def _log_softmax(x, axis=-1):
    m = x.max(axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis, keepdims=True))


# -- the pointwise / embedding losses on every backend -------------------------------------
def _data(seed=0):
    rng = np.random.default_rng(seed)
    d = {
        "x1": rng.standard_normal((4, 5)), "x2": rng.standard_normal((4, 5)),
        "x3": rng.standard_normal((4, 5)),
        "v1": rng.standard_normal(6), "v2": rng.standard_normal(6),
        "sign6": np.array([1.0, -1.0, 1.0, -1.0, -1.0, 1.0]),
        "sign4": np.array([1, -1, 1, -1]), "cls": np.array([0, 3, 4, 1]),
        "mlt": np.array([[3, 0, -1, 1, 2], [0, 1, 2, 3, 4], [-1, 2, 0, 0, 0], [4, 4, -1, 9, 9]]),
        "probs": rng.uniform(0, 1, (4, 5)), "w5": rng.uniform(0.5, 2.0, 5),
    }
    d["mlt"][3, 3:] = -1  # entries after the end marker must still be in [-1, C)
    return d


# name -> (call of (arrays..., reduction), NumPy oracle, input names); the integer inputs
# (INT_INPUTS) are constants, the others get gradients
CASES = {
    "margin_ranking": (lambda a, b, y, r: F.margin_ranking_loss(a, b, y, 0.3, reduction=r),
                       lambda a, b, y: np_margin_ranking(a, b, y, 0.3), ("v1", "v2", "sign6")),
    "hinge_embedding": (lambda a, y, r: F.hinge_embedding_loss(a, y, 0.8, reduction=r),
                        lambda a, y: np_hinge_embedding(a, y, 0.8), ("v1", "sign6")),
    "cosine_embedding": (lambda a, b, y, r: F.cosine_embedding_loss(a, b, y, 0.1, reduction=r),
                         lambda a, b, y: np_cosine_embedding(a, b, y, 0.1),
                         ("x1", "x2", "sign4")),
    "triplet": (lambda a, p, n, r: F.triplet_margin_loss(a, p, n, 1.5, reduction=r),
                lambda a, p, n: np_triplet(a, p, n, 1.5), ("x1", "x2", "x3")),
    "triplet_p1_swap": (lambda a, p, n, r: F.triplet_margin_loss(a, p, n, 2.0, 1, 1e-3, True,
                                                                 reduction=r),
                        lambda a, p, n: np_triplet(a, p, n, 2.0, 1, 1e-3, True),
                        ("x1", "x2", "x3")),
    "triplet_p3": (lambda a, p, n, r: F.triplet_margin_loss(a, p, n, 1.0, 3.0, reduction=r),
                   lambda a, p, n: np_triplet(a, p, n, 1.0, 3.0), ("x1", "x2", "x3")),
    "triplet_distance": (lambda a, p, n, r: F.triplet_margin_with_distance_loss(
                             a, p, n, margin=1.5, swap=True, reduction=r),
                         lambda a, p, n: np_triplet(a, p, n, 1.5, swap=True),
                         ("x1", "x2", "x3")),
    "multi_margin": (lambda x, y, r: F.multi_margin_loss(x, y, reduction=r),
                     lambda x, y: np_multi_margin(x, y), ("x1", "cls")),
    "multi_margin_p2_weight": (lambda x, y, w, r: F.multi_margin_loss(x, y, 2, 0.7, w,
                                                                      reduction=r),
                               lambda x, y, w: np_multi_margin(x, y, 2, 0.7, w),
                               ("x1", "cls", "w5")),
    "multilabel_margin": (lambda x, y, r: F.multilabel_margin_loss(x, y, reduction=r),
                          np_multilabel_margin, ("x1", "mlt")),
    "multilabel_soft_margin": (lambda x, y, w, r: F.multilabel_soft_margin_loss(
                                   x, y, w, reduction=r),
                               np_multilabel_soft_margin, ("x1", "probs", "w5")),
}
INT_INPUTS = {"cls", "mlt", "sign4"}


def _inputs(names, backend=None, dtype=np.float32):
    d = _data()
    out = []
    for k in names:
        v = d[k] if k in INT_INPUTS else d[k].astype(dtype)
        out.append(vtl.asarray(v) if backend is None else vtl.asarray(v, backend=backend))
    return out


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_matches_numpy_formula(backend, name, reduction):
    fn, ref, names = CASES[name]
    d = _data()
    expect = _reduce(ref(*(d[k] for k in names)), reduction)
    out = fn(*_inputs(names), reduction)
    assert out.dtype == vtl.float32
    assert_close(out, expect.astype(np.float32), rtol=3e-5, atol=3e-6)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_gradients_finite_differences(name, reduction):
    fn, _, names = CASES[name]
    d = _data()
    fixed = {k: _np(d[k]) for k in names if k in INT_INPUTS}
    free = [k for k in names if k not in INT_INPUTS]

    def f(*ts):
        it = iter(ts)
        return fn(*(fixed[k] if k in fixed else next(it) for k in names), reduction)

    check_grad(f, *(d[k] for k in free))


@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_gradients_match_numpy_backend(backend, name):
    if backend == "numpy":
        pytest.skip("the reference backend")
    fn, _, names = CASES[name]
    d = _data()
    free = [k for k in names if k not in INT_INPUTS]

    def f(*ts):
        it = iter(ts)
        dev = ts[0].device
        return fn(*(vtl.asarray(d[k], device=dev) if k in INT_INPUTS else next(it)
                    for k in names), "sum")

    check_grad_matches_numpy(f, backend, *(d[k] for k in free))


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_loss_matches_torch(name, reduction):
    fn, _, names = CASES[name]
    d = _data()
    tfn = {
        "margin_ranking": lambda a, b, y: TF.margin_ranking_loss(a, b, y, 0.3,
                                                                  reduction=reduction),
        "hinge_embedding": lambda a, y: TF.hinge_embedding_loss(a, y, 0.8, reduction=reduction),
        "cosine_embedding": lambda a, b, y: TF.cosine_embedding_loss(a, b, y, 0.1,
                                                                     reduction=reduction),
        "triplet": lambda a, p, n: TF.triplet_margin_loss(a, p, n, 1.5, reduction=reduction),
        "triplet_p1_swap": lambda a, p, n: TF.triplet_margin_loss(a, p, n, 2.0, 1, 1e-3, True,
                                                                  reduction=reduction),
        "triplet_p3": lambda a, p, n: TF.triplet_margin_loss(a, p, n, 1.0, 3.0,
                                                             reduction=reduction),
        "triplet_distance": lambda a, p, n: TF.triplet_margin_with_distance_loss(
            a, p, n, margin=1.5, swap=True, reduction=reduction),
        "multi_margin": lambda x, y: TF.multi_margin_loss(x, y, reduction=reduction),
        "multi_margin_p2_weight": lambda x, y, w: TF.multi_margin_loss(x, y, 2, 0.7, w,
                                                                       reduction=reduction),
        "multilabel_margin": lambda x, y: TF.multilabel_margin_loss(x, y, reduction=reduction),
        "multilabel_soft_margin": lambda x, y, w: TF.multilabel_soft_margin_loss(
            x, y, w, reduction=reduction),
    }[name]
    # PyTorch's multi_margin_loss refuses a weight that requires grad
    grads = [k not in INT_INPUTS and not (name.startswith("multi_margin") and k == "w5")
             for k in names]
    tins = [torch.tensor(d[k], requires_grad=g) for k, g in zip(names, grads, strict=True)]
    tout = tfn(*tins)
    vins = [vtl.asarray(d[k], backend="numpy", requires_grad=g)
            for k, g in zip(names, grads, strict=True)]
    vout = fn(*vins, reduction)
    np.testing.assert_allclose(to_numpy(vout), tout.detach().numpy(), rtol=1e-12, atol=1e-12)
    v = np.random.default_rng(1).standard_normal(tuple(tout.shape))
    (tout * torch.tensor(v)).sum().backward()
    vtl.sum(vout * _np(v)).backward()
    for k, g, ti, vi in zip(names, grads, tins, vins, strict=True):
        if g:  # None: no gradient (a target used only in a comparison)
            tg = np.zeros(d[k].shape) if ti.grad is None else ti.grad.numpy()
            vg = np.zeros(d[k].shape) if vi.grad is None else to_numpy(vi.grad)
            np.testing.assert_allclose(vg, tg, rtol=1e-10, atol=1e-12,
                                       err_msg=f"gradient of {k}")


def test_unbatched_and_broadcast_shapes(backend):
    d = _data()
    x1, x2, x3 = (d[k].astype(np.float32) for k in ("x1", "x2", "x3"))
    out = F.cosine_embedding_loss(vtl.asarray(x1[0]), vtl.asarray(x2[0]), vtl.asarray(-1),
                                  reduction="none")
    assert out.shape == ()
    assert_close(out, np.float32(np_cosine_embedding(x1[0], x2[0], -1)), rtol=1e-5)
    out = F.triplet_margin_loss(vtl.asarray(x1), vtl.asarray(x2[:1]), vtl.asarray(x3[1:2]),
                                reduction="none")
    assert_close(out, np_triplet(x1, x2[:1], x3[1:2]).astype(np.float32), rtol=1e-5, atol=1e-6)
    out = F.triplet_margin_loss(vtl.asarray(x1[0]), vtl.asarray(x2[0]), vtl.asarray(x3[0]),
                                reduction="none")
    assert out.shape == ()
    # multi_margin: (C,) input with a 0-d or a one-element target
    assert F.multi_margin_loss(vtl.asarray(x1[0]), vtl.asarray(2), reduction="none").shape == ()
    out = F.multi_margin_loss(vtl.asarray(x1[0]), vtl.asarray([2]), reduction="none")
    assert_close(out, np_multi_margin(x1[0], np.array([2])).astype(np.float32), rtol=1e-5)
    out = F.multilabel_margin_loss(vtl.asarray(x1[0]), vtl.asarray(d["mlt"][0]),
                                   reduction="none")
    assert_close(out, np.float32(np_multilabel_margin(x1[0], d["mlt"][0])), rtol=1e-5)
    out = F.multilabel_soft_margin_loss(vtl.asarray(x1),
                                        vtl.asarray(d["probs"][:1].astype(np.float32)),
                                        reduction="none")
    assert_close(out, np_multilabel_soft_margin(x1, d["probs"][:1]).astype(np.float32),
                 rtol=1e-5)
    # hinge: other targets get both terms; margin_ranking broadcasts within one rank
    out = F.hinge_embedding_loss(vtl.asarray([0.5, 2.0]), vtl.asarray([0.0, 1.0]),
                                 reduction="none")
    assert_close(out, np.array([1.0, 2.0], np.float32))
    out = F.margin_ranking_loss(vtl.asarray([0.5]), vtl.asarray([1.0, -1.0]),
                                vtl.asarray([1, -1]), reduction="none")
    assert_close(out, np.array([0.5, 1.5], np.float32))


def test_custom_distance_function():
    d = _data()

    def cos_dist(a, b):
        return 1.0 - vtl.sum(a * b, axis=-1) / (vtl.linalg.vector_norm(a, axis=-1)
                                                * vtl.linalg.vector_norm(b, axis=-1))

    def np_cos_dist(a, b):
        return 1.0 - (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))

    out = F.triplet_margin_with_distance_loss(_np(d["x1"]), _np(d["x2"]), _np(d["x3"]),
                                              distance_function=cos_dist, margin=0.5,
                                              reduction="none")
    expect = np.maximum(0.5 + np_cos_dist(d["x1"], d["x2"]) - np_cos_dist(d["x1"], d["x3"]), 0)
    assert_close(out, expect)
    check_grad(lambda a, p, n: F.triplet_margin_with_distance_loss(
        a, p, n, distance_function=cos_dist, margin=0.5), d["x1"], d["x2"], d["x3"])


def test_kink_gradients_are_zero():
    # at the hinge (z == 0) the derivative is 0, for every margin loss
    x = vtl.asarray(np.array([1.0, 1.0]), backend="numpy", requires_grad=True)
    vtl.sum(F.margin_ranking_loss(x, vtl.asarray(np.array([1.0, 0.5]), backend="numpy"),
                                  vtl.asarray(np.array([1.0, 1.0]), backend="numpy"),
                                  reduction="sum")).backward()
    assert_close(x.grad, np.array([0.0, 0.0]))
    x = vtl.asarray(np.array([[1.0, 0.0]]), backend="numpy", requires_grad=True)
    F.multi_margin_loss(x, vtl.asarray([0], backend="numpy")).backward()
    assert_close(x.grad, np.array([[0.0, 0.0]]))


# -- errors -------------------------------------------------------------------------------
def test_errors(backend):
    x = vtl.asarray(np.zeros((4, 5), np.float32))
    v = vtl.asarray(np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="reduction must be one of"):
        F.margin_ranking_loss(v, v, v, reduction="avg")
    with pytest.raises(ValueError, match="same number of dimensions"):
        F.margin_ranking_loss(x, v, v)
    with pytest.raises(ValueError, match="do not broadcast"):
        F.margin_ranking_loss(v, vtl.asarray(np.zeros(3, np.float32)), v)
    with pytest.raises(TypeError, match="floating-point"):
        F.hinge_embedding_loss(vtl.asarray([1, 2]), vtl.asarray([1, -1]))
    with pytest.raises(ValueError, match="0-d or 1-D target"):
        F.cosine_embedding_loss(x, x, vtl.asarray(np.ones((1, 4))))
    with pytest.raises(ValueError, match="1-D target expects 2-D inputs"):
        F.cosine_embedding_loss(x, v, v)
    with pytest.raises(ValueError, match="do not broadcast"):
        F.cosine_embedding_loss(x, x, vtl.asarray([1, 1, 1]))
    with pytest.raises(ValueError, match="margin must be greater than 0, got 0"):
        F.triplet_margin_loss(x, x, x, margin=0.0)
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        F.triplet_margin_with_distance_loss(x, x, x, margin=-1.0)
    with pytest.raises(ValueError, match="same number of dimensions.*2-D, 2-D and 1-D"):
        F.triplet_margin_loss(x, x, v)
    with pytest.raises(TypeError, match="callable"):
        F.triplet_margin_with_distance_loss(x, x, x, distance_function=3)
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        F.multi_margin_loss(x, vtl.asarray([0, 1, 2, 3]), p=3)
    with pytest.raises(IndexError, match="target 5 is out of bounds for 5 classes"):
        F.multi_margin_loss(x, vtl.asarray([0, 1, 5, 3]))
    with pytest.raises(ValueError, match=r"expected shape \(4,\)"):
        F.multi_margin_loss(x, vtl.asarray([0, 1]))
    with pytest.raises(TypeError, match="integer dtype"):
        F.multi_margin_loss(x, vtl.asarray([0.0, 1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"weight must have shape \(5,\)"):
        F.multi_margin_loss(x, vtl.asarray([0, 1, 2, 3]), weight=vtl.ones(4))
    with pytest.raises(ValueError, match=r"non-empty \(C,\) or \(N, C\)"):
        F.multi_margin_loss(vtl.zeros((2, 2, 2)), vtl.asarray([0, 1]))
    with pytest.raises(ValueError, match="input's shape"):
        F.multilabel_margin_loss(x, vtl.asarray(np.zeros((4, 3), np.int64)))
    with pytest.raises(IndexError, match="target -2 is out of range for 5 classes"):
        F.multilabel_margin_loss(x, vtl.asarray(np.full((4, 5), -2)))
    with pytest.raises(ValueError, match="broadcast to the input's shape"):
        F.multilabel_soft_margin_loss(x, vtl.asarray(np.zeros((4, 1, 5), np.float32)))


def test_modules(backend):
    d = _data()
    x1, x2, x3 = (vtl.asarray(d[k].astype(np.float32)) for k in ("x1", "x2", "x3"))
    v1, v2, s6 = (vtl.asarray(d[k].astype(np.float32)) for k in ("v1", "v2", "sign6"))
    cls, mlt, s4 = vtl.asarray(d["cls"]), vtl.asarray(d["mlt"]), vtl.asarray(d["sign4"])
    w = vtl.asarray(d["w5"].astype(np.float32))
    probs = vtl.asarray(d["probs"].astype(np.float32))
    pairs = [
        (nn.MarginRankingLoss(0.3, "sum")(v1, v2, s6),
         F.margin_ranking_loss(v1, v2, s6, 0.3, reduction="sum")),
        (nn.HingeEmbeddingLoss(margin=0.8)(v1, s6), F.hinge_embedding_loss(v1, s6, 0.8)),
        (nn.CosineEmbeddingLoss(0.1, reduction="none")(x1, x2, s4),
         F.cosine_embedding_loss(x1, x2, s4, 0.1, reduction="none")),
        (nn.TripletMarginLoss(margin=2.0, p=1, swap=True)(x1, x2, x3),
         F.triplet_margin_loss(x1, x2, x3, 2.0, 1, swap=True)),
        (nn.TripletMarginWithDistanceLoss(margin=0.5)(x1, x2, x3),
         F.triplet_margin_with_distance_loss(x1, x2, x3, margin=0.5)),
        (nn.MultiMarginLoss(p=2, margin=0.7, weight=w)(x1, cls),
         F.multi_margin_loss(x1, cls, 2, 0.7, w)),
        (nn.MultiLabelMarginLoss()(x1, mlt), F.multilabel_margin_loss(x1, mlt)),
        (nn.MultiLabelSoftMarginLoss(weight=w, reduction="sum")(x1, probs),
         F.multilabel_soft_margin_loss(x1, probs, w, reduction="sum")),
    ]
    for got, expect in pairs:
        assert_close(got, to_numpy(expect))
    m = nn.MultiMarginLoss(weight=w)
    assert "weight" in m.state_dict()
    assert "weight" in nn.MultiLabelSoftMarginLoss(weight=w).state_dict()
    assert repr(nn.MultiLabelMarginLoss(reduction="sum")) == \
        "MultiLabelMarginLoss(reduction='sum')"
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        nn.MultiMarginLoss(p=3)
    with pytest.raises(ValueError, match="weight must be 1-D"):
        nn.MultiMarginLoss(weight=vtl.ones((2, 2)))
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        nn.TripletMarginLoss(margin=0)
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        nn.TripletMarginWithDistanceLoss(margin=0)
    with pytest.raises(ValueError, match="reduction must be one of"):
        nn.CosineEmbeddingLoss(reduction="avg")
    with pytest.raises(ValueError, match="blank"):
        nn.CTCLoss(blank=-1)
    with pytest.raises(TypeError, match="input2 to be a vtl.Tensor"):
        nn.MarginRankingLoss()(v1, d["v2"], s6)


# -- CTC ----------------------------------------------------------------------------------
def _ctc_case(seed=0, t=4, n=5, c=3):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((t, n, c)) * 1.5
    lp = _log_softmax(logits)
    # a repeated label (needs a blank between), a skip, an empty target, a target too long
    # for its frames (no alignment), and an empty input
    targets = np.array([[1, 1, 0], [1, 2, 0], [0, 0, 0], [2, 1, 2], [1, 0, 0]])
    il = [4, 3, 2, 2, 0]
    tl = [2, 2, 0, 3, 0]
    return logits, lp, targets, il, tl


def _concat(targets, tl):
    return np.concatenate([targets[i, :v] for i, v in enumerate(tl)])


def test_ctc_brute_force_oracle_itself():
    # the oracle's own sanity: with uniform probabilities the likelihood counts alignments
    lp = np.log(np.full((3, 2), 0.5))
    # paths of 3 frames over {blank, a} collapsing to "a": a__, aa_, aaa, _a_, _aa, __a, ...
    count = sum(1 for p in itertools.product(range(2), repeat=3)
                if [k for i, k in enumerate(p) if (i == 0 or k != p[i - 1]) and k] == [1])
    assert math.isclose(np_ctc_brute(lp, [1]), -math.log(count / 8))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("layout", ["padded", "concatenated"])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_matches_brute_force(backend, reduction, layout, zero_infinity):
    _, lp, targets, il, tl = _ctc_case()
    expect = np_ctc(lp, targets, il, tl, reduction=reduction, zero_infinity=zero_infinity)
    tg = targets if layout == "padded" else _concat(targets, tl)
    out = F.ctc_loss(vtl.asarray(lp.astype(np.float32)), vtl.asarray(tg), il, tl,
                     reduction=reduction, zero_infinity=zero_infinity)
    assert out.dtype == vtl.float32
    assert_close(out, np.asarray(expect, np.float32), rtol=2e-5, atol=2e-6)
    # lengths as integer tensors (read back to the host, as PyTorch does)
    out = F.ctc_loss(vtl.asarray(lp.astype(np.float32)), vtl.asarray(tg), vtl.asarray(il),
                     vtl.asarray(tl), reduction=reduction, zero_infinity=zero_infinity)
    assert_close(out, np.asarray(expect, np.float32), rtol=2e-5, atol=2e-6)


def test_ctc_blank_not_zero_and_unbatched(backend):
    rng = np.random.default_rng(1)
    lp = _log_softmax(rng.standard_normal((4, 2, 4)))
    targets = np.array([[0, 1], [1, 1]])
    expect = [np_ctc_brute(lp[:, 0], [0, 1], blank=3), np_ctc_brute(lp[:3, 1], [1], blank=3)]
    out = F.ctc_loss(vtl.asarray(lp), vtl.asarray(targets), [4, 3], [2, 1], blank=3,
                     reduction="none")
    assert_close(out, np.array(expect))
    for il, tl in [(4, 2), (vtl.asarray(4), vtl.asarray(2)), ([4], [2]),
                   (vtl.asarray([4]), (2,))]:
        out = F.ctc_loss(vtl.asarray(lp[:, 0]), vtl.asarray(targets[0]), il, tl, blank=3,
                         reduction="none")
        assert out.shape == ()
        assert_close(out, np.float64(expect[0]))
        out = F.ctc_loss(vtl.asarray(lp[:, 0]), vtl.asarray(targets[0]), il, tl, blank=3)
        assert_close(out, np.float64(expect[0] / 2))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_ctc_gradient_finite_differences(reduction):
    # the exact derivative with respect to log_probs (unnormalised values work too)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 4, 3))
    targets = np.array([[1, 1], [2, 1], [2, 0], [1, 2]])
    tgt = _np(targets)
    # zero_infinity: the last sample has no alignment (3 labels need 3 frames) -> loss 0
    check_grad(lambda a: F.ctc_loss(a, tgt, [4, 3, 2, 2], [2, 2, 1, 2], reduction=reduction,
                                    zero_infinity=True), x)
    check_grad(lambda a: F.ctc_loss(F.log_softmax(a, 2), tgt, [4, 3, 2, 4], [2, 2, 0, 2],
                                    reduction=reduction), x)


def test_ctc_second_order():
    # create_graph: the gradient is itself differentiable (Hessian-vector product against
    # finite differences of the gradient)
    rng = np.random.default_rng(6)
    x0 = rng.standard_normal((4, 2, 3))
    tgt = _np(np.array([[1, 2], [1, 1]]))

    def grad_at(xn):
        x = vtl.asarray(xn, backend="numpy", requires_grad=True)
        (g,) = vtl.autograd.grad(F.ctc_loss(x, tgt, [4, 4], [2, 2]), [x], create_graph=True)
        return x, g

    v = rng.standard_normal(x0.shape)
    x, g = grad_at(x0)
    (hv,) = vtl.autograd.grad(vtl.sum(g * _np(v)), [x])
    fd = (to_numpy(grad_at(x0 + 1e-6 * v)[1]) - to_numpy(grad_at(x0 - 1e-6 * v)[1])) / 2e-6
    np.testing.assert_allclose(to_numpy(hv), fd, rtol=1e-5, atol=1e-7)


def test_ctc_gradient_is_finite_without_alignment_and_with_minus_inf():
    _, lp, targets, il, tl = _ctc_case()
    lp = lp.copy()
    lp[1, 0, 2] = -np.inf  # a class of probability 0
    expect = np_ctc(lp, targets, il, tl, reduction="none")
    x = vtl.asarray(lp, backend="numpy", requires_grad=True)
    loss = F.ctc_loss(x, _np(targets), il, tl, reduction="none")
    assert_close(loss, expect)
    assert math.isinf(float(loss[3]))  # no alignment: inf, as PyTorch
    vtl.sum(F.ctc_loss(x, _np(targets), il, tl, reduction="sum", zero_infinity=True)).backward()
    g = to_numpy(x.grad)
    assert np.isfinite(g).all()
    assert (g[:, 3] == 0).all() and (g[:, 4] == 0).all()  # impossible / empty input
    assert (g[il[1]:, 1] == 0).all()  # frames past a sample's input length
    x.grad = None
    vtl.sum(F.ctc_loss(x, _np(targets), il, tl, reduction="none")).backward()
    assert np.isfinite(to_numpy(x.grad)).all()  # the inf loss contributes no gradient


def test_ctc_half_precision_numpy_arrays():
    # raw NumPy arrays (no autograd): float16 log-probs run the recursion in float32
    _, lp, targets, il, tl = _ctc_case()
    out = F.ctc_loss(lp.astype(np.float16), targets, il, tl, reduction="none",
                     zero_infinity=True)
    assert isinstance(out, np.ndarray) and out.dtype == np.float16
    expect = np_ctc(lp.astype(np.float16).astype(np.float64), targets, il, tl,
                    reduction="none", zero_infinity=True)
    np.testing.assert_allclose(out, expect.astype(np.float16), rtol=2e-3, atol=2e-3)


def _ctc_random(seed, t=12, n=4, c=5, s=4):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((t, n, c))
    il = [t, t - 2, t - 5, 3]
    tl = [s, 3, 0, 2]
    targets = rng.integers(1, c, (n, s))
    targets[0, 1] = targets[0, 2]  # a repeat
    return logits, targets, il, tl


def test_ctc_gradients_match_numpy_backend(backend):
    if backend == "numpy":
        pytest.skip("the reference backend")
    logits, targets, il, tl = _ctc_random(3, t=6)

    def f(x):
        return F.ctc_loss(F.log_softmax(x, 2), vtl.asarray(targets, device=x.device), il, tl,
                          reduction="none")

    check_grad_matches_numpy(f, backend, logits)


@needs_torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("layout", ["padded", "concatenated"])
def test_ctc_matches_torch(reduction, layout):
    logits, targets, il, tl = _ctc_random(4)
    tg = targets if layout == "padded" else _concat(targets, tl)
    tx = torch.tensor(logits, requires_grad=True)
    tlp = tx.log_softmax(2)
    tlp.retain_grad()
    tout = TF.ctc_loss(tlp, torch.tensor(tg), torch.tensor(il), torch.tensor(tl),
                       reduction=reduction)
    x = vtl.asarray(logits, backend="numpy", requires_grad=True)
    out = F.ctc_loss(F.log_softmax(x, 2), _np(tg), il, tl, reduction=reduction)
    np.testing.assert_allclose(to_numpy(out), tout.detach().numpy(), rtol=1e-10)
    v = np.random.default_rng(5).standard_normal(tuple(tout.shape))
    (tout * torch.tensor(v)).sum().backward()
    vtl.sum(out * _np(v)).backward()
    # through log_softmax the gradients agree; PyTorch's gradient with respect to
    # log_probs itself is the exact one plus exp(log_probs) * (upstream per sample)
    np.testing.assert_allclose(to_numpy(x.grad), tx.grad.numpy(), rtol=1e-8, atol=1e-10)


@needs_torch
def test_ctc_zero_infinity_and_unbatched_match_torch():
    _, lp, targets, il, tl = _ctc_case()
    for zi in (False, True):
        for r in REDUCTIONS:
            tout = TF.ctc_loss(torch.tensor(lp), torch.tensor(targets), il, tl, reduction=r,
                               zero_infinity=zi)
            out = F.ctc_loss(_np(lp), _np(targets), il, tl, reduction=r, zero_infinity=zi)
            np.testing.assert_allclose(to_numpy(out), tout.numpy(), rtol=1e-12)
    tout = TF.ctc_loss(torch.tensor(lp[:, 0]), torch.tensor(targets[0, :2]), torch.tensor(4),
                       torch.tensor(2), reduction="none")
    out = F.ctc_loss(_np(lp[:, 0]), _np(targets[0, :2]), 4, 2, reduction="none")
    assert out.shape == tuple(tout.shape) == ()
    np.testing.assert_allclose(to_numpy(out), tout.numpy(), rtol=1e-12)


def test_ctc_module(backend):
    _, lp, targets, il, tl = _ctc_case()
    lp32 = vtl.asarray(lp.astype(np.float32))
    m = nn.CTCLoss(zero_infinity=True)
    assert_close(m(lp32, vtl.asarray(targets), il, tl),
                 to_numpy(F.ctc_loss(lp32, vtl.asarray(targets), il, tl, zero_infinity=True)))
    m = nn.CTCLoss(blank=0, reduction="sum")
    assert_close(m(lp32, vtl.asarray(targets), il, tl),
                 np.float32(np_ctc(lp, targets, il, tl, reduction="sum")), rtol=2e-5)
    with pytest.raises(TypeError, match="targets to be a vtl.Tensor"):
        m(lp32, targets, il, tl)


def test_ctc_errors(backend):
    _, lp, targets, il, tl = _ctc_case()
    x, t = vtl.asarray(lp.astype(np.float32)), vtl.asarray(targets)
    with pytest.raises(ValueError, match=r"\(T, N, C\) or unbatched \(T, C\)"):
        F.ctc_loss(vtl.zeros((2,)), t, il, tl)
    with pytest.raises(TypeError, match="floating-point"):
        F.ctc_loss(vtl.asarray(np.zeros((4, 5, 3), np.int32)), t, il, tl)
    with pytest.raises(TypeError, match="targets must hold class indices"):
        F.ctc_loss(x, vtl.asarray(targets.astype(np.float32)), il, tl)
    with pytest.raises(ValueError, match=r"blank must be a class index in \[0, 3\), got 3"):
        F.ctc_loss(x, t, il, tl, blank=3)
    with pytest.raises(ValueError, match=r"input_lengths must be in \[0, 4\] \(T\), got 5"):
        F.ctc_loss(x, t, [5, 3, 2, 2, 0], tl)
    with pytest.raises(ValueError, match="target_lengths must be >= 0, got -1"):
        F.ctc_loss(x, t, il, [2, 2, 0, 3, -1])
    with pytest.raises(ValueError, match=r"one entry per sample, \(5,\), got 4 entries"):
        F.ctc_loss(x, t, il[:4], tl)
    with pytest.raises(ValueError, match="one entry per sample"):
        F.ctc_loss(x, t, 4, tl)
    with pytest.raises(TypeError, match="input_lengths must have an integer dtype"):
        F.ctc_loss(x, t, vtl.asarray([4.0, 3, 2, 2, 0]), tl)
    with pytest.raises(TypeError, match="must hold integers"):
        F.ctc_loss(x, t, [4.0, 3, 2, 2, 0], tl)
    with pytest.raises(ValueError, match="exceeds the padded targets' length 3"):
        F.ctc_loss(x, t, il, [4, 2, 0, 3, 0])
    with pytest.raises(ValueError, match=r"sum\(target_lengths\) = 7 entries, got 6"):
        F.ctc_loss(x, vtl.asarray(_concat(targets, tl)[:6]), il, tl)
    with pytest.raises(ValueError, match=r"padded targets must have shape \(N, S\)"):
        F.ctc_loss(x, t[:4], il, tl)
    with pytest.raises(IndexError, match="target 3 is out of bounds for 3 classes"):
        F.ctc_loss(x, vtl.asarray(np.where(targets == 2, 3, targets)), il, tl)
    with pytest.raises(ValueError, match="must not contain the blank index 0"):
        F.ctc_loss(x, vtl.asarray(np.where(targets == 2, 0, targets)), il, tl)
    with pytest.raises(ValueError, match=r"targets must have shape \(target_length,\)"):
        F.ctc_loss(x[:, 0], t, 4, 2)
    with pytest.raises(ValueError, match=r"sum\(target_lengths\) = 2 entries, got 3"):
        F.ctc_loss(x[:, 0], t[0], 4, 2)
    with pytest.raises(ValueError, match="reduction must be one of"):
        F.ctc_loss(x, t, il, tl, reduction="batchmean")


# -- plain array-API arrays (no autograd) ---------------------------------------------------
def test_on_array_api_strict():
    xs = pytest.importorskip("array_api_strict")
    d = _data()
    dev = xs.Device("no_x64")

    def a(k, dtype=None):
        v = d[k]
        dt = xs.int32 if k in INT_INPUTS else xs.float32
        return xs.asarray(v.astype(np.float32) if dt == xs.float32 else v, dtype=dt, device=dev)

    for name, (fn, ref, names) in sorted(CASES.items()):
        out = fn(*(a(k) for k in names), "none")
        host = np.asarray(out.to_device(xs.Device("CPU_DEVICE")))
        np.testing.assert_allclose(host, ref(*(d[k] for k in names)), rtol=1e-5, atol=1e-6,
                                   err_msg=name)
    _, lp, targets, il, tl = _ctc_case()
    out = F.ctc_loss(xs.asarray(lp.astype(np.float32), device=dev),
                     xs.asarray(targets, dtype=xs.int32, device=dev),
                     xs.asarray(il, dtype=xs.int32, device=dev), tl, reduction="none",
                     zero_infinity=True)
    host = np.asarray(out.to_device(xs.Device("CPU_DEVICE")))
    expect = np_ctc(lp, targets, il, tl, reduction="none", zero_infinity=True)
    np.testing.assert_allclose(host, expect, rtol=1e-5, atol=1e-6)
