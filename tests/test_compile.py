"""vtl.compile: captured steps give eager mode's numbers, and its documented semantics
(signatures, warm-up, outputs, replayed host work, errors) hold on every backend."""

from __future__ import annotations

import functools
import gc
import warnings
import weakref

import numpy as np
import pytest
from test_sync_free import MODELS

import vtl
from vtl import nn, optim

STEPS = 100  # as long as the loss curves compared in the docs


def _data(backend: str, shape: tuple, n: int = STEPS, seed: int = 0):
    rng = np.random.default_rng(seed)
    xs = [vtl.asarray(rng.standard_normal(shape, dtype=np.float32), device=backend)
          for _ in range(n)]
    ys = [vtl.asarray(rng.integers(0, 5, shape[0]), device=backend) for _ in range(n)]
    return xs, ys


def _compiled_square_step(backend: str, make_opt):
    """``(compiled step, optimizer)``: a step minimising ``sum(w * w)`` for one 3-vector
    ``w``, with the optimizer ``make_opt([w])``."""
    w = vtl.ones((3,), device=backend, requires_grad=True)
    opt = make_opt([w])

    def step():
        opt.zero_grad()
        vtl.sum(w * w).backward()
        opt.step()

    return vtl.compile(step), opt


def _train(backend: str, model: str, compiled: bool, sched_inside: bool = True, **kw):
    make, shape = MODELS[model]
    xs, ys = _data(backend, shape)
    vtl.random.seed(0)
    net = make().to(backend)
    opt = optim.Adam(net.parameters(), lr=1e-2)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS)

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        if sched_inside:
            sched.step()
        return loss

    f = vtl.compile(step, **kw) if compiled else step
    losses = []
    for x, y in zip(xs, ys, strict=True):
        losses.append(float(f(x, y)))
        if not sched_inside:
            sched.step()
    params = [p.numpy() for p in net.parameters()]
    return losses, params, f, opt


@pytest.mark.parametrize("model", list(MODELS))
def test_compiled_training_equals_eager_bit_for_bit(backend, model):
    """The same numbers, bit for bit, where the compiled step runs the eager step's kernels.
    The one exception: cupy's LSTM time steps, fused eagerly, run as cuBLAS's product and
    the cell's kernel in a captured graph (faster replayed), so they agree to rounding."""
    eager, pe, _, _ = _train(backend, model, compiled=False)
    comp, pc, f, opt = _train(backend, model, compiled=True)
    if backend == "cupy" and model == "lstm":
        np.testing.assert_allclose(comp, eager, rtol=1e-5)
        for a, b in zip(pe, pc, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    else:
        assert comp == eager
        for a, b in zip(pe, pc, strict=True):
            np.testing.assert_array_equal(a, b)
    if vtl.backends.get(backend).can_capture:
        assert f.captures == 1
    assert all(s["step"] == STEPS for s in opt.state.values())


def test_captures_keep_the_cached_arrays_they_read(backend, monkeypatch):
    """Device arrays from vtl's caches (the optimizers' pointer tables here) stay alive with
    the captures that read them: with a cache of one table, the two optimizers' tables
    evict each other at every step, and the freed memory is reused at once."""
    if backend == "cupy":
        import vtl.backends.cupy.optim as cupy_optim

        monkeypatch.setattr(cupy_optim, "_TABLES", 1)

    def run(compiled: bool) -> list[float]:
        xs, ys = _data(backend, (16, 20), n=6)
        vtl.random.seed(0)
        nets = [nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5)).to(backend)
                for _ in range(2)]
        opts = [optim.Adam(n.parameters(), lr=1e-2) for n in nets]

        def step(net, opt, x, y):
            opt.zero_grad()
            loss = nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            return loss

        steps = [vtl.compile(functools.partial(step, n, o)) if compiled
                 else functools.partial(step, n, o) for n, o in zip(nets, opts, strict=True)]
        return [float(f(x, y)) for x, y in zip(xs, ys, strict=True) for f in steps]

    assert run(True) == run(False)


