"""Turn pytest-benchmark JSON into Markdown tables of vtl / reference ratios.

Cases are parametrized with ``impl`` (``vtl`` and references such as ``raw``,
``numpy``, ``cupy``, ``torch-cpu``, ``torch-cuda``, ``portable``); benchmarks
that share a group (``<case>-<backend>``) are compared with each other. Cases
of the wgpu array library parametrized with ``lib`` (``wgpu`` vs ``cupy``)
compare ``wgpu`` with the others.

Usage::

    python benchmarks/report.py bench.json [more.json ...] [--png chart.png] [--flat]
    python benchmarks/report.py --page docs/benchmarks.md RUN.json [[NAME=]RUN2.json ...]

The first form prints the machine (GPU, library versions), then one table per
benchmark function: a row per case and backend, the vtl time, and each
reference's time with the ratio vtl / reference (below 1: vtl is faster).
``--flat`` prints one row per comparison instead. ``--png`` also draws the
ratios (needs matplotlib: ``pip install -e '.[plot]'``).

``--page`` writes the user page ``docs/benchmarks.md``: how to read it, a row per
run (date, CPU, GPU, the versions of Python, NumPy, CuPy, PyTorch, wgpu and vtl),
then one table per backend (numpy, cupy, wgpu) whose rows are grouped into core
ops, call overhead, nn layers, training steps, optimizer step, distributed and
the wgpu array library. Several runs merge (e.g. a CPU machine's run for numpy
and a GPU machine's for cupy and wgpu): a run is named after its file's stem, or
``NAME=`` before it; when two runs time the same case, the later file's figures
are shown, and the page says which run each table (or row) comes from.
"""

from __future__ import annotations

import datetime
import json
import os
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
    backend: str = ""


def records(path: str) -> tuple[list[Record], dict]:
    """The benchmarks of one JSON file and its machine information."""
    with open(path) as f:
        data = json.load(f)
    return _records(data), _info(data)


def _records(data: dict) -> list[Record]:
    out = []
    seen: dict[tuple[str, str], str] = {}
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
        other = seen.setdefault((group, str(impl)), b["name"])
        if other != b["name"]:
            raise ValueError(f"benchmarks {other!r} and {b['name']!r} both time {impl!r} in "
                             f"group {group!r}: give each its own group")
        out.append(Record(section, group, str(impl), b["stats"]["median"],
                          b.get("extra_info") or {}, _backend_of(params, group)))
    return out


def _info(data: dict) -> dict:
    info = dict(data.get("machine_info") or {})
    if data.get("datetime"):
        info["datetime"] = data["datetime"]
    return info


def _backend_of(params: dict, group: str) -> str:
    """The vtl backend a benchmark ran on: its ``backend`` parameter, else a word of its group;
    the wgpu array library's own cases (parametrized with ``lib``) count as wgpu."""
    if params.get("backend") in BACKENDS:
        return params["backend"]
    if "lib" in params:
        return "wgpu"
    return next((w for w in reversed(group.split("-")) if w in BACKENDS), "")


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


# -- the user page: one current table per backend ------------------------------------------

#: The page's groups of cases, in order: (title, the benchmark files whose cases they hold).
CATEGORIES = (
    ("Core ops", ("test_core_bench.py",)),
    ("Call overhead", ("test_frontend_overhead.py",)),
    ("nn layers", ("test_nn_bench.py",)),
    ("Training steps", ("test_mlp_autograd.py", "test_train_bench.py", "test_step_bench.py")),
    ("CPU model steps", ("test_cpu_models_bench.py",)),
    ("Attention", ("test_attention_bench.py",)),
    ("Mixed precision", ("test_amp_bench.py",)),
    ("Optimizer step", ("test_optim_bench.py",)),
    ("Distributed", ("test_distributed_bench.py",)),
    ("wgpu array library", ("test_wgpu_bench.py",)),
)
#: The groups that have no case on some backends (the others have cases on every backend).
CATEGORY_BACKENDS = {"Distributed": ("numpy", "cupy"), "wgpu array library": ("wgpu",),
                     "CPU model steps": ("numpy",), "Attention": ("cupy", "wgpu"),
                     "Mixed precision": ("cupy", "wgpu")}
