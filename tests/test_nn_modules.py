"""vtl.nn modules: registration and traversal, train/eval, to(), state_dict
round trips and load errors, containers, summary, hooks, every layer against
NumPy and its functional op, default inits, gradients and error messages."""

from __future__ import annotations

import io
import math
from collections import OrderedDict

import numpy as np
import pytest
from helpers import assert_close, check_grad, to_numpy

import vtl
import vtl.nn.functional as F
from vtl import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.act = nn.ReLU()
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(8, 3, bias=False)
        self.register_buffer("steps", vtl.zeros((), dtype=vtl.int64))
        self.register_buffer("scratch", vtl.zeros(2), persistent=False)

    def forward(self, x):
        return self.fc2(self.drop(self.act(self.fc1(x))))


def test_registration_and_traversal(backend):
    m = Net()
    assert [n for n, _ in m.named_parameters()] == ["fc1.weight", "fc1.bias", "fc2.weight"]
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in m.parameters())
    assert [n for n, _ in m.named_buffers()] == ["steps", "scratch"]
    assert [n for n, _ in m.named_children()] == ["fc1", "act", "drop", "fc2"]
    assert [n for n, _ in m.named_modules()] == ["", "fc1", "act", "drop", "fc2"]
    assert m.fc2.bias is None and "bias" in m.fc2._parameters
    assert list(m.state_dict()) == ["steps", "fc1.weight", "fc1.bias", "fc2.weight"]  # as torch
    assert m.num_parameters() == 4 * 8 + 8 + 8 * 3
    assert m.get_submodule("fc1") is m.fc1 and m.get_parameter("fc1.bias") is m.fc1.bias
    assert "fc1" in dir(m)
    del m.act
    assert "act" not in m._modules
    m.act = nn.Tanh()
    assert isinstance(m._modules["act"], nn.Tanh)


def test_shared_parameters_are_listed_once(backend):
    lin = nn.Linear(3, 3)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(seq.parameters())) == 2
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_registration_errors(backend):
    m = nn.Module()
    m.w = nn.Parameter(vtl.ones(2))
    with pytest.raises(TypeError, match="cannot assign Tensor as parameter 'w'"):
        m.w = vtl.ones(2)
    with pytest.raises(KeyError, match="contain"):
        m.register_buffer("a.b", vtl.ones(1))
    with pytest.raises(TypeError, match="buffer"):
        m.register_buffer("b", [1, 2])
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("w", vtl.ones(1))

    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(vtl.ones(1))

    with pytest.raises(AttributeError, match="super"):
        Bad()
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = m.nope
    with pytest.raises(NotImplementedError, match="forward"):
        m(vtl.ones(1))


def test_parameter(backend):
    t = vtl.ones(3)
    p = nn.Parameter(t)
    assert isinstance(p, vtl.Tensor) and p.requires_grad and p.is_leaf
    assert repr(p).startswith("Parameter containing:\nvtl.Tensor(")
    assert not nn.Parameter(t, requires_grad=False).requires_grad
    with pytest.raises(TypeError, match="floating"):
        nn.Parameter(vtl.asarray([1, 2]))
    y = vtl.sum(p * 2.0)
    y.backward()
    assert_close(p.grad, np.full(3, 2.0, np.float32))


def test_train_eval_and_dropout(backend):
    vtl.random.seed(0)
    m = Net()
    x = vtl.ones((64, 4))
    assert m.training and m.drop.training
    assert m.eval() is m and not m.drop.training and not m.training
    np.testing.assert_array_equal(to_numpy(m(x)), to_numpy(m(x)))
    m.train()
    assert m.drop.training
    d = nn.Dropout(0.5)
    y = to_numpy(d(vtl.ones((100, 100))))
    assert set(np.unique(y)) <= {0.0, 2.0} and 0.45 < (y == 0).mean() < 0.55
    d.eval()
    assert_close(d(vtl.ones((3,))), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(2.0)


def test_zero_grad_apply_requires_grad(backend):
    m = Net()
    vtl.sum(m(vtl.ones((2, 4)))).backward()
    assert m.fc1.weight.grad is not None
    m.zero_grad(set_to_none=False)
    assert float(vtl.sum(vtl.abs(m.fc1.weight.grad))) == 0.0
    m.zero_grad()
    assert m.fc1.weight.grad is None
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Linear", "ReLU", "Dropout", "Linear", "Net"]
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())


