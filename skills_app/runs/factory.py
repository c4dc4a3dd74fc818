"""The one place a Runner is built, for a user's run and for a subagent (a `context: fork` skill).

`RunSetup` is what a run reads from the database once (workspace, skills on offer, settings
hooks, earlier skill hooks); `build_runner` turns it into an Agent (configuration) and the
services' ports.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils.module_loading import import_string

from skills_app.core.agent import Agent, AgentConfig, SkillProvider
from skills_app.core.context_window import PreviousCall
from skills_app.core.hooks import Hooks
from skills_app.core.llm import ModelClient
from skills_app.core.mcp.connect import Place
from skills_app.core.mcp.definitions import split_model_tool_name
from skills_app.core.model_catalog import resolve_model_id
from skills_app.core.permissions import ToolCall
from skills_app.core.review import Consent
from skills_app.core.runner import Runner
from skills_app.core.skillfile import SkillSpec
from skills_app.core.skillhooks import SkillHook, skill_hooks_from_rows
from skills_app.core.tools import ToolContext, ToolRegistry, default_tools
from skills_app.core.tools.storage import StorageGate
from skills_app.core.tools.workspace import Workspace, WorkspaceError, skill_folder_name
from skills_app.mcp.elicitations import PersonAsker
from skills_app.mcp.filter import refusal as mcp_refusal
from skills_app.mcp.offer import call_recorder, offered_tools
from skills_app.mcp.quota import over_budget, over_quota
from skills_app.models import Conversation, SkillInvocation
from skills_app.permissions.approvals import PermissionGate
from skills_app.policy.access import Policy, policy_for
from skills_app.policy.storage import skill_storage_root
from skills_app.registry.consents import consents_for, still_live
from skills_app.runs import agent_setup, usage
from skills_app.runs.ports import ForkFn, ServicePorts, SubagentPorts
from skills_app.runs.recorder import RunRecorder
from skills_app.runs.spending import Spending
from skills_app.runs.storage import QuotaGate
from skills_app.visibility import (
    UNSANDBOXED_PERMISSION,
    can_inspect,
    mcp_call_preview,
    quotes_hidden,
)
from skills_app.workspaces import workspace_for

# `agent:` presets: which base tools a subagent gets (None: every base tool).
AGENT_PRESETS: dict[str, tuple[str, ...] | None] = {
    "general-purpose": None,
    "Explore": ("Read", "Glob", "Grep"),
    "Plan": ("Read", "Glob", "Grep"),
}
SUBAGENT_SYSTEM = (
    'You are a subagent running the skill "{name}" for another assistant. Follow the skill\'s '
    "instructions with the tools you have, then finish with a concise final answer: it is the only "
    "part the other assistant will see."
)


@dataclass(frozen=True, slots=True)
class RunSetup:
    """What every runner of one conversation shares, read from the database once per run."""

    conversation_id: int
    config: AgentConfig
    workspace: Workspace
    skills: SkillProvider
    skill_hooks: tuple[SkillHook, ...]
    # The conversation's last model call (its usage sizes the next request exactly).
    previous_call: PreviousCall | None = None
    # Commands may run without a sandbox only for holders of UNSANDBOXED_PERMISSION.
    unsandboxed_allowed: bool = False
    # The owner's policy (models, budgets), read when the run starts; None: no policy applies.
    policy: Policy | None = None
    # The consent each offered skill's reviewed commands run under (registry.consents).
    consents: Mapping[str, Consent] = field(default_factory=dict)
    # The owner reads hidden text (an inspector): a call quoting it can be put to them.
    owner_can_inspect: bool = False


def settings_hooks() -> Hooks:
    """Hooks configured by dotted paths in settings.AGENT_HOOKS."""
    hooks = Hooks()
    for event, paths in settings.AGENT_HOOKS.items():
        for path in paths:
            hooks.add(event, import_string(path))
    return hooks


def load_setup(conversation: Conversation, *, model: str | None = None) -> RunSetup:
    """Read a conversation's run setup (sync: it queries the database)."""
    skills = agent_setup.skills_for_conversation(conversation)
    policy = policy_for(conversation.owner_id)
    config = replace(
        agent_setup.agent_config(conversation, model=model),
        disable_skill_shell=settings.DISABLE_SKILL_SHELL,
        offered_models=policy.models,
    )
    return RunSetup(
        conversation_id=conversation.pk,
        config=config,
        workspace=workspace_for(conversation.pk),
        skills=skills,
        skill_hooks=tuple(_stored_skill_hooks(conversation.pk, skills)),
        previous_call=usage.previous_call(conversation.pk),
        unsandboxed_allowed=conversation.owner.has_perm(UNSANDBOXED_PERMISSION),
        policy=policy,
        consents=consents_for(skills.skills()),
        owner_can_inspect=can_inspect(conversation.owner),
    )