def test_hold_lasts_as_long_as_the_capture(backend):
    class Cached:
        pass

    refs = []

    def f(x):
        obj = Cached()
        vtl.capture.hold(obj)
        refs.append(weakref.ref(obj))
        return x * 2.0

    g = vtl.compile(f, warmup=0)
    x = vtl.ones((4,), device=backend)
    g(x)
    g(x)
    gc.collect()
    captured = vtl.backends.get(backend).can_capture
    assert (refs[0]() is not None) == captured  # eager calls hold nothing
    del g
    gc.collect()
    assert refs[0]() is None


def test_scheduler_outside_and_two_warmup_calls(backend):
    eager, _, _, _ = _train(backend, "mlp", compiled=False, sched_inside=False)
    comp, _, _, _ = _train(backend, "mlp", compiled=True, sched_inside=False, warmup=2)
    assert comp == eager


def test_a_first_optimizer_step_cannot_be_captured(backend):
    if not vtl.backends.get(backend).can_capture:
        pytest.skip("the numpy backend runs eagerly")
    with pytest.raises(vtl.CaptureError, match="first step of Adam"):
        _train(backend, "mlp", compiled=True, warmup=0)


def test_python_code_runs_only_while_capturing_and_signatures(backend):
    calls = []
    x = vtl.asarray(np.arange(6, dtype=np.float32), device=backend)

    @vtl.compile
    def f(t, scale):
        calls.append(1)
        return t * scale

    for _ in range(4):
        np.testing.assert_array_equal(f(x, 2.0).numpy(), np.arange(6) * 2.0)
    captures = vtl.backends.get(backend).can_capture
    assert len(calls) == (2 if captures else 4)  # one eager call, then the capture
    np.testing.assert_array_equal(f(x + 1, 2.0).numpy(), (np.arange(6) + 1) * 2.0)
    np.testing.assert_array_equal(f(x, 3.0).numpy(), np.arange(6) * 3.0)  # new signature
    y = vtl.asarray(np.ones(3, np.float32), device=backend)
    np.testing.assert_array_equal(f(y, 3.0).numpy(), np.full(3, 3.0))  # new shape
    if captures:
        assert f.captures == 1  # the new signatures are still warming up


def test_recapturing_warns_once(backend):
    if not vtl.backends.get(backend).can_capture:
        pytest.skip("the numpy backend runs eagerly")
    f = vtl.compile(lambda t: t + 1, warmup=0, max_signatures=2)
    with pytest.warns(RuntimeWarning, match="captured 3 times"):
        for n in range(1, 5):
            f(vtl.ones((n,), device=backend))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(vtl.ones((5,), device=backend))
    assert f.captures == 5


def test_outputs_are_fresh_tensors(backend):
    x = vtl.asarray(np.ones(4, np.float32), device=backend)
    f = vtl.compile(lambda t: (t * 2, {"s": vtl.sum(t)}, None), warmup=0)
    a = f(x)
    b = f(x)
    assert b[2] is None and float(b[1]["s"]) == 4.0
    assert a[0] is not b[0]
    b[0][...] = 7.0  # a returned tensor is the caller's
    np.testing.assert_array_equal(f(x)[0].numpy(), np.full(4, 2.0))
    assert not b[0].requires_grad


def test_a_python_number_output_is_refused(backend):
    if not vtl.backends.get(backend).can_capture:
        pytest.skip("the numpy backend runs eagerly")
    f = vtl.compile(lambda t: (t + 1, 3.0), warmup=0)
    with pytest.raises(vtl.CaptureError, match="returned a float"):
        f(vtl.ones((2,), device=backend))


def test_reading_a_value_inside_is_a_capture_error(backend):
    if not vtl.backends.get(backend).can_capture:
        pytest.skip("the numpy backend runs eagerly")

    def f(t):
        if float(vtl.sum(t)) > 0:  # data-dependent Python control flow
            return t + 1
        return t - 1

    g = vtl.compile(f, warmup=0)
    with pytest.raises(vtl.CaptureError, match="read a value on the host"):
        g(vtl.ones((3,), device=backend))
    # the failed capture left the device usable
    np.testing.assert_array_equal((vtl.ones((3,), device=backend) * 2).numpy(), np.full(3, 2.0))


