"""Invoking a skill, the one path both entrances share (the model's skill tool, the user's `/name`).

Validate, check `Skill(NAME)`, stage the skill, render its body (running `!` commands under the
rules its turn would have), audit every attempt, apply the skill's context change for the rest
of the turn and describe the two messages: the visible status and the hidden instructions.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from .agent import Agent, TurnState
from .dynamic import DynamicContextError, DynamicRender, render_dynamic, run_shell
from .model_catalog import resolve_model_id
from .permissions import Decision, Rule, RuleSyntaxError, ToolCall, parse_rule
from .ports import InvocationRecord, RunPorts
from .profiles.base import CLAUDE_CODE, Rendering, SkillOutcome
from .skillfile import SkillSpec
from .skillhooks import SkillHook, parse_skill_hooks
from .skilltool import (
    CANNOT_LOAD,
    PERMISSION_DENIED,
    SKILL_TOOL,
    SkillInvocationError,
    validate_invocation,
)
from .tools.bash import BashTool
from .transcript import StoredMessage, status_message_text

logger = logging.getLogger(__name__)

ALREADY_LOADED = (
    'The skill "{name}" is already loaded above with the same content; follow those instructions.'
)
_SKILL_DIR_VAR = re.compile(r"\$\{CLAUDE_SKILL_DIR\}|\{baseDir\}")


class SkillInvoker:
    """Invokes skills for one run; it updates the run's turn state as skills apply."""

    def __init__(
        self,
        *,
        agent: Agent,
        ports: RunPorts,
        state: TurnState,
        history: Sequence[StoredMessage],
        register_hooks: Callable[[Sequence[SkillHook]], object],
        bash: BashTool,
    ) -> None:
        self.agent = agent
        self.ports = ports
        self.state = state
        self.history = history
        self.register_hooks = register_hooks
        self.bash = bash

    async def invoke(
        self,
        name: str,
        args: str,
        *,
        caller: str,
        tool_use_id: str | None,
        permission: str = SKILL_TOOL,
        rendering: Rendering = CLAUDE_CODE,
        context: bool = True,
    ) -> SkillOutcome:
        """Validate, decide, render and audit one invocation; every attempt is audited.

        `permission` is the tool the rules see (`Skill`, or a profile's loader whose default
        differs); `rendering` is the form of the body the profile delivers; `context=False`
        (a design without Claude Code's execution context) applies none of the skill's
        `allowed-tools`, `disallowed-tools`, `model`, `effort` and `hooks`.
        """
        record = InvocationRecord(
            skill=name, args=args, caller=caller, tool_use_id=tool_use_id or ""
        )
        try:
            spec = validate_invocation(
                name, caller=caller, lookup=self.agent.skills.get, reserved=self.agent.tools.names()
            )
            record = replace(record, source=spec.source, digest=spec.digest)
            call = ToolCall(tool=permission, input={"skill": name, "args": args})
            decision = await self._decide(call, name, caller)
            record = replace(record, decided_by=decision.reason, approval_id=decision.approval_id)
            if decision.behavior != "allow":
                raise SkillInvocationError(
                    PERMISSION_DENIED,
                    f'Permission to use the skill "{name}" was denied: {decision.reason}',
                )
            try:
                skill_dir = await self.ports.stage_skill(spec)
                rendered = await self._render_body(spec, args, skill_dir, rendering)
            except DynamicContextError as exc:
                record = replace(record, shell_commands=tuple(r.as_audit() for r in exc.runs))
                raise SkillInvocationError(exc.code, exc.message) from exc
            except Exception as exc:
                logger.warning("skill %s cannot be loaded", name, exc_info=True)
                raise SkillInvocationError(
                    CANNOT_LOAD, f'The skill "{name}" cannot be loaded: {exc}'
                ) from exc
        except SkillInvocationError as exc:
            decision_text = "denied" if exc.code == PERMISSION_DENIED else "failed"
            record = replace(record, decision=decision_text, error_code=exc.code, error=exc.message)
            await self.ports.record_invocation(record)
            return SkillOutcome(ok=False, error=exc.message, code=exc.code)
        return await self._apply(
            spec, args, skill_dir, rendered, record, context=context, dedupe=rendering.text is None
        )

    async def _decide(self, call: ToolCall, name: str, caller: str) -> Decision:
        """The permission for this invocation; a person's own `/name` is their consent.

        A slash command is typed on purpose, so the default "ask" for skills does not ask
        again. Deny rules still refuse it, and an admin rule that explicitly says ask for this
        skill still asks; a model's call is decided (and asked about) as before.
        """
        if caller != "user":
            return await self.ports.decide(call, self.state)
        ruled = await self.ports.check(call, self.state)
        if ruled.behavior == "ask" and ruled.rule is None:
            return Decision("allow", f"started by the user with /{name}", None)
        if ruled.behavior == "ask":
            return await self.ports.decide(call, self.state)
        return ruled

    async def _apply(
        self,
        spec: SkillSpec,
        args: str,
        skill_dir: str,
        rendered: DynamicRender,
        record: InvocationRecord,
        *,
        context: bool = True,
        dedupe: bool = True,
    ) -> SkillOutcome:
        """The skill's context change for the turn, its audit row and the rows it delivers."""
        hidden = rendered.text
        already = dedupe and any(
            m.kind == "skill_prompt" and m.sent_to_model and m.plain_text == hidden
            for m in self.history
        )
        state = self.state
        state.active_skills.append(spec.name)
        skill_hooks: list[SkillHook] = []
        allowed: list[Rule] = []
        denied: list[Rule] = []
        model: str | None = ""
        refused = ""
        effort = None
        if context:
            skill_hooks, hook_notes = parse_skill_hooks(spec.name, spec.hooks)
            for note in hook_notes:
                logger.warning("skill %s: %s", spec.name, note)
            allowed = skill_rules(spec, "allow", skill_dir)
            denied = skill_rules(spec, "deny", skill_dir)
            state.skill_rules.extend(allowed + denied)
            state.disallowed_tools.update(r.tool for r in denied if r.specifier is None)
            state.env["SKILL_DIR"] = skill_dir
            model = resolve_model_id(spec.model or "")
            if model and not self.agent.config.offers(model):
                # A skill cannot buy a person a model their policy does not offer: the turn
                # keeps its model and the audit says the override was refused.
                refused, model = model, None
            if model:
                state.model_override = model
            effort = spec.effort
            if effort:
                state.effort_override = effort
        status = status_message_text(spec.name, args)
        injected = ALREADY_LOADED.format(name=spec.name) if already else hidden
        record = replace(
            record,
            decision="allowed",
            status_text=status,
            injected_text=injected,
            allowed_tools=tuple(r.text for r in allowed),
            disallowed_tools=tuple(r.text for r in denied),
            model_override=model or "",
            model_refused=refused,
            already_loaded=already,
            skill_dir=skill_dir,
            shell_commands=tuple(r.as_audit() for r in rendered.runs),
            hooks=tuple(h.as_dict() for h in skill_hooks),
        )
        invocation = await self.ports.record_invocation(record)
        self.register_hooks(skill_hooks)
        state.current_invocation = invocation
        if invocation is not None:
            state.invocations[spec.name] = invocation
        messages = [
            StoredMessage.text(
                "user", status, kind="skill_status", meta={"skill": spec.name, "args": args}
            ),
            StoredMessage.text(
                "user", injected, kind="skill_prompt", is_meta=True, meta={"skill": spec.name}
            ),
        ]
        if allowed or denied or model or refused or effort:
            messages.append(
                StoredMessage.text(
                    "user",
                    permissions_record(spec, allowed, denied, refused=refused),
                    kind="permissions",
                    is_meta=True,
                    to_model=False,
                    meta={"skill": spec.name},
                )
            )
        return SkillOutcome(ok=True, messages=tuple(messages), invocation=invocation)

    async def _render_body(
        self, spec: SkillSpec, args: str, skill_dir: str, rendering: Rendering
    ) -> DynamicRender:
        """The hidden message, with `!` commands run under the rules the skill's turn would have."""
        if rendering.text is not None:
            return DynamicRender(rendering.text)
        if not rendering.substitutions:
            return DynamicRender(spec.body.strip())
        state = TurnState(
            active_skills=[*self.state.active_skills, spec.name],
            skill_rules=[
                *self.state.skill_rules,
                *skill_rules(spec, "allow", skill_dir),
                *skill_rules(spec, "deny", skill_dir),
            ],
        )
        base = self.agent.tool_context
        ctx = replace(base, env={**base.env, **self.state.env, "SKILL_DIR": skill_dir})

        async def allowed(command: str) -> Decision:
            return await self.ports.check(ToolCall(tool="Bash", input={"command": command}), state)

        return await render_dynamic(
            spec,
            args,
            skill_dir=skill_dir,
            session_id=self.agent.config.session_id,
            check=allowed,
            execute=lambda command: run_shell(command, ctx, bash=self.bash),
            disabled=self.agent.config.disable_skill_shell,
            base_dir_line=rendering.base_dir_line,
        )