def _stored_skill_hooks(conversation_id: int, skills: SkillProvider) -> list[SkillHook]:
    """Hooks registered by earlier invocations in this conversation, for skills still offered."""
    stored = SkillInvocation.objects.filter(
        conversation_id=conversation_id, decision="allowed"
    ).order_by("pk")
    hooks = skill_hooks_from_rows(stored.values_list("hooks", flat=True))
    return [h for h in hooks if skills.get(h.skill) is not None]


def tool_context(
    workspace: Workspace, *, unsandboxed_allowed: bool = False, storage: StorageGate | None = None
) -> ToolContext:
    return ToolContext(
        storage=storage,
        workspace=workspace,
        sandbox=settings.SANDBOX,
        unsandboxed_allowed=unsandboxed_allowed,
        # Inside the sandbox these server folders are masked, should a system bind expose them:
        # the skill folders too (SKILLS_DIRS kept under /usr/local/share was readable by every
        # command, a skill restricted to other groups included; a conversation gets a skill's
        # files only as its staged copy).
        sandbox_hidden_paths=(
            str(settings.BASE_DIR),
            str(settings.VAR_DIR),
            str(settings.MEDIA_ROOT),
            str(settings.BUNDLED_SKILLS_DIR),
            str(skill_storage_root()),
            *(str(path) for path in settings.SKILLS_DIRS),
        ),
        bash_timeout_default=settings.BASH_TIMEOUT_DEFAULT,
        bash_timeout_max=settings.BASH_TIMEOUT_MAX,
        output_limit=settings.BASH_OUTPUT_LIMIT,
    )


async def build_runner(
    setup: RunSetup,
    *,
    run_id: int,
    user_id: int,
    client: ModelClient,
    recorder: RunRecorder,
    auto_answer: str | None = None,
    subagent: SkillSpec | None = None,
    forker: ForkFn | None = None,
    spending: Spending | None = None,
) -> Runner:
    """The runner of one run; `subagent` is the forked skill when this run is a subagent's.

    `spending`: the owner's policy check of every model call (made by the caller, who closes
    it when the run is over: `spending_for`).
    """
    gate = PermissionGate(
        conversation_id=setup.conversation_id,
        run_id=run_id,
        user_id=user_id,
        workspace=setup.workspace,
        record=recorder.record,
        auto_answer=auto_answer,
        consents=setup.consents,
        quotes_hidden=_hidden_check(setup),
        # An mcp__ call carrying hidden text, a stored secret or another person's words never
        # leaves (docs/mcp.md).
        leaves=mcp_leaves(setup.conversation_id, user_id, setup.policy),
        # What is kept of an mcp__ call: its arguments filtered (docs/mcp.md).
        kept=lambda call: ToolCall(
            call.tool, mcp_call_preview(setup.conversation_id, call.tool, dict(call.input))
        ),
        # The conversation's skills (a subagent's too: its parent's provider), by staged folder.
        offered_folders=offered_folders(setup.skills),
        live=functools.partial(still_live, user_id=setup.policy.user_id if setup.policy else None),
    )
    tools = default_tools()
    mcp_offer = await offered_tools(
        group_ids=setup.policy.group_ids if setup.policy is not None else frozenset(),
        place=Place(
            root=setup.workspace.root,
            skills_dir=setup.workspace.skills_dir,
            sandbox=settings.SANDBOX,
            unsandboxed_allowed=setup.unsandboxed_allowed,
            hidden_paths=tool_context(setup.workspace).sandbox_hidden_paths,
        ),
        record=call_recorder(
            user_id=user_id,
            policy=setup.policy,
            conversation_id=setup.conversation_id,
            run_id=run_id,
            preview=functools.partial(mcp_call_preview, setup.conversation_id),
        ),
        user_id=user_id,
        # A server's question mid-call is asked of the person in this conversation.
        ask=PersonAsker(
            conversation_id=setup.conversation_id,
            run_id=run_id,
            record=recorder.record,
            preview=functools.partial(mcp_call_preview, setup.conversation_id),
        ),
    )
    # The approved tools of the MCP servers the person may see (mcp__server__tool); the rules
    # decide each call like any other tool's (an mcp__ call no rule names asks).
    tools = ToolRegistry([*tools, *mcp_offer.tools])
    config, skills, skill_hooks = setup.config, setup.skills, setup.skill_hooks
    previous_call = setup.previous_call
    if subagent is not None:
        preset = AGENT_PRESETS.get(subagent.agent or "general-purpose")
        if preset is not None:
            tools = tools.without([n for n in tools.names() if n not in preset])
        # The subagent keeps its conversation's profile (its skill tools, skill_run included);
        # a `model:` the person's policy does not offer is refused here as in the turn.
        config = replace(
            config,
            model=subagent_model(subagent, config),
            effort=subagent.effort or config.effort,
            max_turns=settings.AGENT_MAX_TURNS,
            system_prompt=(config.system_prompt + "\n\n").lstrip()
            + SUBAGENT_SYSTEM.format(name=subagent.name),
        )
        skills, skill_hooks = NoForks(skills, own=subagent.name), ()
        previous_call = None  # a subagent starts from a fresh message list
    # A bare admin deny (e.g. "Bash") removes the tool from the request altogether.
    removed = await sync_to_async(gate.removed_tools)([*tools.names(), "Skill"])
    agent = Agent(
        config=config,
        tools=tools.without(removed),
        skills=skills,
        tool_context=tool_context(
            setup.workspace,
            unsandboxed_allowed=setup.unsandboxed_allowed,
            # Every write of the run counts against the owner's storage quota.
            storage=QuotaGate(setup.policy.user_id, setup.conversation_id)
            if setup.policy is not None
            else None,
        ),
        hooks=await sync_to_async(settings_hooks)(),
        removed_tools=removed,
        skill_hooks=skill_hooks,
        previous_call=previous_call,
        notices=mcp_offer.notices if subagent is None else (),
    )
    if subagent is not None:
        ports: ServicePorts = SubagentPorts(
            client,
            recorder,
            gate,
            setup.workspace,
            forker=None,
            spending=spending,
            skill=subagent.name,
        )
    else:
        ports = ServicePorts(
            client, recorder, gate, setup.workspace, forker=forker, spending=spending
        )
    return Runner(agent, ports)


