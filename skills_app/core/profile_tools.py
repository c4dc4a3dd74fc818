"""The tools of the `tool-result` and `system-prompt` delivery profiles, as an Agent mixin.

They reuse the Skill meta-tool's path (`_invoke_skill`: validation, `Skill(NAME)` permission, render,
audit) and differ only in where the injected text goes.
"""

from __future__ import annotations

import fnmatch
import json
import shlex
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .permissions import ToolCall
from .profiles import (
    DOC_CHAR_LIMIT,
    META_MESSAGE,
    SYSTEM_PROMPT_PROFILE,
    TOOL_RESULT,
    TOOLSET_NAMES,
    catalog_lines,
    skill_state,
    state_message,
)
from .tools.bash import BashTool
from .transcript import HIDDEN_PREFIX, StoredMessage, tool_result_block

if TYPE_CHECKING:
    from .agent import Agent, SkillOutcome

# (the tool_result for the turn's visible result row, or None when a hidden row carries it; extra rows)
ToolAnswer = tuple[dict[str, Any] | None, list[tuple[StoredMessage, Any]]]
_SAFE_ENV = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789")
_PROTECTED_ENV = frozenset({"PATH", "HOME", "WORK_DIR", "OUTPUT_DIR", "SKILLS_DIR", "SKILL_NAME"})


def _body_of(hidden: str) -> str:
    """The substituted body without the "Base directory for this skill" line."""
    if hidden.startswith(HIDDEN_PREFIX):
        _first, _sep, rest = hidden.partition("\n\n")
        return rest
    return hidden