def test_gradients_of_arguments_and_lr_changes(backend):
    w = vtl.asarray(np.linspace(-1, 1, 5, dtype=np.float32), device=backend,
                    requires_grad=True)
    opt = optim.SGD([w], lr=0.1, momentum=0.9)

    def step(x):
        opt.zero_grad()
        loss = vtl.sum((x * w) ** 2)
        loss.backward()
        opt.step()
        return loss

    f = vtl.compile(step)
    xs = [vtl.asarray(np.full(5, v, np.float32), device=backend, requires_grad=True)
          for v in (1.0, 2.0, 3.0, 0.5)]
    got = []
    for i, x in enumerate(xs):
        if i == 3:
            opt.param_groups[0]["lr"] = 0.01  # a new learning rate reaches the replay
        got.append((float(f(x)), x.grad.numpy()))
    w2 = vtl.asarray(np.linspace(-1, 1, 5, dtype=np.float32), device=backend,
                     requires_grad=True)
    opt2 = optim.SGD([w2], lr=0.1, momentum=0.9)
    for i, v in enumerate((1.0, 2.0, 3.0, 0.5)):
        if i == 3:
            opt2.param_groups[0]["lr"] = 0.01
        x = vtl.asarray(np.full(5, v, np.float32), device=backend, requires_grad=True)
        opt2.zero_grad()
        loss = vtl.sum((x * w2) ** 2)
        loss.backward()
        opt2.step()
        assert got[i][0] == float(loss)
        np.testing.assert_array_equal(got[i][1], x.grad.numpy())
    np.testing.assert_array_equal(w.numpy(), w2.numpy())


def test_a_changed_update_rule_is_refused(backend):
    if not vtl.backends.get(backend).can_capture:
        pytest.skip("the numpy backend runs eagerly")
    f, opt = _compiled_square_step(backend, lambda ps: optim.Adam(ps, lr=0.1))
    f()
    f()
    opt.param_groups[0]["weight_decay"] = 0.1
    with pytest.raises(vtl.CaptureError, match="update rule of Adam changed"):
        f()


def test_bad_arguments():
    with pytest.raises(TypeError, match="expected a callable"):
        vtl.compile(3)
    with pytest.raises(ValueError, match="warmup"):
        vtl.compile(lambda: None, warmup=-1)
    with pytest.raises(ValueError, match="max_signatures"):
        vtl.compile(lambda: None, max_signatures=0)
    f = vtl.compile(lambda t, opts: t)
    with pytest.raises(TypeError, match="ndarray is neither a tensor nor hashable"):
        f(vtl.ones((1,)), {"a": [1, np.zeros(2)]})


