"""Every URL route, checked for owner / other user / anonymous / staff, plus CSRF.

Routes are discovered by walking `get_resolver()`, so a view added later is checked without
editing this file. Expectations are inferred: a route with an object argument is owner-only (owner
200, anyone else 403/404, anonymous to the login page), one without is for any signed-in user. `RULES` lists only the routes that differ (public pages, staff pages,
POST-only views, objects other than a conversation). The Django admin has its own checks; the
websocket routes have theirs in test_security_websockets.py.

The tests share one world per module (tests/security/conftest.py): they only read it, and what a
test writes (a POST that should have been refused, the positive control's rename) is rolled back
after it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.apps import apps
from django.conf import settings
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from skills_app.core.transcript import status_message_text
from skills_app.models import (
    Approval,
    Attachment,
    Conversation,
    Message,
    Run,
    RunEvent,
    SkillInvocation,
    SkillPackage,
    SkillVersion,
    TriggerQuery,
    TriggerRun,
)
from tests.support.shared_db import signed_in_client

# One unique marker for hidden content; test_security_hidden.py asserts it never leaks.
HIDDEN_MARKER = "HIDDEN-MARKER-7f3a91c4"
PERSONAS = ("anonymous", "owner", "other", "staff")

LOGIN = "login"  # a redirect to settings.LOGIN_URL
OK = frozenset({200})
DENIED = frozenset({403, 404})
NOT_ALLOWED = frozenset({405})


# -- route discovery ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Route:
    """One URL pattern: its reversible name, its arguments and where it was found."""

    name: str  # "namespace:name" when namespaced
    route: str  # the concatenated pattern text, for messages
    params: tuple[tuple[str, str], ...]  # (kwarg, converter or "re")
    namespace: str = ""

    @property
    def short(self) -> str:
        return self.name.split(":")[-1]


def _params(pattern: Any) -> list[tuple[str, str]]:
    converters = getattr(pattern, "converters", None)
    if converters:
        return [(name, type(conv).__name__) for name, conv in converters.items()]
    regex = getattr(pattern, "regex", None)
    return [(name, "re") for name in regex.groupindex] if regex is not None else []


def walk(
    patterns: list[Any], prefix: str = "", namespace: str = "", params: tuple = ()
) -> Iterator[tuple[URLPattern, str, str, tuple]]:
    """(pattern, full route text, namespace, inherited params) for every leaf pattern."""
    for entry in patterns:
        here = (*params, *_params(entry.pattern))
        text = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            ns = ":".join(p for p in (namespace, entry.namespace or "") if p)
            yield from walk(entry.url_patterns, text, ns, here)
        else:
            yield entry, text, namespace, here


def http_routes() -> list[Route]:
    found: dict[str, Route] = {}
    for pattern, text, namespace, params in walk(get_resolver().url_patterns):
        if not pattern.name:
            continue  # unnamed (the admin catch-all): not reversible, checked by the admin test
        name = f"{namespace}:{pattern.name}" if namespace else pattern.name
        found.setdefault(name, Route(name, text, tuple(params), namespace))
    return list(found.values())


ROUTES = http_routes()
APP_ROUTES = [r for r in ROUTES if r.namespace != "admin"]
ADMIN_ROUTES = [r for r in ROUTES if r.namespace == "admin"]


# -- expectations -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Expect:
    """Acceptable answers to a GET per persona; `LOGIN` means a redirect to the login page."""

    anonymous: Any = LOGIN
    owner: Any = OK
    other: Any = DENIED
    staff: Any = DENIED
    obj: str = "conversation"  # which of the owner's objects fills `pk`
    post_only: bool = False  # GET is 405 for signed-in users
    extra: dict[str, Any] = field(default_factory=dict)

    def for_persona(self, persona: str) -> Any:
        expected = getattr(self, persona)
        if expected == OK and not self.post_only:
            # A POST-only view answers GET with 405 to those it serves; not a leak.
            return OK | NOT_ALLOWED
        if self.post_only and expected == OK:
            return NOT_ALLOWED
        if expected != LOGIN:
            # The method check may come before the ownership check; the POST test covers those.
            return expected | NOT_ALLOWED
        return expected


PUBLIC = Expect(anonymous=OK, owner=OK, other=OK, staff=OK)
SIGNED_IN = Expect(owner=OK, other=OK, staff=OK)
STAFF_ONLY = Expect(owner=frozenset({403}), other=frozenset({403}), staff=OK)
# Signed-in users are sent away from the login page or shown it; either is fine.
LOGIN_PAGE = Expect(anonymous=OK, owner=frozenset({200, 302}), other=frozenset({200, 302}),
                    staff=frozenset({200, 302}))  # fmt: skip

# allauth's pages that are not part of Skillscope answer 404 to everyone
# (skills_app.accounts.middleware): only the identity provider's flow is served.
GONE = Expect(anonymous=DENIED, owner=DENIED, other=DENIED, staff=DENIED)
# The provider's flow needs no sign-in (it is how one signs in); without a configured provider
# (as here) its login and callback URLs answer 404.
FLOW = Expect(
    anonymous=frozenset({200, 302, 401, 404}),
    owner=frozenset({200, 302, 401, 404}),
    other=frozenset({200, 302, 401, 404}),
    staff=frozenset({200, 302, 401, 404}),
)
_ALLAUTH_GONE = (
    "account_signup", "account_reauthenticate", "account_request_reauthentication_code",
    "account_confirm_reauthentication_code", "account_email", "account_email_verification_sent",
    "account_change_password", "account_set_password", "account_reset_password",
    "account_confirm_login_code", "account_confirm_email", "account_reset_password_from_key_done",
    "account_reset_password_from_key", "account_reset_password_done", "socialaccount_connections",
)  # fmt: skip
_ALLAUTH_FLOW = (
    "account_inactive", "socialaccount_login_cancelled", "socialaccount_login_error",
    "socialaccount_signup", "saml_acs", "saml_finish_acs", "saml_sls", "saml_metadata",
    "saml_login", "openid_connect_login", "openid_connect_callback",
)  # fmt: skip

RULES: dict[str, Expect] = {
    **dict.fromkeys(_ALLAUTH_GONE, GONE),
    **dict.fromkeys(_ALLAUTH_FLOW, FLOW),
    "account_login": LOGIN_PAGE,
    "account_logout": Expect(
        anonymous=NOT_ALLOWED, owner=NOT_ALLOWED, other=NOT_ALLOWED, staff=NOT_ALLOWED
    ),  # fmt: skip
    "login": LOGIN_PAGE,
    "logout": Expect(
        anonymous=NOT_ALLOWED, owner=NOT_ALLOWED, other=NOT_ALLOWED, staff=NOT_ALLOWED
    ),  # fmt: skip
    # Load-balancer probes: no login, nothing but fixed status words (tests/ops/test_ops_health.py).
    "healthz": PUBLIC,
    "readyz": PUBLIC,
    "password_reset": PUBLIC,
    "password_reset_done": PUBLIC,
    "password_reset_confirm": PUBLIC,
    "password_reset_complete": PUBLIC,
    "password_change": SIGNED_IN,
    "password_change_done": SIGNED_IN,
    "skills-home": SIGNED_IN,
    "conversation-new": Expect(owner=OK, other=OK, staff=OK, post_only=True),
    # Where signing in lands: a redirect to the person's own unused conversation (issue 29).
    "conversation-start": Expect(
        owner=frozenset({302}), other=frozenset({302}), staff=frozenset({302})
    ),
    "preferences-time-zone": Expect(owner=OK, other=OK, staff=OK, post_only=True),
    "preferences-dismiss-intro": Expect(owner=OK, other=OK, staff=OK, post_only=True),
    "conversation-rename": Expect(post_only=True),
    # The audit is for the Auditor role (the staff persona), never for chatters.
    "audit-home": STAFF_ONLY,
    # The Rules page needs the permission to view rules (the Auditor has it); changing them needs
    # the Skill manager's add, change or delete permission, which no persona here has.
    "rules-page": STAFF_ONLY,
    "rule-add": Expect(
        owner=frozenset({403}), other=frozenset({403}), staff=frozenset({403}), post_only=True
    ),
    "rule-edit": Expect(owner=frozenset({403}), other=frozenset({403}), staff=frozenset({403})),
    "rule-delete": Expect(
        owner=frozenset({403}), other=frozenset({403}), staff=frozenset({403}), post_only=True
    ),
    "audit-export-csv": STAFF_ONLY,
    "audit-spend": STAFF_ONLY,
    "my-usage": SIGNED_IN,
    "conversation-settings": Expect(post_only=True),
    "audit-invocations": STAFF_ONLY,
    "audit-invocation": Expect(
        owner=frozenset({403}), other=frozenset({403}), staff=OK, obj="invocation"
    ),  # fmt: skip
    # The auditor persona has the inspect permission: it may open anyone's conversation audit.
    "audit-conversations": STAFF_ONLY,
    "audit-conversation": Expect(owner=frozenset({403}), other=frozenset({403}), staff=OK),
    "audit-request-json": Expect(owner=frozenset({403}), other=frozenset({403}), staff=OK),
    "audit-costs": STAFF_ONLY,
    "conversation-export": Expect(owner=OK, other=DENIED, staff=OK),
    "conversation-export-markdown": Expect(owner=OK, other=DENIED, staff=OK),
    "transcript-import": SIGNED_IN,
    # Earlier rows of one's own conversation; without its ?before= the owner is told what to
    # send (400), anyone else learns nothing (404).
    "conversation-earlier": Expect(owner=frozenset({400})),
    # The whole text of one tool call: the world's Read of the skill's hidden prompt.
    "conversation-tool-text": Expect(extra={"tool_use_id": "toolu_world_read", "part": "result"}),
    "compare": STAFF_ONLY,
    "compare-start": Expect(
        owner=frozenset({403}), other=frozenset({403}), staff=OK, post_only=True
    ),
    # A comparison belongs to the staff member who made it.
    "compare-detail": Expect(
        owner=frozenset({403}), other=frozenset({403}), staff=OK, obj="comparison"
    ),  # fmt: skip
    # The operator page: workers and run counts.
    "ops-status": STAFF_ONLY,
    # Trigger tests of alice's personal skill: she edits and runs them, auditors (the staff
    # persona) read them, nobody else learns they exist.
    "triggers-package": Expect(obj="package", staff=OK),
    "triggers-export": Expect(obj="package", staff=OK),
    # Without its choices the plan says what to pick (400); auditors may not run tests.
    "triggers-plan": Expect(obj="package", owner=frozenset({200, 400})),
    "triggers-query-add": Expect(obj="package", post_only=True),
    "triggers-query-edit": Expect(obj="package", post_only=True),
    "triggers-query-remove": Expect(obj="package", post_only=True),
    "triggers-import": Expect(obj="package", post_only=True),
    "triggers-start": Expect(obj="package", post_only=True),
    "triggers-run": Expect(obj="trigger_run", staff=OK),
    "triggers-stop": Expect(obj="trigger_run", post_only=True),
    # A run's results as run_eval JSON: read like its report (409 while it is not done).
    "triggers-results-json": Expect(
        obj="trigger_run", owner=frozenset({200, 409}), staff=frozenset({200, 409})
    ),
    "triggers-gate": Expect(obj="package", post_only=True),
    # The result page of one's own import; nobody else's (404).
    "transcript-import-result": Expect(owner=OK),
    "audit-trigger-runs": STAFF_ONLY,
    # A skill's page is for anyone it is offered to (a bundled skill: everyone signed in); a
    # personal skill's page only for its owner (tests/registry/test_skills_page.py).
    "skill-detail": Expect(owner=OK, other=OK, staff=OK, extra={"name": "text-stats"}),
    # Reviews are of organisation versions, for skill managers: alice's personal version has
    # none, so nobody (the staff persona is an auditor) reaches it.
    "skill-review": Expect(obj="version", owner=DENIED, other=DENIED, staff=DENIED),
    "skills-org-upload": Expect(
        owner=frozenset({404}), other=frozenset({404}), staff=frozenset({404}), post_only=True
    ),
    "audit-decisions": STAFF_ONLY,
    "audit-reviews": STAFF_ONLY,
    # Feedback on one skill version's answers: auditors only; the made-up name and digest are 404.
    "audit-version-feedback": Expect(
        owner=frozenset({403}), other=frozenset({403}), staff=frozenset({404})
    ),
    # Read-only links (tests/chat/test_shares.py): made and revoked by the owner only.
    "conversation-share-revoke": Expect(post_only=True),
    # A made-up token answers 404 to everyone signed in; nobody anonymous gets past sign-in.
    "shared-conversation": Expect(owner=DENIED, other=DENIED, staff=DENIED),
    # OAuth sign-in to an MCP server (tests/mcp/test_oauth.py): a server nobody registered is 404
    # to everyone signed in; a callback whose state no one of this session started is refused.
    "mcp-oauth-sign-in": Expect(owner=DENIED, other=DENIED, staff=DENIED),
    "mcp-oauth-callback": Expect(
        owner=frozenset({400}), other=frozenset({400}), staff=frozenset({400})
    ),
}

# Object kinds chosen by a word in the route name when RULES says nothing.
OBJECT_WORDS = (
    ("invocation", "invocation"),
    ("version", "version"),
    ("package", "package"),
    ("skill", "package"),
    ("approval", "approval"),
    ("compare", "comparison"),
    ("run", "run"),
)


def expectation(route: Route) -> Expect:
    if route.short in RULES:
        return RULES[route.short]
    if not route.params:
        return SIGNED_IN
    obj = next((kind for word, kind in OBJECT_WORDS if word in route.short), "conversation")
    return Expect(obj=obj)


# -- the world: one of everything, owned by alice (comparisons by the staff auditor) -------------


@dataclass(slots=True)
class World:
    users: dict[str, Any]
    ids: dict[str, int]
    # Signed-in session cookies by persona, when the world is shared (tests/security/conftest.py).
    sessions: dict[str, str] = field(default_factory=dict)


def build_world(alice: Any, bob: Any, auditor: Any, tmp_path: Path) -> World:
    """Alice's conversation with a run, visible and hidden rows, an invocation, a file, and more."""
    conversation = Conversation.objects.create(owner=alice, title="Alice's plans")
    run = Run.objects.create(conversation=conversation, status=Run.DONE, model="claude-test")
    run.requests = [{"call": 1, "model": "claude-test", "at": "2025-01-01T00:00:00+00:00"}]
    run.model_calls = 1
    run.save()
    ids = {"conversation": conversation.pk, "run": run.pk}
    hidden = f"Base directory for this skill: /skills/notes\n\n{HIDDEN_MARKER} follow these steps."
    rows = [
        ("user", "text", False, True, "Please summarise my notes."),
        ("user", "skill_status", False, True, status_message_text("notes", "a.md")),
        ("user", "skill_prompt", True, True, hidden),
        ("user", "permissions", True, False, f"allowed-tools: Read {HIDDEN_MARKER}"),
        ("assistant", "text", False, True, "Here is the summary."),
    ]
    # A Read whose result quotes the hidden prompt: the filter must withhold it from the owner.
    read = [
        {"type": "tool_use", "id": "toolu_world_read", "name": "Read", "input": {"file_path": "x"}}
    ]
    result = [{"type": "tool_result", "tool_use_id": "toolu_world_read", "content": hidden}]
    invocation = SkillInvocation.objects.create(
        conversation=conversation,
        run=run,
        skill="notes",
        source="bundled",
        caller="user",
        args="a.md",
        decision="allowed",
        decided_by="rule",
        status_text=status_message_text("notes", "a.md"),
        injected_text=hidden,
    )
    ids["invocation"] = invocation.pk
    messages = []
    for seq, (role, kind, is_meta, to_model, text) in enumerate(rows, start=1):
        messages.append(
            Message.objects.create(
                conversation=conversation,
                seq=seq,
                role=role,
                kind=kind,
                is_meta=is_meta,
                to_model=to_model,
                content=[{"type": "text", "text": text}],
                run=run,
                invocation=invocation if kind.startswith(("skill", "perm")) else None,
            )
        )
    for role, kind, content in (("assistant", "tool_use", read), ("user", "tool_result", result)):
        messages.append(
            Message.objects.create(
                conversation=conversation,
                seq=len(messages) + 1,
                role=role,
                kind=kind,
                content=content,
                run=run,
            )
        )
    events = [("run.started", {"run_id": run.pk, "label": "Claude"}, False)]
    events += [
        (
            "message",
            {"message_id": m.pk, "role": m.role, "kind": m.kind, "is_meta": m.is_meta},
            m.is_meta,
        )  # fmt: skip
        for m in messages
    ]
    events += [
        ("model.call", {"call": 1, "model": "claude-test"}, False),
        ("run.finished", {"run_id": run.pk, "status": "done", "error": "", "kind": ""}, False),
    ]
    for seq, (type_, data, hidden_flag) in enumerate(events, start=1):
        RunEvent.objects.create(
            conversation=conversation, run=run, seq=seq, type=type_, data=data, hidden=hidden_flag
        )
    Conversation.objects.filter(pk=conversation.pk).update(last_event_seq=len(events))
    approval = Approval.objects.create(
        conversation=conversation, run=run, tool="Bash", call_text="Bash(ls)"
    )
    ids["approval"] = approval.pk
    package = SkillPackage.objects.create(name="alice-notes", owner=alice)
    version = SkillVersion.objects.create(
        package=package,
        digest="0" * 64,
        number=1,
        storage_path=str(tmp_path / "storage" / "alice-notes"),
        skill_md="---\nname: alice-notes\ndescription: Alice's notes.\n---\nBody\n",
        frontmatter={"name": "alice-notes", "description": "Alice's notes."},
        uploaded_by=alice,
    )
    package.active_version = version
    package.save()
    ids.update(package=package.pk, version=version.pk)
    query = TriggerQuery.objects.create(
        package=package, query="summarise my notes", should_trigger=True
    )
    trigger_run = TriggerRun.objects.create(
        package=package,
        version=version,
        skill=package.name,
        version_number=1,
        version_digest=version.digest,
        owner=alice,
        version_state="active",
        started_by=alice,
        model="claude-test",
        profile="meta-message",
        status=TriggerRun.DONE,
    )
    ids.update(trigger_query=query.pk, trigger_run=trigger_run.pk)
    comparison_model = _model("Comparison")
    if comparison_model is not None:
        comparison = comparison_model.objects.create(created_by=auditor, prompt="Compare these")
        comparison.conversations.add(conversation)
        ids["comparison"] = comparison.pk
    from skills_app.workspaces import workspace_for

    out = Path(workspace_for(conversation.pk).root) / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.txt").write_text("the report\n")
    # A file alice attached: in the workspace's in/, with the digest the download checks.
    data = b"alice's notes\n"
    path = workspace_for(conversation.pk).save_input("notes.txt", data)
    attachment = Attachment.objects.create(
        conversation=conversation,
        owner=alice,
        name=path.removeprefix("in/"),
        path=path,
        media_type="text/plain",
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
    )
    ids["attachment"] = attachment.pk
    return World(users={"owner": alice, "other": bob, "staff": auditor}, ids=ids)