def offered_folders(skills: SkillProvider) -> frozenset[str]:
    """The folders under the workspace's skills/ of the skills a conversation may use."""
    folders = set()
    for spec in skills.skills():
        try:
            folders.add(skill_folder_name(spec.name))
        except WorkspaceError:
            continue  # a name that cannot be staged has no copy to read
    return frozenset(folders)


def spending_for(setup: RunSetup, client: ModelClient, purpose: str) -> Spending | None:
    """The policy check of a run's model calls (None when the run has no owner's policy)."""
    if setup.policy is None:
        return None
    return Spending(setup.policy, purpose, is_demo=client.is_demo)


def subagent_model(spec: SkillSpec, config: AgentConfig) -> str:
    """The model a forked skill runs on: its `model:` when the person may use it, else the turn's."""
    model = resolve_model_id(spec.model or "")
    return model if model and config.offers(model) else config.model


def _hidden_check(setup: RunSetup) -> Callable[[ToolCall], bool]:
    """Whether a call would show its conversation's owner hidden text (sync: it may query)."""

    def check(call: ToolCall) -> bool:
        return quotes_hidden(
            setup.conversation_id, dict(call.input), can_inspect=setup.owner_can_inspect
        )

    return check


def mcp_leaves(
    conversation_id: int, user_id: int, policy: Policy | None = None
) -> Callable[[ToolCall], tuple[str, ToolCall] | None]:
    """Why an mcp__ call may not leave (hidden text, even for an inspector; a stored secret;
    another person's words; the person's calls-per-minute quota used up, or no room in their
    spending limits for what a call of that server counts): a run's `PermissionGate.leaves` (and
    the bench's, `bench/bench_mcp.py`)."""

    def hidden(arguments: dict[str, Any]) -> bool:
        return quotes_hidden(conversation_id, arguments, can_inspect=False)

    def check(call: ToolCall) -> tuple[str, ToolCall] | None:
        refused = mcp_refusal(call, user_id=user_id, quotes_hidden=hidden)
        named = split_model_tool_name(call.tool)
        if refused is None and named is not None:
            over = over_quota(user_id) or over_budget(policy, named[0])
            if over is not None:
                return over, call
        return refused

    return check


class NoForks:
    """A skill provider without forked skills: subagents cannot fork again.

    The subagent's own skill stays reachable by name, as an inline skill, so the toolset
    profile's `skill_run` and `skill_select_docs` work on it inside the subagent.
    """

    def __init__(self, provider: SkillProvider, *, own: str | None = None) -> None:
        self.provider = provider
        self.own = own

    def get(self, name: str) -> SkillSpec | None:
        spec = self.provider.get(name)
        if spec is not None and name == self.own:
            return replace(spec, context=None)
        return None if spec is None or spec.context == "fork" else spec

    def skills(self) -> list[SkillSpec]:
        return [s for s in self.provider.skills() if s.context != "fork"]
