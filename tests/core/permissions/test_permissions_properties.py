from __future__ import annotations

from pathlib import Path

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from skills_app.core.permissions import (
    BEHAVIORS,
    KNOWN_TOOLS,
    PermissionContext,
    Rule,
    RuleSyntaxError,
    ToolCall,
    call_as_rule_text,
    decide,
    grant_rule_for,
    parse_call,
    parse_rule,
)

WS = Path("/srv/ws/conv-1")

# ---------------------------------------------------------------- parser

# Characters that never make a specifier invalid on their own (no parentheses, no '[', no '~').
SAFE = st.text(alphabet="abcxyz019 -_.:/=*'\"", min_size=1, max_size=25).filter(
    lambda s: s.strip() not in ("", ":")
)
rule_texts = st.one_of(
    st.sampled_from(KNOWN_TOOLS),
    st.builds(lambda s: f"Bash({s})", SAFE),
    st.builds(lambda s: f"Skill({s})", SAFE),
    st.builds(lambda s: f"Task({s})", SAFE),
    st.builds(lambda s: f"Read({s})", SAFE.filter(lambda s: not s.strip().startswith("~"))),
    st.builds(lambda s: f"Edit({s})", SAFE.filter(lambda s: not s.strip().startswith("~"))),
    st.builds(
        lambda s: f"WebFetch(domain:{s})", st.from_regex(r"[a-z*][a-z0-9.*-]{0,20}", fullmatch=True)
    ),
    st.builds(
        lambda s: f"mcp__{s}", st.from_regex(r"[a-z]{1,8}(__([a-z_]{1,8}|\*))?", fullmatch=True)
    ),
)
metadata = st.fixed_dictionaries(
    {
        "behavior": st.sampled_from(BEHAVIORS),
        "source": st.sampled_from(("admin", "skill", "conversation", "default")),
        "rule_id": st.none() | st.integers(min_value=1, max_value=10_000),
        "scope_skill": st.none() | st.sampled_from(("pdf", "docx")),
        "note": st.text(max_size=10),
    }
)


@given(text=rule_texts, meta=metadata)
def test_it_parses_generated_valid_rules_and_round_trips_their_text(
    text: str, meta: dict[str, object]
) -> None:
    behavior = str(meta.pop("behavior"))
    rule = parse_rule(text, behavior, **meta)  # type: ignore[arg-type]
    assert parse_rule(rule.text, behavior, **meta) == rule  # type: ignore[arg-type]


any_rule_text = st.text(max_size=40) | st.builds(
    lambda tool, spec: f"{tool}({spec})", st.sampled_from(KNOWN_TOOLS), st.text(max_size=40)
)


@given(text=any_rule_text, meta=metadata)
def test_it_round_trips_any_text_it_accepts(text: str, meta: dict[str, object]) -> None:
    behavior = str(meta.pop("behavior"))
    try:
        rule = parse_rule(text, behavior, **meta)  # type: ignore[arg-type]
    except RuleSyntaxError:
        return  # rejecting is fine; accepted text must round-trip
    assert parse_rule(rule.text, behavior, **meta) == rule  # type: ignore[arg-type]


@given(text=st.text(max_size=80))
def test_it_never_raises_anything_but_rule_syntax_error(text: str) -> None:
    for candidate in (
        text,
        f"Bash({text})",
        f"Read({text})",
        f"Skill({text})",
        f"WebFetch({text})",
    ):
        try:
            parse_rule(candidate)
        except RuleSyntaxError:
            pass
        try:
            parse_call(candidate)
        except RuleSyntaxError:
            pass


@given(command=st.text(min_size=1, max_size=60).filter(lambda s: s.strip()))
def test_it_grants_exactly_the_approved_command(command: str) -> None:
    grant = grant_rule_for(ToolCall("Bash", {"command": command}))
    assert parse_rule(grant.text, source="conversation") == grant
    # Only a command that asked can be approved; one denied (`>/` writes outside the
    # workspace) never reaches the user, and a grant does not lift a deny.
    assume(
        decide(ToolCall("Bash", {"command": command}), PermissionContext(workspace=WS)).behavior
        != "deny"
    )
    context = PermissionContext(workspace=WS, grants=[grant])
    assert decide(ToolCall("Bash", {"command": command}), context).behavior == "allow"
    assert decide(ToolCall("Bash", {"command": command + "x"}), context).behavior != "allow"


