"""Skill hooks: `hooks` in a skill's frontmatter, run as sandboxed shell commands.

The shape is Claude Code's settings hooks:
`{EventName: [{matcher: "Bash", hooks: [{type: "command", command: "...", timeout: 30}]}]}`.
They register when the skill is invoked and stay for the rest of the conversation (the caller
persists `SkillHook.as_dict()` and registers them again for later runs).

Each run is checked as `Bash(command)` without asking: anything but `allow` skips the hook (and
the skip is audited). The hook input (tool_name, tool_input, session_id, ...) arrives as JSON on
stdin, in `$SKILLSCOPE_HOOK_INPUT` and in the file `$SKILLSCOPE_HOOK_INPUT_FILE`. Exit code 2
blocks the call (PreToolUse) or the prompt (UserPromptSubmit), with the output as the reason;
any other non-zero exit is recorded and does not block. Every run or skip is reported through
`report` (the `audit.hook` event).
"""

from __future__ import annotations

import json
import logging
import os
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .dynamic import run_shell
from .hooks import HookResult, Hooks
from .permissions import Decision
from .tools.base import ToolContext, cap_text
from .tools.bash import BashTool

logger = logging.getLogger(__name__)

EVENTS = ("PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop")
TOOL_EVENTS = ("PreToolUse", "PostToolUse")
BLOCKING_EVENTS = ("PreToolUse", "UserPromptSubmit")
BLOCK_EXIT = 2
DEFAULT_TIMEOUT = 60
OUTPUT_CAP = 2_000
# Larger inputs are only passed in the file and on stdin (an env string is limited to 128 KiB).
ENV_INPUT_LIMIT = 32_000
_PAYLOAD_KEYS = ("tool_name", "tool_input", "tool_use_id", "prompt", "stop_reason")


@dataclass(frozen=True, slots=True)
class SkillHook:
    skill: str
    event: str
    matcher: str
    command: str
    timeout: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "skill": self.skill,
            "event": self.event,
            "matcher": self.matcher,
            "command": self.command,
            "timeout": self.timeout,
        }

    def matches(self, tool_name: str) -> bool:
        """True when this hook applies to a call of `tool_name` (always, for non-tool events)."""
        if self.event not in TOOL_EVENTS or self.matcher in ("", "*"):
            return True
        try:
            return re.fullmatch(self.matcher, tool_name) is not None
        except re.error:
            return self.matcher == tool_name


def parse_skill_hooks(skill: str, mapping: Mapping[str, Any]) -> tuple[list[SkillHook], list[str]]:
    """The command hooks of a skill's `hooks` field, and a note for each entry that was skipped."""
    hooks: list[SkillHook] = []
    notes: list[str] = []
    if not isinstance(mapping, Mapping):
        return [], [f"hooks must be a mapping of event names, not {type(mapping).__name__}"]
    for event, groups in mapping.items():
        if event not in EVENTS:
            notes.append(f"unsupported hook event {event!r} (supported: {', '.join(EVENTS)})")
            continue
        if not isinstance(groups, list):
            notes.append(f"{event}: expected a list of matcher groups")
            continue
        for group in groups:
            if not isinstance(group, Mapping) or not isinstance(group.get("hooks"), list):
                notes.append(f"{event}: each entry needs a 'hooks' list")
                continue
            matcher = group.get("matcher") or ""
            if not isinstance(matcher, str):
                notes.append(f"{event}: matcher must be a string")
                continue
            for entry in group["hooks"]:
                hook = _hook(skill, event, matcher, entry, notes)
                if hook is not None and hook not in hooks:
                    hooks.append(hook)
    return hooks, notes


def _hook(skill: str, event: str, matcher: str, entry: Any, notes: list[str]) -> SkillHook | None:
    if not isinstance(entry, Mapping):
        notes.append(f"{event}: a hook must be a mapping with type and command")
        return None
    if entry.get("type", "command") != "command":
        notes.append(f"{event}: only command hooks are supported, not {entry.get('type')!r}")
        return None
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        notes.append(f"{event}: a command hook needs a non-empty command")
        return None
    timeout = entry.get("timeout")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        timeout = None
    return SkillHook(skill, event, matcher, command, float(timeout) if timeout else None)


def skill_hooks_from_rows(rows: Iterable[Any]) -> list[SkillHook]:
    """Hooks from stored `as_dict()` lists (one list per invocation), skipping malformed entries."""
    found: list[SkillHook] = []
    for stored in rows:
        for item in stored if isinstance(stored, list) else ():
            try:
                hook = SkillHook(
                    skill=str(item["skill"]),
                    event=str(item["event"]),
                    matcher=str(item.get("matcher") or ""),
                    command=str(item["command"]),
                    timeout=float(item["timeout"]) if item.get("timeout") else None,
                )
            except (KeyError, TypeError, ValueError, AttributeError):
                logger.warning("ignoring a malformed stored skill hook: %r", item)
                continue
            if hook.event in EVENTS and hook not in found:
                found.append(hook)
    return found


