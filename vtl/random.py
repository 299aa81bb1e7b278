"""Random numbers that are the same on every backend: a counter-based generator.

vtl draws every random number (model init, dropout, data shuffling) from
Philox-4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3",
SC11). Philox is a keyed bijection of 128-bit counters, so block ``i`` of a
stream is a pure function of ``(key, counter + i)``: the generator is written
with standard array-API ``uint32`` operations (multiplications through 16-bit
halves, so no product ever needs more than 32 bits and no backend needs
``uint64``) and gives bit-identical words on NumPy, CuPy and WebGPU.

>>> g = vtl.random.Generator(42)
>>> g.uniform(size=(2, 3))                      # float32 in [0, 1)
>>> g.normal(0.0, 0.02, size=(4,), device="cupy")  # same numbers on any device
>>> state = g.get_state(); ...; g.set_state(state)  # replay

The state of a generator is its 64-bit ``seed`` (the Philox key) and a 128-bit
``counter`` (the index of the next block of four words). Every draw consumes a
whole number of blocks, so a draw's numbers depend only on the state before it.

Conversions:

* uniform ``float32``: the top 24 bits of one word times ``2**-24``;
  ``float64``: 53 bits from two words (27 + 26) times ``2**-53``. Both are exact
  and lie in ``[0, 1)``, identical on every backend.
* normal: Box-Muller on pairs of uniforms (``u1`` in ``(0, 1]``). The inputs are
  bit-identical everywhere; the outputs go through ``log``/``sqrt``/``cos``/
  ``sin``, whose last bit may differ between runtimes.
* integers: the top bits of a 64-bit (96-bit for ranges over ``2**32``) random
  fraction times the range (Lemire's multiply-shift without rejection). Each
  value's probability differs from ``1/range`` by a relative error below
  ``2**-32``; no modulo bias.
* permutations: a stable sort of 64-bit random keys (two stable passes over
  32-bit halves), the same on every backend.

A backend may provide the words in one kernel, ``backend.kernel("philox")`` (the contract
is ``PhiloxKernel`` in ``vtl.backends.kernels``; every built-in backend has one): the
same bits as the portable version here, which stays their oracle.
"""

from __future__ import annotations

import math
import operator
import threading
import weakref
from functools import partial
from typing import Any

from . import capture as _capture

__all__ = [
    "Generator", "bernoulli", "bits", "default_generator", "get_state", "initial_seed",
    "normal", "permutation", "randint", "random", "seed", "set_state", "shuffle",
    "standard_normal", "uniform",
]

ALGORITHM = "philox4x32-10"
_MASK = 0xFFFFFFFF
_M0, _M1 = 0xD2511F53, 0xCD9E8D57  # Philox multipliers
_W0, _W1 = 0x9E3779B9, 0xBB67AE85  # Weyl key increments
_ROUNDS = 10
_DEFAULT_SEED = 67280421310721  # PyTorch's default seed, so fresh runs are reproducible


# -- the portable Philox core (raw arrays of any array-API namespace) -------------------------
def _mulhilo(a: Any, m: int) -> tuple[Any, Any]:
    """High and low 32-bit words of ``a * m`` (uint32 array times a 32-bit constant).

    Works on 16-bit halves: every partial product and sum stays below 2**32.
    """
    ml, mh = m & 0xFFFF, m >> 16
    al = a & 0xFFFF
    ah = a >> 16
    ll = al * ml
    lh = al * mh
    hl = ah * ml
    mid = (ll >> 16) + (lh & 0xFFFF) + (hl & 0xFFFF)
    lo = (ll & 0xFFFF) | ((mid & 0xFFFF) << 16)
    hi = ah * mh + (lh >> 16) + (hl >> 16) + (mid >> 16)
    return hi, lo


def _add32(a: Any, b: Any) -> tuple[Any, Any]:
    """``(a + b) mod 2**32`` and the carry (0 or 1), without overflowing uint32."""
    lo = (a & 0xFFFF) + (b & 0xFFFF)
    hi = (a >> 16) + (b >> 16) + (lo >> 16)
    return ((hi & 0xFFFF) << 16) | (lo & 0xFFFF), hi >> 16


def philox4x32(c: list[Any], key: tuple[int, int], rounds: int = _ROUNDS) -> list[Any]:
    """Philox-4x32 on counter words ``c`` (four uint32 arrays) with a 64-bit ``key``."""
    c0, c1, c2, c3 = c
    k0, k1 = key
    for r in range(rounds):
        if r:
            k0 = (k0 + _W0) & _MASK
            k1 = (k1 + _W1) & _MASK
        hi0, lo0 = _mulhilo(c0, _M0)
        hi1, lo1 = _mulhilo(c2, _M1)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return [c0, c1, c2, c3]