#: The two reference columns of each backend's table; other references share a third.
MAIN_REFS = {"numpy": ("NumPy", "PyTorch CPU"), "cupy": ("CuPy", "PyTorch CUDA"),
             "wgpu": ("CuPy", "PyTorch CUDA")}
REF_LABELS = {"numpy": "NumPy", "cupy": "CuPy", "torch": "PyTorch CPU",
              "torch-cpu": "PyTorch CPU", "torch-cuda": "PyTorch CUDA",
              "portable": "portable", "no-ddp": "no DDP"}
#: ``raw`` is the backend's own namespace: NumPy, CuPy, or vtl's wgpu array library.
RAW_LABELS = {"numpy": "NumPy", "cupy": "CuPy", "wgpu": "wgpu library"}

PAGE_INTRO = """\
# Benchmarks

<!-- Generated by benchmarks/report.py from pytest-benchmark JSON; edit that script, not this
page. -->

vtl's time for each case next to the libraries it is measured against, one table per
backend. Every time is a median; vtl and its references run in the same process on the same
machine, GPU timings include a synchronize inside the timed call, and TF32 is off in CuPy
and PyTorch (float32 means float32).

**ratio = vtl time / reference time**: below 1, vtl is faster; 2.00, vtl takes twice as
long. Compare ratios within a table; absolute times depend on the run's machine (below).
The numpy backend is measured against NumPy (the same NumPy calls, or a hand-written NumPy
version for the MLP) and PyTorch on the CPU; cupy and wgpu against CuPy and PyTorch on
CUDA. Other references: *portable* is vtl's optimizer without its fused kernel
(`foreach=False`); *no DDP* the same training step without `DistributedDataParallel`;
*wgpu library* vtl's array library `vtl.backends.wgpu` called directly, so the ratio is
what the tensor layer adds. The "wgpu array library" rows time that library against CuPy.
Case names: `-b64` is a batch of 64, `fwd-bwd` forward and backward, `add-small`/`-large`
1,000 and 1,000,000 elements, `matmul-small`/`-large` 32 and 512 square, `step-<model>`
a whole training step (forward, loss, backward, clipping, Adam, schedule) and
`step-<model>-compiled` the same step through `vtl.compile` (PyTorch runs eagerly in both);
each benchmark file in `benchmarks/` describes its cases. PyTorch's eager steps on a GPU are
bound by the time its host spends in Python, as vtl's eager steps are, so their times and
the step ratios move with the host: two machines of one image have timed the same PyTorch
step up to 1.6x apart. Ratios of one run compare; between runs, compare the kernel counts
and the compiled steps, which depend less on the host."""

PAGE_HOWTO = """\
Run the benchmarks with `make bench` (every available backend; `VTL_TEST_BACKENDS=numpy`
picks backends), or write a run's JSON for this page with
`python -m pytest benchmarks --benchmark-only --benchmark-enable --benchmark-json=RUN.json`;
on a GPU machine `benchmarks/gpu_run.sh OUT` writes `OUT/bench.json`. Several processes
(MPI all-reduce and DDP step times, their own JSON, not in these tables):
`python benchmarks/distributed_bench.py --ranks 1,2 --out dist_bench.json`."""


@dataclass
class Run:
    """One pytest-benchmark JSON file: its name on the page, its cases and its machine."""

    name: str
    path: str
    records: list[Record]
    info: dict
    commit: dict
    explicit_name: bool = False


def load_run(arg: str) -> Run:
    """``RUN.json`` or ``NAME=RUN.json``; the name defaults to the file's stem."""
    name, path, explicit = "", arg, False
    if "=" in arg and not os.path.exists(arg):
        name, path = arg.split("=", 1)
        explicit = True
    with open(path) as f:
        data = json.load(f)
    name = name or os.path.splitext(os.path.basename(path))[0]
    return Run(name, path, _records(data), _info(data), data.get("commit_info") or {}, explicit)


def merge(runs: list[Run]) -> dict[tuple[str, str], tuple[int, dict[str, Record]]]:
    """(benchmark, group) -> (index of the run it comes from, impl -> record).

    A case is a group, all of whose implementations come from one run: when two runs time the
    same case, the later run's group replaces the earlier one whole (ratios never mix runs),
    except where the later run timed only the references (its vtl case failed or was
    skipped): then the earlier run's complete group stays.
    """
    cases: dict[tuple[str, str], tuple[int, dict[str, Record]]] = {}
    for i, run in enumerate(runs):
        mine: dict[tuple[str, str], dict[str, Record]] = defaultdict(dict)
        for r in run.records:
            mine[(r.section, r.group)][r.impl] = r
        for key, impls in mine.items():
            earlier = cases.get(key)
            if subject(impls) is None and earlier is not None \
                    and subject(earlier[1]) is not None:
                continue
            cases[key] = (i, impls)
    return cases