def _model(name: str) -> Any:
    try:
        return apps.get_model("skills_app", name)
    except LookupError:
        return None


def url_for(route: Route, world: World, expect: Expect | None = None) -> str:
    """The route reversed with the owner's objects as arguments."""
    expect = expect or expectation(route)
    kwargs: dict[str, Any] = {}
    for name, converter in route.params:
        if name in ("pk", "id", "object_id", "conversation_id"):
            kwargs[name] = world.ids.get(expect.obj, world.ids["conversation"])
        elif name == "run_id":
            kwargs[name] = world.ids["run"]
        elif name == "query_id":
            kwargs[name] = world.ids["trigger_query"]
        elif name == "attachment_id":
            # Its own id: filled with the conversation's, the route passed only while the two
            # tables' ids happened to agree (a fresh database), and answered 404 after tests
            # that made conversations but no attachments ran first on the same worker.
            kwargs[name] = world.ids["attachment"]
        elif name == "call":
            kwargs[name] = 1
        elif name == "path":
            kwargs[name] = "out/report.txt"
        elif name in expect.extra:
            kwargs[name] = expect.extra[name]
        elif converter == "IntConverter":
            kwargs[name] = world.ids["conversation"]
        else:
            kwargs[name] = "x"
    return reverse(route.name, kwargs=kwargs)