paths = st.text(alphabet="abc.-_/ \t*?[]()\\", min_size=1, max_size=25)


@given(path=paths, tool=st.sampled_from(("Read", "Edit", "Write")))
def test_it_grants_exactly_the_approved_path(path: str, tool: str) -> None:
    call = ToolCall(tool, {"file_path": path})
    grant = grant_rule_for(call)
    assert parse_rule(grant.text, source="conversation") == grant
    context = PermissionContext(workspace=WS, grants=[grant])
    assert decide(call, context).behavior == "allow"


@given(
    command=st.text(max_size=40),
    tool=st.sampled_from(("Bash", "Skill", "Read", "Edit", "Glob", "WebFetch", "Task")),
)
# Found by Hypothesis on 2026-12-06: a path that ends in whitespace once its slash is dropped.
@example(command="0\r/", tool="Read")
@example(command="notes /", tool="Edit")
def test_it_shows_any_call_as_text_that_parses_back_to_the_same_text(
    command: str, tool: str
) -> None:
    key = {"Bash": "command", "Skill": "skill", "Read": "file_path", "Edit": "file_path"}
    key |= {"Glob": "pattern", "WebFetch": "url", "Task": "subagent_type"}
    text = call_as_rule_text(ToolCall(tool, {key[tool]: command.strip()}))
    assert call_as_rule_text(parse_call(text)) == text


# ---------------------------------------------------------------- decisions

RULE_POOL = [
    "Bash",
    "Bash(git *)",
    "Bash(git push *)",
    "Bash(rm *)",
    "Bash(ls*)",
    "Bash(ls *)",
    "Bash(echo *)",
    "Bash(python3 *)",
    "Read",
    "Read(./docs/**)",
    "Read(*.env)",
    "Read(//etc/**)",
    "Edit",
    "Edit(out/*.md)",
    "Write",
    "Glob",
    "Grep",
    "Skill",
    "Skill(pdf)",
    "Skill(pdf *)",
    "WebFetch(domain:*.example.com)",
    "mcp__gh",
]
PARTS = ["git push origin", "git status", "rm -rf x", "ls -la", "lsof", "python3 a.py"]
PARTS += ["echo $(rm x)", "echo 'a && rm b'", "timeout 5 rm x", "cat .env"]
commands = st.builds(
    lambda parts, ops: "".join(p + o for p, o in zip(parts, ops, strict=False)) + parts[-1],
    st.lists(st.sampled_from(PARTS), min_size=1, max_size=4),
    st.lists(st.sampled_from([" && ", " || ", "; ", " | ", " & ", "\n"]), max_size=3),
)
file_paths = st.sampled_from(
    ["docs/a.md", "out/r.md", "prod.env", "src/x/.env", "/etc/passwd", "a.txt", "../x"]
)
bash_calls = st.builds(lambda c: ToolCall("Bash", {"command": c}), commands)
calls = st.one_of(
    bash_calls,
    bash_calls,
    st.builds(
        lambda t, p: ToolCall(t, {"file_path": p}),
        st.sampled_from(("Read", "Edit", "Write")),
        file_paths,
    ),
    st.builds(lambda p: ToolCall("Grep", {"pattern": "x", "path": p}), file_paths),
    st.builds(
        lambda n, a: ToolCall("Skill", {"skill": n, "args": a}),
        st.sampled_from(("pdf", "pdfx", "docx")),
        st.sampled_from(("", "fill a.pdf")),
    ),
    st.builds(
        lambda u: ToolCall("WebFetch", {"url": u}),
        st.sampled_from(("https://a.example.com", "https://example.com")),
    ),
    st.builds(lambda t: ToolCall(t, {}), st.sampled_from(("mcp__gh__x", "mcp__other__x", "Task"))),
)
placed_rules = st.lists(
    st.tuples(
        st.sampled_from(BEHAVIORS),
        st.sampled_from(RULE_POOL),
        st.sampled_from(("admin", "scoped-active", "scoped-inactive", "skill", "grant")),
    ),
    min_size=2,
    max_size=12,
)


