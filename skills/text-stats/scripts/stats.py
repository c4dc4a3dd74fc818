#!/usr/bin/env python3
"""Count lines, words and characters of files or text; write a JSON report and print a summary.

Usage: stats.py PATH-OR-TEXT...   Each argument that names an existing file is counted as a
file; all other arguments are joined with spaces and counted as one piece of text. The report
goes to $OUTPUT_DIR (default ./out) as text-stats-<timestamp>.json.
"""

from __future__ import annotations

import json
import os
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


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: stats.py PATH-OR-TEXT...", file=sys.stderr)
        return 2
    items = []
    words = []
    for arg in argv:
        path = Path(arg)
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            items.append({"source": str(path), **count(text)})
        else:
            words.append(arg)
    if words:
        items.append({"source": "text", **count(" ".join(words))})
    total = {key: sum(item[key] for item in items) for key in ("lines", "words", "characters")}
    out_dir = Path(os.environ.get("OUTPUT_DIR") or "out")
    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / f"text-stats-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json"
    report.write_text(
        json.dumps({"items": items, "total": total}, indent=2) + "\n", encoding="utf-8"
    )
    print(f"{total['lines']} lines, {total['words']} words, {total['characters']} characters")
    print(f"report: {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
