"""Turn pytest-benchmark JSON into Markdown tables of vtl / reference ratios.

Cases are parametrized with ``impl`` (``vtl`` and references such as ``raw``,
``numpy``, ``cupy``, ``torch-cpu``, ``torch-cuda``, ``portable``); benchmarks
that share a group (``<case>-<backend>``) are compared with each other. Cases
of the wgpu array library parametrized with ``lib`` (``wgpu`` vs ``cupy``)
compare ``wgpu`` with the others.

Usage::

    python benchmarks/report.py bench.json [more.json ...] [--png chart.png] [--flat]

prints the machine (GPU, library versions), then one table per benchmark
function: a row per case and backend, the vtl time, and each reference's time
with the ratio vtl / reference (below 1: vtl is faster). ``--flat`` prints one
row per comparison instead. ``--png`` also draws the ratios (needs matplotlib:
``pip install -e '.[plot]'``).
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass, field

BACKENDS = ("numpy", "cupy", "wgpu")
SUBJECTS = ("vtl", "wgpu")  # what is being measured, in order of preference
REF_ORDER = ("raw", "numpy", "portable", "cupy", "torch", "torch-cpu", "torch-cuda")


@dataclass
class Record:
    """One timed benchmark: where it comes from, its group and implementation, its median."""

    section: str
    group: str
    impl: str
    median: float
    extra: dict = field(default_factory=dict)


def records(path: str) -> tuple[list[Record], dict]:
    """The benchmarks of one JSON file and its machine information."""
    with open(path) as f:
        data = json.load(f)
    out = []
    for b in data["benchmarks"]:
        params = b.get("params") or {}
        func = b["name"].split("[")[0]
        fullname = b.get("fullname", b["name"])
        section = fullname.split("[")[0].rsplit("/", 1)[-1]
        if "impl" in params:
            impl, group = params["impl"], b.get("group") or b["name"]
        elif "lib" in params:
            rest = ", ".join(f"{k}={v}" for k, v in sorted(params.items()) if k != "lib")
            impl = params["lib"]
            group = b.get("group") or (f"{func}[{rest}]" if rest else func)
        else:
            impl, group = b["name"], b.get("group") or b["name"]
        out.append(Record(section, group, str(impl), b["stats"]["median"],
                          b.get("extra_info") or {}))
    info = dict(data.get("machine_info") or {})
    if data.get("datetime"):
        info["datetime"] = data["datetime"]
    return out, info


def load(path: str) -> dict[str, dict[str, float]]:
    """group -> impl -> median seconds."""
    groups: dict[str, dict[str, float]] = defaultdict(dict)
    for r in records(path)[0]:
        groups[r.group][r.impl] = r.median
    return groups


def subject(impls: dict) -> str | None:
    """The implementation a group measures (``vtl``, else the ``wgpu`` library), if timed."""
    return next((s for s in SUBJECTS if s in impls), None)


def ratios(groups: dict[str, dict[str, float]]) -> list[tuple[str, str, float]]:
    """(case, reference, vtl time / reference time) for every comparison."""
    out = []
    for group in sorted(groups, key=_natural):
        impls = groups[group]
        s = subject(impls)
        if s is not None:
            out.extend((group, ref, impls[s] / impls[ref]) for ref in _refs(impls))
    return out


def table(groups: dict[str, dict[str, float]]) -> str:
    """One row per comparison: case, vtl time, reference time, ratio."""
    lines = ["| case | vtl | reference | ratio (vtl / reference) |", "|---|---|---|---|"]
    for group, ref, ratio in ratios(groups):
        impls = groups[group]
        t = impls[subject(impls)]
        lines.append(f"| {group} | {_fmt(t)} | {ref} {_fmt(impls[ref])} | {ratio:.2f} |")
    return "\n".join(lines)


def split_group(group: str) -> tuple[str, str]:
    """``matmul-float32-1024-cupy`` -> (``matmul-float32-1024``, ``cupy``)."""
    for b in BACKENDS:
        if group.endswith("-" + b):
            return group[: -len(b) - 1], b
    return group, ""


def grouped(recs: list[Record]) -> str:
    """One table per benchmark function: a row per case and backend, a column per reference."""
    sections: dict[str, dict[str, dict[str, Record]]] = defaultdict(lambda: defaultdict(dict))
    for r in recs:
        sections[r.section][r.group][r.impl] = r
    out = []
    for section in sorted(sections):
        groups = sections[section]
        refs = sorted({i for impls in groups.values() for i in impls if i != subject(impls)},
                      key=_ref_key)
        rates = any(_rate(impls[s]) for impls in groups.values()
                    if (s := subject(impls)) is not None)
        head = ["case", "backend", "vtl"] + refs + (["vtl rate"] if rates else [])
        out += [f"### {section}", "", "| " + " | ".join(head) + " |",
                "|" + "---|" * len(head)]

        def order(g: str) -> tuple:
            case, backend = split_group(g)
            return _natural(case), BACKENDS.index(backend) if backend in BACKENDS else 9

        for group in sorted(groups, key=order):
            impls = groups[group]
            case, backend = split_group(group)
            s = subject(impls)
            if not backend and s == "wgpu":
                backend = "wgpu (library)"
            t = impls[s].median if s else None
            row = [case, backend or "-", _fmt(t) if t else "-"]
            for ref in refs:
                if ref not in impls or ref == s:
                    row.append("")
                elif t:
                    row.append(f"{_fmt(impls[ref].median)} (**{t / impls[ref].median:.2f}x**)")
                else:
                    row.append(_fmt(impls[ref].median))
            if rates:
                row.append(_rate(impls[s]) if s else "")
            out.append("| " + " | ".join(row) + " |")
        out.append("")
    return "\n".join(out)


def machine(info: dict) -> str:
    """One paragraph naming the machine and the versions the figures come from."""
    v = info.get("vtl_bench", {})
    cpu = info.get("cpu", {}) if isinstance(info.get("cpu"), dict) else {}
    parts = [f"GPU: {v.get('gpu', 'none')}",
             f"CPU: {cpu.get('brand_raw') or info.get('processor') or '?'}"
             f" ({v.get('cpu_count', cpu.get('count', '?'))} cores)",
             f"Python {v.get('python') or info.get('python_version', '?')}",
             f"NumPy {v.get('numpy', '?')}"]
    if "cupy" in v:
        parts.append(f"CuPy {v['cupy']} (CUDA runtime {v.get('cuda_runtime', '?')})")
    if "torch" in v:
        parts.append(f"PyTorch {v['torch']} ({v.get('torch_threads', '?')} CPU threads)")
    if "wgpu" in v:
        parts.append(f"wgpu {v['wgpu']} on {v.get('wgpu_adapter', '?')}")
    parts.append(f"vtl {v.get('vtl', '?')}, backends {v.get('backends', '?')}")
    if v.get("quick"):
        parts.append("QUICK sizes (VTL_BENCH_QUICK=1)")
    if v.get("full"):
        parts.append("full CPU sizes (VTL_BENCH_FULL=1)")
    when = f" ({info['datetime']})" if info.get("datetime") else ""
    return f"Machine{when}: " + "; ".join(parts) + "."


def report(recs: list[Record], info: dict) -> str:
    """The whole Markdown report: machine, then the grouped tables."""
    return "\n".join([
        "## vtl benchmarks", "", machine(info), "",
        "Median times; **ratio = vtl time / reference time** (below 1: vtl is faster). "
        "GPU timings synchronize inside the timed call.", "", grouped(recs)])


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
    fig, ax = plt.subplots(figsize=(10, 0.2 * len(rows) + 1.2))
    colors = ["tab:green" if v <= 1.0 else "tab:orange" if v <= 2.0 else "tab:red" for v in values]
    ax.barh(range(len(rows)), values, color=colors)
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xscale("log")
    fmt = matplotlib.ticker.FormatStrFormatter("%gx")
    ax.xaxis.set_major_formatter(fmt)
    ax.xaxis.set_minor_formatter(fmt)
    ax.tick_params(axis="x", which="both", labelsize=7)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("vtl time / reference time (lower is better)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _refs(impls: dict) -> list[str]:
    s = subject(impls)
    return sorted((i for i in impls if i != s), key=_ref_key)


def _ref_key(name: str) -> tuple:
    return (REF_ORDER.index(name) if name in REF_ORDER else len(REF_ORDER), name)


def _natural(text: str) -> list:
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", text)]


def _rate(r: Record) -> str:
    """A throughput from ``extra_info`` (``TFLOP/s``, ``GB/s``, ``samples/s`` ...), if any."""
    for k, v in r.extra.items():
        if k.endswith("/s") or "/s " in k:
            if isinstance(v, int | float):
                return f"{v:.3g} {k}"
    return ""


def _fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    png = None
    if "--png" in args:
        i = args.index("--png")
        if i + 1 >= len(args):
            print("--png needs a file name")
            return 2
        png = args.pop(i + 1)
        args.pop(i)
    flat = "--flat" in args
    paths = [a for a in args if a != "--flat"]
    if not paths:
        print(__doc__)
        return 2
    recs: list[Record] = []
    info: dict = {}
    for p in paths:
        r, i = records(p)
        recs += r
        info = info or i
    groups: dict[str, dict[str, float]] = defaultdict(dict)
    for r in recs:
        groups[r.group][r.impl] = r.median
    print(table(groups) if flat else report(recs, info))
    if png is not None:
        try:
            chart(groups, png)
        except ImportError as e:  # the tables are still useful without the chart
            print(f"\n_No chart: {e}; `python3 benchmarks/report.py bench.json --png "
                  f"{png.rsplit('/', 1)[-1]}` draws it where matplotlib is installed._")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