def test_to_dtype_keeps_parameter_objects(backend):
    if "float64" not in vtl.__array_namespace_info__().dtypes(device=vtl.Device(backend)):
        pytest.skip("no float64")
    m = Net()
    w = m.fc1.weight
    before = to_numpy(w).astype(np.float64)
    assert m.to(vtl.float64) is m
    assert m.fc1.weight is w and w.dtype == vtl.float64 and w.requires_grad
    assert m.steps.dtype == vtl.int64  # integer buffers keep their dtype
    np.testing.assert_array_equal(to_numpy(w), before)
    assert m(vtl.ones((2, 4), dtype=vtl.float64)).dtype == vtl.float64
    m.float()
    assert w.dtype == vtl.float32
    with pytest.raises(TypeError, match="floating-point"):
        m.to(vtl.int32)


def test_to_other_backend(backend, other_backends):
    if not other_backends:
        pytest.skip("only one backend available")
    m = Net()
    ref = to_numpy(m.eval()(vtl.ones((2, 4))))
    for name in other_backends:
        m.to(name)
        assert m.fc1.weight.device == vtl.Device(name) and m.steps.device == vtl.Device(name)
        np.testing.assert_allclose(to_numpy(m(vtl.ones((2, 4), backend=name))), ref,
                                   rtol=1e-5, atol=1e-6)
    m.to(backend)
    assert m.fc1.weight.device == vtl.Device(backend)


def test_state_dict_round_trip(backend):
    vtl.random.seed(1)
    a = Net().eval()
    vtl.random.seed(2)
    b = Net().eval()
    x = vtl.random.normal(size=(5, 4))
    assert not np.allclose(to_numpy(a(x)), to_numpy(b(x)))
    sd = a.state_dict()
    assert all(not t.requires_grad for t in sd.values())
    res = b.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    np.testing.assert_array_equal(to_numpy(a(x)), to_numpy(b(x)))
    # host arrays (e.g. from a checkpoint file) are accepted and converted
    host = {k: to_numpy(v) for k, v in Net().state_dict().items()}
    b.load_state_dict(host)
    np.testing.assert_array_equal(to_numpy(b.fc1.weight), host["fc1.weight"])
    # the copy is independent of the source
    with vtl.no_grad():
        a.fc1.weight[...] = 0.0
    assert float(vtl.sum(vtl.abs(b.fc1.weight))) > 0
    w = b.fc1.weight
    b.load_state_dict(a.state_dict(), assign=True)
    assert b.fc1.weight is not w and isinstance(b.fc1.weight, nn.Parameter)


def test_load_state_dict_errors_leave_module_unchanged(backend):
    m = Net()
    before = {k: to_numpy(v).copy() for k, v in m.state_dict().items()}
    good = Net().state_dict()
    bad = dict(good)
    bad["fc1.weight"] = vtl.zeros((8, 5))
    del bad["fc2.weight"]
    bad["extra"] = vtl.zeros(1)
    with pytest.raises(RuntimeError) as exc:
        m.load_state_dict(bad)
    msg = str(exc.value)
    assert "Error(s) in loading state_dict for Net" in msg
    assert 'Missing key(s) in state_dict: "fc2.weight"' in msg
    assert 'Unexpected key(s) in state_dict: "extra"' in msg
    assert ("size mismatch for fc1.weight: copying a param with shape (8, 5) from checkpoint, "
            "the shape in current model is (8, 4)") in msg
    for k, v in m.state_dict().items():  # nothing was written, not even the good keys
        np.testing.assert_array_equal(to_numpy(v), before[k])
    partial = {k: v for k, v in good.items() if k != "fc2.weight"}
    partial["extra"] = vtl.zeros(1)
    res = m.load_state_dict(partial, strict=False)
    assert res.missing_keys == ["fc2.weight"] and res.unexpected_keys == ["extra"]
    np.testing.assert_array_equal(to_numpy(m.fc1.weight), to_numpy(good["fc1.weight"]))
    with pytest.raises(RuntimeError, match="size mismatch"):
        m.load_state_dict({**good, "fc1.bias": vtl.zeros(3)}, strict=False)
    with pytest.raises(TypeError, match="dict-like"):
        m.load_state_dict([1, 2])


