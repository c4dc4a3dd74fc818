"""Sum the database thread's hops by phase: the runs starting, the steady streams, the ends.

Run: python bench/hop_report.py HOPS_FILE MEASURED_START FIRST_SENT LAST_SENT
(epoch seconds, as bench_concurrency.py prints them in its "Skillscope times" line; the hops
file is written by `bench/hopcpu/sitecustomize.py`), e.g.:

    SKILLSCOPE_HOPS=/tmp/hops.tsv PYTHONPATH=bench/hopcpu .venv/bin/python \
        bench/bench_concurrency.py --conversations 100 --rate 50 --duration 20 --no-latency-target

Phases: from the measured start to 3 s after the first delta was sent; then to 3 s before the
last; then the rest (the answers stored, the runs ended).
"""

from __future__ import annotations

import collections
import sys


def report(path: str, start: float, first: float, last: float) -> str:
    rows = []
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            when, cpu, wall, name = line.rstrip("\n").split("\t")
            if float(when) >= start:
                rows.append((float(when), float(cpu), float(wall), name))
    phases = [
        ("runs starting (to 3 s after the first delta)", lambda t: t < first + 3),
        ("steady", lambda t: first + 3 <= t < last - 3),
        ("runs ending (from 3 s before the last delta)", lambda t: t >= last - 3),
    ]
    out = []
    for title, inside in phases:
        sums: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
        for when, cpu, wall, name in rows:
            if inside(when):
                entry = sums[name]
                entry[0] += 1
                entry[1] += cpu
                entry[2] += wall
        total = sum(entry[1] for entry in sums.values())
        out.append(
            f"## {title}: {sum(int(e[0]) for e in sums.values())} hops, {total / 1e3:.2f} s CPU"
        )
        for name, (count, cpu, wall) in sorted(sums.items(), key=lambda item: -item[1][1])[:20]:
            out.append(
                f"{cpu / 1e3:7.3f} s {int(count):5d} x {cpu / count:6.2f} ms CPU "
                f"{wall / count:7.2f} ms wall  {name}"
            )
    return "\n".join(out)


if __name__ == "__main__":
    print(report(sys.argv[1], *(float(a) for a in sys.argv[2:5])))