class ProfileToolsMixin:
    """Handlers for `load_skill` and the `skill_*` toolset; mixed into Agent."""

    def _is_profile_tool(self: Agent, name: str) -> bool:
        profile = self.config.profile
        return (profile == TOOL_RESULT and name == "load_skill") or (
            profile == SYSTEM_PROMPT_PROFILE and name in TOOLSET_NAMES
        )

    async def _profile_tool(self: Agent, block: dict[str, Any]) -> ToolAnswer:
        name = block["name"]
        tool_input = block.get("input") or {}
        if name == "load_skill":
            answer = await self._load_skill(block["id"], str(tool_input.get("name") or ""))
        elif name == "skill_list":
            answer = (tool_result_block(block["id"], catalog_lines(self.skills.skills())), [])
        elif name == "skill_load":
            answer = await self._skill_load(block["id"], str(tool_input.get("skill") or ""))
        elif name == "skill_select_docs":
            answer = self._skill_select_docs(block["id"], tool_input)
        else:
            answer = await self._skill_run(block, tool_input)
        result = answer[0]
        skill = str(tool_input.get("skill") or tool_input.get("name") or "")
        if result is None:
            result = {"content": "(skill instructions, hidden)"}
        await self._emit_result(block, result, skill=skill)
        return answer

    async def _emit_result(
        self: Agent, block: dict[str, Any], result: dict[str, Any], **extra: Any
    ) -> None:
        from .agent import AgentEvent

        content = result["content"]
        await self.emit(
            AgentEvent(
                "tool.result",
                {
                    "tool_use_id": block["id"],
                    "name": block["name"],
                    "is_error": bool(result.get("is_error")),
                    "content": content,
                    **extra,
                },
            )
        )

    def _available_names(self: Agent) -> str:
        return ", ".join(s.name for s in self.skills.skills() if s.model_invocable) or "(none)"

    async def _load_through_tool(
        self: Agent, tool_use_id: str, name: str
    ) -> tuple[SkillOutcome | None, ToolAnswer | None]:
        """The shared start of `load_skill` and `skill_load`: an outcome to deliver, or the answer."""
        if self.skills.get(name) is None:
            message = f'Error: unknown skill "{name}". Available skills: {self._available_names()}'
            return None, (tool_result_block(tool_use_id, message, is_error=True), [])
        outcome = await self._invoke_skill(name, "", caller="model", tool_use_id=tool_use_id)
        if not outcome.ok:
            return None, (
                tool_result_block(tool_use_id, f"Error: {outcome.error}", is_error=True),
                [],
            )
        if self._forks(name):
            return None, await self._forked_answer(tool_use_id, name, outcome)
        return outcome, None

    async def _load_skill(self: Agent, tool_use_id: str, name: str) -> ToolAnswer:
        outcome, answer = await self._load_through_tool(tool_use_id, name)
        if outcome is None:
            assert answer is not None
            return answer
        status, hidden = outcome.messages[0], outcome.messages[1]
        wrapped = f'<skill name="{name}">\n{hidden.plain_text}\n</skill>'
        block = tool_result_block(tool_use_id, wrapped)
        # The result carrying the body is stored on its own, hidden row; a chip stands for it.
        row = StoredMessage(
            role="user", kind="skill_prompt", content=(block,), is_meta=True, meta={"skill": name}
        )
        extra = [(row, outcome.invocation), (_not_to_model(status), outcome.invocation)]
        extra += [(m, outcome.invocation) for m in outcome.messages[2:]]
        return None, extra

    async def _skill_load(self: Agent, tool_use_id: str, name: str) -> ToolAnswer:
        outcome, answer = await self._load_through_tool(tool_use_id, name)
        if outcome is None:
            assert answer is not None
            return answer
        status, hidden = outcome.messages[0], outcome.messages[1]
        state = state_message(name, "load", _body_of(hidden.plain_text))
        extra = [(state, outcome.invocation), (_not_to_model(status), outcome.invocation)]
        extra += [(m, outcome.invocation) for m in outcome.messages[2:]]
        text = f'Loaded the skill "{name}": its instructions are now in the system prompt.'
        return tool_result_block(tool_use_id, text), extra

    async def _forked_answer(
        self: Agent, tool_use_id: str, name: str, outcome: SkillOutcome
    ) -> ToolAnswer:
        """A `context: fork` skill runs as a subagent in every profile; its final text is the result."""
        chip = _not_to_model(outcome.messages[0])
        forked = await self._run_fork(
            name, replace(outcome, messages=[chip, *outcome.messages[1:]])
        )
        text = forked.text if forked.ok else f"Error: {forked.error}"
        return tool_result_block(tool_use_id, text, is_error=not forked.ok), []

    def _skill_select_docs(self: Agent, tool_use_id: str, tool_input: dict[str, Any]) -> ToolAnswer:
        name = str(tool_input.get("skill") or "")
        docs = tool_input.get("docs") or []
        if name not in skill_state(self.history).loaded:
            return _error(tool_use_id, f'Load the skill "{name}" with skill_load first.')
        if not isinstance(docs, list) or not docs:
            return _error(
                tool_use_id, "docs must be a non-empty list of paths in the skill folder."
            )
        spec = self.skills.get(name)
        if spec is None:
            return _error(tool_use_id, f'Unknown skill "{name}".')
        root = spec.path.resolve()
        selected: dict[str, str] = {}
        for doc in docs:
            path = (root / str(doc)).resolve()
            if not path.is_relative_to(root) or not path.is_file():
                files = sorted(
                    str(p.relative_to(root))
                    for p in root.rglob("*")
                    if p.is_file() and p.name != "SKILL.md"
                )
                return _error(
                    tool_use_id,
                    f'"{doc}" is not a document of the skill "{name}". Its files: {", ".join(files)}',
                )
            try:
                selected[str(doc)] = path.read_text(encoding="utf-8")[:DOC_CHAR_LIMIT]
            except UnicodeDecodeError:
                return _error(tool_use_id, f'"{doc}" is not a text document.')
        state = state_message(name, "docs", f"selected {len(selected)} document(s)", docs=selected)
        text = f'Selected {len(selected)} document(s) of "{name}": {", ".join(selected)}. Their text is now in the system prompt.'
        return tool_result_block(tool_use_id, text), [(state, None)]

    async def _skill_run(
        self: Agent, block: dict[str, Any], tool_input: dict[str, Any]
    ) -> ToolAnswer:
        tool_use_id = block["id"]
        name = str(tool_input.get("skill") or "")
        command = str(tool_input.get("command") or "").strip()
        if name not in skill_state(self.history).loaded:
            return _error(
                tool_use_id, f'Load the skill "{name}" with skill_load before running it.'
            )
        if not command:
            return _error(tool_use_id, "command is empty.")
        # skill_run commands are governed by the Bash rules.
        decision = await self.decide(ToolCall(tool="Bash", input={"command": command}), self.state)
        if decision.behavior != "allow":
            return _error(tool_use_id, f"Permission denied: {decision.reason}")
        ctx = self.tool_context
        workspace = ctx.workspace
        cwd = str(tool_input.get("cwd") or ".")
        try:
            cwd_path = workspace.resolve(cwd)
        except Exception as exc:
            return _error(tool_use_id, str(exc))
        user_env = tool_input.get("env") or {}
        env = {
            k: str(v)
            for k, v in (user_env.items() if isinstance(user_env, dict) else [])
            if k and set(k) <= _SAFE_ENV and k not in _PROTECTED_ENV
        }
        env |= {"SKILL_NAME": name}
        err_file = workspace.work_dir / ".tmp" / f"stderr-{uuid.uuid4().hex}"
        err_file.parent.mkdir(parents=True, exist_ok=True)
        wrapped = (
            f"cd {shlex.quote(str(cwd_path))} && ( {command}\n) 2> {shlex.quote(str(err_file))}"
        )
        run_input: dict[str, Any] = {"command": wrapped}
        if tool_input.get("timeout"):
            run_input["timeout"] = tool_input["timeout"]
        started = time.monotonic()
        result = await BashTool().run(run_input, replace(ctx, env={**ctx.env, **env}))
        duration = round(time.monotonic() - started, 3)
        stderr = err_file.read_text(errors="replace") if err_file.exists() else ""
        err_file.unlink(missing_ok=True)
        stdout, _sep, status = result.content.rpartition("\n\n")
        exit_code: int | None = None
        if status.startswith("Exit code: "):
            try:
                exit_code = int(status.removeprefix("Exit code: ").split()[0])
            except ValueError:
                exit_code = None
        patterns = [str(p) for p in tool_input.get("output_files") or []]
        files = [
            rel
            for rel in _workspace_files(workspace.root)
            if any(fnmatch.fnmatch(rel, p) for p in patterns)
        ]
        payload = {
            "stdout": stdout if status else result.content,
            "stderr": stderr[-ctx.output_limit :],
            "exit_code": exit_code,
            "timed_out": "timed out" in status,
            "duration": duration,
            "output_files": files,
        }
        block_out = tool_result_block(
            tool_use_id, json.dumps(payload, ensure_ascii=False), is_error=result.is_error
        )
        return block_out, []


def _workspace_files(root: Path) -> list[str]:
    out: list[str] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if rel.parts and rel.parts[0] in {"skills"} or any(p.startswith(".") for p in rel.parts):
            continue
        if path.is_file():
            out.append(str(rel))
    return out


def _error(tool_use_id: str, message: str) -> ToolAnswer:
    return tool_result_block(tool_use_id, f"Error: {message}", is_error=True), []


def _not_to_model(message: StoredMessage) -> StoredMessage:
    return StoredMessage(
        role=message.role,
        content=message.content,
        kind=message.kind,
        is_meta=message.is_meta,
        to_model=False,
        meta=message.meta,
    )


__all__ = ["META_MESSAGE", "ProfileToolsMixin"]