def test_repr(backend):
    m = nn.Sequential(nn.Linear(4, 2), nn.LeakyReLU(0.2), nn.Dropout(0.1),
                      nn.Sequential(nn.Flatten(), nn.Softmax(dim=1)))
    assert repr(m) == (
        "Sequential(\n"
        "  (0): Linear(in_features=4, out_features=2, bias=True)\n"
        "  (1): LeakyReLU(negative_slope=0.2)\n"
        "  (2): Dropout(p=0.1, inplace=False)\n"
        "  (3): Sequential(\n"
        "    (0): Flatten(start_dim=1, end_dim=-1)\n"
        "    (1): Softmax(dim=1)\n"
        "  )\n"
        ")"
    )
    assert repr(nn.ReLU()) == "ReLU()"
    assert repr(nn.Embedding(10, 3, padding_idx=0)) == "Embedding(10, 3, padding_idx=0)"
    assert repr(nn.CrossEntropyLoss(reduction="sum")) == "CrossEntropyLoss(reduction='sum')"


def test_containers(backend):
    layers = [nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 1)]
    s = nn.Sequential(*layers)
    assert len(s) == 3 and s[0] is layers[0] and s[-1] is layers[2]
    assert isinstance(s[1:], nn.Sequential) and len(s[1:]) == 2
    s.append(nn.Sigmoid())
    assert isinstance(s[3], nn.Sigmoid)
    del s[1]
    assert [type(x).__name__ for x in s] == ["Linear", "Linear", "Sigmoid"]
    assert list(s._modules) == ["0", "1", "2"]
    s.insert(1, nn.Tanh())
    assert [type(x).__name__ for x in s][:2] == ["Linear", "Tanh"]
    with pytest.raises(IndexError, match="out of range"):
        s[10]
    named = nn.Sequential(OrderedDict(enc=nn.Linear(2, 3), act=nn.ReLU()))
    assert list(named.state_dict()) == ["enc.weight", "enc.bias"]
    x = vtl.asarray([[1.0, -1.0]])
    assert_close(named(x), to_numpy(F.relu(named.enc(x))))

    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(list(ml.parameters())) == 6 and len(ml) == 3
    ml.append(nn.ReLU())
    del ml[0]
    assert list(ml._modules) == ["0", "1", "2"]
    md = nn.ModuleDict({"a": nn.Linear(1, 1), "b": nn.ReLU()})
    assert list(md) == ["a", "b"] and "a" in md and isinstance(md["b"], nn.ReLU)
    assert [n for n, _ in md.named_parameters()] == ["a.weight", "a.bias"]
    pl = nn.ParameterList([vtl.ones(2), vtl.zeros(3)])
    assert [n for n, _ in pl.named_parameters()] == ["0", "1"]
    pd = nn.ParameterDict({"s": vtl.ones(1)})
    assert isinstance(pd["s"], nn.Parameter)


def test_summary(backend):
    m = nn.Sequential(nn.Flatten(), nn.Linear(12, 5), nn.ReLU(), nn.Linear(5, 2))
    buf = io.StringIO()
    m.summary((7, 3, 4), file=buf)
    text = buf.getvalue()
    assert "0 (Flatten)" in text and "(7, 12)" in text
    assert "1 (Linear)" in text and "(7, 5)" in text and "65" in text
    assert "3 (Linear)" in text and "(7, 2)" in text
    assert "Total params: 77" in text and "Trainable params: 77" in text
    with pytest.raises(ValueError, match=r"Linear\(in_features=12, out_features=5\)"):
        m.summary((7, 13))


def test_hooks(backend):
    lin = nn.Linear(2, 2)
    calls = []
    h = lin.register_forward_hook(lambda mod, args, out: calls.append(out.shape) or out * 0.0)
    pre = lin.register_forward_pre_hook(lambda mod, args: (args[0] * 2.0,))
    out = lin(vtl.ones((3, 2)))
    assert calls == [(3, 2)] and float(vtl.sum(vtl.abs(out))) == 0.0
    h.remove()
    pre.remove()
    assert float(vtl.sum(vtl.abs(lin(vtl.ones((3, 2)))))) > 0