def philox_words(xp: Any, n: int, key: tuple[int, int], counter: int, device: Any = None) -> Any:
    """The first ``n`` uint32 words of the stream of ``key`` from block ``counter``.

    ``xp`` is any array-API namespace; the result is a 1-D ``xp.uint32`` array
    on ``device`` (block ``counter + i`` gives words ``4i .. 4i+3``).
    """
    nblocks = -(-n // 4)
    if nblocks >= 2**32:
        raise ValueError(f"vtl.random: cannot draw {n} words at once (at most 2**34)")
    j = xp.arange(nblocks, dtype=xp.uint32, device=device)
    words = []
    carry: Any = None
    for limb in range(4):
        base = (counter >> (32 * limb)) & _MASK
        if limb == 0:
            w, carry = _add32(j, base)
        else:
            w, carry = _add32(carry, base)
        words.append(w)
    out = philox4x32(words, key)
    flat = xp.reshape(xp.stack(out, axis=1), (-1,))
    return flat if 4 * nblocks == n else flat[:n]


# -- conversions (raw arrays) ---------------------------------------------------------------
def _unit_float(xp: Any, w: Any, dtype: Any, bits: int = 24) -> Any:
    """Uniform floats in [0, 1): 24 bits of one word (float32) or 53 of two (float64).

    ``w`` holds one word per float32 value, two per float64 value. ``bits`` < 24 gives
    float32 values that a float16 (11) or bfloat16 (8) holds exactly.
    """
    if dtype == xp.float64:
        w2 = xp.reshape(w, (-1, 2))
        a = xp.astype(w2[:, 0] >> 5, xp.float64)
        b = xp.astype(w2[:, 1] >> 6, xp.float64)
        return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)
    return xp.astype(w >> (32 - bits), dtype) * (1.0 / 2.0 ** bits)


def _words_per_float(xp: Any, dtype: Any) -> int:
    return 2 if dtype == xp.float64 else 1


def _limb_mul_top(xp: Any, x: list[Any], s: list[int]) -> list[Any]:
    """The top ``len(s)`` 32-bit limbs of ``x * s`` (little-endian limbs; ``x``
    uint32 arrays, ``s`` Python ints)."""
    n = len(x) + len(s)
    r: list[Any] = [None] * n

    def add_at(k: int, v: Any) -> None:
        while k < n and v is not None:
            if r[k] is None:
                r[k] = v
                return
            r[k], v = _add32(r[k], v)
            k += 1

    for i, xi in enumerate(x):
        for j, sj in enumerate(s):
            hi, lo = _mulhilo(xi, sj)
            add_at(i + j, lo)
            add_at(i + j + 1, hi)
    return r[len(x):]


def _bounded(xp: Any, w: Any, span: int, nx: int) -> list[Any]:
    """Integers in ``[0, span)`` as little-endian uint32 limbs, from ``nx`` words each."""
    w2 = xp.reshape(w, (-1, nx))
    x = [w2[:, k] for k in range(nx)]
    if span == 2**32:
        return [x[-1]]  # floor(x * 2**32 / 2**64): the top word
    s = [span] if span < 2**32 else [span & _MASK, span >> 32]
    return _limb_mul_top(xp, x, s)


def _int_from_limbs(xp: Any, limbs: list[Any], low: int, span: int, dtype: Any) -> Any:
    """``low + value`` in ``dtype`` without an intermediate overflow."""
    info = xp.iinfo(dtype)
    bits = info.bits
    signed = info.min < 0
    if len(limbs) == 1:
        v = limbs[0]
        part = v if not signed or span <= 2 ** (bits - 1) else v & (2 ** (bits - 1) - 1)
        out = xp.astype(part, dtype)
    else:  # two limbs: only for 64-bit dtypes
        lo, hi = limbs
        part_hi = hi if not signed or span <= 2**63 else hi & 0x7FFFFFFF
        out = xp.astype(part_hi, dtype) * (2**32) + xp.astype(lo, dtype)
        v = hi
        bits = 32  # the high bit of the value is bit 31 of the high limb
    if low:
        out = out + low
    if signed and span > 2 ** (info.bits - 1):
        top = xp.astype(v >> (bits - 1), dtype) * (2 ** (info.bits - 2))
        out = out + top
        out = out + top
    return out


def _resolve(device: Any, backend: Any) -> Any:
    from .backends import resolve_device

    return resolve_device(device, backend)


def _shape(size: Any, fname: str) -> tuple[int, ...]:
    if size is None:
        return ()
    if isinstance(size, int) or hasattr(size, "__index__"):
        size = (operator.index(size),)
    try:
        shape = tuple(operator.index(s) for s in size)
    except TypeError:
        raise TypeError(f"vtl.random.{fname}(): size must be an int or a tuple of ints, "
                        f"got {size!r}") from None
    if any(s < 0 for s in shape):
        raise ValueError(f"vtl.random.{fname}(): negative dimension in size {shape}")
    return shape


def _numel(shape: tuple[int, ...]) -> int:
    return math.prod(shape)


