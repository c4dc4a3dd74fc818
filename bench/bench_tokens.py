"""Token economy of the two layers: the catalog in every request vs every body in the system prompt.

Run: .venv/bin/python bench/bench_tokens.py [--generated 50]
For the bundled skills, and for the bundled skills plus N generated ones (the same generator as
bench_skills.py), compares the Skill tool's description (Layer 1, sent with every request) with
what putting every SKILL.md body into the system prompt would cost. Tokens are estimated as
characters / 4.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_skills import generate  # noqa: E402
from skills_app.core.registry import SkillRegistry, SkillSource  # noqa: E402
from skills_app.core.skilltool import skill_tool_schema  # noqa: E402

BUDGET, ENTRY_CAP = 15_000, 1_536


def body_of(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end >= 0:
            return text[end + 4 :].lstrip("\n")
    return text


def measure(label: str, sources: list[SkillSource]) -> dict[str, float]:
    skills = SkillRegistry(sources).skills()
    invocable = [s for s in skills if s.model_invocable]
    catalog = skill_tool_schema(invocable, budget=BUDGET, entry_cap=ENTRY_CAP)["description"]
    bodies = "\n\n".join(
        f'<skill name="{s.name}">\n{body_of(Path(s.path) / "SKILL.md")}</skill>' for s in invocable
    )
    saving = 1 - len(catalog) / len(bodies) if bodies else 0.0
    print(
        f"| {label} | {len(invocable)} | {len(catalog):,} | {len(catalog) // 4:,} "
        f"| {len(bodies):,} | {len(bodies) // 4:,} | {saving * 100:.1f} % |"
    )
    return {"catalog": len(catalog), "bodies": len(bodies)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--generated", type=int, default=50)
    opts = parser.parse_args()
    bundled = SkillSource("bundled", ROOT / "skills")
    print(
        "| skill set | model-invocable skills | catalog chars | catalog tokens (est.) "
        "| all bodies chars | all bodies tokens (est.) | saved per request |"
    )
    print("|---|---|---|---|---|---|---|")
    measure("bundled", [bundled])
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp), opts.generated)
        measure(f"{opts.generated} generated", [SkillSource("dirs", Path(tmp))])
        measure(f"bundled + {opts.generated} generated", [bundled, SkillSource("dirs", Path(tmp))])
    return 0


if __name__ == "__main__":
    sys.exit(main())
