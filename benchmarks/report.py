"""Turn pytest-benchmark JSON into a Markdown table of vtl / reference ratios.

Cases are parametrized with ``impl`` (``vtl`` and one or more references such
as ``raw``, ``numpy``, ``torch``); benchmarks that share a group are compared
with each other. Usage: ``python benchmarks/report.py bench.json``.
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
    for group in sorted(groups):
        impls = groups[group]
        if "vtl" not in impls:
            continue
        for ref, t in sorted(impls.items()):
            if ref == "vtl":
                continue
            v = impls["vtl"]
            lines.append(f"| {group} | {_fmt(v)} | {ref} {_fmt(t)} | {v / t:.2f} |")
    return "\n".join(lines)


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
    print(table(load(args[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
