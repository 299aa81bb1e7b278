"""Views, and in-place writes through them, with PyTorch's semantics.

A result that shares its input's storage (basic indexing, ``reshape`` when no copy is
needed, ``permute_dims``, ``moveaxis``, ``matrix_transpose``, ``expand_dims``,
``squeeze``, ``unstack``, ``flip``, ``real``/``imag`` of a complex tensor) is a *view*:

* it shares its base's version counter, so a tensor saved for backward and changed
  through any view of its storage makes backward raise instead of returning a wrong
  gradient;
* written in place while autograd records, it hands the write to its base: the base's
  history becomes "the old base with the view's elements replaced by the new values"
  (an ``index_put`` for an indexing view, the inverse reshape or permutation for a view
  of every element), and so on up to the tensor that owns the storage;
* after a recorded write to a storage, every other view of it made in grad mode takes
  its history from its base again, so it sees the write.

A view of a leaf that requires grad cannot be written in place while grad mode is on,
nor can a view made under ``no_grad`` of a tensor that requires grad (PyTorch's rules).
"""

from __future__ import annotations

import weakref
from typing import Any

from .._tensor import Tensor
from ..autograd import grad_mode

_grad = grad_mode.state
_ref = weakref.ref

# A view's link, ``t._view``: ``(base, kind, arg, made_in_grad_mode)``. ``kind`` names how
# the view derives from its base; ``arg`` is what that derivation needs.
def _derive(kind: str, arg: Any, base: Tensor) -> Tensor:
    """The view again, made from ``base`` (recorded when ``base`` requires grad)."""
    import vtl

    if kind == "index":
        return base[arg]
    if kind == "reshape":
        return vtl.reshape(base, arg[0])
    if kind == "permute":
        return vtl.permute_dims(base, arg)
    if kind == "expand_dims":
        return vtl.expand_dims(base, axis=arg[0])
    if kind == "squeeze":
        return vtl.squeeze(base, axis=arg[0])
    if kind == "flip":
        return vtl.flip(base, axis=arg)
    if kind == "matrix_transpose":
        return vtl.matrix_transpose(base)
    return getattr(vtl, kind)(base)  # real, imag


def _put(kind: str, arg: Any, base: Tensor, value: Tensor) -> Tensor:
    """``base`` with the view's elements replaced by ``value``, out of place (recorded)."""
    import vtl

    if kind == "index":
        from .indexing import _index_put, _parse

        items, _ = _parse(arg, base)
        return _index_put(base, items, False, value)
    if kind in ("reshape", "expand_dims", "squeeze"):  # views of every element
        return vtl.reshape(value, arg[1])
    if kind == "permute":
        return vtl.permute_dims(value, tuple(sorted(range(len(arg)), key=arg.__getitem__)))
    if kind == "flip":
        return vtl.flip(value, axis=arg)
    if kind == "matrix_transpose":
        return vtl.matrix_transpose(value)
    raise RuntimeError(
        f"in-place operation through a view made by {kind}() cannot be recorded for "
        "autograd; write the result out of place"
    )


def make_view(t: Tensor, base: Tensor, kind: str, arg: Any = None) -> Tensor:
    """Mark ``t`` (whose data shares ``base``'s storage) as a view of ``base``."""
    vc = base._vc or base._version_counter()
    t._vc = vc
    if _grad.enabled:
        t._view = (base, kind, arg, True)
        try:
            views = vc[2]
        except IndexError:
            views = []
            vc.append(views)
        views.append(_ref(t))
        n = len(views)
        if n >= 32 and not n & (n - 1):  # at powers of two: drop the collected views
            views[:] = [r for r in views if r() is not None]
    else:
        t._view = (base, kind, arg, False)
    return t


def maybe_view(t: Tensor, base: Tensor, kind: str, arg: Any = None) -> Tensor:
    """:func:`make_view` when ``t``'s data shares ``base``'s storage (an op that returns a
    view only when it can, such as ``reshape``)."""
    if base._device._backend.same_storage(t._data, base._data):
        return make_view(t, base, kind, arg)
    return t


def _link(t: Tensor) -> tuple | None:
    return getattr(t, "_view", None)


def check_view_write(t: Tensor, fname: str) -> None:
    """Refuse an in-place write (grad mode on) through a view that PyTorch refuses: of a
    leaf that requires grad, or made under ``no_grad`` from a tensor that requires grad."""
    link = _link(t)
    while link is not None:
        base, kind, _, made_in_grad_mode = link
        if not made_in_grad_mode and (base._requires_grad or _root(base)._requires_grad):
            raise RuntimeError(
                f"in-place {fname} on a view ({kind}) that was made under no_grad of a "
                "tensor that requires grad; make the view with grad mode on, or write "
                "the update out of place"
            )
        nxt = _link(base)
        if nxt is None and base._requires_grad and base._grad_fn is None:
            raise RuntimeError(
                f"in-place {fname} on a view ({kind}) of a leaf tensor that requires "
                "grad; wrap the update in `with vtl.no_grad():` or use an out-of-place "
                "operation"
            )
        link = nxt


def _root(t: Tensor) -> Tensor:
    link = _link(t)
    while link is not None:
        t = link[0]
        link = _link(t)
    return t


def rebase_bases(t: Tensor, value: Tensor, fname: str) -> None:
    """After a recorded write of ``value`` into the view ``t``: give each base up the chain
    the history of the write (the base with the view's elements replaced)."""
    link = _link(t)
    while link is not None:
        base, kind, arg, _ = link
        value = _put(kind, arg, base, value)
        if value._grad_fn is not None:
            base._grad_fn = value._grad_fn
            base._out_idx = value._out_idx
            base._requires_grad = True
        link = _link(base)


def refresh_views(vc: list, written: Tensor) -> None:
    """After a recorded write into a storage: the views of it made in grad mode (other than
    ``written``) take their history from their bases again, oldest first (a base is
    always older than its views)."""
    if len(vc) < 3:
        return
    for ref in list(vc[2]):
        w = ref()
        if w is None or w is written:
            continue
        base, kind, arg, _ = w._view
        fresh = _derive(kind, arg, base)  # itself a view: registered, then collected
        if fresh._grad_fn is not None:
            w._grad_fn = fresh._grad_fn
            w._out_idx = fresh._out_idx
            w._requires_grad = True
        else:
            w._grad_fn = None
            w._requires_grad = False


def is_view(t: Any) -> bool:
    """Whether ``t`` is a view of another tensor's storage (PyTorch's ``t._is_view()``)."""
    return _link(t) is not None


def view_base(t: Tensor) -> Tensor | None:
    """The tensor owning the storage ``t`` views (PyTorch's ``t._base``), or ``None``."""
    return _root(t) if _link(t) is not None else None

