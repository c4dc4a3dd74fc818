"""Layer 1: the catalog of model-invocable skills, within a character budget.

Budget policy: the whole text (intro and tags included) stays within `budget` whenever the bare
names fit. Descriptions are shortened evenly from the longest down ("water-filling": one common
length cap L, so short descriptions stay whole and long ones are cut to L with an ellipsis). When
L would drop below MIN_DESCRIPTION characters, a cut that short is useless, so the longest
descriptions are dropped instead (the entry becomes the bare name) and the shortest kept whole
while they fit. Names are never dropped: if even the bare names overflow, every name is still
listed and the budget is exceeded.

Who is listed (Claude Code's filter): model-invocable skills that have a `description` or a
`when_to_use` in their frontmatter; a skill with neither is left out (the lint says so), though
the user can still run it as `/name`. A plugin skill's entry ends its description with
`(plugin:NAME)`. Skills with `mode: true` come first, under a "Mode Commands" heading, and the
others under "Skills" (the headings appear only when there are mode skills).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from skills_app.core.skillfile import SkillSpec

CATALOG_INTRO = (
    "Skills are folders of instructions, scripts and reference files that make you better at "
    "particular tasks. Each line below names one available skill and says what it does and when "
    "it helps. When a request matches a skill, call the Skill tool with "
    '{"skill": "<name>", "args": "<arguments, if any>"} before doing the work yourself; the '
    "skill's full instructions then arrive in the conversation and you follow them. When the "
    'user types "/<name>" (optionally followed by arguments), they mean the skill of that name: '
    "invoke it with those arguments. Only invoke skills listed here, never a guessed name. Do not "
    "invoke a skill whose instructions are already loaded in this conversation; follow them instead."
)
MIN_DESCRIPTION = 20
ELLIPSIS = "…"
_HEAD = f"{CATALOG_INTRO}\n\n<available_skills>\n"
_TAIL = "</available_skills>"
MODE_HEADING = "Mode Commands:\n"
OTHER_HEADING = "\nSkills:\n"


@lru_cache(maxsize=8192)
def _entry_text(description: str, when_to_use: str | None, cap: int) -> str:
    # One line per entry: block-scalar newlines and runs of spaces collapse to single spaces.
    text = " ".join(description.split())
    when = " ".join(when_to_use.split()) if when_to_use else ""
    if when:
        text = f"{text} - {when}" if text else when
    return _cut(text, cap)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    if limit <= len(ELLIPSIS):
        return ""
    return text[: limit - len(ELLIPSIS)].rstrip() + ELLIPSIS


def _line(name: str, text: str) -> str:
    return f'"{name}": {text}\n' if text else f'"{name}"\n'


def listed(spec: SkillSpec) -> bool:
    """Whether the catalog lists a skill: model-invocable, with a description or when_to_use."""
    return spec.model_invocable and (spec.has_description or bool(spec.when_to_use))


def catalog_skills(skills: Sequence[SkillSpec]) -> list[SkillSpec]:
    """The skills the catalog lists, in catalog order: `mode` first, then by name."""
    return sorted((s for s in skills if listed(s)), key=lambda s: (not s.mode, s.name))


def _description(spec: SkillSpec) -> str:
    # The source suffix tells apart skills of different plugins with similar descriptions.
    if spec.plugin:
        return f"{spec.description} (plugin:{spec.plugin})".strip()
    return spec.description


def build_catalog(
    skills: Sequence[SkillSpec], *, budget: int = 15_000, entry_cap: int = 1_536
) -> str:
    """The catalog text: intro, then one `"name": description - when_to_use` line per skill."""
    chosen = catalog_skills(skills)
    texts = [_entry_text(_description(s), s.when_to_use, entry_cap) for s in chosen]
    modes = sum(1 for s in chosen if s.mode)
    others = len(chosen) - modes
    headings = (len(MODE_HEADING) + (len(OTHER_HEADING) if others else 0)) if modes else 0
    bare = len(_HEAD) + len(_TAIL) + headings + sum(len(s.name) + 3 for s in chosen)
    room = budget - bare  # what descriptions may use; each costs 2 (": ") plus its text
    lengths = [len(t) for t in texts]
    full = sum(2 + n for n in lengths if n)
    if full > room:
        texts = _fit(texts, lengths, room)
    lines = [_line(s.name, t) for s, t in zip(chosen, texts, strict=True)]
    if modes:
        lines = [MODE_HEADING, *lines[:modes], *([OTHER_HEADING] if others else []), *lines[modes:]]
    return _HEAD + "".join(lines) + _TAIL


def _fit(texts: list[str], lengths: list[int], room: int) -> list[str]:
    def cost(cap: int) -> int:
        return sum(2 + min(n, cap) for n in lengths if n)

    if room > 0 and cost(MIN_DESCRIPTION) <= room:
        lo, hi = MIN_DESCRIPTION, max(lengths)
        while lo < hi:  # the largest cap that fits
            mid = (lo + hi + 1) // 2
            if cost(mid) <= room:
                lo = mid
            else:
                hi = mid - 1
        return [_cut(t, lo) for t in texts]
    # Too tight for useful cuts: keep the shortest descriptions whole, drop the longest.
    kept = [""] * len(texts)
    for i in sorted(range(len(texts)), key=lambda i: (lengths[i], i)):
        if lengths[i] and 2 + lengths[i] <= room:
            kept[i] = texts[i]
            room -= 2 + lengths[i]
    return kept