def client_for(persona: str, world: World, **options: Any) -> Client:
    if persona == "anonymous" or persona in world.sessions:
        return signed_in_client(world.sessions.get(persona), **options)
    client = Client(**options)
    client.force_login(world.users[persona])
    return client


def check(response: Any, expected: Any) -> str | None:
    """Why the response does not match the expectation, or None."""
    if expected == LOGIN:
        location = response.get("Location", "")
        if response.status_code == 302 and urlsplit(location).path == settings.LOGIN_URL:
            return None
        return f"expected a redirect to {settings.LOGIN_URL}, got {response.status_code} {location}"
    if response.status_code not in expected:
        # What the page said, so a failure seen once in a full run tells its cause.
        said = getattr(response, "content", b"")[:300].decode("utf-8", "replace")
        return f"expected {sorted(expected)}, got {response.status_code}: {said!r}"
    return None


# -- HTTP: persona matrix -----------------------------------------------------------------------


def test_discovery_finds_the_known_routes():
    names = {r.name for r in ROUTES}
    assert {"skills-home", "conversation", "login", "admin:index"} <= names
    assert len(APP_ROUTES) >= 10


def test_every_rule_names_a_route_that_exists():
    assert set(RULES) - {r.short for r in ROUTES} == set()


@pytest.mark.django_db
@pytest.mark.parametrize("route", APP_ROUTES, ids=lambda r: r.name)
def test_each_route_answers_each_persona_as_expected(route, world):
    """Each persona's GET, and every POST form on the page a persona allowed there gets carries
    the CSRF token."""
    expect = expectation(route)
    url = url_for(route, world, expect)
    authorised = _authorised_persona(route)
    problems = []
    for persona in PERSONAS:
        response = client_for(persona, world).get(url)
        problem = check(response, expect.for_persona(persona))
        if problem:
            problems.append(f"GET {url} as {persona}: {problem}")
        if persona == authorised:
            problems += _forms_without_the_token(route, response)
    assert problems == []


