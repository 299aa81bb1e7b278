"""L-BFGS (PyTorch's ``torch.optim.LBFGS``), with the strong Wolfe line search."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from .. import capture as _capture
from .._tensor import Tensor, _new
from ..autograd.grad_mode import enable_grad
from ..backends._dtypes import kind as _dkind
from .optimizer import Optimizer, _check_number, _is_index, _scalar_state

__all__ = ["LBFGS"]

_STATE_KEYS = frozenset({"func_evals", "n_iter", "d", "t", "old_dirs", "old_stps", "ro",
                         "H_diag", "prev_flat_grad", "prev_loss", "al"})


def _cubic_interpolate(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
                       bounds: tuple[float, float] | None = None) -> float:
    """The minimiser of the cubic through ``(x1, f1, g1)`` and ``(x2, f2, g2)`` (values
    and slopes), clipped to ``bounds`` (default: between x1 and x2); the middle of the
    bounds when the cubic has no minimum or is degenerate (``x1 == x2``, a zero
    denominator: where PyTorch's arithmetic on tensors gives nan)."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    try:
        d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
        d2_square = d1**2 - g1 * g2
        if d2_square >= 0:
            d2 = math.sqrt(d2_square)
            if x1 <= x2:
                min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
            else:
                min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
            return min(max(min_pos, xmin_bound), xmax_bound)
    except ZeroDivisionError:  # a degenerate cubic (PyTorch's tensors give nan here)
        pass
    return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(obj_func: Callable[[Any, float, Any], tuple[float, Any]], dot: Any,
                  max_abs: Callable[[Any], float], x: Any, t: float, d: Any, f: float, g: Any,
                  gtd: float, c1: float = 1e-4, c2: float = 0.9,
                  tolerance_change: float = 1e-9,
                  max_ls: int = 25) -> tuple[float, Any, float, int]:
    """A step ``t`` along ``d`` satisfying the strong Wolfe conditions (bracketing, then
    zoom by cubic interpolation; minFunc's ``WolfeLineSearch`` as PyTorch ports it).
    Returns ``(f_new, g_new, t, function evaluations)``."""
    d_norm = max_abs(d)
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = dot(g_new, d)

    # bracket an interval containing a point satisfying the Wolfe criteria
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    bracket: list[float] = []
    bracket_f: list[float] = []
    bracket_g: list[Any] = []
    bracket_gtd: list[float] = []
    while ls_iter < max_ls:
        # check conditions
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new], [gtd_prev, gtd_new]
            break
        # interpolate
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                               bounds=(min_step, max_step))
        # next step
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new, gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = dot(g_new, d)
        ls_iter += 1
    # reached max number of iterations?
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]

    # zoom phase: a point satisfying the criteria inside the bracket
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        # line-search bracket is so small
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        # compute new trial value
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                               bracket[1], bracket_f[1], bracket_gtd[1])
        # test that we are making sufficient progress
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            # interpolation close to boundary
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                # evaluate at 0.1 away from boundary
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        # Evaluate new point
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = dot(g_new, d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            # Armijo condition not satisfied or not lower than lowest point
            bracket[high_pos] = t
            bracket_f[high_pos] = f_new
            bracket_g[high_pos] = g_new
            bracket_gtd[high_pos] = gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True  # Wolfe conditions satisfied
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                # old high becomes new low
                bracket[high_pos] = bracket[low_pos]
                bracket_f[high_pos] = bracket_f[low_pos]
                bracket_g[high_pos] = bracket_g[low_pos]
                bracket_gtd[high_pos] = bracket_gtd[low_pos]
            # new point becomes new low
            bracket[low_pos] = t
            bracket_f[low_pos] = f_new
            bracket_g[low_pos] = g_new
            bracket_gtd[low_pos] = gtd_new

    t = bracket[low_pos]
    return bracket_f[low_pos], bracket_g[low_pos], t, ls_func_evals


class LBFGS(Optimizer):
    r"""L-BFGS (limited-memory BFGS), as PyTorch implements it after minFunc.

    ``step(closure)`` runs up to ``max_iter`` iterations (and ``max_eval``
    evaluations of ``closure``, default ``max_iter * 5 // 4``) on all the
    parameters as one flat vector: a direction from the two-loop recursion over
    the last ``history_size`` curvature pairs, then a step of ``lr`` along it
    (scaled by ``min(1, 1 / |g|₁)`` on the very first iteration) or, with
    ``line_search_fn="strong_wolfe"``, a step satisfying the strong Wolfe
    conditions (bracketing, then zoom by cubic interpolation). Iterations stop
    early when ``max |g| <= tolerance_grad``, when the step or the loss change
    falls below ``tolerance_change``, or when the directional derivative is
    ``> -tolerance_change``. ``closure`` re-evaluates the model, calls
    ``backward()`` and returns the loss; it runs with gradients enabled.

    Unlike the Adam-family steps, a step of L-BFGS reads scalars back from the
    device (the loss, ``max |g|``, dot products for the curvature test and the
    line search), as PyTorch's does with ``.item()``: each iteration waits for the
    device, and a step cannot be captured by ``vtl.compile``.

    One parameter group only; all parameters on one device, of one real
    floating dtype. State (on the first parameter, as in PyTorch):
    ``func_evals``, ``n_iter`` (ints), ``d`` and ``prev_flat_grad`` (flat
    vectors), ``t`` and ``prev_loss`` (floats), ``H_diag`` and the history
    ``old_dirs``, ``old_stps``, ``ro``. In :meth:`state_dict` the history is
    stacked into tensors of shapes ``(k, n)``, ``(k, n)`` and ``(k,)`` (so that a
    checkpoint stores it as arrays); :meth:`load_state_dict` also takes
    PyTorch's lists of vectors. This optimizer keeps ``history_size + 2`` flat
    copies of the parameters.
    """

    def __init__(self, params: Iterable[Any], lr: float = 1, max_iter: int = 20,
                 max_eval: int | None = None, tolerance_grad: float = 1e-7,
                 tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        if max_eval is None and isinstance(max_iter, int) and not isinstance(max_iter, bool):
            max_eval = max_iter * 5 // 4
        defaults = {"lr": lr, "max_iter": max_iter, "max_eval": max_eval,
                    "tolerance_grad": tolerance_grad, "tolerance_change": tolerance_change,
                    "history_size": history_size, "line_search_fn": line_search_fn}
        super().__init__(params, defaults)
        self._params: list[Tensor] = self.param_groups[0]["params"]
        first = self._params[0]
        for p in self._params:
            if p._device is not first._device:
                raise ValueError(f"LBFGS: all parameters must be on one device, got "
                                 f"{first.device} and {p.device}")
            if _dkind(p._data.dtype) != "f":
                raise TypeError(f"LBFGS: parameters must be of a real floating dtype, got "
                                f"{p.dtype}")
            if p._data.dtype != first._data.dtype:
                raise ValueError(f"LBFGS: all parameters must have one dtype, got "
                                 f"{first.dtype} and {p.dtype}")
        self._numel = sum(math.prod(p.shape) for p in self._params)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """LBFGS takes exactly one parameter group (``ValueError`` for a second one)."""
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    def _check_group(self, group: dict[str, Any]) -> None:
        _check_number("lr", group["lr"], cls="LBFGS")
        for key in ("max_iter", "max_eval", "history_size"):
            v = group[key]
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"LBFGS: {key} must be a positive int, got {v!r}")
        _check_number("tolerance_grad", group["tolerance_grad"], cls="LBFGS")
        _check_number("tolerance_change", group["tolerance_change"], cls="LBFGS")
        if group["line_search_fn"] not in (None, "strong_wolfe"):
            raise ValueError("LBFGS: line_search_fn must be None or 'strong_wolfe', got "
                             f"{group['line_search_fn']!r}")

    # -------------------------------------------------------- flat-vector helpers
    def _xp(self) -> Any:
        return self._params[0]._device.xp

    def _gather_flat_grad(self) -> Any:
        xp = self._xp()
        views = []
        for p in self._params:
            g = getattr(p, "_grad", None)
            flat = xp.reshape(p._data if g is None else g._data, (-1,))
            views.append(xp.zeros_like(flat) if g is None else flat)
        if len(views) == 1:
            return xp.asarray(views[0], copy=True)
        return xp.concat(views)

    def _add_grad(self, step_size: Any, update: Any) -> None:
        xp = self._xp()
        offset = 0
        for p in self._params:
            n = math.prod(p.shape)
            p._data[...] = p._data + step_size * xp.reshape(update[offset:offset + n],
                                                            tuple(p.shape))
            p._bump_version()
            offset += n

    def _clone_param(self) -> list[Any]:
        xp = self._xp()
        return [xp.asarray(p._data, copy=True) for p in self._params]

    def _set_param(self, params_data: list[Any]) -> None:
        for p, data in zip(self._params, params_data, strict=True):
            p._data[...] = data
            p._bump_version()

    def _directional_evaluate(self, closure: Callable[[], Any], x: list[Any], t: float,
                              d: Any) -> tuple[float, Any]:
        self._add_grad(t, d)
        with enable_grad():
            loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    # ------------------------------------------------------------------- step
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # type: ignore[override]
        """Run up to ``max_iter`` L-BFGS iterations; returns the loss of the first
        evaluation of ``closure`` (which is required)."""
        if closure is None or not callable(closure):
            raise TypeError("LBFGS.step requires a closure that re-evaluates the model and "
                            f"returns the loss, got {closure!r}")
        p0 = self._params[0]
        if _capture.current(p0._device) is not None:
            raise _capture.CaptureError(
                "vtl.compile: an LBFGS step reads the loss and gradient norms back from the "
                "device at every iteration and cannot be captured")
        xp = self._xp()

        def dot(a: Any, b: Any) -> Any:
            return xp.vecdot(a, b)

        def max_abs(a: Any) -> float:
            return float(xp.max(xp.abs(a)))

        group = self.param_groups[0]
        lr = group["lr"]
        max_iter = group["max_iter"]
        max_eval = group["max_eval"]
        tolerance_grad = group["tolerance_grad"]
        tolerance_change = group["tolerance_change"]
        line_search_fn = group["line_search_fn"]
        history_size = group["history_size"]

        state = self.state.setdefault(p0, {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        # evaluate initial f(x) and df/dx
        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1

        flat_grad = self._gather_flat_grad()
        opt_cond = max_abs(flat_grad) <= tolerance_grad
        # optimal condition
        if opt_cond:
            return orig_loss

        # tensors cached in state (for tracing)
        d = state.get("d")
        t = state.get("t")
        old_dirs = state.get("old_dirs")
        old_stps = state.get("old_stps")
        ro = state.get("ro")
        h_diag = state.get("H_diag")
        prev_flat_grad = state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            # compute gradient descent direction
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                h_diag = 1
            else:
                # do lbfgs update (update memory)
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = dot(y, s)  # y*s
                if float(ys) > 1e-10:
                    # updating memory
                    if len(old_dirs) == history_size:
                        # shift history by one (limited-memory)
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    # store new direction/step
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    # update scale of initial Hessian approximation
                    h_diag = ys / dot(y, y)  # (y*y)

                # compute the approximate (L-BFGS) inverse Hessian multiplied by the gradient
                num_old = len(old_dirs)
                al: list[Any] = [None] * num_old
                # iteration in L-BFGS loop collapsed to use just one buffer
                q = -flat_grad
                for i in range(num_old - 1, -1, -1):
                    al[i] = dot(old_stps[i], q) * ro[i]
                    q = q + (-al[i]) * old_dirs[i]
                # multiply by initial Hessian; r/d is the final direction
                d = r = q * h_diag
                for i in range(num_old):
                    be_i = dot(old_dirs[i], r) * ro[i]
                    r = r + (al[i] - be_i) * old_stps[i]
                d = r

            prev_flat_grad = flat_grad
            prev_loss = loss

            # compute step length
            # reset initial guess for step size
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(xp.sum(xp.abs(flat_grad)))) * lr
            else:
                t = lr

            # directional derivative
            gtd = float(dot(flat_grad, d))  # g * d

            # directional derivative is below tolerance
            if gtd > -tolerance_change:
                break

            # optional line search: user function
            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = self._clone_param()

                def obj_func(x: list[Any], t: float, d: Any) -> tuple[float, Any]:
                    return self._directional_evaluate(closure, x, t, d)

                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    obj_func, lambda a, b: float(dot(a, b)), max_abs, x_init, t, d, loss,
                    flat_grad, gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = max_abs(flat_grad) <= tolerance_grad
            else:
                # no line search, simply move with fixed-step
                self._add_grad(t, d)
                if n_iter != max_iter:
                    # re-evaluate function only if not in last iteration
                    # the reason we do this: in a stochastic setting,
                    # no use to re-evaluate that function here
                    with enable_grad():
                        loss = float(closure())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = max_abs(flat_grad) <= tolerance_grad
                    ls_func_evals = 1

            # update func eval
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            # check conditions
            if n_iter == max_iter:
                break
            if current_evals >= max_eval:
                break
            # optimal condition
            if opt_cond:
                break
            # lack of progress
            if max_abs(d) * abs(t) <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        state["d"] = d
        state["t"] = t
        state["old_dirs"] = old_dirs
        state["old_stps"] = old_stps
        state["ro"] = ro
        state["H_diag"] = h_diag
        state["prev_flat_grad"] = prev_flat_grad
        state["prev_loss"] = prev_loss
        return orig_loss

    # ------------------------------------------------------------ state dict
    def state_dict(self) -> dict[str, Any]:
        """As :meth:`Optimizer.state_dict`, with the history stacked into tensors (copies)."""
        out = super().state_dict()
        dev = self._params[0]._device
        xp = dev.xp
        packed = {}
        for idx, st in out["state"].items():
            entry: dict[str, Any] = {}
            for key, value in st.items():
                if key in ("old_dirs", "old_stps", "ro"):
                    if value:
                        stacked = xp.stack(value)
                    else:
                        raw = self._params[0]._data
                        shape = (0,) if key == "ro" else (0, self._numel)
                        stacked = xp.zeros(shape, dtype=raw.dtype, device=raw.device)
                    entry[key] = _new(xp.asarray(stacked, copy=True), dev)
                elif key == "H_diag" and not isinstance(value, (int, float)):
                    entry[key] = _new(xp.asarray(value, copy=True), dev)
                elif key in ("d", "prev_flat_grad") and value is not None:
                    entry[key] = _new(xp.asarray(value, copy=True), dev)
                else:
                    entry[key] = value
            packed[idx] = entry
        out["state"] = packed
        return out

    def _check_state_dict(self, state_dict: Any) -> tuple[list[dict[str, Any]],
                                                          dict[Tensor, dict[str, Any]]]:
        groups, state = super()._check_state_dict(state_dict)
        where = "LBFGS.load_state_dict"
        for p, st in state.items():
            if p is not self._params[0]:
                raise ValueError(f"{where}: LBFGS keeps its state on the first parameter "
                                 "only, got state for another one")
            st.pop("al", None)
            lengths = {k: len(st[k]) for k in ("old_dirs", "old_stps", "ro") if k in st}
            if len(set(lengths.values())) > 1:
                raise ValueError(f"{where}: the history lengths differ: {lengths}")
            if lengths and next(iter(lengths.values())) > groups[0]["history_size"]:
                raise ValueError(f"{where}: the history holds {lengths} pairs, more than "
                                 f"history_size={groups[0]['history_size']}")
        return groups, state

    def _load_value(self, p: Tensor, idx: Any, key: str, value: Any) -> Any:
        where = f"LBFGS.load_state_dict: state {key!r} of parameter {idx}"
        if key not in _STATE_KEYS:
            raise ValueError(f"LBFGS.load_state_dict: unknown state {key!r} for parameter "
                             f"{idx}; an LBFGS keeps {sorted(_STATE_KEYS - {'al'})}")
        if key in ("func_evals", "n_iter"):
            if not _is_index(value):
                raise ValueError(f"{where} must be a non-negative int, got {value!r}")
            return value
        if key in ("t", "prev_loss"):
            return None if value is None else _scalar_state(value, where)
        if key == "al":
            return None
        if key == "H_diag":
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return value
            return self._raw(value, (), where)
        if key in ("d", "prev_flat_grad"):
            return None if value is None else self._raw(value, (self._numel,), where)
        if value is None:
            return None
        # the history: a stacked tensor or a list (PyTorch's form)
        shape = () if key == "ro" else (self._numel,)
        if isinstance(value, (list, tuple)):
            return [self._raw(v, shape, where) for v in value]
        stacked = self._raw(value, None, where)
        if tuple(stacked.shape[1:]) != shape:
            raise ValueError(f"{where} must have shape (k, *{shape}), got "
                             f"{tuple(stacked.shape)}")
        return [stacked[i, ...] for i in range(stacked.shape[0])]

    def _raw(self, value: Any, shape: tuple[int, ...] | None, where: str) -> Any:
        """``value`` as a raw array of the parameters' dtype on their device."""
        import vtl

        p = self._params[0]
        if isinstance(value, (str, bytes, dict, bool)):
            raise ValueError(f"{where} must be an array, got {value!r}")
        try:
            t = value if isinstance(value, Tensor) else vtl.asarray(value)
            if shape is not None and tuple(t.shape) != shape:
                raise ValueError(f"{where} has shape {tuple(t.shape)}, expected {shape}")
            if t.device != p.device:
                t = t.to(p.device)
            return vtl.astype(t, p.dtype, copy=True)._data
        except (TypeError, ValueError) as exc:
            if str(exc).startswith(where):
                raise
            raise ValueError(f"{where}: {exc}") from exc
