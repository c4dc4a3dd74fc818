#!/usr/bin/env python3
"""Count lines, words and characters of files or text; write a JSON report and print a summary.

Usage: stats.py PATH-OR-TEXT...   Each argument that names an existing file (or an attached
one, in in/) is counted as a file; an argument that looks like a path but names no file is
reported, not counted; all other arguments are joined with spaces and counted as one piece
of text. The report
goes to $OUTPUT_DIR (default ./out) as text-stats-<timestamp>.json.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path


def count(text: str) -> dict[str, int]:
    """Line, word and character counts of `text` (a final line without a newline still counts)."""
    return {
        "lines": len(text.splitlines()),
        "words": len(text.split()),
        "characters": len(text),
    }


def looks_like_path(arg: str) -> bool:
    """A word with a folder in it, or a name with an extension ("notes.md", not "2.5.0")."""
    if "://" in arg or arg.startswith("-"):
        return False
    return "/" in arg or re.fullmatch(r"\w[\w.-]*\.[A-Za-z][A-Za-z0-9]{0,7}", arg) is not None


def plural(number: int, noun: str) -> str:
    """'1 line', '2 lines'."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: stats.py PATH-OR-TEXT...", file=sys.stderr)
        return 2
    items = []
    words = []
    missing = []
    for arg in argv:
        path = Path(arg)
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            items.append({"source": str(path), **count(text)})
        elif not path.exists() and (Path("in") / arg).is_file():
            # An attached file: attachments are kept in in/.
            text = (Path("in") / arg).read_text(encoding="utf-8", errors="replace")
            items.append({"source": f"in/{arg}", **count(text)})
        elif looks_like_path(arg):
            missing.append(arg)
        else:
            words.append(arg)
    for name in missing:
        print(f"{name} is not among this conversation's files: attach it first.")
    if words:
        items.append({"source": "text", **count(" ".join(words))})
    if not items:
        return 1
    total = {key: sum(item[key] for item in items) for key in ("lines", "words", "characters")}
    out_dir = Path(os.environ.get("OUTPUT_DIR") or "out")
    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / f"text-stats-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json"
    report.write_text(
        json.dumps({"items": items, "total": total}, indent=2) + "\n", encoding="utf-8"
    )
    print(", ".join(plural(total[key], key[:-1]) for key in ("lines", "words", "characters")))
    print(f"report: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
