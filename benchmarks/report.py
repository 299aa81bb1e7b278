"""Turn pytest-benchmark JSON into a Markdown table of vtl / reference ratios.

Cases are parametrized with ``impl`` (``vtl`` and one or more references such
as ``raw``, ``numpy``, ``torch``); benchmarks that share a group are compared
with each other. Usage: ``python benchmarks/report.py bench.json [--png chart.png]``
(the chart needs matplotlib: ``pip install -e '.[plot]'``).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def load(path: str) -> dict[str, dict[str, float]]:
    """group -> impl -> median seconds."""
    with open(path) as f:
        data = json.load(f)
    groups: dict[str, dict[str, float]] = defaultdict(dict)
    for b in data["benchmarks"]:
        impl = b.get("params", {}).get("impl", b["name"])
        groups[b.get("group") or b["name"]][impl] = b["stats"]["median"]
    return groups


def table(groups: dict[str, dict[str, float]]) -> str:
    lines = ["| case | vtl | reference | ratio (vtl / reference) |", "|---|---|---|---|"]
    for group, ref, ratio in ratios(groups):
        impls = groups[group]
        lines.append(f"| {group} | {_fmt(impls['vtl'])} | {ref} {_fmt(impls[ref])} | {ratio:.2f} |")
    return "\n".join(lines)


def ratios(groups: dict[str, dict[str, float]]) -> list[tuple[str, str, float]]:
    """(case, reference, vtl time / reference time) for every comparison."""
    out = []
    for group in sorted(groups):
        impls = groups[group]
        if "vtl" in impls:
            out.extend((group, ref, impls["vtl"] / t) for ref, t in sorted(impls.items())
                       if ref != "vtl")
    return out


def chart(groups: dict[str, dict[str, float]], path: str) -> None:
    """Write a horizontal bar chart of the ratios (log scale; 1 = as fast) to ``path``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        raise ImportError("the chart needs matplotlib: pip install -e '.[plot]'") from None
    rows = ratios(groups)
    if not rows:
        raise ValueError("no case has both a vtl and a reference timing")
    labels = [f"{case} vs {ref}" for case, ref, _ in rows]
    values = [r for _, _, r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(rows) + 1.2))
    colors = ["tab:green" if v <= 1.0 else "tab:orange" if v <= 2.0 else "tab:red" for v in values]
    ax.barh(range(len(rows)), values, color=colors)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    fmt = matplotlib.ticker.FormatStrFormatter("%gx")
    ax.xaxis.set_major_formatter(fmt)
    ax.xaxis.set_minor_formatter(fmt)
    ax.tick_params(axis="x", which="both", labelsize=8)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("vtl time / reference time (lower is better)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(__doc__)
        return 2
    groups = load(args[0])
    print(table(groups))
    if "--png" in args:
        i = args.index("--png")
        if i + 1 >= len(args):
            print("--png needs a file name")
            return 2
        chart(groups, args[i + 1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
