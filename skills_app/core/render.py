"""Layer 2: the hidden message a skill injects (base directory + substituted body).

Substitutions, in one left-to-right pass (a substituted value is never re-scanned):
- `$ARGUMENTS` -> the whole argument string as typed;
- `$ARGUMENTS[N]` and `$N` -> the N-th argument (0-based, shell-style quoting); with no N-th
  argument the token is left as written;
- `$name` for each name declared in `arguments:` -> that positional argument, or "" when missing;
- an odd run of backslashes before one of those tokens escapes it (one backslash is removed and
  the token stays literal: `\\$1.00` -> `$1.00`); an even run is kept and the token substituted;
- `${CLAUDE_SKILL_DIR}` and `${CLAUDE_SESSION_ID}` are always substituted, backslashes or not;
  `{baseDir}` (the older spelling skill authors still use) resolves like `${CLAUDE_SKILL_DIR}`.
`ARGUMENTS: <args>` is appended when args are given and the body has no argument placeholder of
any of the forms above (so the model still sees what the user passed).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from functools import lru_cache

from skills_app.core.skillfile import SkillSpec

_ARG_TOKENS = r"\$ARGUMENTS\[(?P<index>\d+)\]|\$ARGUMENTS(?![\w\[])|\$(?P<pos>\d+)"
_CLAUDE_VARS = r"\$\{CLAUDE_(?P<var>SKILL_DIR|SESSION_ID)\}|\{(?P<base>baseDir)\}"


@lru_cache(maxsize=256)
def _pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    named = ""
    if names:
        # Longest first, so `$file_type` is not read as `$file` + "_type".
        alts = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
        named = rf"|\$(?P<name>{alts})(?![\w])"
    return re.compile(rf"(?P<bs>\\*)(?P<tok>{_ARG_TOKENS}{named})|{_CLAUDE_VARS}")


def split_args(args: str) -> list[str]:
    """Split arguments with shell-style quoting; unbalanced quotes are closed, not fatal."""
    try:
        return shlex.split(args)
    except ValueError:
        pass
    text = args.removesuffix("\\")  # a dangling escape at the end escapes nothing
    for suffix in ("", '"', "'"):
        try:
            return shlex.split(text + suffix)
        except ValueError:
            continue
    return args.split()


def _declared(arguments: Sequence[str]) -> tuple[str, ...]:
    return tuple(a for a in arguments if re.fullmatch(r"[A-Za-z_]\w*", a) and a != "ARGUMENTS")


def has_placeholder(body: str, arguments: Sequence[str] = ()) -> bool:
    """True when the body holds an unescaped argument placeholder of any form."""
    for m in _pattern(_declared(arguments)).finditer(body):
        if m["tok"] is not None and len(m["bs"]) % 2 == 0:
            return True
    return False


def substitute(
    body: str, args: str, *, arguments: Sequence[str] = (), skill_dir: str, session_id: str
) -> str:
    """Apply the argument and ${CLAUDE_*} substitutions to a skill body."""
    names = _declared(arguments)
    values = split_args(args) if args.strip() else []
    positions = {name: i for i, name in enumerate(arguments) if name in names}

    def replace(m: re.Match[str]) -> str:
        if m["base"] is not None:
            return skill_dir
        if m["var"] is not None:
            return skill_dir if m["var"] == "SKILL_DIR" else session_id
        bs, tok = m["bs"], m["tok"]
        if len(bs) % 2:
            return bs[:-1] + tok
        if m["index"] is not None or m["pos"] is not None:
            i = int(m["index"] if m["index"] is not None else m["pos"])
            return bs + (values[i] if i < len(values) else tok)
        if m.groupdict().get("name") is not None:
            i = positions[m["name"]]
            return bs + (values[i] if i < len(values) else "")
        return bs + args

    return _pattern(names).sub(replace, body)


def render_skill(
    spec: SkillSpec,
    args: str,
    *,
    skill_dir: str | None = None,
    session_id: str,
    base_dir_line: bool = True,
) -> str:
    """The hidden message: base directory, a blank line, the substituted body (+ ARGUMENTS line).

    Without `base_dir_line` it is the substituted body alone (the toolset profile's form).
    """
    directory = skill_dir if skill_dir is not None else str(spec.path)
    body = substitute(
        spec.body, args, arguments=spec.arguments, skill_dir=directory, session_id=session_id
    )
    text = f"Base directory for this skill: {directory}\n\n{body.rstrip()}"
    if not base_dir_line:
        text = body.strip()
    if args.strip() and not has_placeholder(spec.body, spec.arguments):
        text += f"\n\nARGUMENTS: {args}"
    return text