@pytest.mark.django_db
@pytest.mark.parametrize("route", APP_ROUTES, ids=lambda r: r.name)
def test_a_post_by_someone_without_access_changes_nothing(route, world):
    expect = expectation(route)
    url = url_for(route, world, expect)
    before = _counts()
    problems = []
    for persona in PERSONAS:
        if persona == "anonymous" and expect.anonymous != LOGIN:
            continue  # a public page
        allowed = expect.for_persona(persona)
        denied = allowed != LOGIN and allowed <= DENIED | NOT_ALLOWED and allowed != NOT_ALLOWED
        if persona != "anonymous" and not denied:
            continue  # this persona may use the route; the view's own tests cover the POST
        response = client_for(persona, world).post(url, {"title": "pwned"})
        expected = LOGIN if persona == "anonymous" else frozenset({403, 404, 405})
        problem = check(response, expected)
        if problem:
            problems.append(f"POST {url} as {persona}: {problem}")
    assert problems == []
    assert _counts() == before
    assert Conversation.objects.get(pk=world.ids["conversation"]).title == "Alice's plans"
    # The same world serves the forged POST (nothing above changed it).
    _a_post_without_the_csrf_token_is_refused(route, world)


def _counts() -> dict[str, int]:
    models = [Conversation, Message, Run, RunEvent, SkillInvocation, SkillPackage, Approval]
    models += [TriggerQuery, TriggerRun]
    extra = _model("Comparison")
    return {m.__name__: m.objects.count() for m in [*models, *([extra] if extra else [])]}