# (command, skill) -> decision; never asks.
CheckFn = Callable[[str, str], Awaitable[Decision]]
ReportFn = Callable[[dict[str, Any]], Awaitable[Any]]


class SkillHookRunner:
    """Installs skill hooks into a `Hooks` set (each at most once) and runs them when they fire."""

    def __init__(
        self,
        hooks: Hooks,
        *,
        check: CheckFn | None,
        context: Callable[[], ToolContext],
        report: ReportFn,
        session_id: str,
        bash: BashTool | None = None,
    ) -> None:
        self.hooks = hooks
        self.check = check
        self.context = context
        self.report = report
        self.session_id = session_id
        self.bash = bash
        self.installed: list[SkillHook] = []

    def register(self, skill_hooks: Iterable[SkillHook]) -> list[SkillHook]:
        """Install the hooks not installed yet; returns the newly installed ones."""
        added: list[SkillHook] = []
        for hook in skill_hooks:
            if hook in self.installed or hook.event not in EVENTS:
                continue
            self.installed.append(hook)
            added.append(hook)
            self.hooks.add(hook.event, self._handler(hook))
        return added

    def _handler(self, hook: SkillHook) -> Callable[[dict[str, Any]], Awaitable[HookResult | None]]:
        async def handle(payload: dict[str, Any]) -> HookResult | None:
            return await self.fire(hook, payload)

        return handle

    async def fire(self, hook: SkillHook, payload: dict[str, Any]) -> HookResult | None:
        """Run one hook for one event payload, if it matches and the rules allow its command."""
        tool_name = str(payload.get("tool_name") or "")
        if not hook.matches(tool_name):
            return None
        audit: dict[str, Any] = {
            "skill": hook.skill,
            "event": hook.event,
            "matcher": hook.matcher,
            "command": hook.command,
            "tool_name": tool_name,
            "exit_code": None,
            "output": "",
            "blocked": False,
        }
        if self.check is None:
            decision = Decision("deny", "no permission check is configured for hooks", None)
        else:
            decision = await self.check(hook.command, hook.skill)
        if decision.behavior != "allow":
            await self.report(
                {**audit, "status": "skipped", "reason": f"{decision.behavior}: {decision.reason}"}
            )
            return None
        ctx = self.context()
        data = self._input(hook, payload, ctx)
        # Never through a link a command planted at work/ or work/.tmp: O_NOFOLLOW all the way.
        path = ctx.workspace.ensure_tmp() / f"hook-input-{uuid.uuid4().hex}.json"
        fd = ctx.workspace.open_file(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
        env = {
            **ctx.env,
            "SKILLSCOPE_HOOK_INPUT_FILE": str(path),
            "SKILLSCOPE_HOOK_EVENT": hook.event,
        }
        if len(data) <= ENV_INPUT_LIMIT:
            env["SKILLSCOPE_HOOK_INPUT"] = data
        # The Bash tool gives commands an empty stdin; a subshell reads the input file instead,
        # so hook scripts written for Claude Code (`jq .tool_input` on stdin) work unchanged.
        wrapped = f'(\n{hook.command}\n) < "$SKILLSCOPE_HOOK_INPUT_FILE"'
        try:
            result = await run_shell(
                wrapped,
                replace(ctx, env=env),
                timeout=hook.timeout or DEFAULT_TIMEOUT,
                bash=self.bash,
            )
        finally:
            path.unlink(missing_ok=True)
        output = cap_text(result.output.strip(), OUTPUT_CAP)
        blocked = result.exit_code == BLOCK_EXIT and hook.event in BLOCKING_EVENTS
        if result.exit_code == 0 or blocked:
            status = "blocked" if blocked else "ran"
        else:
            status = "timeout" if result.timed_out else "error"
        await self.report(
            {
                **audit,
                "exit_code": result.exit_code,
                "output": output,
                "blocked": blocked,
                "status": status,
                "reason": decision.reason,
            }
        )
        if status == "error" or status == "timeout":
            logger.info("skill hook %s (%s) failed: %s", hook.command, hook.skill, status)
        if blocked:
            reason = output or f"the hook `{hook.command}` of the skill {hook.skill} exited with 2"
            return HookResult(block=True, reason=reason)
        return None

    def _input(self, hook: SkillHook, payload: dict[str, Any], ctx: ToolContext) -> str:
        data: dict[str, Any] = {
            "session_id": self.session_id,
            "hook_event_name": hook.event,
            "cwd": str(ctx.workspace.root),
            "skill": hook.skill,
        }
        data.update({k: payload[k] for k in _PAYLOAD_KEYS if k in payload})
        result = payload.get("result")
        if result is not None and hasattr(result, "content"):
            data["tool_response"] = {
                "content": result.content,
                "is_error": bool(getattr(result, "is_error", False)),
            }
        return json.dumps(data, ensure_ascii=False, default=str)