# -- layers ---------------------------------------------------------------------------------
def test_linear_layer(backend):
    vtl.random.seed(4)
    lin = nn.Linear(3, 2)
    w, b = to_numpy(lin.weight), to_numpy(lin.bias)
    bound = 1 / math.sqrt(3)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    assert_close(lin(vtl.asarray(x)), x @ w.T + b, rtol=1e-6)
    xt = vtl.asarray(x)
    vtl.sum(lin(xt) * vtl.asarray(np.ones((4, 2), np.float32))).backward()
    assert_close(lin.weight.grad, np.ones((4, 2), np.float32).T @ x, rtol=1e-6)
    assert_close(lin.bias.grad, np.full(2, 4.0, np.float32))
    with pytest.raises(ValueError, match=r"Linear\(in_features=3, out_features=2\): expected "
                       r"input with last dimension 3, got input of shape \(4, 5\)"):
        lin(vtl.ones((4, 5)))
    lin64 = nn.Linear(3, 2, dtype=vtl.float64, device="numpy")
    assert lin64.weight.dtype == vtl.float64

    check_grad(lambda xx: lin64(xx), x.astype(np.float64))


def test_default_init_is_seeded_and_backend_independent(backend):
    vtl.random.seed(42)
    a = nn.Linear(5, 4)
    vtl.random.seed(42)
    b = nn.Linear(5, 4, device="numpy")
    np.testing.assert_array_equal(to_numpy(a.weight), to_numpy(b.weight))
    np.testing.assert_array_equal(to_numpy(a.bias), to_numpy(b.bias))
    big = nn.Linear(400, 300)
    w = to_numpy(big.weight)
    assert abs(w.std() - 1 / math.sqrt(400) / math.sqrt(3)) < 0.002


def test_bilinear_layer(backend):
    m = nn.Bilinear(3, 2, 4)
    x1, x2 = np.ones((5, 3), np.float32), np.arange(10, dtype=np.float32).reshape(5, 2)
    expect = np.einsum("ni,kij,nj->nk", x1, to_numpy(m.weight), x2) + to_numpy(m.bias)
    assert_close(m(vtl.asarray(x1), vtl.asarray(x2)), expect, rtol=1e-5, atol=1e-5)
    assert np.abs(to_numpy(m.weight)).max() <= 1 / math.sqrt(3)
    with pytest.raises(ValueError, match="Bilinear"):
        m(vtl.asarray(x2), vtl.asarray(x1))


ACT_MODULES = [
    (nn.ReLU(), F.relu), (nn.ReLU6(), F.relu6), (nn.LeakyReLU(0.3), lambda x: F.leaky_relu(x, 0.3)),
    (nn.ELU(0.5), lambda x: F.elu(x, 0.5)), (nn.CELU(0.5), lambda x: F.celu(x, 0.5)),
    (nn.SELU(), F.selu), (nn.GELU(), F.gelu), (nn.GELU("tanh"), lambda x: F.gelu(x, "tanh")),
    (nn.Sigmoid(), F.sigmoid), (nn.Tanh(), F.tanh), (nn.SiLU(), F.silu), (nn.Swish(), F.silu),
    (nn.Mish(), F.mish), (nn.Softplus(2.0, 3.0), lambda x: F.softplus(x, 2.0, 3.0)),
    (nn.LogSigmoid(), F.logsigmoid), (nn.Softsign(), F.softsign),
    (nn.Hardtanh(-2.0, 2.0), lambda x: F.hardtanh(x, -2.0, 2.0)),
    (nn.Hardsigmoid(), F.hardsigmoid), (nn.Hardswish(), F.hardswish),
    (nn.Tanhshrink(), F.tanhshrink), (nn.Softshrink(0.2), lambda x: F.softshrink(x, 0.2)),
    (nn.Hardshrink(0.2), lambda x: F.hardshrink(x, 0.2)),
    (nn.Threshold(0.5, -1.0), lambda x: F.threshold(x, 0.5, -1.0)),
    (nn.Softmax(dim=1), lambda x: F.softmax(x, 1)), (nn.Softmin(dim=0), lambda x: F.softmin(x, 0)),
    (nn.LogSoftmax(dim=-1), lambda x: F.log_softmax(x, -1)), (nn.GLU(1), lambda x: F.glu(x, 1)),
    (nn.PReLU(), lambda x: F.prelu(x, vtl.full((1,), 0.25))),
]