# -- the Django admin ---------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("route", ADMIN_ROUTES, ids=lambda r: r.name)
def test_the_admin_is_closed_to_non_staff_and_works_for_a_superuser(route, world):
    url = _admin_url(route, world)
    for persona in ("anonymous", "owner", "other"):
        if route.name in ("admin:login", "admin:logout"):
            break  # the admin's own sign-in and sign-out pages are public
        response = client_for(persona, world).get(url)
        assert response.status_code in (302, 404), f"GET {url} as {persona}"
        if response.status_code == 302:
            assert urlsplit(response["Location"]).path in (reverse("admin:login"), url)
    assert client_for("admin", world).get(url).status_code < 500


def _admin_url(route: Route, world: World) -> str:
    kwargs: dict[str, Any] = {}
    match = re.match(r"admin:(\w+?)_(\w+?)_(change|delete|history|password_change)$", route.name)
    for name, _converter in route.params:
        if name == "app_label":
            kwargs[name] = "skills_app"
        elif name in ("object_id", "id") and match:
            kwargs[name] = _admin_object_id(match.group(1), match.group(2), world)
        elif name == "content_type_id":
            from django.contrib.contenttypes.models import ContentType

            kwargs[name] = ContentType.objects.get_for_model(Conversation).pk
        elif name == "object_id":
            kwargs[name] = world.ids["conversation"]
        elif _converter == "IntConverter" or name.endswith("_id"):
            kwargs[name] = world.ids.get(name.removesuffix("_id"), 1)
        else:
            kwargs[name] = "x"
    return reverse(route.name, kwargs=kwargs)