def skill_rules(spec: SkillSpec, behavior: str, skill_dir: str) -> list[Rule]:
    """A skill's allowed-tools (behavior "allow") or disallowed-tools ("deny") as rules."""
    texts = spec.allowed_tools if behavior == "allow" else spec.disallowed_tools
    rules: list[Rule] = []
    for text in texts:
        # ${CLAUDE_SKILL_DIR} in a rule lets a skill pre-approve its own scripts by path.
        resolved = _SKILL_DIR_VAR.sub(lambda _m: skill_dir, text)
        try:
            rules.append(parse_rule(resolved, behavior, source="skill", scope_skill=spec.name))
        except RuleSyntaxError as exc:
            logger.warning("skill %s: ignoring malformed rule %r: %s", spec.name, text, exc)
    return rules


def permissions_record(
    spec: SkillSpec, allowed: list[Rule], denied: list[Rule], *, refused: str = ""
) -> str:
    lines = [f'Applied for the rest of this turn by the skill "{spec.name}":']
    if allowed:
        lines.append("allowed-tools: " + ", ".join(r.text for r in allowed))
    if denied:
        lines.append("disallowed-tools: " + ", ".join(r.text for r in denied))
    model = resolve_model_id(spec.model or "")
    if refused:
        lines.append(
            f"model: {refused} refused (not offered to this person); the turn kept its model"
        )
    elif model:
        lines.append(f"model: {model}")
    if spec.effort:
        lines.append(f"effort: {spec.effort}")
    return "\n".join(lines)
