"""Dynamic context: shell commands in a skill body that run before the body is delivered.

Two forms, as in Claude Code:
- inline `` !`command` ``, recognised at the start of a line or after whitespace (never inside a
  word: `foo!`x`` is plain text);
- a fenced block opened by a line ```` ```! ```` and closed by a line ```` ``` ````; its content is
  one (possibly multi-line) command.

Each command is checked as `Bash(command)` by a non-asking permission check: only `allow` runs,
anything else aborts the invocation (commands never prompt). A non-zero exit or a timeout aborts
too. The output (stdout and stderr merged, capped) replaces the placeholder in one pass, so output
that itself looks like `` !`x` `` is never run. With shell execution disabled each placeholder is
replaced by a notice instead.

Commands are found in the raw body, before argument substitution, so arguments can never add a
command; argument tokens inside a command are substituted (and the rules then see the final text).
Commands run through the ordinary Bash tool, so the sandbox, the scrubbed environment and the
resource limits apply.

The commands and their output are hidden content (like the body they come from): the errors
raised here name the skill, the command's position ("command 2 of 3"), the rule or the failure
(exit code, timeout, the sandbox refusal), never the command text or its output. Both are kept
in `ShellRun`s for the audit, which only inspectors see.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from .permissions import Decision
from .render import render_skill, substitute
from .skillfile import SkillSpec
from .tools.base import ToolContext, ToolError, cap_text
from .tools.bash import BashTool

SHELL_DENIED = "shell_denied"
SHELL_FAILED = "shell_failed"
DISABLED_NOTICE = "[shell command execution disabled by policy]"
# Per command, in the injected text; the Bash tool already capped the stream itself.
OUTPUT_CAP = 10_000

# Fence lines: a ```! opener or a bare ``` closer. Blocks are paired in one linear walk (a lazy
# regex across the body would rescan to the end for every unclosed opener).
_FENCES = re.compile(r"^```(?P<bang>!)?[ \t]*$", re.MULTILINE)
# Starts with the literal, so the engine can skip ahead; the "after whitespace" test is in code.
_INLINE = re.compile(r"!`(?P<command>[^`\n]+)`")
_STATUS = re.compile(r"Exit code: (?P<code>-?\d+)")


class DynamicContextError(Exception):
    """A `!` command that was not allowed or failed; the invocation delivers nothing."""

    def __init__(self, code: str, message: str, runs: tuple[ShellRun, ...]) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.runs = runs


@dataclass(frozen=True, slots=True)
class Placeholder:
    start: int
    end: int
    command: str
    form: str  # "inline" | "block"


@dataclass(frozen=True, slots=True)
class ShellResult:
    exit_code: int | None  # None when it timed out or the status is unknown
    output: str
    timed_out: bool = False
    # Set when the command never ran (the Bash tool refused it); the server's own words.
    error: str = ""


@dataclass(frozen=True, slots=True)
class ShellRun:
    """One placeholder's fate, for the audit."""

    command: str
    form: str
    status: str  # ran | disabled | denied | failed
    exit_code: int | None = None
    output: str = ""
    reason: str = ""

    def as_audit(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "form": self.form,
            "status": self.status,
            "exit_code": self.exit_code,
            "output": self.output,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class DynamicRender:
    text: str
    runs: tuple[ShellRun, ...] = ()


ShellCheck = Callable[[str], Awaitable[Decision]]
ShellExec = Callable[[str], Awaitable[ShellResult]]


def find_placeholders(body: str) -> list[Placeholder]:
    """The `!` commands of a body, in order (a fenced block's content is one command)."""
    if "!`" not in body and "```!" not in body:
        return []
    blocks: list[Placeholder] = []
    opener: re.Match[str] | None = None
    for fence in _FENCES.finditer(body):
        if opener is None:
            if fence["bang"] and fence.end() < len(body):
                opener = fence
        elif not fence["bang"]:
            command = body[opener.end() + 1 : fence.start()].rstrip("\n")
            blocks.append(Placeholder(opener.start(), fence.end(), command, "block"))
            opener = None
    found: list[Placeholder] = []
    cursor = 0
    for block in [*blocks, None]:
        stop = block.start if block is not None else len(body)
        pos = cursor
        while (m := _INLINE.search(body, pos, stop)) is not None:
            if m.start() == 0 or body[m.start() - 1].isspace():
                found.append(Placeholder(m.start(), m.end(), m["command"], "inline"))
                pos = m.end()
            else:  # inside a word: not a command, but a real one may start within it
                pos = m.start() + 1
        if block is not None:
            found.append(block)
            cursor = block.end
    return found


async def run_shell(
    command: str,
    ctx: ToolContext,
    *,
    timeout: float | None = None,
    bash: BashTool | None = None,
) -> ShellResult:
    """Run a command with the Bash tool (sandbox, scrubbed env, limits) and split off its status."""
    tool = bash or BashTool()
    call: dict[str, Any] = {"command": command}
    if timeout is not None:
        call["timeout"] = timeout
    try:
        result = await tool.run(call, ctx)
    except ToolError as exc:
        return ShellResult(exit_code=None, output="", error=str(exc))
    # The Bash tool ends its result with a status paragraph: "Exit code: N" or a timeout notice.
    text, sep, status = result.content.rpartition("\n\n")
    if not sep:
        text, status = "", result.content
    m = _STATUS.match(status)
    if m is not None:
        return ShellResult(exit_code=int(m["code"]), output=text)
    if status.startswith("Command timed out"):
        return ShellResult(exit_code=None, output=text, timed_out=True)
    return ShellResult(exit_code=None, output=result.content)


async def render_dynamic(
    spec: SkillSpec,
    args: str,
    *,
    skill_dir: str,
    session_id: str,
    check: ShellCheck | None,
    execute: ShellExec,
    disabled: bool = False,
) -> DynamicRender:
    """The hidden message with every `!` command replaced by its output (or the policy notice)."""
    placeholders = find_placeholders(spec.body)
    if not placeholders:
        return DynamicRender(render_skill(spec, args, skill_dir=skill_dir, session_id=session_id))

    # Each placeholder becomes a random token the argument substitution cannot touch; the tokens
    # are replaced by the outputs in a single pass at the end, so no output is ever re-scanned.
    token = f"\x00shell-{uuid.uuid4().hex}-"
    parts: list[str] = []
    cursor = 0
    for i, p in enumerate(placeholders):
        parts += [spec.body[cursor : p.start], f"{token}{i}\x00"]
        cursor = p.end
    parts.append(spec.body[cursor:])
    rendered = render_skill(
        replace(spec, body="".join(parts)), args, skill_dir=skill_dir, session_id=session_id
    )

    runs: list[ShellRun] = []
    outputs: list[str] = []
    for p in placeholders:
        command = substitute(
            p.command, args, arguments=spec.arguments, skill_dir=skill_dir, session_id=session_id
        )
        which = f"command {len(runs) + 1} of {len(placeholders)}"
        run = await _run_one(spec.name, which, command, p.form, check, execute, disabled, runs)
        runs.append(run)
        outputs.append(run.output)

    text = re.sub(re.escape(token) + r"(\d+)\x00", lambda m: outputs[int(m[1])], rendered)
    return DynamicRender(text, tuple(runs))


async def _run_one(
    skill: str,
    which: str,
    command: str,
    form: str,
    check: ShellCheck | None,
    execute: ShellExec,
    disabled: bool,
    done: list[ShellRun],
) -> ShellRun:
    if disabled:
        return ShellRun(command, form, "disabled", output=DISABLED_NOTICE, reason="policy")
    if not command.strip():
        return ShellRun(command, form, "ran", exit_code=0)
    if check is None:
        decision = Decision("deny", "no permission check is configured for skill commands", None)
    else:
        decision = await check(command)
    if decision.behavior != "allow":
        denied = ShellRun(command, form, "denied", reason=f"{decision.behavior}: {decision.reason}")
        raise DynamicContextError(
            SHELL_DENIED,
            f'The skill "{skill}" runs a shell command before it loads ({which}, `!` dynamic '
            f"context), and the permission check did not allow it ({decision.behavior}: "
            f"{decision.reason}). Skill commands never prompt: an admin must add an allow rule "
            "for that command (an auditor can see it in the skill's audit), or remove the "
            "command from the skill.",
            (*done, denied),
        )
    result = await execute(command)
    output = cap_text(result.output.rstrip("\n"), OUTPUT_CAP)
    if result.exit_code != 0:
        why = (
            "timed out"
            if result.timed_out
            else f"failed with exit code {result.exit_code}"
            if result.exit_code is not None
            else f"could not run: {result.error}"
            if result.error
            else "could not run"
        )
        failed = ShellRun(command, form, "failed", result.exit_code, output, reason=why)
        raise DynamicContextError(
            SHELL_FAILED,
            f'The skill "{skill}" could not load: its shell command ({which}, `!` dynamic '
            f"context) {why}. Its output is kept in the skill's audit.",
            (*done, failed),
        )
    return ShellRun(command, form, "ran", result.exit_code, output, reason=decision.reason)
