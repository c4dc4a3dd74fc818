"""Benchmark the interop readers (not a test): a Claude Code session at the import limit, the
lint of the parity fixture set under --strict, and a Git tree read.

Run: .venv/bin/python bench/bench_interop.py [--lines N] [--skills N]
Reports the median of 5 for each, with PASS/MISS against targets for a 2-core machine:
- parse a 20,000-line session (one line per block, parallel calls, interleaved sidechains): < 1.5 s;
- lint 200 skills as `skills validate --strict` reads them: < 2 s;
- list and read 200 skill folders from a local bare repository (no network): < 3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dulwich.repo import Repo  # noqa: E402

from skills_app.core.cc_transcript import parse_transcript  # noqa: E402
from skills_app.core.gitsource import (  # noqa: E402
    TreeLimits,
    find_skill_folders,
    list_tree,
    read_blob,
    read_folder,
)
from skills_app.core.skillfile import lint_skill_dir  # noqa: E402

TARGETS = {"session": 1.5, "lint": 2.0, "git": 3.0}


def session(lines: int) -> str:
    """A session of `lines` lines: turns of text + 3 parallel calls, a sidechain interleaved."""
    out: list[str] = []
    n = 0
    while len(out) < lines:
        n += 1
        out.append(
            json.dumps(
                {
                    "type": "user",
                    "uuid": f"u{n}",
                    "message": {"role": "user", "content": f"question {n}"},
                }
            )
        )
        mid = f"msg_{n}"
        for k in range(3):
            block = {
                "type": "tool_use",
                "id": f"t{n}_{k}",
                "name": "Read",
                "input": {"file_path": f"f{k}"},
            }
            out.append(
                json.dumps(
                    {
                        "type": "assistant",
                        "uuid": f"a{n}_{k}",
                        "message": {"id": mid, "role": "assistant", "content": [block]},
                    }
                )
            )
        out.append(
            json.dumps(
                {
                    "type": "user",
                    "isSidechain": True,
                    "uuid": f"s{n}",
                    "parentUuid": None,
                    "message": {"role": "user", "content": f"sub {n}"},
                }
            )
        )
        for k in range(3):
            result = {"type": "tool_result", "tool_use_id": f"t{n}_{k}", "content": "text " * 20}
            out.append(
                json.dumps(
                    {
                        "type": "user",
                        "uuid": f"r{n}_{k}",
                        "message": {"role": "user", "content": [result]},
                    }
                )
            )
        out.append(
            json.dumps(
                {
                    "type": "assistant",
                    "isSidechain": True,
                    "uuid": f"sa{n}",
                    "parentUuid": f"s{n}",
                    "message": {"id": f"sub_{n}", "role": "assistant", "content": "done"},
                }
            )
        )
        out.append(
            json.dumps(
                {
                    "type": "assistant",
                    "uuid": f"e{n}",
                    "message": {"id": f"end_{n}", "role": "assistant", "content": f"answer {n}"},
                }
            )
        )
    return "\n".join(out[:lines]) + "\n"


def skills(root: Path, count: int) -> None:
    for i in range(count):
        folder = root / "skills" / f"skill-{i}"
        (folder / "references").mkdir(parents=True)
        (folder / "SKILL.md").write_text(
            f"---\nname: skill-{i}\ndescription: Does task {i} when asked about it.\n"
            f"license: MIT\n---\n# Skill {i}\n\nSee [the notes](references/notes.md).\n"
        )
        (folder / "references" / "notes.md").write_text("notes\n" * 50)


def median(fn, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--skills", type=int, default=200)
    args = parser.parse_args()
    text = session(args.lines)
    results = {"session": median(lambda: parse_transcript(text))}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "work"
        skills(root, args.skills)
        folders = sorted((root / "skills").iterdir())
        results["lint"] = median(lambda: [lint_skill_dir(f) for f in folders])
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "b",
            "GIT_AUTHOR_EMAIL": "b@x",
            "GIT_COMMITTER_NAME": "b",
            "GIT_COMMITTER_EMAIL": "b@x",
        }
        for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "s"]):
            subprocess.run(["git", *cmd], cwd=root, env=env, check=True)
        bare = Path(tmp) / "bare.git"
        subprocess.run(["git", "clone", "-q", "--bare", str(root), str(bare)], check=True)
        repo = Repo(str(bare))
        commit = repo.refs[b"refs/heads/main"].decode()
        limits = TreeLimits(max_files=5000, max_file_bytes=10 << 20, max_total_bytes=30 << 20)

        def read_all() -> None:
            entries = list_tree(repo, commit, "")
            found = find_skill_folders(entries, lambda e: read_blob(repo, e, 512 * 1024))
            for folder in found.skills:
                read_folder(repo, folder.files, limits, folder.origin)

        results["git"] = median(read_all)
    for key, value in results.items():
        verdict = "PASS" if value < TARGETS[key] else "MISS"
        print(f"{key:8} {value:8.3f} s  (target < {TARGETS[key]} s)  {verdict}")


if __name__ == "__main__":
    main()