def test_wgpu_capture_returns_its_buffers(wgpu):
    from vtl.backends.wgpu import memory_info

    x = vtl.ones((1 << 16,), device="wgpu")
    f = vtl.compile(lambda t: vtl.sum(vtl.exp(t) * 2.0), warmup=0)
    f(x)
    f(x)
    held = memory_info()["in_use"]
    del f
    gc.collect()
    vtl.ones((1,), device="wgpu")  # an allocation drains the released buffers
    assert memory_info()["in_use"] < held


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                            "ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("precision", ["32", "fp16"])
def test_fit_with_compile_gives_the_same_history(backend, precision):
    """Also under float16 autocast with fit's GradScaler, whose captured steps skip on the
    device (the first batch's inputs overflow it: that step is skipped)."""
    if precision == "fp16" and not vtl.backends.get(backend).kernel(
            "multi_tensor_apply").supports(vtl.float16):
        pytest.skip(f"{backend} has no float16")

    def run(compiled):
        vtl.random.seed(0)
        net = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Dropout(0.1),
                            nn.Linear(32, 5)).to(backend)
        opt = optim.Adam(net.parameters(), lr=1e-2)
        sched = optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=9)
        xs, ys = _data(backend, (40, 20), n=1, seed=3)
        x = xs[0]
        if precision == "fp16":
            x = vtl.concat([x[:16] * 1e4, x[16:]])
        loader = vtl.data.DataLoader(vtl.data.TensorDataset(x, ys[0]), batch_size=16)
        hist = vtl.train.fit(net, loader, nn.CrossEntropyLoss(), opt, epochs=3,
                             scheduler=sched, scheduler_step="batch", clip_grad_norm=1.0,
                             progress=False, compile=compiled, precision=precision)
        return hist.history, [p.numpy() for p in net.parameters()], \
            sorted({s["step"] for s in opt.state.values()})

    eager, pe, steps = run(False)
    comp, pc, csteps = run(True)
    assert comp == eager
    assert csteps == steps == ([6] if precision == "fp16" else [9])  # 3 skipped in fp16
    for a, b in zip(pe, pc, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
@pytest.mark.parametrize("be", ["cupy", "wgpu"])
def test_a_16bit_model_compiles(be, name):
    """A float16/bfloat16 model's Adam step runs in the fused kernel (float32 state), so a
    captured step holds it: compiled training equals eager training, and both stay close
    to the portable optimizer's (foreach=False)."""
    b = vtl.backends.get(be)
    if not b.is_available:
        pytest.skip(f"{be} backend unavailable: {b.unavailable_reason}")
    if not b.kernel("multi_tensor_apply").supports(getattr(vtl, name)):
        pytest.skip(f"{be} has no {name}")
    runs = []
    for compiled, foreach in ((False, None), (True, None), (False, False)):
        vtl.random.seed(0)
        net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)).to(be)
        net = net.to(dtype=getattr(vtl, name))
        opt = optim.Adam(net.parameters(), lr=1e-2, foreach=foreach)
        rng = np.random.default_rng(0)
        x = vtl.asarray(rng.standard_normal((12, 8)).astype(np.float32), device=be)
        x = x.astype(getattr(vtl, name))
        y = vtl.asarray(rng.integers(0, 3, 12), device=be)

        def step(x, y, net=net, opt=opt):
            opt.zero_grad()  # the loss in float32, as autocast computes it
            loss = nn.functional.cross_entropy(net(x).astype(vtl.float32), y)
            loss.backward()
            opt.step()
            return loss

        f = vtl.compile(step) if compiled else step
        losses = [float(f(x, y)) for _ in range(8)]
        if compiled:
            assert f.captures == 1
        assert all(s["exp_avg"].dtype == vtl.float32 for s in opt.state.values())
        runs.append((losses, [p.numpy().astype(np.float32) for p in net.parameters()]))
    assert runs[0][0] == runs[1][0]
    for a, b in zip(runs[0][1], runs[1][1], strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(runs[0][1], runs[2][1], strict=True):
        np.testing.assert_allclose(a, b, rtol=2e-2, atol=2e-2)


def _scaled_training(backend: str, compiled: bool, opt_name: str, steps: int = 15,
                     warmup: int = 1):
    """A GradScaler run whose gradients overflow on the steps of inputs scaled by 1e36 and
    whose scale grows after three clean steps, so that skipped and taken steps alternate;
    with Adam's per-step bias corrections and a schedule, clipping after unscale_."""
    vtl.random.seed(0)
    net = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 5)).to(backend)
    if opt_name == "adam":
        opt = optim.Adam(net.parameters(), lr=1e-2)
    else:
        opt = optim.SGD(net.parameters(), lr=1e-2, momentum=0.9, dampening=0.1)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps)
    scaler = vtl.amp.GradScaler(growth_interval=3)
    xs, ys = _data(backend, (8, 6), n=steps, seed=5)
    for i in (0, 3, 4, 9, 11):
        xs[i] = xs[i] * 1e36
    for i in range(steps - 3, steps):  # a new signature: eager, then a second capture
        xs[i], ys[i] = xs[i][:6], ys[i][:6]

    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(net(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        sched.step()
        return loss

    f = vtl.compile(step, warmup=warmup) if compiled else step
    losses, scales = [], []
    for x, y in zip(xs, ys, strict=True):
        # eagerly until a step is taken: a captured step needs the optimizer's state
        # (``_state``: looking at ``state`` would settle the captured steps' counts)
        losses.append(float((f if opt._state else step)(x, y)))
        scales.append(scaler.get_scale())
    counts = sorted({s.get("step", -1) for s in opt.state.values()})
    return losses, scales, counts, [p.numpy() for p in net.parameters()], f


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                            "ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize(("opt_name", "warmup"), [("adam", 1), ("adam", 0), ("sgd", 1)])
def test_grad_scaler_steps_are_skipped_on_the_device_in_a_capture(backend, opt_name, warmup,
                                                                  monkeypatch):
    """Inside vtl.compile, GradScaler.step cannot read its inf/nan flag: the fused step
    skips on the device and the optimizer settles its step counts before each replay (SGD
    has none: it never reads the flag). The losses, scales, step counts and parameters are
    eager training's, bit for bit, also when a new signature is captured right after
    replays whose counts are not settled yet (``warmup=0``)."""
    eager = _scaled_training(backend, False, opt_name)
    reads = []
    settle = optim.Optimizer._settle
    monkeypatch.setattr(optim.Optimizer, "_settle",
                        lambda self: (reads.append(1), settle(self))[1])
    comp = _scaled_training(backend, True, opt_name, warmup=warmup)
    assert comp[0] == eager[0]
    assert comp[1] == eager[1]
    assert comp[2] == eager[2]
    for a, b in zip(eager[3], comp[3], strict=True):
        np.testing.assert_array_equal(a, b)
    ratios = np.diff(np.log2(eager[1]))
    assert (ratios < 0).any(), "no step was skipped"
    assert (ratios > 0).any(), "the scale never grew"
    if vtl.backends.get(backend).can_capture:
        assert comp[4].captures == 2
    captures = vtl.backends.get(backend).can_capture
    assert bool(reads) == (captures and opt_name == "adam")


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                            "ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("opt_name", ["adam", "sgd"])
def test_eager_grad_scaler_skips_on_the_device(backend, opt_name, monkeypatch):
    """Eager GradScaler steps on an asynchronous backend leave the skip to the fused step
    once the optimizer has its state (the flag read at the next step, for Adam's counts;
    never for SGD): the same losses, scales, step counts and parameters as reading the
    flag before each step."""
    from vtl.amp import grad_scaler

    calls = []
    real = optim.Optimizer._step_skippable
    monkeypatch.setattr(optim.Optimizer, "_step_skippable",
                        lambda self, found: (calls.append(1), real(self, found))[1])
    got = _scaled_training(backend, False, opt_name)
    device_side = len(calls)
    monkeypatch.setattr(grad_scaler, "_skips_on_device", lambda opt, found: False)
    want = _scaled_training(backend, False, opt_name)
    assert len(calls) == device_side
    assert got[:3] == want[:3]
    for a, b in zip(got[3], want[3], strict=True):
        np.testing.assert_array_equal(a, b)
    asynchronous = vtl.backends.get(backend).asynchronous
    # the steps after the first taken one (the first batch overflows: no state is made)
    assert device_side == (13 if asynchronous else 0)
    assert (np.diff(np.log2(got[1])) < 0).sum() >= 3, "too few skipped steps"


def test_eager_grad_scaler_step_never_waits(backend):
    """An fp16-style step with a GradScaler on a GPU backend: no host read for SGD, and for
    Adam one per step of the previous step's flag (its counts), never of the step just
    queued: a copy recorded with that step (cupy: into pinned memory; wgpu: into a staging
    buffer of its own, mapped at the next step), so no read-back is counted."""
    if not vtl.backends.get(backend).asynchronous:
        pytest.skip("the numpy backend does not wait")
    from test_sync_free import count_waits

    for opt_name in ("sgd", "adam"):
        vtl.random.seed(0)
        net = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 5)).to(backend)
        opt = (optim.Adam(net.parameters()) if opt_name == "adam" else
               optim.SGD(net.parameters(), lr=1e-2, momentum=0.9))
        scaler = vtl.amp.GradScaler()
        xs, ys = _data(backend, (8, 6), n=6, seed=1)

        def step(x, y, opt=opt, net=net, scaler=scaler):
            opt.zero_grad()
            scaler.scale(nn.functional.cross_entropy(net(x), y)).backward()
            scaler.step(opt)
            scaler.update()

        step(xs[0], ys[0])  # creates the optimizer's state (a read: no state to skip yet)
        with count_waits(backend, strict=False) as waits:
            for x, y in zip(xs[1:], ys[1:], strict=True):
                step(x, y)
        assert waits == [], opt_name
        assert all(s["step"] == 6 for s in opt.state.values()) if opt_name == "adam" else True


