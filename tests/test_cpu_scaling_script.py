"""``benchmarks/cpu_scaling.py``: every kind of work runs at each thread count asked for and
gets a line with its time and throughput."""

from __future__ import annotations

import re

from benchmarks import cpu_scaling


def test_prints_a_line_per_work_and_thread_count(capsys):
    cpu_scaling.main(["--threads", "1,2", "--seconds", "0.001"])
    lines = capsys.readouterr().out.strip().splitlines()
    names = [name for name, _ in cpu_scaling.cases()]
    assert len(lines) == 1 + 2 * len(names)
    for k, name in enumerate(names):
        for t, line in zip((1, 2), lines[1 + 2 * k: 3 + 2 * k], strict=True):
            assert line.startswith(name)
            m = re.search(r"\s(\d+)\s+([\d.]+)\s+([\d.]+)x$", line)
            assert m is not None and int(m.group(1)) == t and float(m.group(2)) > 0
        assert lines[1 + 2 * k].endswith(" 1.00x")  # one thread is the reference


def test_each_thread_calls_its_own_work():
    made = []

    def make():
        count = [0]
        made.append(count)
        return lambda: count.__setitem__(0, count[0] + 1)

    per = cpu_scaling._together(make, 3, 0.001)
    assert per > 0 and len(made) == 3 and all(c[0] > 1 for c in made)