def _admin_object_id(app_label: str, model_name: str, world: World) -> Any:
    try:
        model = apps.get_model(app_label, model_name)
    except LookupError:
        return 1
    first = model.objects.order_by("pk").values_list("pk", flat=True).first()
    return first if first is not None else 1


# -- CSRF ---------------------------------------------------------------------------------------


def _authorised_persona(route: Route) -> str | None:
    expect = expectation(route)
    for persona in ("owner", "staff", "other", "anonymous"):
        if expect.for_persona(persona) in (OK | NOT_ALLOWED, NOT_ALLOWED, LOGIN_PAGE.owner):
            return persona
    return None


def _a_post_without_the_csrf_token_is_refused(route: Route, world: World) -> None:
    """A POST by a persona allowed on the route, without the token: 403, nothing changed."""
    persona = _authorised_persona(route) or "owner"
    client = client_for(persona, world, enforce_csrf_checks=True)
    before = _counts()
    response = client.post(url_for(route, world), {"title": "forged"})
    if route.short in _ALLAUTH_GONE:
        # Not served at all: 404 before anything reads the form.
        assert response.status_code == 404, f"POST {route.name} as {persona}"
        assert _counts() == before
        return
    if route.short in ("saml_acs", "saml_sls"):
        # The identity provider posts these from its own site: CSRF-exempt by the protocol, the
        # signed assertion is the proof. Without a SAML provider they sign nobody in.
        assert response.status_code in (302, 400, 404), f"POST {route.name}"
        assert "_auth_user_id" not in client.session or persona != "anonymous"
        assert _counts() == before
        return
    assert response.status_code == 403, f"POST {route.name} as {persona}"
    assert b"CSRF verification failed" in response.content
    assert _counts() == before