def test_compiled_grad_scaler_step_never_waits(backend):
    """Replays of a step with a GradScaler and Adam read no flag back: each run's skip flag
    is copied once its work is queued (``vtl.capture.after_replay``) and read at the next
    run from that copy; a skipped replay still puts Adam's step counts back."""
    if not vtl.backends.get(backend).can_capture:
        pytest.skip("the numpy backend runs eagerly")
    from test_sync_free import count_waits

    vtl.random.seed(0)
    net = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 5)).to(backend)
    opt = optim.Adam(net.parameters())
    scaler = vtl.amp.GradScaler()
    xs, ys = _data(backend, (8, 6), n=7, seed=2)
    xs[5] = xs[5] * 1e36  # a replay whose gradients overflow: skipped

    def step(x, y):
        opt.zero_grad()
        scaler.scale(nn.functional.cross_entropy(net(x), y)).backward()
        scaler.step(opt)
        scaler.update()

    f = vtl.compile(step)
    for x, y in zip(xs[:3], ys[:3], strict=True):  # eager (state made), capture, replay
        f(x, y)
    vtl.backends.get(backend).synchronize()
    with count_waits(backend, strict=False) as waits:
        for x, y in zip(xs[3:], ys[3:], strict=True):
            f(x, y)
    assert waits == []
    assert [s["step"] for s in opt.state.values()] == [6] * 4  # 7 steps, one skipped
    assert scaler.get_scale() == 2.0 ** 15