def _words_at(start: int, key: tuple[int, int]) -> tuple[int, ...]:
    """The four words of the 128-bit counter ``start`` (low first) and the key's two."""
    return (start & _MASK, (start >> 32) & _MASK, (start >> 64) & _MASK,
            (start >> 96) & _MASK, *key)


class Generator:
    """A Philox-4x32-10 generator with explicit, saveable state.

    ``Generator(seed)`` starts at counter 0 with key ``seed`` (an int in
    ``[0, 2**64)``). Every method places its result on ``device=`` (a Device or
    a string like ``'cupy:0'``; ``backend=`` picks a backend's first device;
    default: the default backend) and returns a :class:`vtl.Tensor`. The
    numbers do not depend on the device.

    Args:
        seed: The key: an int in ``[0, 2**64)``.

    Raises:
        TypeError: If ``seed`` is not an int.
        ValueError: If ``seed`` is out of range.

    Example:
        >>> a = vtl.random.Generator(42).uniform(size=3)
        >>> b = vtl.random.Generator(42).uniform(size=3)
        >>> bool(vtl.all(a == b)), a.dtype == vtl.float32
        (True, True)
    """

    def __init__(self, seed: int = _DEFAULT_SEED) -> None:
        self._lock = threading.Lock()
        #: (the capture, its draws) of the draws a capture under way made from this
        #: generator, which one hook redraws before each replay
        self._captured: tuple[weakref.ref, list] | None = None
        self.manual_seed(seed)

    # -- state --------------------------------------------------------------------------------
    def manual_seed(self, seed: int) -> Generator:
        """Restart the stream of ``seed`` (an int in ``[0, 2**64)``); returns ``self``."""
        seed = _check_seed(seed)
        with self._lock:
            self._seed = seed
            self._counter = 0
        return self

    seed = manual_seed

    def initial_seed(self) -> int:
        """The seed (key) of this generator."""
        return self._seed

    @property
    def key(self) -> tuple[int, int]:
        """The Philox key: the low and high 32-bit words of the seed."""
        return self._seed & _MASK, self._seed >> 32

    @property
    def counter(self) -> int:
        """The 128-bit index of the next block of four words."""
        return self._counter

    def get_state(self) -> dict[str, Any]:
        """The state as a plain dict (JSON-serialisable) for :meth:`set_state`."""
        with self._lock:
            return {"algorithm": ALGORITHM, "seed": self._seed, "counter": self._counter}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a state from :meth:`get_state`.

        A malformed state (not a dict: ``TypeError``; missing or unknown keys, another
        algorithm, a bad seed or counter: ``ValueError``) leaves the generator unchanged.
        """
        self._apply_state(self._check_state(state))

    @staticmethod
    def _check_state(state: Any) -> tuple[int, int]:
        """``(seed, counter)`` of a :meth:`get_state` dict; raises on a malformed one."""
        if not isinstance(state, dict):
            raise TypeError(f"Generator.set_state() expects a dict from get_state(), "
                            f"got {type(state).__name__}")
        keys = {"algorithm", "seed", "counter"}
        missing, unknown = keys - set(state), set(state) - keys
        if missing:
            raise ValueError(f"Generator.set_state(): state lacks {sorted(missing)}")
        if unknown:
            raise ValueError(f"Generator.set_state(): state has unknown key(s) "
                             f"{sorted(map(str, unknown))}; expected {sorted(keys)}")
        if state["algorithm"] != ALGORITHM:
            raise ValueError(f"Generator.set_state(): state is for algorithm "
                             f"{state['algorithm']!r}, expected {ALGORITHM!r}")
        seed = state["seed"]
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise ValueError(f"Generator.set_state(): seed must be an int in [0, 2**64), "
                             f"got {seed!r}")
        counter = state["counter"]
        if isinstance(counter, bool) or not isinstance(counter, int) \
                or not 0 <= counter < 2**128:
            raise ValueError(f"Generator.set_state(): counter must be an int in [0, 2**128), "
                             f"got {counter!r}")
        return int(seed), int(counter)

    def _apply_state(self, state: tuple[int, int]) -> None:
        with self._lock:
            self._seed, self._counter = state

    def __repr__(self) -> str:
        return f"vtl.random.Generator(seed={self._seed}, counter={self._counter})"

    # -- raw words ----------------------------------------------------------------------------
    def _take_blocks(self, n: int) -> int:
        """Reserve the blocks holding ``n`` words; returns the first block's index."""
        with self._lock:
            start = self._counter
            self._counter = (start + -(-n // 4)) % 2**128
        return start

    def _words(self, n: int, xp: Any, device: Any, backend: Any = None,
               index: int = 0, vdev: Any = None) -> Any:
        if -(-n // 4) >= 2**32:
            raise ValueError(f"vtl.random: cannot draw {n} words at once (at most 2**34)")
        cap = None if vdev is None else _capture.current(vdev)
        if cap is not None:
            return self._captured_words(cap, n, backend, index)
        start = self._take_blocks(n)
        if backend is not None:
            fused = backend.kernel("philox")
            if fused is not None:
                words = fused(n, self.key, start, index)
                if words is not None:
                    return words
        return philox_words(xp, n, self.key, start, device)

    def _draw_words(self, n: int) -> tuple[int, ...]:
        """The counter's four words (low first) and the key's two for the next draw of ``n``
        words (advances the counter, as a draw does)."""
        return _words_at(self._take_blocks(n), self.key)

    def _kernel_words(self, n: int, device: Any) -> Any:
        """The Philox counter (four words, low first) and key (two words) of a draw of ``n``
        words that a backend kernel generates itself (fused dropout): a tuple of six ints,
        or inside a capture (``vtl.compile``) the per-step scalars each replay advances.
        Advances the counter as drawing the words would."""
        if -(-n // 4) >= 2**32:
            raise ValueError(f"vtl.random: cannot draw {n} words at once (at most 2**34)")
        cap = _capture.current(device)
        return self._draw_words(n) if cap is None else self._replayed_draw(cap, n)

    def _replayed_draw(self, cap: Any, n: int) -> Any:
        """The counter and key of a draw of ``n`` words as per-step scalars of the capture
        ``cap``, which each replay advances as the draw would."""
        dyn = cap.scalars(self._draw_words(n), "uint32")
        seen = self._captured
        if seen is None or seen[0]() is not cap:
            draws: list[tuple[int, Any]] = []
            self._captured = (weakref.ref(cap), draws)
            _capture.on_replay(partial(self._redraw, draws))
        else:
            draws = seen[1]
        draws.append((-(-n // 4), dyn))
        return dyn

    def _redraw(self, draws: list[tuple[int, Any]]) -> None:
        """Before a replay: the counter and key of each of a capture's draws from this
        generator, ``(blocks, scalars)`` in the order they were made (the generator advances
        as those draws would: they are consecutive, no other code draws during a replay)."""
        start = self._take_blocks(4 * sum(b for b, _ in draws))
        key = self.key
        for blocks, dyn in draws:  # as dyn.set, without its check: always six words
            dyn.values = _words_at(start, key)
            start = (start + blocks) % 2**128

    def _captured_words(self, cap: Any, n: int, backend: Any, index: int) -> Any:
        """A draw recorded by a capture (``vtl.compile``): the backend's kernel reads the
        counter and key from per-step scalars (a failure aborts the capture, with them)."""
        fused = backend.kernel("philox")
        dyn = self._replayed_draw(cap, n)
        words = None if fused is None else fused(n, self.key, dyn, index)
        if words is None:
            raise _capture.CaptureError(
                f"vtl.compile: a random draw of {n} words on {backend.name} cannot be "
                "captured (the backend's philox kernel declines it)")
        return words

    def _raw(self, n: int, like: Any) -> tuple[Any, Any, Any, Any]:
        """Namespace, device and ``n`` words for ``like`` (a Device, Tensor or raw array)."""
        from ._tensor import Tensor
        from .backends import Device

        if isinstance(like, Tensor):
            like = like._device
        if isinstance(like, Device):
            b = like.backend
            native = b.native_device(like.index)
            return (like.xp, native, self._words(n, like.xp, native, b, like.index, like),
                    like)
        from array_api_compat import array_namespace

        xp = array_namespace(like)
        return xp, like.device, self._words(n, xp, like.device), None

    def _wrap(self, raw: Any, dev: Any) -> Any:
        if dev is None:
            return raw
        from ._tensor import _new

        return _new(raw, dev)

    # -- distributions ------------------------------------------------------------------------
    def bits(self, size: Any = None, *, device: Any = None, backend: str | None = None) -> Any:
        """Raw uint32 words of the stream (Philox output, in order)."""
        shape = _shape(size, "bits")
        dev = _resolve(device, backend)
        xp, _, w, _ = self._raw(_numel(shape), dev)
        return self._wrap(xp.reshape(w, shape), dev)

    def _unit(self, shape: tuple[int, ...], dtype: Any, like: Any, fname: str,
              wide: bool = False) -> Any:
        """Raw uniform [0, 1) floats of ``shape``, the Device (None for raw arrays) and the
        dtype asked for. For float16/bfloat16 the floats are float32 (round them with
        :func:`_round_low`): with as many bits as the low dtype holds, or all 24 when
        ``wide`` (for further float32 arithmetic, as in Box-Muller)."""
        xp0 = like.xp if _is_device(like) else None
        n = _numel(shape)
        probe_xp = xp0 if xp0 is not None else _namespace_of(like)
        dt = _float_dtype(probe_xp, dtype, like, fname)
        bits = 24
        cdt = dt
        if getattr(dt, "name", None) in _LOW_BITS:  # drawn in float32, rounded once at the end
            cdt = _to_dtype("float32")
            bits = 24 if wide else _LOW_BITS[dt.name]
        xp, _, w, dev = self._raw(n * _words_per_float(probe_xp, cdt), like)
        return xp, xp.reshape(_unit_float(xp, w, cdt, bits), shape), dev, dt

    def random(self, size: Any = None, *, dtype: Any = None, device: Any = None,
               backend: str | None = None) -> Any:
        """Uniform floats in ``[0, 1)`` (``float32`` unless ``dtype`` says otherwise)."""
        dev = _resolve(device, backend)
        xp, u, dev, dt = self._unit(_shape(size, "random"), dtype, dev, "random")
        return self._wrap(_round_low(xp, u, dt), dev)

    def _random_like(self, x: Any, shape: tuple[int, ...]) -> Any:
        """float32 uniforms in ``[0, 1)`` of ``shape`` where ``x`` lives: a Tensor on
        ``x``'s device for a Tensor, else an array of ``x``'s namespace and device."""
        from ._tensor import Tensor

        if isinstance(x, Tensor):
            dev = x._device
            _, u, dev, _ = self._unit(shape, _to_dtype("float32"), dev, "random")
            return self._wrap(u, dev)
        xp = _namespace_of(x)
        return self._unit(shape, xp.float32, x, "random")[1]

    def uniform(self, low: float = 0.0, high: float = 1.0, size: Any = None, *,
                dtype: Any = None, device: Any = None, backend: str | None = None) -> Any:
        """Uniform floats in ``[low, high)`` (``high`` itself can appear through rounding)."""
        low, high = _real(low, "uniform", "low"), _real(high, "uniform", "high")
        dev = _resolve(device, backend)
        xp, u, dev, dt = self._unit(_shape(size, "uniform"), dtype, dev, "uniform")
        if (low, high) != (0.0, 1.0):
            u = u * (high - low) + low
        return self._wrap(_round_low(xp, u, dt), dev)

    def _std_normal(self, shape: tuple[int, ...], dtype: Any, like: Any, fname: str) -> Any:
        n = _numel(shape)
        m = -(-n // 2)
        xp, u, dev, dt = self._unit((2 * m,), dtype, like, fname, wide=True)
        u1 = 1.0 - u[:m]  # in (0, 1]: the log is finite
        u2 = u[m:]
        r = xp.sqrt(-2.0 * xp.log(u1))
        theta = (2.0 * math.pi) * u2
        z = xp.concat([r * xp.cos(theta), r * xp.sin(theta)])
        if 2 * m != n:
            z = z[:n]
        return xp, xp.reshape(z, shape), dev, dt

    def standard_normal(self, size: Any = None, *, dtype: Any = None, device: Any = None,
                        backend: str | None = None) -> Any:
        """Standard normal floats (Box-Muller)."""
        dev = _resolve(device, backend)
        xp, z, dev, dt = self._std_normal(_shape(size, "standard_normal"), dtype, dev,
                                          "standard_normal")
        return self._wrap(_round_low(xp, z, dt), dev)

    def normal(self, loc: float = 0.0, scale: float = 1.0, size: Any = None, *,
               dtype: Any = None, device: Any = None, backend: str | None = None) -> Any:
        """Normal floats with mean ``loc`` and standard deviation ``scale`` (>= 0)."""
        loc, scale = _real(loc, "normal", "loc"), _real(scale, "normal", "scale")
        if scale < 0:
            raise ValueError(f"vtl.random.normal(): scale must be >= 0, got {scale}")
        dev = _resolve(device, backend)
        xp, z, dev, dt = self._std_normal(_shape(size, "normal"), dtype, dev, "normal")
        if (loc, scale) != (0.0, 1.0):
            z = z * scale + loc
        return self._wrap(_round_low(xp, z, dt), dev)

    def randint(self, low: int, high: int | None = None, size: Any = None, *,
                dtype: Any = None, device: Any = None, backend: str | None = None) -> Any:
        """Integers in ``[low, high)`` (``[0, low)`` when ``high`` is None), like
        ``numpy.random.randint``; ``dtype`` defaults to the device's default integer
        dtype. The range may be up to ``2**64 - 1`` wide."""
        if high is None:
            low, high = 0, low
        low, high = _int(low, "low"), _int(high, "high")
        if high <= low:
            raise ValueError(f"vtl.random.randint(): need low < high, got low={low}, "
                             f"high={high}")
        shape = _shape(size, "randint")
        dev = _resolve(device, backend)
        xp = dev.xp
        dt = _int_dtype(dtype, dev)
        info = xp.iinfo(dt)
        if low < info.min or high - 1 > info.max:
            raise ValueError(f"vtl.random.randint(): [{low}, {high}) does not fit in "
                             f"{info.dtype}")
        span = high - low
        nx = 2 if span <= 2**32 else 3
        n = _numel(shape)
        xp, _, w, dev = self._raw(n * nx, dev)
        limbs = _bounded(xp, w, span, nx)
        out = _int_from_limbs(xp, limbs, low, span, dt)
        return self._wrap(xp.reshape(out, shape), dev)

    def bernoulli(self, p: Any = 0.5, size: Any = None, *, dtype: Any = None,
                  device: Any = None, backend: str | None = None) -> Any:
        """Draws of 1 with probability ``p`` (a float, or a tensor of probabilities
        whose shape and device the result takes), else 0.

        The result has ``p``'s floating dtype (float32 for a Python float) unless
        ``dtype`` is given (``vtl.bool`` for a mask). ``p`` has a resolution of
        ``2**-24`` in float32 and ``2**-53`` in float64.
        """
        from ._tensor import Tensor

        if isinstance(p, Tensor):
            if size is not None and _shape(size, "bernoulli") != p.shape:
                raise ValueError(f"vtl.random.bernoulli(): size {size} differs from the "
                                 f"shape {p.shape} of p")
            dev = p._device
            xp, u, dev, _ = self._unit(p.shape, p.dtype, dev, "bernoulli", wide=True)
            mask = u < p._data
            out_dt = p.dtype if dtype is None else _to_dtype(dtype)
        else:
            p = _real(p, "bernoulli", "p")
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"vtl.random.bernoulli(): p must be in [0, 1], got {p}")
            dev = _resolve(device, backend)
            out_dt = None if dtype is None else _to_dtype(dtype)
            ut = out_dt if out_dt is not None and _is_real_float(out_dt) else None
            xp, u, dev, udt = self._unit(_shape(size, "bernoulli"), ut, dev, "bernoulli",
                                         wide=True)
            mask = u < p
            out_dt = udt if out_dt is None else out_dt
        if out_dt != xp.bool:
            mask = xp.astype(mask, out_dt)
        return self._wrap(mask, dev)

    def permutation(self, x: Any, *, device: Any = None, backend: str | None = None) -> Any:
        """A random permutation of ``range(x)`` (int ``x``; index dtype) or of a
        tensor's rows (differentiable gather along axis 0)."""
        from ._tensor import Tensor

        if isinstance(x, Tensor):
            if x.ndim == 0:
                raise ValueError("vtl.random.permutation(): x must have at least one "
                                 "dimension, got a 0-d tensor")
            import vtl

            perm = self.permutation(x.shape[0], device=x._device)
            return vtl.take(x, perm, axis=0)
        n = _int(x, "x")
        if n < 0:
            raise ValueError(f"vtl.random.permutation(): n must be >= 0, got {n}")
        dev = _resolve(device, backend)
        return self._wrap(self._perm_raw(n, dev)[1], dev)

    def _perm_raw(self, n: int, like: Any) -> tuple[Any, Any]:
        xp, _, w, _ = self._raw(2 * n, like)
        w2 = xp.reshape(w, (n, 2))
        lo, hi = w2[:, 1], w2[:, 0]
        idx = xp.argsort(lo, stable=True)
        idx = xp.take(idx, xp.argsort(xp.take(hi, idx), stable=True))
        return xp, idx

    def shuffle(self, x: Any) -> None:
        """Shuffle ``x`` (a Tensor or a mutable raw array) along axis 0, in place."""
        from ._tensor import Tensor

        if getattr(x, "ndim", 0) == 0:
            raise ValueError("vtl.random.shuffle(): x must have at least one dimension")
        if isinstance(x, Tensor):
            import vtl

            perm = self.permutation(x.shape[0], device=x._device)
            x[...] = vtl.take(x, perm, axis=0)
            return
        xp, idx = self._perm_raw(x.shape[0], x)
        x[...] = xp.take(x, idx, axis=0)


# -- helpers -----------------------------------------------------------------------------------
def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool):
        raise TypeError("vtl.random: seed must be an int, got bool")
    try:
        s = operator.index(seed)
    except TypeError:
        raise TypeError(f"vtl.random: seed must be an int, got {type(seed).__name__}") from None
    if not 0 <= s < 2**64:
        raise ValueError(f"vtl.random: seed must be in [0, 2**64), got {s}")
    return s


def _int(v: Any, name: str) -> int:
    if isinstance(v, bool):
        raise TypeError(f"vtl.random: {name} must be an int, got bool")
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"vtl.random: {name} must be an int, got {type(v).__name__}") from None


def _real(v: Any, fname: str, name: str) -> float:
    if isinstance(v, (bool, complex)) or not isinstance(v, (int, float)) and \
            not hasattr(v, "__float__"):
        raise TypeError(f"vtl.random.{fname}(): {name} must be a real number, "
                        f"got {type(v).__name__}")
    f = float(v)
    if math.isnan(f):
        raise ValueError(f"vtl.random.{fname}(): {name} is nan")
    return f


def _is_device(like: Any) -> bool:
    from .backends import Device

    return isinstance(like, Device)


def _namespace_of(like: Any) -> Any:
    from array_api_compat import array_namespace

    return array_namespace(like)


def _to_dtype(dtype: Any) -> Any:
    from .backends._dtypes import to_dtype

    return to_dtype(dtype)


def _is_real_float(dt: Any) -> bool:
    return getattr(dt, "kind", None) == "f" or getattr(dt, "name", None) == "bfloat16"


#: low-precision dtype -> bits of a uniform [0, 1) value it holds exactly
_LOW_BITS = {"float16": 11, "bfloat16": 8}


def _round_low(xp: Any, x: Any, dt: Any) -> Any:
    """``x`` (float32 draws for a float16/bfloat16 request) rounded to ``dt``."""
    return x if x.dtype == dt else xp.astype(x, dt)


def _float_dtype(xp: Any, dtype: Any, like: Any, fname: str) -> Any:
    """The floating dtype to draw: ``dtype``, else the device's default (float32)."""
    if _is_device(like):
        if dtype is None:
            return like.backend.default_dtypes(like.index)["real floating"]
        dt = _to_dtype(dtype)
        if not _is_real_float(dt):
            raise TypeError(f"vtl.random.{fname}(): dtype must be a real floating dtype "
                            f"(float16, bfloat16, float32, float64), got {dt}")
        like.backend.check_dtype(dt, like.index)
        return dt
    if dtype is None:
        return xp.float32
    if dtype not in (xp.float32, xp.float64):
        raise TypeError(f"vtl.random.{fname}(): dtype must be float32 or float64, got {dtype}")
    return dtype


def _int_dtype(dtype: Any, dev: Any) -> Any:
    if dtype is None:
        return dev.backend.default_dtypes(dev.index)["integral"]
    dt = _to_dtype(dtype)
    if getattr(dt, "kind", None) not in "iu":
        raise TypeError(f"vtl.random.randint(): dtype must be an integer dtype, got {dt}")
    dev.backend.check_dtype(dt, dev.index)
    return dt


# -- the default generator and module-level functions ------------------------------------------
_default = Generator(_DEFAULT_SEED)


def default_generator() -> Generator:
    """The generator behind the module-level functions, init and dropout.

    Returns:
        The default :class:`Generator`.
    """
    return _default


def seed(n: int) -> None:
    """Reseed the default generator (``torch.manual_seed``/``numpy.random.seed``).

    Args:
        n: The new seed: an int in ``[0, 2**64)``.

    Raises:
        TypeError: If ``n`` is not an int.
        ValueError: If ``n`` is out of range.

    Example:
        >>> vtl.random.seed(0)
        >>> a = vtl.random.uniform(size=(3,))
        >>> vtl.random.seed(0)
        >>> bool(vtl.all(a == vtl.random.uniform(size=(3,))))
        True
    """
    _default.manual_seed(n)


manual_seed = seed


def initial_seed() -> int:
    """The seed of the default generator.

    Returns:
        The seed, an int.
    """
    return _default.initial_seed()


def get_state() -> dict[str, Any]:
    """The default generator's state (see :meth:`Generator.get_state`).

    Returns:
        A dict that :func:`set_state` takes.
    """
    return _default.get_state()


def set_state(state: dict[str, Any]) -> None:
    """Restore the default generator's state.

    Args:
        state: A dict from :func:`get_state`.

    Raises:
        TypeError: If ``state`` is not a dict.
        ValueError: If ``state`` is malformed.
    """
    _default.set_state(state)


def bits(size: Any = None, *, device: Any = None, backend: str | None = None) -> Any:
    """:meth:`Generator.bits` on the default generator.

    Args:
        size: Shape of the result: an int, a tuple of ints, or ``None`` for a 0-d tensor.
        device: Device of the result (a Device or a string like ``'cupy:0'``; default: the default
            device).
        backend: Put the result on this backend's first device instead.

    Returns:
        A uint32 tensor of raw words.

    Raises:
        TypeError: If ``size`` is not an int or a tuple of ints.
    """
    return _default.bits(size, device=device, backend=backend)


def random(size: Any = None, *, dtype: Any = None, device: Any = None,
           backend: str | None = None) -> Any:
    """:meth:`Generator.random` on the default generator.

    Args:
        size: Shape of the result: an int, a tuple of ints, or ``None`` for a 0-d tensor.
        dtype: ``vtl.float32`` (the default) or ``vtl.float64``.
        device: Device of the result (a Device or a string like ``'cupy:0'``; default: the default
            device).
        backend: Put the result on this backend's first device instead.

    Returns:
        A tensor of floats in ``[0, 1)``.

    Raises:
        TypeError: If ``size`` is not an int or a tuple of ints, or ``dtype`` is not a supported
            floating dtype.
    """
    return _default.random(size, dtype=dtype, device=device, backend=backend)


def uniform(low: float = 0.0, high: float = 1.0, size: Any = None, *, dtype: Any = None,
            device: Any = None, backend: str | None = None) -> Any:
    """:meth:`Generator.uniform` on the default generator.

    Args:
        low: Lower bound.
        high: Upper bound.
        size: Shape of the result: an int, a tuple of ints, or ``None`` for a 0-d tensor.
        dtype: ``vtl.float32`` (the default) or ``vtl.float64``.
        device: Device of the result (a Device or a string like ``'cupy:0'``; default: the default
            device).
        backend: Put the result on this backend's first device instead.

    Returns:
        A tensor of floats in ``[low, high)``.

    Raises:
        TypeError: If ``size`` is not an int or a tuple of ints, or ``dtype`` is not a supported
            floating dtype.
    """
    return _default.uniform(low, high, size, dtype=dtype, device=device, backend=backend)


def standard_normal(size: Any = None, *, dtype: Any = None, device: Any = None,
                    backend: str | None = None) -> Any:
    """:meth:`Generator.standard_normal` on the default generator.

    Args:
        size: Shape of the result: an int, a tuple of ints, or ``None`` for a 0-d tensor.
        dtype: ``vtl.float32`` (the default) or ``vtl.float64``.
        device: Device of the result (a Device or a string like ``'cupy:0'``; default: the default
            device).
        backend: Put the result on this backend's first device instead.

    Returns:
        A tensor of standard normal floats.

    Raises:
        TypeError: If ``size`` is not an int or a tuple of ints, or ``dtype`` is not a supported
            floating dtype.
    """
    return _default.standard_normal(size, dtype=dtype, device=device, backend=backend)


def normal(loc: float = 0.0, scale: float = 1.0, size: Any = None, *, dtype: Any = None,
           device: Any = None, backend: str | None = None) -> Any:
    """:meth:`Generator.normal` on the default generator.

    Args:
        loc: The mean.
        scale: The standard deviation (at least 0).
        size: Shape of the result: an int, a tuple of ints, or ``None`` for a 0-d tensor.
        dtype: ``vtl.float32`` (the default) or ``vtl.float64``.
        device: Device of the result (a Device or a string like ``'cupy:0'``; default: the default
            device).
        backend: Put the result on this backend's first device instead.

    Returns:
        A tensor of normal floats.

    Raises:
        ValueError: If ``scale`` is negative.
        TypeError: If ``size`` is not an int or a tuple of ints, or ``dtype`` is not a supported
            floating dtype.
    """
    return _default.normal(loc, scale, size, dtype=dtype, device=device, backend=backend)


def randint(low: int, high: int | None = None, size: Any = None, *, dtype: Any = None,
            device: Any = None, backend: str | None = None) -> Any:
    """:meth:`Generator.randint` on the default generator.

    Args:
        low: The lowest value (the exclusive upper bound when ``high`` is ``None``).
        high: One above the highest value.
        size: Shape of the result: an int, a tuple of ints, or ``None`` for a 0-d tensor.
        dtype: An integer dtype (default: the device's default integer dtype).
        device: Device of the result (a Device or a string like ``'cupy:0'``; default: the default
            device).
        backend: Put the result on this backend's first device instead.

    Returns:
        A tensor of random integers.

    Raises:
        ValueError: If ``low >= high`` or the range does not fit the dtype.
        TypeError: If ``dtype`` is not an integer dtype or a bound is not an int.
    """
    return _default.randint(low, high, size, dtype=dtype, device=device, backend=backend)


def bernoulli(p: Any = 0.5, size: Any = None, *, dtype: Any = None, device: Any = None,
              backend: str | None = None) -> Any:
    """:meth:`Generator.bernoulli` on the default generator.

    Args:
        p: The probability of a 1: a float in ``[0, 1]`` or a tensor of probabilities.
        size: Shape of the result: an int, a tuple of ints, or ``None`` for a 0-d tensor.
        dtype: dtype of the result (default: ``p``'s floating dtype, float32 for a float;
            ``vtl.bool`` for a mask).
        device: Device of the result (a Device or a string like ``'cupy:0'``; default: the default
            device).
        backend: Put the result on this backend's first device instead.

    Returns:
        A tensor of 0s and 1s.

    Raises:
        ValueError: If ``p`` is out of ``[0, 1]`` or ``size`` differs from a tensor ``p``'s shape.
    """
    return _default.bernoulli(p, size, dtype=dtype, device=device, backend=backend)


def permutation(x: Any, *, device: Any = None, backend: str | None = None) -> Any:
    """:meth:`Generator.permutation` on the default generator.

    Args:
        x: An int ``n`` (permute ``range(n)``) or a tensor (permute its rows).
        device: Device of the result (a Device or a string like ``'cupy:0'``; default: the default
            device).
        backend: Put the result on this backend's first device instead.

    Returns:
        The permuted indices or rows.

    Raises:
        ValueError: If ``n`` is negative or the tensor is 0-d.
    """
    return _default.permutation(x, device=device, backend=backend)


def shuffle(x: Any) -> None:
    """:meth:`Generator.shuffle` on the default generator.

    Args:
        x: A tensor (or a mutable raw array) of at least one dimension.

    Raises:
        ValueError: If ``x`` is 0-d.
    """
    _default.shuffle(x)
