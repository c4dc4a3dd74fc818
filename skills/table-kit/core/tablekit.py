"""tablekit: load CSV files and summarise their columns, with the Python standard library only.

To use it, put this folder at the front of `sys.path` and import the module: `load_csv(path)`
gives the rows, `summarise(rows)` the figures per column, `to_markdown(summary)` a table of them.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

BLANKS = frozenset({"", "-", "n/a", "na", "null", "none", "nan"})
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")
_DECORATION = re.compile(r"[\s,_$€£%]")


def load_csv(path: str | Path, *, encoding: str = "utf-8-sig") -> list[dict[str, str]]:
    """The rows of a CSV file as dicts keyed by the header row; the delimiter is sniffed."""
    text = Path(path).read_text(encoding=encoding)
    if not text.strip():
        return []
    try:
        dialect = csv.Sniffer().sniff(text[:4096], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel  # a single column, or too little text to tell
    reader = csv.DictReader(text.splitlines(), dialect=dialect)
    if reader.fieldnames is None:
        return []
    fields = [name.strip() for name in reader.fieldnames]
    rows = []
    for raw in reader:
        values = list(raw.values())
        rows.append({f: (v or "").strip() for f, v in zip(fields, values, strict=False)})
    return rows


def is_blank(value: str | None) -> bool:
    """True for empty cells and the usual placeholders (`-`, `n/a`, `null`, ...)."""
    return value is None or value.strip().lower() in BLANKS


def to_number(value: str | None) -> float | None:
    """`1,234.50`, `$3`, `12%`, `(7)` as numbers; None when the cell is not a number."""
    if is_blank(value):
        return None
    text = value.strip()
    negative = text.startswith("(") and text.endswith(")")
    text = _DECORATION.sub("", text.strip("()"))
    if not _NUMBER.match(text):
        return None
    number = float(text)
    return -number if negative else number


def summarise(rows: list[dict[str, str]], *, top: int = 3) -> dict[str, dict[str, Any]]:
    """Per column: count, blank, kind ("number" or "text") and the figures for that kind."""
    columns: list[str] = []
    for row in rows:
        columns.extend(c for c in row if c not in columns)
    summary: dict[str, dict[str, Any]] = {}
    for column in columns:
        values = [row.get(column, "") for row in rows]
        filled = [v for v in values if not is_blank(v)]
        numbers = [to_number(v) for v in filled]
        info: dict[str, Any] = {"count": len(filled), "blank": len(values) - len(filled)}
        if filled and all(n is not None for n in numbers):
            nums = [n for n in numbers if n is not None]
            info |= {
                "kind": "number",
                "min": _tidy(min(nums)),
                "max": _tidy(max(nums)),
                "mean": _tidy(sum(nums) / len(nums)),
                "total": _tidy(sum(nums)),
            }
        else:
            counts = Counter(filled)
            info |= {
                "kind": "text",
                "distinct": len(counts),
                "top": [[value, n] for value, n in counts.most_common(top)],
            }
        summary[column] = info
    return summary


def group_totals(rows: list[dict[str, str]], by: str, value: str) -> dict[str, float]:
    """The total of column `value` per distinct `by`, largest first; non-numbers are skipped."""
    totals: dict[str, float] = {}
    for row in rows:
        number = to_number(row.get(value))
        if number is None:
            continue
        key = row.get(by, "") if not is_blank(row.get(by)) else "(blank)"
        totals[key] = totals.get(key, 0.0) + number
    ordered = sorted(totals.items(), key=lambda item: (-item[1], item[0]))
    return {key: _tidy(total) for key, total in ordered}


def to_markdown(summary: dict[str, dict[str, Any]]) -> str:
    """A summary from `summarise` as a Markdown table, one row per column."""
    lines = [
        "| column | kind | count | blank | details |",
        "|---|---|---|---|---|",
    ]
    for column, info in summary.items():
        if info["kind"] == "number":
            details = (
                f"min {_fmt(info['min'])}, max {_fmt(info['max'])}, "
                f"mean {_fmt(info['mean'])}, total {_fmt(info['total'])}"
            )
        else:
            common = ", ".join(f"{value} ({n})" for value, n in info["top"])
            details = f"{info['distinct']} distinct; most common: {common or '-'}"
        lines.append(
            f"| {column} | {info['kind']} | {info['count']} | {info['blank']} | {details} |"
        )
    return "\n".join(lines)


def save_json(data: Any, path: str | Path) -> str:
    """Write `data` as indented JSON (creating folders) and return the path written."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return str(target)


def _tidy(number: float) -> float | int:
    rounded = round(number, 6)
    return int(rounded) if rounded == int(rounded) else rounded


def _fmt(number: float | int) -> str:
    return f"{number:,.2f}".rstrip("0").rstrip(".") if isinstance(number, float) else f"{number:,}"
