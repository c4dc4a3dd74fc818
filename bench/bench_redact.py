"""Benchmark the outbound filter (skills_app/core/redact.py) with 200 skills indexed (not a test).

Run: .venv/bin/python bench/bench_redact.py [--skills 200] [--skill-kb 25] [--baseline-commit C]

Generates SKILLS skills of about SKILL_KB kilobytes each (a SKILL.md, two references, a script:
words and code written here, no third-party text), builds the index the way the services do
(`Shingles` per skill version, merged into one library, plus a conversation's own texts) and
times `redact` per outgoing megabyte for:
- prose: 1 MB of text that quotes nothing hidden, in one piece and in 4 KB pieces (the usual
  size of a tool card or a fragment);
- quoting: the same megabyte with 20 verbatim quotes of hidden files spliced in;
- read: Read-style numbered lines of whole hidden files (every line a hit), 1 MB.
Reports the median of ROUNDS runs, index build time and memory, and the load average, with
PASS/MISS against the target of 100 ms per outgoing MB. `--baseline-commit` also times the
redact.py of that commit on the same texts (its index held only the conversation's texts).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skills_app.core.redact import HiddenIndex, HiddenText, Shingles  # noqa: E402

TARGET_PER_MB = 0.100
MB = 1_000_000
SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "sa",
    "ti",
    "vo",
    "ze",
    "pa",
    "qui",
    "dre",
    "fon",
    "gal",
    "hest",
    "ium",
    "jor",
    "kel",
]
CODE_LINES = [
    "def step_{n}(rows, limit={n}):",
    "    total = sum(r.value for r in rows if r.tag == 'k{n}')",
    "    return [r for r in rows[:limit] if r.weight > {n} / 7]",
    "if __name__ == '__main__':",
    "    print(step_{n}(load('work/in-{n}.csv')))",
]


def words(rng: random.Random, count: int) -> str:
    vocabulary = [
        "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(4000)
    ]
    lines = []
    for _ in range(max(1, count // 12)):
        lines.append(" ".join(rng.choice(vocabulary) for _ in range(12)).capitalize() + ".")
    return "\n".join(lines)


def make_skill(rng: random.Random, number: int, size: int) -> list[HiddenText]:
    """The files of one generated skill, as the services would index them."""
    body = words(rng, size // 3 // 6)
    refs = [words(rng, size // 4 // 6) for _ in range(2)]
    code = "\n".join(line.format(n=rng.randint(1, 10**6)) for line in CODE_LINES * (size // 1400))
    name = f"skill-{number:03d}"
    return [
        HiddenText(f"---\nname: {name}\ndescription: d\n---\n{body}", f"{name}/SKILL.md"),
        HiddenText(refs[0], f"{name}/references/a.md"),
        HiddenText(refs[1], f"{name}/references/b.md"),
        HiddenText(code, f"{name}/scripts/run.py"),
    ]


def timed(fn: Any, rounds: int) -> tuple[float, float]:
    """Median wall time and median CPU time of this process (the CPU time is what a shared,
    loaded machine does not inflate)."""
    wall, cpu = [], []
    for _ in range(rounds):
        started, started_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return statistics.median(wall), statistics.median(cpu)


def baseline_module(commit: str) -> ModuleType | None:
    # redact.py of that commit; since the hashing moved to core/shingles.py, a baseline that
    # imports it uses today's shingles.py (the index's search is what differs between commits).
    try:
        source = subprocess.run(
            ["git", "show", f"{commit}:skills_app/core/redact.py"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        print(f"baseline {commit}: not available ({exc})")
        return None
    path = Path(tempfile.mkdtemp()) / "redact_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("redact_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["redact_baseline"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skills", type=int, default=200)
    parser.add_argument("--skill-kb", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline-commit", default="")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}, cpus: {os.cpu_count()}")
    rng = random.Random(23)
    skills = [make_skill(rng, n, args.skill_kb * 1000) for n in range(args.skills)]
    hidden_chars = sum(len(t.text) for files in skills for t in files)
    print(f"{args.skills} skills, {hidden_chars / MB:.1f} M characters of hidden text")

    started = time.perf_counter()
    versions = [Shingles.build(files) for files in skills]
    per_version = time.perf_counter() - started
    started = time.perf_counter()
    library = Shingles.merge(versions)
    merge = time.perf_counter() - started
    del versions
    conversation = Shingles.build(
        [HiddenText(skills[0][0].text + "\nARGUMENTS: x", "hidden skill text")]
    )
    index = HiddenIndex.of([(library, None), (conversation, None)])
    # Memory on a second build (tracemalloc slows numpy's allocations down, so not timed).
    tracemalloc.start()
    again = Shingles.merge([Shingles.build(files) for files in skills])
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    texts = sum(len(t) for t in again.texts)
    del again
    print(
        f"index: built per skill in {per_version:.2f} s "
        f"({per_version / (hidden_chars / MB):.3f} s per M characters), merged in {merge:.2f} s; "
        f"{len(library.hashes):,} sampled windows; memory {kept / MB:.1f} MB kept "
        f"({texts / MB:.1f} M characters of normalised text among it), "
        f"{peak / MB:.1f} MB peak while building"
    )

    prose = words(random.Random(99), MB // 6)[:MB]
    pieces = [prose[i : i + 4096] for i in range(0, len(prose), 4096)]
    quotes = [files[1].text[500:2500] for files in skills[:: max(1, args.skills // 20)]][:20]
    quoting = prose
    step = len(prose) // (len(quotes) + 1)
    for n, quote in enumerate(quotes, 1):
        quoting = quoting[: n * step] + "\n" + quote + "\n" + quoting[n * step :]
    numbered: list[str] = []
    for files in skills:
        for line_no, line in enumerate(files[0].text.splitlines(), 1):
            numbered.append(f"{line_no:>6}\t{line}")
        if sum(len(x) + 1 for x in numbered) > MB:
            break
    read = "\n".join(numbered)[:MB]

    assert index.redact(prose) == prose, "prose shares nothing hidden"
    shown = index.redact(quoting)
    assert all(q[100:160] not in shown for q in quotes), "every quote withheld"
    assert "withheld" in index.redact(read)

    rows = [
        ("prose, 1 MB in one piece", lambda: index.redact(prose), len(prose)),
        ("prose, 1 MB in 4 KB pieces", lambda: [index.redact(p) for p in pieces], len(prose)),
        ("prose with 20 quotes", lambda: index.redact(quoting), len(quoting)),
        ("Read of hidden files (all hits)", lambda: index.redact(read), len(read)),
    ]
    target = f"target {TARGET_PER_MB * 1000:.0f} ms"
    print(f"\n{'outgoing text':<36}{'wall/MB':>10}{'CPU/MB':>10}  verdict ({target}, wall)")
    for label, fn, size in rows:
        wall, cpu = (t / (size / MB) for t in timed(fn, args.rounds))
        verdict = "PASS" if wall <= TARGET_PER_MB else "MISS"
        print(f"{label:<36}{wall * 1000:>7.1f} ms{cpu * 1000:>7.1f} ms  {verdict}")

    if args.baseline_commit:
        old = baseline_module(args.baseline_commit)
        if old is not None:
            few = [t for files in skills[:3] for t in files]  # the old index: invoked skills only
            for label, hidden in (("3 skills", few), (f"{args.skills} skills", None)):
                if hidden is None:
                    hidden = [t for files in skills for t in files]
                started = time.perf_counter()
                old_index = old.HiddenIndex([old.HiddenText(t.text, t.label) for t in hidden])
                built = time.perf_counter() - started
                wall, cpu = timed(lambda i=old_index: i.redact(prose), 1)
                print(
                    f"baseline {args.baseline_commit} with {label}: built in {built:.2f} s, "
                    f"prose {wall / (len(prose) / MB) * 1000:.0f} ms wall, "
                    f"{cpu / (len(prose) / MB) * 1000:.0f} ms CPU per MB"
                )
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
