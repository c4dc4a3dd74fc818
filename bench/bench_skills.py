"""Benchmark the skills core on 2,000 generated skills (not a test).

Run: .venv/bin/python bench/bench_skills.py [--skills N]
Reports cold discovery, warm re-check (median), catalog render (median) and peak memory,
each with PASS/MISS against the targets for a 2-core machine.
"""

from __future__ import annotations

import argparse
import random
import resource
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skills_app.core.catalog import build_catalog  # noqa: E402
from skills_app.core.registry import SkillRegistry, SkillSource  # noqa: E402

TARGETS = {"cold": 1.5, "warm": 0.050, "catalog": 0.005}
WORDS = [
    "report",
    "data",
    "file",
    "user",
    "table",
    "chart",
    "summary",
    "review",
    "check",
    "format",
    "text",
    "value",
    "list",
    "step",
    "result",
    "source",
    "output",
    "input",
    "draft",
    "update",
    "section",
    "page",
    "note",
    "record",
    "field",
    "date",
    "total",
]


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def generate(root: Path, count: int) -> None:
    """Write `count` skills: frontmatter, a few hundred words of body, one reference file."""
    rng = random.Random(42)
    for i in range(count):
        name = f"skill-{i:04d}"
        d = root / name
        (d / "references").mkdir(parents=True)
        paragraphs = "\n\n".join(_sentence(rng, 40) for _ in range(8))
        (d / "SKILL.md").write_text(
            "---\n"
            f"name: {name}\n"
            f"description: {_sentence(rng, 30)}\n"
            f"when_to_use: {_sentence(rng, 12)}\n"
            "allowed-tools: Read Grep Bash(python3 *)\n"
            "metadata:\n  author: bench\n  version: '1.0'\n"
            "---\n\n"
            f"# {name}\n\n{paragraphs}\n\nSee [the guide](references/guide.md) for details.\n",
            encoding="utf-8",
        )
        (d / "references" / "guide.md").write_text(
            "# Guide\n\n" + "\n\n".join(_sentence(rng, 30) for _ in range(5)), encoding="utf-8"
        )


def _median(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skills", type=int, default=2000)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        generate(root, opts.skills)
        registry = SkillRegistry([SkillSource("dirs", root)])
        start = time.perf_counter()
        skills = registry.skills()
        cold = time.perf_counter() - start
        # tracemalloc slows allocation-heavy code severalfold, so memory gets its own cold pass.
        tracemalloc.start()
        SkillRegistry([SkillSource("dirs", root)]).skills()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert len(skills) == opts.skills, f"found {len(skills)} skills"
        assert all(len(s.digest) == 64 for s in skills)
        parses = registry.parse_count
        warm = _median(registry.refresh, 9)
        assert registry.parse_count == parses, "a warm re-check parsed a skill again"
        catalog = _median(lambda: build_catalog(skills), 21)
        text = build_catalog(skills)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    figures = {"cold": cold, "warm": warm, "catalog": catalog}
    print(f"skills: {opts.skills}   catalog: {len(text)} chars")
    for key, value in figures.items():
        verdict = "PASS" if value < TARGETS[key] else "MISS"
        print(f"{key:8} {value * 1000:9.1f} ms   target < {TARGETS[key] * 1000:.0f} ms   {verdict}")
    print(f"peak traced memory during cold discovery: {peak / 1e6:.1f} MB; max RSS {rss_mb:.0f} MB")
    return 0 if all(figures[k] < TARGETS[k] for k in TARGETS) else 1


if __name__ == "__main__":
    sys.exit(main())