def test_grad_scaler_in_a_capture_needs_a_fused_step(backend):
    if not vtl.backends.get(backend).can_capture:
        pytest.skip("the numpy backend runs eagerly")
    w = vtl.asarray(np.ones(3, np.float32), device=backend, requires_grad=True)
    opt = optim.LBFGS([w])
    scaler = vtl.amp.GradScaler()

    def step():
        opt.zero_grad()
        scaler.scale(vtl.sum(w * w)).backward()
        scaler.step(opt)
        scaler.update()

    f = vtl.compile(step, warmup=0)
    with pytest.raises(vtl.CaptureError, match="cannot skip a LBFGS step"):
        f()


def test_a_first_sgd_momentum_step_cannot_be_captured(backend):
    if not vtl.backends.get(backend).can_capture:
        pytest.skip("the numpy backend runs eagerly")
    f, opt = _compiled_square_step(backend, lambda ps: optim.SGD(ps, lr=0.1))  # no buffer
    f()
    opt.param_groups[0]["momentum"] = 0.9
    with pytest.raises(vtl.CaptureError, match="first momentum step"):
        f()


def test_replayed_copies_follow_their_buffers(backend, monkeypatch):
    """Replays copy each call's inputs in and the outputs out; on wgpu those copies are kept
    per pair of buffers and recorded again when the same buffers meet (also after the oldest
    were dropped, and for views at offsets), and every result is that call's."""
    if backend == "wgpu":
        from vtl.backends.wgpu import capture as wcap

        monkeypatch.setattr(wcap._Copies, "SIZE", 3)
    rng = np.random.default_rng(5)
    hosts = [rng.standard_normal((6, 5)).astype(np.float32) for _ in range(4)]
    xs = [vtl.asarray(h, device=backend) for h in hosts]
    big = vtl.asarray(np.concatenate(hosts), device=backend)
    views = [big[6 * i:6 * (i + 1)] for i in range(4)]  # one buffer, four offsets
    f = vtl.compile(lambda t: (t * 3 + 1, vtl.sum(t, axis=0)), warmup=0)
    kept = []
    for _ in range(3):
        for i in [0, 1, 2, 3, 1, 0]:
            for t in (xs[i], views[i]):
                out, s = f(t)
                kept.append((out, s, hosts[i]))
    for out, s, h in kept:  # earlier results are not overwritten by later calls
        np.testing.assert_allclose(out.numpy(), h * 3 + 1, rtol=1e-6)
        np.testing.assert_allclose(s.numpy(), h.sum(axis=0), rtol=1e-5, atol=1e-6)
    if backend == "wgpu":
        entry = next(iter(f._entries.values()))
        assert 0 < len(entry.capture._copies._kept) <= 3