def page(runs: list[Run], out: str = "docs/benchmarks.md") -> str:
    """The Markdown page: how to read it, the runs, then one table per backend."""
    if not runs:
        raise ValueError("the page needs at least one run")
    _unique_names(runs)
    cases = merge(runs)
    by_backend: dict[str, list] = defaultdict(list)
    for (section, group), (i, impls) in cases.items():
        s = subject(impls)
        if s is not None:
            by_backend[impls[s].backend].append((section, group, i, impls))
    backends = list(BACKENDS) + sorted(b for b in by_backend if b not in BACKENDS)
    used = {b: sorted({c[2] for c in by_backend[b]}) for b in backends if b in by_backend}
    lines = [PAGE_INTRO, "", "## Runs", "", *_runs_table(runs, used), "",
             "Regenerate this page from the runs' JSON files, in this order (when two runs time",
             "the same case, the later file's figures are shown):", "", "```sh",
             page_command(runs, out), "```", "", *_where_runs_are(runs), PAGE_HOWTO]
    for b in backends:
        lines += ["", f"## {b} backend" if b else "## Other cases", ""]
        rows = by_backend.get(b)
        if not rows:
            lines.append("No run of this page measured this backend.")
            continue
        runs_here = used[b]
        if len(runs_here) == 1:
            lines += [f"From run **{runs[runs_here[0]].name}**.", ""]
        else:
            names = ", ".join(f"**{runs[i].name}**" for i in runs_here)
            lines += [f"From runs {names} (column *run*).", ""]
        lines += backend_table(b, rows, runs, show_run=len(runs_here) > 1)
        lines += launch_table(b, rows)
        lines += memory_table(b, rows)
        have = {_category(section) for section, *_ in rows}
        missing = [t for t, _ in CATEGORIES
                   if t not in have and b in CATEGORY_BACKENDS.get(t, (b,))]
        if missing:
            lines += ["", "Not timed in these runs: " + ", ".join(missing) + "."]
    return "\n".join(lines) + "\n"


#: the project's root: files in it are named from there on the page
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _in_project(path: str) -> str | None:
    """``path`` from the project's root, or ``None`` for a file outside the project."""
    full = os.path.abspath(path)
    return os.path.relpath(full, _ROOT) if full.startswith(_ROOT + os.sep) else None


def _where_runs_are(runs: list[Run]) -> list[str]:
    """A paragraph naming the project folder that keeps the runs' files, where they share
    one."""
    paths = [_in_project(r.path) for r in runs]
    folders = {os.path.dirname(p) for p in paths if p is not None}
    if None in paths or len(folders) != 1:
        return []
    return [f"The runs' JSON files (each case's statistics, without the single rounds) are "
            f"kept in `{folders.pop()}/`.", ""]


def page_command(runs: list[Run], out: str) -> str:
    """The command that regenerates the page: paths from the project's root for files in
    the project, bare file names for the others (no folder of the machine it ran on)."""

    def shown(path: str) -> str:
        return _in_project(path) or os.path.basename(path)

    files = [(f"{r.name}=" if r.explicit_name else "") + shown(r.path) for r in runs]
    return " ".join(["python benchmarks/report.py --page", shown(out), *files])


