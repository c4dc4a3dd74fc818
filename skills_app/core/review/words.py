"""A command or a permission rule in plain words, for a reviewer and for the people who use it.

The words are built from a small vocabulary and a few short facts of the command (the program's
name, a git subcommand, the skill's own file paths, a host name, a file it writes), never from
the rest of its text, so they can be shown to someone who may not read the skill's body. The
Skills page still passes them through the outbound filter against the skill's files.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from ..permissions import RuleSyntaxError, parse_rule
from ..permissions.rules import mcp_parts
from ..permissions.shell import analyze
from .commands import SKILL_DIR_VARS

ARG_PLACEHOLDER = re.compile(r"\$ARGUMENTS\[\d+\]|\$ARGUMENTS\b|\$\d+\b")
_INTERPRETERS = {
    "python": "Python", "python3": "Python", "node": "Node.js", "bash": "shell", "sh": "shell",
    "zsh": "shell", "ruby": "Ruby", "perl": "Perl", "php": "PHP", "deno": "Deno", "bun": "Bun",
}  # fmt: skip
_INSTALLERS = {
    "pip",
    "pip3",
    "npm",
    "pnpm",
    "yarn",
    "uv",
    "poetry",
    "cargo",
    "gem",
    "apt",
    "apt-get",
}
_NETWORK = {"curl", "wget", "ssh", "scp", "rsync", "nc", "ncat", "ftp", "sftp"}
_SHORT = 48  # the longest word quoted in plain words (a path or a name, never prose)
_SKILL_TOKEN = "SKILLDIR"


def _short(word: str) -> str:
    return word if len(word) <= _SHORT else word[: _SHORT - 1] + "…"


def _skill_rel(word: str) -> str | None:
    """The skill-relative path a word names through the skill folder, or None."""
    for prefix in (_SKILL_TOKEN + "/", *(v + "/" for v in SKILL_DIR_VARS)):
        if word.startswith(prefix):
            return word[len(prefix) :]
    return None


def _script(language: str, word: str) -> str:
    rel = _skill_rel(word)
    if rel is not None:
        return f"runs the skill's own {language} script `{_short(rel)}`"
    return f"runs the {language} script `{_short(word)}`"


def _simple(words: tuple[str, ...]) -> str:
    """One simple command in words."""
    if not words:
        return "runs nothing"
    program = words[0].rsplit("/", 1)[-1]
    rel = _skill_rel(words[0])
    rest = list(words[1:])
    if rel is not None:
        return f"runs the skill's own program `{_short(rel)}`"
    if program in _INTERPRETERS:
        language = _INTERPRETERS[program]
        if rest and rest[0] in ("-c", "-e"):
            return f"runs {language} code written on the command line"
        if rest and rest[0] == "-m" and len(rest) > 1:
            return f"runs the {language} module `{_short(rest[1])}`"
        script = next((w for w in rest if not w.startswith("-")), None)
        if script is not None:
            return _script(language, script)
        return "starts a shell" if language == "shell" else f"starts {language}"
    if program == "git":
        sub = next((w for w in rest if not w.startswith("-")), "")
        return f"runs `git {_short(sub)}`" if sub else "runs `git`"
    if program == "rm":
        recursive = any(w.startswith("-") and ("r" in w.lower()) for w in rest)
        return "deletes files and folders" if recursive else "deletes files"
    if program in _NETWORK:
        hosts = [urlsplit(w).hostname for w in rest if "://" in w]
        where = f" ({', '.join(sorted({h for h in hosts if h}))})" if any(hosts) else ""
        return f"reaches the network with `{program}`{where}"
    if program in _INSTALLERS and "install" in rest:
        return f"installs packages with `{program}`"
    if program in ("sudo", "doas", "su"):
        return "runs a command as another user"
    if program in ("mv", "cp"):
        return "moves files" if program == "mv" else "copies files"
    return f"runs `{_short(program)}`"


def explain_command(command: str) -> str:
    """What a command does, in words ("runs the Python script the skill's own file ...")."""
    text = command
    for var in SKILL_DIR_VARS:
        text = text.replace(var, _SKILL_TOKEN)
    takes_arguments = bool(ARG_PLACEHOLDER.search(text))
    text = ARG_PLACEHOLDER.sub("ARG", text)
    analysis = analyze(text)
    parts = [_simple(c.words) for c in analysis.commands] or ["runs a command"]
    sentence = "; then ".join(dict.fromkeys(parts))
    writes = [w for w in analysis.writes if w is not None]
    if writes:
        sentence += "; writes " + ", ".join(f"`{_short(w.replace(chr(0), '$'))}`" for w in writes)
    if any(w is None for w in analysis.writes):
        sentence += "; writes a file whose name is computed when it runs"
    if analysis.opaque:
        sentence += "; part of it is computed when it runs, so no rule can see all of it"
    if takes_arguments:
        sentence += ", with the arguments typed after the skill's name"
    return sentence[0].upper() + sentence[1:] + "."


def _pattern_words(spec: str) -> str:
    if spec.endswith(" *"):
        return f"`{_short(spec[:-2].strip())}` with any arguments"
    if "*" in spec:
        return f"any command matching `{_short(spec)}`"
    return f"exactly `{_short(spec)}`"


def explain_rule(text: str) -> str:
    """What an `allowed-tools` entry grants, in words, with a warning when it grants too much."""
    try:
        rule = parse_rule(text, "allow", source="skill")
    except RuleSyntaxError as exc:
        return f"Cannot be read as a permission rule ({exc}); it grants nothing."
    spec = rule.specifier
    if rule.tool == "Bash":
        if spec is None:
            return "Runs any command at all without asking: no limit."
        broad = breadth_warning(spec)
        caution = f" Careful: {broad}." if broad else ""
        body = spec.replace("\\*", "")
        if spec.endswith(" *") and "*" not in body[:-2]:
            said = explain_command(body[:-2].strip()).rstrip(".")
            return f"{said}, with any arguments, without asking.{caution}"
        if "*" not in body:
            return f"{explain_command(body).rstrip('.')}, exactly as written, without asking."
        return f"Runs {_pattern_words(spec)} without asking.{caution}"
    if rule.tool in ("Read", "Glob", "Grep"):
        return f"Reads files matching `{_short(spec)}`." if spec else "Reads any file it can reach."
    if rule.tool in ("Edit", "Write"):
        return (
            f"Changes files matching `{_short(spec)}`."
            if spec
            else "Changes any file in the workspace."
        )
    if rule.tool == "WebFetch":
        return (
            f"Fetches web pages from {spec.removeprefix('domain:')}."
            if spec
            else "Fetches any web page."
        )
    if rule.tool == "Skill":
        return f"Loads the skill `{_short(spec)}`." if spec else "Loads any skill."
    if (parts := mcp_parts(rule.tool)) is not None:
        return explain_mcp(*parts) + " without asking."
    return f"Uses the {rule.tool} tool" + (f" for `{_short(spec)}`." if spec else ".")


def explain_mcp(server: str, name: str) -> str:
    """What calling `mcp__server__name` does (name "" or "*": any tool, "pre*": a prefix)."""
    if name in ("", "*"):
        return f"Calls any tool of the MCP server `{server}`, with any arguments,"
    if name.endswith("*"):
        return (
            f"Calls the tools of the MCP server `{server}` whose names start with "
            f"`{name[:-1]}`, with any arguments,"
        )
    return f"Calls the tool `{name}` of the MCP server `{server}`, with any arguments,"


def mcp_breadth(name: str) -> str:
    """Why an MCP grant covers more than the tools it names today, or "" when it does not."""
    if name in ("", "*"):
        return "it covers every tool the server lists, and the tools it adds later"
    if name.endswith("*"):
        return "it covers the tools the server adds later under that prefix too"
    return ""


_BROAD_PROGRAMS = {
    "rm": "it deletes any file it is given",
    "curl": "it can send or fetch anything on the network",
    "wget": "it can fetch anything on the network",
    "sudo": "it runs anything as another user",
    "ssh": "it can run anything on another machine",
    **dict.fromkeys(_INTERPRETERS, "the interpreter runs any code it is given"),
}


def breadth_warning(spec: str | None) -> str:
    """Why a Bash pattern grants more than one job needs, or "" when it does not."""
    if spec is None or spec.strip() in ("*", "* *"):
        return "it allows every command"
    words = spec.replace("\\*", "").split()
    program = words[0].rsplit("/", 1)[-1] if words else ""
    if spec.startswith("*"):
        return "it allows any command that ends this way"
    if program in _BROAD_PROGRAMS and (
        len(words) <= 1 or words[1] in ("*", "-rf", "-fr", "-r", "-c", "-e", "-m")
    ):
        return _BROAD_PROGRAMS[program]
    return ""


__all__ = [
    "ARG_PLACEHOLDER",
    "breadth_warning",
    "explain_command",
    "explain_mcp",
    "explain_rule",
    "mcp_breadth",
]