@pytest.mark.parametrize("idx", range(len(ACT_MODULES)))
def test_activation_modules(backend, idx):
    mod, fn = ACT_MODULES[idx]
    mod.to(backend)  # built at import, on the default backend of that moment
    x = vtl.asarray(np.linspace(-4, 4, 24).reshape(3, 8).astype(np.float32))
    assert_close(mod(x), to_numpy(fn(x)))
    if not list(mod.parameters()):  # PReLU's float32 weight is covered in test_prelu_layer
        check_grad(mod, np.linspace(-3.1, 2.9, 24).reshape(3, 8) + 0.013)


def test_prelu_layer(backend):
    m = nn.PReLU(3)
    assert_close(m.weight, np.full(3, 0.25, np.float32))
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(2, 3, 2)
    assert_close(m(vtl.asarray(x)), np.where(x > 0, x, 0.25 * x))
    vtl.sum(m(vtl.asarray(x))).backward()
    assert_close(m.weight.grad, np.minimum(x, 0).sum(axis=(0, 2)))
    with pytest.raises(ValueError, match=r"PReLU\(num_parameters=3\).*\(2, 4\)"):
        m(vtl.ones((2, 4)))


LOSS_MODULES = [
    (nn.MSELoss(), F.mse_loss, False), (nn.L1Loss(reduction="sum"),
                                        lambda a, b: F.l1_loss(a, b, reduction="sum"), False),
    (nn.HuberLoss(delta=0.5), lambda a, b: F.huber_loss(a, b, delta=0.5), False),
    (nn.SmoothL1Loss(beta=0.5), lambda a, b: F.smooth_l1_loss(a, b, beta=0.5), False),
    (nn.SoftMarginLoss(), F.soft_margin_loss, False),
    (nn.BCELoss(), F.binary_cross_entropy, "prob"),
    (nn.BCEWithLogitsLoss(pos_weight=vtl.asarray([2.0, 1.0, 0.5, 1.0])),
     lambda a, b: F.binary_cross_entropy_with_logits(a, b, pos_weight=vtl.asarray(
         [2.0, 1.0, 0.5, 1.0])), "target01"),
    (nn.KLDivLoss(reduction="batchmean"), lambda a, b: F.kl_div(a, b, reduction="batchmean"),
     "target01"),
    (nn.PoissonNLLLoss(), F.poisson_nll_loss, "target01"),
    (nn.CrossEntropyLoss(label_smoothing=0.1),
     lambda a, b: F.cross_entropy(a, b, label_smoothing=0.1), "class"),
    (nn.NLLLoss(weight=vtl.asarray([1.0, 2.0, 3.0, 4.0]), ignore_index=1),
     lambda a, b: F.nll_loss(a, b, vtl.asarray([1.0, 2.0, 3.0, 4.0]), ignore_index=1), "class"),
]


@pytest.mark.parametrize("idx", range(len(LOSS_MODULES)))
def test_loss_modules(backend, idx):
    mod, fn, kind = LOSS_MODULES[idx]
    mod.to(backend)  # built at import, on the default backend of that moment
    rng = np.random.default_rng(idx)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    if kind == "prob":
        a = 1 / (1 + np.exp(-a))
        b = 1 / (1 + np.exp(-b))
    elif kind == "target01":
        b = 1 / (1 + np.exp(-b))
    elif kind == "class":
        b = np.array([0, 3, 1])
    assert_close(mod(vtl.asarray(a), vtl.asarray(b)), to_numpy(fn(vtl.asarray(a),
                                                                  vtl.asarray(b))))
    xa = vtl.asarray(a, requires_grad=True)
    mod(xa, vtl.asarray(b)).backward()
    assert xa.grad.shape == a.shape and np.isfinite(to_numpy(xa.grad)).all()


