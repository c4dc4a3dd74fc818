"""What a trigger run sends: the request of a fresh conversation, read from the database now.

The catalog is the one a new conversation would get at this moment:
- for an organisation skill, what every member of the organisation is offered (organisation
  uploads, SKILLS_DIRS, bundled skills; no one's personal skills);
- for a personal skill, what its owner is offered (their personal skills too).
The version under test stands in for the package's active one. The system prompt, tools, model
settings and the tools an admin's bare deny removes are those of a new conversation
(`agent_setup.agent_config` over an unsaved Conversation): nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from skills_app.core.agent import AgentConfig, SkillProvider
from skills_app.core.catalog import listed
from skills_app.core.llm import ModelRequest
from skills_app.core.permissions import PermissionContext, removed_tools
from skills_app.core.profiles import DeliveryProfile, get_profile
from skills_app.core.skillfile import SkillSpec
from skills_app.core.tools import default_tools
from skills_app.core.tools.base import ToolRegistry
from skills_app.core.triggers.probe import WithVersion, probe_request
from skills_app.models import Conversation, SkillPackage, SkillVersion
from skills_app.permissions.approvals import admin_rules
from skills_app.registry.skills import parse_version, skills_for_user
from skills_app.runs import agent_setup


class TriggerRunError(Exception):
    """A trigger run that cannot start or go on; the message says why and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class ProbeSetup:
    """Everything one run's probes share."""

    spec: SkillSpec  # the version under test, as the registry parses it
    skills: SkillProvider
    config: AgentConfig
    tools: ToolRegistry
    removed: frozenset[str]
    profile: DeliveryProfile

    def request(self, query: str) -> ModelRequest:
        return probe_request(
            query, tools=self.tools, skills=self.skills, config=self.config, removed=self.removed
        )

    @property
    def listed(self) -> bool:
        """Whether the catalog lists the skill under test (the model can choose it at all)."""
        return listed(self.spec) and "Skill" not in self.removed

    def competitors(self) -> list[str]:
        """The other skills the model may choose from, by name."""
        return [s.name for s in self.skills.skills() if listed(s) and s.name != self.spec.name]


def catalog_text(spec: SkillSpec) -> str:
    """The skill's text in the catalog, before any budget cut: description, then when_to_use."""
    text = " ".join(spec.description.split())
    when = " ".join((spec.when_to_use or "").split())
    return f"{text} - {when}" if text and when else text or when


def version_spec(package: SkillPackage, version: SkillVersion) -> SkillSpec:
    source = "personal" if package.owner_id else "uploaded"
    spec = parse_version(version, package.name, source)
    if spec is None:
        raise TriggerRunError(
            f"The files of {package.name} version {version.number} cannot be read from storage; "
            "upload that content again."
        )
    return spec


def probe_setup(
    package: SkillPackage, version: SkillVersion, *, model: str, profile: str
) -> ProbeSetup:
    """The shared parts of every probe of a run (sync: it reads the database)."""
    spec = version_spec(package, version)
    provider = skills_for_user(package.owner_id)
    # An unsaved conversation: its defaults are a new conversation's, and nothing is stored.
    conversation = Conversation(profile=profile, model=model)
    config = agent_setup.agent_config(conversation, model=model)
    tools = default_tools()
    context = PermissionContext(workspace=Path(settings.WORKSPACE_ROOT), admin_rules=admin_rules())
    removed = removed_tools([*tools.names(), "Skill"], context)
    return ProbeSetup(
        spec=spec,
        skills=WithVersion(provider, spec),
        config=config,
        tools=tools.without(removed),
        removed=removed,
        profile=get_profile(profile),
    )