def build_context(placed: list[tuple[str, str, str]]) -> PermissionContext:
    admin: list[Rule] = []
    skill: list[Rule] = []
    grants: list[Rule] = []
    for behavior, text, where in placed:
        if where == "admin":
            admin.append(parse_rule(text, behavior))
        elif where.startswith("scoped"):
            scope = "pdf" if where == "scoped-active" else "docx"
            admin.append(parse_rule(text, behavior, scope_skill=scope))
        elif where == "skill":
            skill.append(parse_rule(text, behavior, source="skill", scope_skill="pdf"))
        else:
            grants.append(parse_rule(text, "allow", source="conversation"))
    return PermissionContext(
        workspace=WS, admin_rules=admin, active_skills=["pdf"], skill_rules=skill, grants=grants
    )


def rules_deciding_alone(placed: list[tuple[str, str, str]], call: ToolCall, behavior: str) -> list:
    """The placed rules of one behavior that, alone, decide the call by matching it."""
    return [
        p
        for p in placed
        if p[0] == behavior
        and p[2] != "grant"
        and (alone := decide(call, build_context([p]))).rule is not None
        and alone.behavior == behavior
    ]


@settings(max_examples=400)
@given(placed=placed_rules, call=calls)
def test_it_denies_whenever_any_deny_rule_matches_whatever_the_allow_rules(
    placed: list[tuple[str, str, str]], call: ToolCall
) -> None:
    decision = decide(call, build_context(placed))
    if rules_deciding_alone(placed, call, "deny"):
        assert decision.behavior == "deny"
        assert decision.rule is not None and decision.rule.behavior == "deny"
    if decision.behavior == "allow":
        assert not rules_deciding_alone(placed, call, "deny")


@settings(max_examples=400)
@given(placed=placed_rules, call=calls)
def test_it_asks_whenever_an_ask_rule_matches_and_no_deny_rule_does(
    placed: list[tuple[str, str, str]], call: ToolCall
) -> None:
    decision = decide(call, build_context(placed))
    denied = rules_deciding_alone(placed, call, "deny")
    if not denied and rules_deciding_alone(placed, call, "ask"):
        assert decision.behavior == "ask"
        assert decision.rule is not None and decision.rule.behavior == "ask"


@settings(max_examples=300)
@given(placed=placed_rules, call=calls, data=st.data())
def test_it_decides_the_same_behavior_whatever_the_rule_order(
    placed: list[tuple[str, str, str]], call: ToolCall, data: st.DataObject
) -> None:
    shuffled = data.draw(st.permutations(placed))
    assert (
        decide(call, build_context(placed)).behavior
        == decide(call, build_context(shuffled)).behavior
    )


@settings(max_examples=300)
@given(placed=placed_rules, call=calls, data=st.data())
def test_it_decides_the_same_behavior_whatever_the_order_of_allow_rules_alone(
    placed: list[tuple[str, str, str]], call: ToolCall, data: st.DataObject
) -> None:
    allows = [p for p in placed if p[0] == "allow"]
    others = [p for p in placed if p[0] != "allow"]
    reordered = others + data.draw(st.permutations(allows))
    assert (
        decide(call, build_context(placed)).behavior
        == decide(call, build_context(reordered)).behavior
    )


@given(command=st.text(max_size=80), path=st.text(max_size=40))
def test_it_decides_any_call_without_raising(command: str, path: str) -> None:
    context = build_context([(b, t, "admin") for b in BEHAVIORS for t in RULE_POOL[:8]])
    for call in (
        ToolCall("Bash", {"command": command}),
        ToolCall("Read", {"file_path": path}),
        ToolCall("Glob", {"pattern": path, "path": command}),
        ToolCall("Skill", {"skill": command}),
        ToolCall("WebFetch", {"url": command}),
        ToolCall("Bash", {"command": 42}),
    ):
        assert decide(call, context).behavior in BEHAVIORS