def test_wgpu_replays_with_the_same_buffers_skip_the_array_library(backend, monkeypatch):
    """A loop that drops each call's output: after a few calls the input and output copies
    are all kept ones (the pool hands the outputs the same buffers again)."""
    if backend != "wgpu":
        pytest.skip("the kept copies of wgpu captures")
    from vtl.backends.wgpu import capture as wcap

    x = vtl.asarray(np.arange(8, dtype=np.float32), device=backend)
    f = vtl.compile(lambda t: t * 2, warmup=0)
    calls = []
    real = wcap.copy_into
    monkeypatch.setattr(wcap, "copy_into",
                        lambda src, dst: (calls.append(dst._st.buf.uid), real(src, dst)))
    for _ in range(8):
        np.testing.assert_array_equal(f(x).numpy(), np.arange(8) * 2.0)
    first = len(calls)
    for _ in range(4):
        np.testing.assert_array_equal(f(x).numpy(), np.arange(8) * 2.0)
    assert 0 < first and len(calls) == first


def test_a_replay_checks_the_targets_it_is_given(backend):
    """Targets copied into a replay are checked as in eager mode: a later call's
    out-of-range target raises (at the first read after it, on a GPU), whatever the ranges
    of the targets the capture saw."""
    x = vtl.asarray(np.ones((4, 5), np.float32), device=backend)
    f = vtl.compile(lambda x, y: nn.functional.cross_entropy(x, y), warmup=0)
    for labels in ([0, 1, 2, 3], [1, 1, 1, 1], [4, 0, 0, 0]):
        y = vtl.asarray(np.array(labels), device=backend)
        assert float(f(x, y)) == pytest.approx(np.log(5), rel=1e-6)
    y = vtl.asarray(np.array([7, 0, 0, 0]), device=backend)
    with pytest.raises(IndexError, match="target 7 is out of bounds for 5 classes"):
        float(f(x, y))
    y = vtl.asarray(np.array([2, 0, 0, 0]), device=backend)
    assert float(f(x, y)) == pytest.approx(np.log(5), rel=1e-6)  # the replay works on


def test_replayed_draws_of_two_generators_follow_eager_ones(backend):
    """A captured function drawing three times from the default generator and once from
    another (dropout, and a draw that is not dropout): each replay redraws them all, with
    other draws between the calls, as eager calls do."""
    def run(compiled):
        vtl.random.seed(5)
        g2 = vtl.random.Generator(9)
        x = vtl.asarray(np.ones((6, 40), np.float32), backend=backend)

        def f(x):
            a = nn.functional.dropout(x, 0.3)
            b = nn.functional.dropout(a, 0.5, generator=g2)
            c = nn.functional.dropout(x * 2.0, 0.2)
            return a + b + c + nn.functional.dropout(x, 0.6)

        fn = vtl.compile(f) if compiled else f
        out = []
        for i in range(5):
            out.append(fn(x).numpy())
            if i % 2:
                vtl.random.uniform(size=(3,), device=x.device)  # a draw between the calls
        return out, vtl.random.default_generator().counter, g2.counter

    eager, ce, ge = run(False)
    comp, cc, gc_ = run(True)
    assert (cc, gc_) == (ce, ge)
    for a, b in zip(eager, comp, strict=True):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(eager[-1], eager[-2])  # new masks at each call


def test_replay_hooks_need_a_capture_under_way():
    from vtl import capture

    for register in (capture.on_replay, capture.after_replay):
        with pytest.raises(capture.CaptureError, match=f"{register.__name__}: no capture"):
            register(lambda: None)
