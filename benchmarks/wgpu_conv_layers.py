"""Device time of the wgpu backend's convolution kernels on ResNet-18's 3x3 layers.

For each layer (channels in = out, a square image, stride 1, padding 1) the forward, the
input gradient and the weight gradient are timed apart by GPU timestamps
(``vtl.backends.wgpu.profile``), each op's dispatches summed (its products and the sums of
their depth slices), with a synchronize between calls so that no two calls overlap on the
device, and reported in milliseconds and TFLOP/s::

    python -m benchmarks.wgpu_conv_layers [--batch 128] [--reps 8] [--ab] [--slices]

``--ab`` times the channel-major depth (``conv.TAPS_FIRST = False``) next to the tap-major
one, alternating in one process; ``--slices`` sweeps the weight gradient's depth slices
(1 to 16) against the planned count. The default layers are CIFAR ResNet-18's
(64 channels at 32x32 down to 512 at 4x4); ``--layers 64x32 256x8`` picks some.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any
from unittest import mock

import numpy as np

#: (channels, image size) of CIFAR ResNet-18's 3x3 layers
LAYERS = ((64, 32), (128, 16), (256, 8), (512, 4))
_GEOMETRY = ((1, 1), (1, 1, 1, 1), (1, 1))  # stride, padding (top, bottom, left, right), dilation


def _warm_up(seconds: float) -> None:
    """Products for ``seconds``, so that the device's clocks are up before the timings."""
    import vtl.backends.wgpu as wx
    from vtl.backends.wgpu._recorder import REC

    a = wx.asarray(np.ones((2048, 2048), np.float32))
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(4):
            a @ a
        REC.synchronize()


def device_ms(fn: Callable[[], Any], reps: int) -> float:
    """Milliseconds of device time per call of ``fn`` (the sum of its dispatches)."""
    from vtl.backends.wgpu._recorder import REC
    from vtl.backends.wgpu.profile import kernel_times

    fn()
    REC.synchronize()
    with kernel_times() as t:
        for _ in range(reps):
            fn()
            REC.synchronize()
    return 1e3 * t.busy / reps


def layer_ops(channels: int, size: int, batch: int, seed: int = 0) -> dict[str, Callable]:
    """The three ops of one layer on random data: ``fwd``, ``dgrad``, ``wgrad``."""
    import vtl.backends.wgpu as wx
    from vtl.backends.wgpu import conv

    rng = np.random.default_rng(seed)
    x, g = (wx.asarray(rng.standard_normal((batch, channels, size, size)).astype(np.float32))
            for _ in range(2))
    w = wx.asarray(rng.standard_normal((channels, channels, 3, 3)).astype(np.float32))
    kern = conv.WgpuConv2d()
    return {
        "fwd": lambda: kern.forward(x, w, None, *_GEOMETRY, 1),
        "dgrad": lambda: conv._implicit_backward(None, x.shape, w, g, *_GEOMETRY, True,
                                                 False, False),
        "wgrad": lambda: conv._implicit_backward(x, x.shape, w, g, *_GEOMETRY, False, True,
                                                 False),
    }


def flop(channels: int, size: int, batch: int) -> float:
    """Floating-point operations of one op of the layer (each is one product's worth)."""
    return 2.0 * batch * size * size * channels * channels * 9


def _row(label: str, times: dict[str, float], gflop: float) -> str:
    return label + "  ".join(f"{k} {v:.3f} ms ({gflop / v:.1f} TFLOP/s)"
                             for k, v in times.items())


def run(layers: tuple, batch: int, reps: int, ab: bool, slices: bool,
        warm_s: float = 1.0) -> list[str]:
    """The report's lines (also printed as they come)."""
    from vtl.backends.wgpu import conv

    _warm_up(warm_s)
    out = []

    def say(line: str) -> None:
        out.append(line)
        print(line, flush=True)

    for channels, size in layers:
        ops = layer_ops(channels, size, batch)
        gflop = flop(channels, size, batch) / 1e9
        say(f"{channels} channels, {size}x{size}, batch {batch} ({gflop:.2f} GFLOP an op)")
        forms = ((True, "tap-major"), (False, "channel-major"), (True, "tap-major")) if ab \
            else ((conv.TAPS_FIRST, "as shipped"),)
        for taps, label in forms:
            with mock.patch.multiple(conv, TAPS_FIRST=taps):
                say(_row(f"  {label:14s} ", {k: device_ms(f, reps) for k, f in ops.items()},
                         gflop))
        if slices:
            big, gx, gy, _, planned = conv._wgrad_plan(conv.D.float32, channels,
                                                       channels * 9, batch * size * size)
            total = batch * size * size
            times = {}
            for s in (1, 2, 4, 8, 16):
                depth = -(-total // (s * 16)) * 16
                plan = (big, gx, gy, depth, -(-total // depth))
                with mock.patch.multiple(conv, _wgrad_plan=lambda *a, plan=plan: plan):
                    times[f"wgrad/{s}"] = device_ms(ops["wgrad"], reps)
            say(_row(f"  planned {planned} slices; ", times, gflop))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--reps", type=int, default=8)
    ap.add_argument("--layers", nargs="*", default=None, metavar="CxS",
                    help="layers as channels x image size, e.g. 64x32 256x8")
    ap.add_argument("--ab", action="store_true", help="tap-major against channel-major")
    ap.add_argument("--slices", action="store_true", help="sweep the weight gradient's slices")
    args = ap.parse_args(argv)
    layers = LAYERS if not args.layers else tuple(
        tuple(int(v) for v in s.split("x")) for s in args.layers)
    run(layers, args.batch, args.reps, args.ab, args.slices)


if __name__ == "__main__":
    main()