@pytest.mark.django_db
def test_the_admin_refuses_a_post_without_the_csrf_token(world):
    client = client_for("admin", world, enforce_csrf_checks=True)
    url = reverse("admin:skills_app_skillpackage_delete", args=[world.ids["package"]])
    response = client.post(url, {"post": "yes"})
    assert response.status_code == 403 and b"CSRF verification failed" in response.content
    assert SkillPackage.objects.filter(pk=world.ids["package"]).exists()


class _FormFinder(HTMLParser):
    """POST forms (with whether they carry the token) and htmx posting elements of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []
        self.hx_posts: list[str] = []
        self.hx_csrf = False
        self._open: dict[str, Any] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if "X-CSRFToken" in a.get("hx-headers", ""):
            self.hx_csrf = True
        for verb in ("hx-post", "hx-put", "hx-patch", "hx-delete"):
            if verb in a:
                self.hx_posts.append(a[verb])
        if tag == "form" and a.get("method", "get").lower() == "post":
            self._open = {"action": a.get("action", ""), "token": False}
            self.forms.append(self._open)
        if tag == "input" and a.get("name") == "csrfmiddlewaretoken" and self._open is not None:
            self._open["token"] = bool(a.get("value"))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._open = None


def _forms_without_the_token(route: Route, response: Any) -> list[str]:
    """What is wrong with the POST forms and htmx posts of an HTML page (nothing if it is not one)."""
    if response.status_code != 200 or "html" not in response.get("Content-Type", ""):
        return []
    finder = _FormFinder()
    finder.feed(response.content.decode())
    problems = []
    missing = [f["action"] or "(this page)" for f in finder.forms if not f["token"]]
    if missing:
        problems.append(f"POST forms without csrfmiddlewaretoken on {route.name}: {missing}")
    if finder.hx_posts and not finder.hx_csrf:
        problems.append(f"htmx posts on {route.name} without X-CSRFToken in hx-headers")
    return problems


@pytest.mark.django_db
def test_a_form_post_with_the_token_is_accepted(world):
    """The positive control: the same client passes the check when it sends the token."""
    client = client_for("owner", world, enforce_csrf_checks=True)
    page = client.get(reverse("conversation", args=[world.ids["conversation"]]))
    token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page.content)
    assert token is not None
    response = client.post(
        reverse("conversation-rename", args=[world.ids["conversation"]]),
        {"title": "Renamed", "csrfmiddlewaretoken": token.group(1).decode()},
    )
    assert response.status_code == 302
    assert Conversation.objects.get(pk=world.ids["conversation"]).title == "Renamed"