def backend_table(backend: str, rows: list, runs: list[Run], show_run: bool = False) -> list[str]:
    """One table: a row per case, grouped by CATEGORIES, vtl's time and each reference's
    time with the ratio vtl / reference."""
    main = MAIN_REFS.get(backend, ())
    built = []
    for section, group, i, impls in rows:
        s = subject(impls)
        cells: dict[str, Record] = {}
        other: list[tuple[str, Record]] = []
        for impl in _refs(impls):
            label = ref_label(backend, impl)
            if label in main and label not in cells:
                cells[label] = impls[impl]
            else:
                other.append((label, impls[impl]))
        built.append((_category(section), section, _case_label(group, backend), i,
                      impls[s], cells, other))
    used_main = [m for m in main if any(m in row[5] for row in built)]
    has_other = any(row[6] for row in built)
    has_rate = any(_rate(row[4]) for row in built)
    head = ["case", "vtl"]
    for m in used_main:
        head += [m, f"vtl / {m}"]
    if has_other:
        head += ["other reference", "vtl / other"]
    if has_rate:
        head.append("vtl throughput")
    if show_run:
        head.append("run")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    order = [c[0] for c in CATEGORIES] + ["Other"]
    built.sort(key=lambda r: (order.index(r[0]), r[1], _natural(r[2])))
    current = None
    for cat, _, label, i, rec, cells, other in built:
        if cat != current:
            current = cat
            out.append(f"| **{cat}** |" + " |" * (len(head) - 1))
        t = rec.median
        row = [label, _fmt(t)]
        for m in used_main:
            ref = cells.get(m)
            row += [_fmt(ref.median), f"{t / ref.median:.2f}"] if ref else ["", ""]
        if has_other:
            row += ["<br>".join(f"{lab} {_fmt(r.median)}" for lab, r in other),
                    "<br>".join(f"{t / r.median:.2f}" for _, r in other)]
        if has_rate:
            row.append(_rate(rec))
        if show_run:
            row.append(runs[i].name)
        out.append("| " + " | ".join(row) + " |")
    return out


def _against_torch(backend: str, rows: list, key: str) -> list[str]:
    """Table rows of ``extra_info[key]`` for vtl and PyTorch CUDA where a run recorded a
    non-zero value for both."""
    out = []
    for _, group, _, impls in sorted(rows, key=lambda r: _natural(r[1])):
        ref = impls.get("torch-cuda")
        mine = impls[subject(impls)].extra.get(key)
        theirs = ref.extra.get(key) if ref is not None else None
        if mine and theirs:
            out.append(f"| {_case_label(group, backend)} | {mine:g} | {theirs:g} | "
                       f"{mine / theirs:.2f} |")
    return out


_TORCH_HEAD = ["", "| case | vtl | PyTorch CUDA | vtl / PyTorch |", "|---|---|---|---|"]


def launch_table(backend: str, rows: list) -> list[str]:
    """The device launches per training step (``extra_info["kernels"]``) of vtl and PyTorch
    CUDA, where a run counted them; no lines where none did."""
    out = _against_torch(backend, rows, "kernels")
    if not out:
        return []
    what = ("dispatches recorded by vtl" if backend == "wgpu"
            else "CUDA kernels, copies and fills, counted with CUPTI")
    return ["", f"Device launches per training step ({what}; PyTorch's counted with CUPTI):",
            *_TORCH_HEAD, *out]


def memory_table(backend: str, rows: list) -> list[str]:
    """The peak device memory of one call (``extra_info["peak_mib"]``: memory allocated
    during it, beyond what was live before) of vtl and PyTorch CUDA, where a run measured
    both; no lines where none did. A captured step allocates nothing when replayed, so
    its zero is left out."""
    out = _against_torch(backend, rows, "peak_mib")
    if not out:
        return []
    return ["", "Peak device memory of one call (MiB allocated during it; PyTorch's "
            "`max_memory_allocated`):", *_TORCH_HEAD, *out]


def ref_label(backend: str, impl: str) -> str:
    """A reference's name on the page (``raw`` is the backend's own namespace)."""
    if impl == "raw":
        return RAW_LABELS.get(backend, "raw")
    return REF_LABELS.get(impl, impl)


def _category(section: str) -> str:
    file = section.split("::")[0]
    return next((title for title, files in CATEGORIES if file in files), "Other")


def _case_label(group: str, backend: str) -> str:
    """``matmul-float32-128-numpy`` -> ``matmul-float32-128``; ``test_sgemm[n=1024]`` ->
    ``sgemm[n=1024]``."""
    if backend and group.endswith("-" + backend):
        return group[: -len(backend) - 1]
    return group.removeprefix("test_")


def _unique_names(runs: list[Run]) -> None:
    seen: dict[str, int] = defaultdict(int)
    for r in runs:
        seen[r.name] += 1
        if seen[r.name] > 1:
            r.name = f"{r.name} ({seen[r.name]})"


