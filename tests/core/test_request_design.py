"""`compose_request` "as the source design": each profile's DesignTraits, as a pure function."""

from __future__ import annotations

from dataclasses import replace

import pytest

from skills_app.core.agent import AgentConfig, TurnState
from skills_app.core.model_catalog import DEFAULT_MODEL
from skills_app.core.request import compose_request
from skills_app.core.skillfile import SkillSpec
from skills_app.core.tools import default_tools
from skills_app.core.transcript import StoredMessage

HISTORY = [StoredMessage.text("user", "hi")]


class NoSkills:
    def get(self, name: str) -> SkillSpec | None:
        return None

    def skills(self) -> list[SkillSpec]:
        return []


def config(profile: str, *, design: bool) -> AgentConfig:
    return AgentConfig(
        model=DEFAULT_MODEL,
        profile=profile,
        design=design,
        thinking=True,
        effort="high",
        prompt_caching=True,
    )


def compose(profile: str, *, design: bool, state: TurnState | None = None):
    return compose_request(
        HISTORY,
        tools=default_tools(),
        skills=NoSkills(),
        config=config(profile, design=design),
        state=state,
    )


def test_tool_result_as_the_design_sends_s05s_tools_and_options():
    request = compose("tool-result", design=True)
    assert [t["name"] for t in request.tools] == [
        "bash",
        "read_file",
        "write_file",
        "edit_file",
        "load_skill",
    ]
    assert (request.max_tokens, request.thinking, request.effort, request.cache) == (
        8000,
        False,
        None,
        False,
    )
    body = request.as_kwargs()
    assert isinstance(body["system"], str)
    assert "thinking" not in body and "output_config" not in body


def test_system_prompt_as_the_design_keeps_the_configured_max_tokens():
    request = compose("system-prompt", design=True)
    assert request.max_tokens == config("system-prompt", design=True).max_tokens
    assert (request.thinking, request.effort, request.cache) == (False, None, False)
    run = next(t for t in request.tools if t["name"] == "skill_run")
    assert run["input_schema"]["title"] == "SkillRunInput"
    assert "Read" in [t["name"] for t in request.tools]  # the agent's own tools stay


@pytest.mark.parametrize("profile", ["meta-message", "tool-result", "system-prompt"])
def test_under_the_same_base_prompt_every_profile_keeps_skillscopes_settings(profile):
    request = compose(profile, design=False)
    assert (request.thinking, request.effort, request.cache) == (True, "high", True)
    assert "Bash" in [t["name"] for t in request.tools]


def test_meta_message_as_the_design_keeps_claude_codes_settings():
    shared, design = compose("meta-message", design=False), compose("meta-message", design=True)
    assert replace(design, system=shared.system) == shared


def test_a_bare_bash_deny_removes_the_designs_bash():
    state = TurnState(disallowed_tools={"Bash"})
    names = [t["name"] for t in compose("tool-result", design=True, state=state).tools]
    assert names == ["read_file", "write_file", "edit_file", "load_skill"]
