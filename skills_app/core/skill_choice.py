"""How the offline demo model (and the tests' fake API) picks a skill: a documented, deterministic
rule over the catalog text a request carries, so trigger tests run end to end without Claude.

The rule, in order:

1. **Named.** When the query names a listed skill as a word (not inside a longer name, a path or
   a file name such as `report.pdf`), that skill is chosen; the earliest mention wins, then the
   longest name. The text after the name becomes the skill's arguments.
2. **Word overlap.** Otherwise both sides are reduced to *content words*: lower-cased runs of
   letters and digits (a name like `release-notes` gives `release` and `notes`), at least three
   characters long, not in `STOP_WORDS`, with a plural `s` dropped (`notes` -> `note`, but not
   `ss` as in `class`). A skill's words come from its name and its catalog text (description and
   `when_to_use`). Its score is the number of distinct query words among them. The skill with
   the highest score is chosen when that score is at least `MIN_OVERLAP`; a tie goes to the
   skill listed first in the catalog.
3. Otherwise no skill is chosen.

It is a stand-in, not a model of Claude: it shows how a description's wording decides what a
word-matching reader picks, which is enough to exercise every part of a trigger run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MIN_OVERLAP = 2
# Function words and the generic words of a request: they say nothing about which skill fits.
STOP_WORDS = frozenset(
    """
    the and for are but not you your yours our ours all any can could has have had was were will
    would just get got its them they their there here then than also very one out too over more
    most such only own same other each few both way let lets may might must should shall does
    did doing done been being him her his she hers we us me my mine this that these those with
    from into onto about when what which who whom how why where while please help want need like
    use using used skill something thing things some
    """.split()  # noqa: SIM905 - a word list reads better as text
)
LOADERS = ("Skill", "load_skill", "skill_load")

_WORD = re.compile(r"[a-z0-9]+")
_SKILL_TOOL_ENTRY = re.compile(r'^\s*(?:[-*]\s*)?"(?P<name>[^"\n]+)"\s*:\s*(?P<desc>.*)$')
_SKILL_TOOL_BARE = re.compile(r'^\s*(?:[-*]\s*)?"(?P<name>[^"\n]+)"\s*$')
_LISTED_ENTRY = re.compile(r"^\s*-\s*(?P<name>[A-Za-z0-9][\w:.-]*)\s*:\s*(?P<desc>.*)$")
_LISTINGS = ("Skills available:", "Available skills:")


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """A skill as the request lists it: its name and its catalog text."""

    name: str
    description: str


@dataclass(frozen=True, slots=True)
class Choice:
    """The skill the rule picked, why ("named" or "overlap"), its score and the arguments."""

    entry: CatalogEntry
    reason: str
    score: int
    args: str = ""


def read_catalog(system: str, tools: Sequence[dict[str, Any]]) -> list[CatalogEntry]:
    """The skills a request lists: in the Skill tool's description, else in the system prompt."""
    entries: list[CatalogEntry] = []
    for tool in tools:
        description = str(tool.get("description", ""))
        if tool.get("name") == "Skill" and "<available_skills>" in description:
            inner = description.split("<available_skills>", 1)[1].split("</available_skills>", 1)[0]
            for line in inner.splitlines():
                if match := _SKILL_TOOL_ENTRY.match(line):
                    entries.append(CatalogEntry(match["name"].strip(), match["desc"].strip()))
                elif match := _SKILL_TOOL_BARE.match(line):
                    # A description the budget dropped: the bare name is still listed.
                    entries.append(CatalogEntry(match["name"].strip(), ""))
    heading = next((h for h in _LISTINGS if h in system), None)
    if not entries and heading is not None:
        listing = system.split(heading, 1)[1]
        for line in listing.splitlines()[1:]:
            if match := _LISTED_ENTRY.match(line):
                entries.append(CatalogEntry(match["name"], match["desc"].strip()))
            elif line.strip():
                break
    return entries


def content_words(text: str) -> frozenset[str]:
    """The words the overlap rule compares (see the module docstring)."""
    words = set()
    for word in _WORD.findall(text.lower()):
        if word in STOP_WORDS:
            continue  # before folding: "this" is not the plural of "thi"
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        if len(word) >= 3 and word not in STOP_WORDS:
            words.add(word)
    return frozenset(words)


def named_skill(query: str, catalog: Sequence[CatalogEntry]) -> Choice | None:
    """Rule 1: the skill the query names as a word, with the text after the name as arguments."""
    best: tuple[int, int, CatalogEntry, re.Match[str]] | None = None
    for entry in catalog:
        # A name as a word: not part of a longer name, a path or a file extension like report.pdf.
        pattern = rf"(?<![\w./:-]){re.escape(entry.name)}(?![\w/:-])(?!\.\w)"
        match = re.search(pattern, query, re.IGNORECASE)
        if match and (best is None or (match.start(), -len(entry.name)) < best[:2]):
            best = (match.start(), -len(entry.name), entry, match)
    if best is None:
        return None
    rest = query[best[3].end() :]
    rest = re.sub(r"^\s*(?:skill\b)?[\s:,.-]*", "", rest, flags=re.IGNORECASE)
    return Choice(best[2], "named", 0, rest.strip())


def overlap_scores(query: str, catalog: Sequence[CatalogEntry]) -> list[tuple[CatalogEntry, int]]:
    """Rule 2's score of every listed skill, in catalog order."""
    asked = content_words(query)
    return [
        (entry, len(asked & content_words(f"{entry.name} {entry.description}")))
        for entry in catalog
    ]


def choose_skill(query: str, catalog: Sequence[CatalogEntry]) -> Choice | None:
    """The skill the rule picks for `query` from `catalog`, or None (see the module docstring)."""
    named = named_skill(query, catalog)
    if named is not None:
        return named
    best: tuple[CatalogEntry, int] | None = None
    for entry, score in overlap_scores(query, catalog):
        if score >= MIN_OVERLAP and (best is None or score > best[1]):
            best = (entry, score)
    return Choice(best[0], "overlap", best[1]) if best else None


def loader_call(
    tools: Sequence[dict[str, Any]], skill: str, args: str
) -> tuple[str, dict[str, Any]]:
    """The tool name and input that load `skill` with the loader tool a request offers."""
    names = {str(tool.get("name")): tool for tool in tools}
    if "Skill" in names:
        return "Skill", {"skill": skill, "args": args}
    if "skill_load" in names:
        return "skill_load", {"skill": skill}
    tool = names.get("load_skill", {})
    properties = list(tool.get("input_schema", {}).get("properties", {}) or {"name": None})
    return "load_skill", {properties[0]: skill}


def can_load(tools: Sequence[dict[str, Any]]) -> bool:
    """Whether the request offers a tool that loads skills."""
    return any(tool.get("name") in LOADERS for tool in tools)