def _runs_table(runs: list[Run], used: dict[str, list[int]]) -> list[str]:
    """A row per run: its date, hardware and versions, and the tables it provides."""
    out = ["| run | date | CPU | GPU | Python | NumPy | CuPy | PyTorch | wgpu | vtl | tables |",
           "|" + "---|" * 11]
    notes = []
    for i, run in enumerate(runs):
        info = run.info
        v = info.get("vtl_bench") or {}
        cpu = info.get("cpu") if isinstance(info.get("cpu"), dict) else {}
        cores = v.get("cpu_count") or cpu.get("count")
        cpu_text = (cpu.get("brand_raw") or info.get("processor") or "?") + (
            f", {cores} cores" if cores else "")
        cupy = v.get("cupy", "")
        if cupy and v.get("cuda_runtime"):
            cupy += f", CUDA {_cuda_version(v['cuda_runtime'])}"
        torch = v.get("torch", "")
        if torch and v.get("torch_threads"):
            n = v["torch_threads"]
            torch += f", {n} CPU thread{'s' if n != 1 else ''}"
        wgpu = v.get("wgpu") or ""
        if wgpu and v.get("wgpu_adapter"):
            wgpu += f" on {v['wgpu_adapter']}"
        vtl = v.get("vtl", "?")
        if run.commit.get("id"):
            vtl += f" ({run.commit['id'][:7]}{', modified' if run.commit.get('dirty') else ''})"
        tables = ", ".join(b or "other" for b, idx in used.items() if i in idx)
        out.append("| " + " | ".join([
            f"**{run.name}**", _date(info.get("datetime")), cpu_text, v.get("gpu") or "none",
            v.get("python") or info.get("python_version") or "?", v.get("numpy", "?"),
            cupy or "-", torch or "-", wgpu or "-", vtl,
            tables or "none (every case is in a later run)"]) + " |")
        if v.get("quick"):
            notes.append(f"Run **{run.name}** used small sizes (`VTL_BENCH_QUICK=1`): a smoke "
                         "run, not a measurement.")
        if v.get("full"):
            notes.append(f"Run **{run.name}** also timed the large CPU sizes "
                         "(`VTL_BENCH_FULL=1`).")
    return out + ([""] + notes if notes else [])


def _date(stamp: str | None) -> str:
    """An ISO time stamp as ``YYYY-MM-DD HH:MM UTC``."""
    if not stamp:
        return "?"
    try:
        t = datetime.datetime.fromisoformat(stamp)
    except ValueError:
        return stamp
    if t.tzinfo is not None:
        t = t.astimezone(datetime.UTC)
    return t.strftime("%Y-%m-%d %H:%M") + " UTC"


def _cuda_version(v: int | str) -> str:
    """CUDA's runtime version number (``13020``) as ``13.2``."""
    try:
        n = int(v)
    except (TypeError, ValueError):
        return str(v)
    return f"{n // 1000}.{n % 1000 // 10}"


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
                return f"{_num(v)} {k}"
    return ""


def _num(v: float) -> str:
    """Three significant digits, without exponents: ``0.109``, ``23.7``, ``1,210``."""
    if v >= 1000:
        return f"{float(f'{v:.3g}'):,.0f}"
    return f"{v:.3g}"


def _fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def _option(args: list[str], name: str) -> str | None:
    """Remove ``name VALUE`` from ``args`` and return VALUE (None when absent)."""
    if name not in args:
        return None
    i = args.index(name)
    if i + 1 >= len(args):
        raise ValueError(f"{name} needs a file name")
    value = args.pop(i + 1)
    args.pop(i)
    return value


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        png = _option(args, "--png")
        page_path = _option(args, "--page")
    except ValueError as e:
        print(e)
        return 2
    flat = "--flat" in args
    paths = [a for a in args if a != "--flat"]
    if not paths:
        print(__doc__)
        return 2
    if page_path is not None:
        runs = [load_run(p) for p in paths]
        text = page(runs, page_path)
        with open(page_path, "w") as f:
            f.write(text)
        print(f"wrote {page_path} from {len(runs)} run(s)")
        groups: dict[str, dict[str, float]] = defaultdict(dict)
        for (_, group), (_, impls) in merge(runs).items():
            groups[group] = {impl: r.median for impl, r in impls.items()}
    else:
        recs: list[Record] = []
        info: dict = {}
        for p in paths:
            r, i = records(p)
            recs += r
            info = info or i
        groups = defaultdict(dict)
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