def test_loss_module_buffers_and_errors(backend):
    ce = nn.CrossEntropyLoss(weight=vtl.asarray([1.0, 2.0]))
    assert list(ce.state_dict()) == ["weight"]
    with pytest.raises(ValueError, match="reduction must be one of"):
        nn.MSELoss(reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        nn.CrossEntropyLoss(label_smoothing=-0.1)
    g = nn.GaussianNLLLoss()
    assert_close(g(vtl.zeros(3), vtl.ones(3), vtl.ones(3)), np.float32(0.5))


def test_embedding_layer(backend):
    vtl.random.seed(7)
    e = nn.Embedding(50, 40, padding_idx=3)
    w = to_numpy(e.weight)
    assert (w[3] == 0).all()
    rest = np.delete(w, 3, axis=0)
    assert abs(rest.mean()) < 0.05 and abs(rest.std() - 1) < 0.05  # N(0, 1) default
    idx = vtl.asarray([[3, 4, 4], [0, 3, 49]])
    out = e(idx)
    assert_close(out, w[to_numpy(idx)])
    vtl.sum(out).backward()
    counts = np.zeros(50, np.float32)
    np.add.at(counts, [4, 4, 0, 49], 1.0)
    assert_close(e.weight.grad, np.repeat(counts[:, None], 40, axis=1))
    with pytest.raises(TypeError, match=r"Embedding\(50, 40\): indices must be integers"):
        e(vtl.ones((2,)))
    with pytest.raises(ValueError, match="padding_idx"):
        nn.Embedding(5, 2, padding_idx=5)
    pre = nn.Embedding.from_pretrained(vtl.asarray(np.eye(3, dtype=np.float32)))
    assert not pre.weight.requires_grad
    assert_close(pre(vtl.asarray([2, 0])), np.eye(3, dtype=np.float32)[[2, 0]])
    with pytest.raises(ValueError, match="2-D"):
        nn.Embedding.from_pretrained(vtl.ones(3))


def test_flatten_unflatten(backend):
    x = vtl.asarray(np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5))
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 2)(x).shape == (24, 5)
    assert nn.Flatten(-2)(x).shape == (2, 3, 20)
    assert_close(nn.Flatten()(x), np.arange(120, dtype=np.float32).reshape(2, 60))
    u = nn.Unflatten(1, (3, -1))
    y = u(nn.Flatten()(x))
    assert y.shape == (2, 3, 20)
    assert nn.Unflatten(-1, (5, 1))(x).shape == (2, 3, 4, 5, 1)
    with pytest.raises(ValueError, match=r"Unflatten\(dim=1, unflattened_size=\(7, -1\)\)"):
        nn.Unflatten(1, (7, -1))(nn.Flatten()(x))
    with pytest.raises(IndexError, match=r"Flatten\(start_dim=5"):
        nn.Flatten(5)(x)
    xg = vtl.asarray(np.ones((2, 3, 2), np.float32), requires_grad=True)
    vtl.sum(nn.Flatten()(xg) * 2.0).backward()
    assert_close(xg.grad, np.full((2, 3, 2), 2.0, np.float32))


def test_dropout_modules(backend):
    x = vtl.ones((4, 6, 5, 5))
    y = to_numpy(nn.Dropout2d(0.5, generator=vtl.random.Generator(0))(x)).reshape(4, 6, 25)
    assert ((y == 0).all(axis=2) | (y == 2).all(axis=2)).all()
    assert nn.Dropout2d(0.5).eval()(x) is x
    assert nn.Dropout1d(0.2)(vtl.ones((2, 3, 4))).shape == (2, 3, 4)
    assert nn.Dropout3d(0.2)(vtl.ones((2, 3, 2, 2, 2))).shape == (2, 3, 2, 2, 2)
    assert nn.AlphaDropout(0.2)(vtl.ones(5)).shape == (5,)
    assert repr(nn.Dropout2d(0.3)) == "Dropout2d(p=0.3, inplace=False)"


def test_identity_and_training_step(backend):
    assert nn.Identity(3, foo=1)(x := vtl.ones(2)) is x
    vtl.random.seed(0)
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
    xs = vtl.random.uniform(-1, 1, (64, 2))
    ys = vtl.sum(xs * xs, axis=1, keepdims=True)
    loss_fn = nn.MSELoss()
    first = None
    for _ in range(200):
        loss = loss_fn(model(xs), ys)
        if first is None:
            first = float(loss)
        model.zero_grad()
        loss.backward()
        with vtl.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
    assert float(loss) < 0.3 * first
