"""``einsum``: Einstein summation over tensors (PyTorch's ``torch.einsum``), written with
the namespace's own differentiable functions, so gradients (of any order) come from their
rules.

The equation is parsed once; then each operand is reduced on its own (a subscript repeated
within an operand takes the diagonal; a size-one axis whose subscript has a larger size
elsewhere is dropped, which is broadcasting; a subscript that no other operand and not the
output uses is summed), and the operands are contracted pairwise from left to right, each
pair as one batched ``matmul``: subscripts in both operands that are needed later are the
batch, those needed by neither the output nor a later operand are contracted (``K``), the
others are the rows (``M``) and columns (``N``). The order is left to right, as written
(PyTorch may reorder the contractions through opt_einsum; the values are the same up to
rounding).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._tensor import Tensor
from ._core import same_device, tensor_arg

__all__ = ["einsum"]

_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

# a subscript: a letter (str) or an axis of the ellipsis (int, counted from its start)
Label = str | int


def _parse_term(term: str, what: str) -> tuple[list[str], int]:
    """The letters of one term and the position of its ellipsis (-1: none)."""
    letters: list[str] = []
    at = -1
    i = 0
    while i < len(term):
        c = term[i]
        if c == ".":
            if term[i:i + 3] != "..." or at >= 0:
                raise ValueError(f"einsum(): {what} {term!r} has a '.' that is not part of "
                                 "one '...' (an ellipsis may appear once per term)")
            at = len(letters)
            i += 3
            continue
        if c not in _LETTERS:
            raise ValueError(f"einsum(): invalid subscript {c!r} in {what} {term!r}; "
                             "subscripts are the letters a-z and A-Z")
        letters.append(c)
        i += 1
    return letters, at


def _parse(equation: str, shapes: list[tuple[int, ...]]
           ) -> tuple[list[list[Label]], list[Label]]:
    eq = "".join(equation.split())
    if eq.count("->") > 1 or eq.replace("->", "").count("-") or eq.replace("->", "").count(">"):
        raise ValueError(f"einsum(): equation {equation!r} must have at most one '->' and no "
                         "other '-' or '>'")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum(): the equation {equation!r} has {len(terms)} operand "
                         f"term(s) but {len(shapes)} operand(s) were given")
    parsed = [_parse_term(t, f"operand {k} term") for k, t in enumerate(terms)]
    ells = []
    for k, ((letters, at), shape) in enumerate(zip(parsed, shapes, strict=True)):
        extra = len(shape) - len(letters)
        if (at < 0 and extra != 0) or extra < 0:
            raise ValueError(f"einsum(): operand {k} has {len(shape)} dimension(s) (shape "
                             f"{shape}) but its term {terms[k]!r} has {len(letters)} "
                             "subscript(s)" + ("" if at >= 0 else " and no '...'"))
        ells.append(extra if at >= 0 else 0)
    n_ell = max(ells, default=0)
    inputs: list[list[Label]] = []
    for (letters, at), e in zip(parsed, ells, strict=True):
        if at < 0:
            inputs.append(list(letters))
        else:
            inputs.append([*letters[:at], *range(n_ell - e, n_ell), *letters[at:]])
    if arrow:
        letters, at = _parse_term(rhs, "output term")
        seen: set[str] = set()
        everywhere = {c for labels in inputs for c in labels}
        for c in letters:
            if c in seen:
                raise ValueError(f"einsum(): output subscript {c!r} appears more than once in "
                                 f"{rhs!r}")
            if c not in everywhere:
                raise ValueError(f"einsum(): output subscript {c!r} does not appear in any "
                                 f"operand's term of {equation!r}")
            seen.add(c)
        out: list[Label] = list(letters) if at < 0 else [
            *letters[:at], *range(n_ell), *letters[at:]]
    else:
        counts: dict[str, int] = {}
        for labels in inputs:
            for c in labels:
                if isinstance(c, str):
                    counts[c] = counts.get(c, 0) + 1
        out = [*range(n_ell), *sorted(c for c, n in counts.items() if n == 1)]
    return inputs, out


def _name(label: Label) -> str:
    return repr(label) if isinstance(label, str) else f"'...' axis {label}"


def _sizes(inputs: list[list[Label]], shapes: list[tuple[int, ...]]) -> dict[Label, int]:
    """The size of each subscript; sizes of one subscript must agree, or be 1 (broadcast)."""
    sizes: dict[Label, int] = {}
    where: dict[Label, int] = {}
    for k, (labels, shape) in enumerate(zip(inputs, shapes, strict=True)):
        seen: dict[Label, int] = {}
        for lab, s in zip(labels, shape, strict=True):
            if lab in seen and seen[lab] != s:
                raise ValueError(f"einsum(): subscript {_name(lab)} is repeated in operand {k} "
                                 f"(shape {shape}) with different sizes {seen[lab]} and {s}")
            seen[lab] = s
            old = sizes.get(lab, 1)
            if s != 1 and old != 1 and s != old:
                raise ValueError(f"einsum(): subscript {_name(lab)} has size {old} in operand "
                                 f"{where[lab]} and size {s} in operand {k} (shape {shape}); "
                                 "sizes must be equal or 1")
            if s != 1 or lab not in sizes:
                sizes[lab] = s
                where[lab] = k
    return sizes


def _prod(values: Any) -> int:
    n = 1
    for v in values:
        n *= v
    return n


class _Op:
    """An operand on its way through the contraction: a tensor and one subscript per axis."""

    __slots__ = ("labels", "t")

    def __init__(self, t: Tensor, labels: list[Label]) -> None:
        self.t = t
        self.labels = labels

    def permuted(self, order: list[Label]) -> Tensor:
        from .manipulation import permute_dims

        perm = tuple(self.labels.index(lab) for lab in order)
        return self.t if perm == tuple(range(len(perm))) else permute_dims(self.t, perm)

    def sum_out(self, drop: list[Label]) -> None:
        if not drop:
            return
        from .statistical import sum as sum_

        axes = tuple(self.labels.index(lab) for lab in drop)
        self.t = sum_(self.t, axis=axes, dtype=self.t.dtype)
        self.labels = [lab for lab in self.labels if lab not in drop]

    def diagonals(self) -> None:
        """Take the diagonal of every subscript repeated within this operand."""
        from .manipulation import permute_dims, reshape

        while len(set(self.labels)) != len(self.labels):
            lab = next(lab for lab in self.labels if self.labels.count(lab) > 1)
            i = self.labels.index(lab)
            j = self.labels.index(lab, i + 1)
            rest = [k for k in range(len(self.labels)) if k not in (i, j)]
            perm = (*rest, i, j)
            t = self.t if perm == tuple(range(len(perm))) else permute_dims(self.t, perm)
            n = t.shape[-1]
            t = reshape(t, (*t.shape[:-2], n * n))
            self.t = t[..., :: n + 1]  # the elements (m, m): every (n + 1)-th of the pair
            self.labels = [self.labels[k] for k in rest] + [lab]

    def broadcast(self, sizes: dict[Label, int]) -> None:
        """Drop the size-one axes whose subscript is larger elsewhere (broadcasting)."""
        drop = [k for k, lab in enumerate(self.labels)
                if self.t.shape[k] == 1 and sizes[lab] != 1]
        if drop:
            from .manipulation import squeeze

            self.t = squeeze(self.t, axis=tuple(drop))
            self.labels = [lab for k, lab in enumerate(self.labels) if k not in drop]


def _contract(a: _Op, b: _Op, later: set[Label], sizes: dict[Label, int]) -> _Op:
    """``a`` and ``b`` as one operand: one (batched) matmul."""
    from .linear_algebra import matmul
    from .manipulation import reshape

    in_b = set(b.labels)
    in_a = set(a.labels)
    a.sum_out([lab for lab in a.labels if lab not in in_b and lab not in later])
    b.sum_out([lab for lab in b.labels if lab not in in_a and lab not in later])
    batch = [lab for lab in a.labels if lab in in_b and lab in later]
    inner = [lab for lab in a.labels if lab in in_b and lab not in later]
    left = [lab for lab in a.labels if lab not in in_b]
    right = [lab for lab in b.labels if lab not in in_a]
    bs = [sizes[lab] for lab in batch]
    m = _prod(sizes[lab] for lab in left)
    k = _prod(sizes[lab] for lab in inner)
    n = _prod(sizes[lab] for lab in right)
    lead = (_prod(bs),) if batch else ()
    x = reshape(a.permuted(batch + left + inner), (*lead, m, k))
    y = reshape(b.permuted(batch + inner + right), (*lead, k, n))
    z = matmul(x, y)
    shape = (*bs, *(sizes[lab] for lab in left), *(sizes[lab] for lab in right))
    return _Op(reshape(z, shape), batch + left + right)


def einsum(equation: str, *operands: Tensor | Sequence[Tensor]) -> Tensor:
    """Einstein summation, as ``torch.einsum``: ``einsum("ij,jk->ik", a, b)`` or
    ``einsum("ij,jk", [a, b])``.

    The equation names each operand's axes with letters (``a-z``, ``A-Z``); ``...`` stands
    for the axes not named (broadcast across operands, aligned from the right). Without
    ``->`` the output has the ``...`` axes, then the letters that appear exactly once, in
    alphabetical order (uppercase first); with ``->`` it has the axes listed there, and
    every other subscript is summed over (``...`` too, when the output leaves it out). A
    letter repeated in one term takes the diagonal (``"ii->i"``, and ``"ii"`` is the trace).
    Axes of size 1 broadcast against the same subscript's size in other operands.

    The operands are contracted pairwise from left to right, each pair as one ``matmul``;
    differentiable (any order) through the functions it calls. ``ValueError`` names what is
    wrong with an equation or with the operands' shapes; ``TypeError`` for operands that
    are not tensors. PyTorch's sublist form (``einsum(a, [0, 1], b, [1, 2])``) is not
    supported.

    Args:
        equation: The subscripts, e.g. ``'ij,jk->ik'``.
        *operands: The tensors, or one sequence of them.

    Returns:
        The result.

    Raises:
        TypeError: If the equation is not a string.
        ValueError: If there is no operand or the equation does not fit the operands.
    """
    if not isinstance(equation, str):
        raise TypeError(f"einsum() expected an equation string first, got "
                        f"{type(equation).__name__} (the sublist form einsum(a, [0, 1], ...) "
                        "is not supported)")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise ValueError("einsum() needs at least one operand")
    ts = [tensor_arg(t, "einsum", f"operand {k}") for k, t in enumerate(operands)]
    same_device("einsum", ts)
    shapes = [t.shape for t in ts]
    inputs, out = _parse(equation, shapes)
    sizes = _sizes(inputs, shapes)
    ops = [_Op(t, list(labels)) for t, labels in zip(ts, inputs, strict=True)]
    for op in ops:
        op.diagonals()
        op.broadcast(sizes)
    want = set(out)
    cur = ops[0]
    for i in range(1, len(ops)):
        later = want.union(*(op.labels for op in ops[i + 1:]))
        cur = _contract(cur, ops[i], later, sizes)
    cur.sum_out([lab for lab in cur.labels if lab not in want])
    return cur.permuted(out)
