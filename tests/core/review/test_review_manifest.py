"""The command manifest (core.review): what a body asks the model to run, found exactly, said in
plain words, and whether approving it consents; the template a reviewed command with arguments
becomes. No database."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skills_app.core.permissions import ToolCall
from skills_app.core.review import Consent, build_manifest, covering_entry, read_package
from skills_app.core.review.commands import find_commands, relative_skill_paths
from skills_app.core.review.manifest import Manifest
from skills_app.core.review.template import compile_template, matches
from skills_app.core.review.words import breadth_warning, explain_command, explain_rule
from skills_app.core.skillfile import parse_skill_dir
from tests.support.paths import REPO

BUNDLED = REPO / "skills"


def _skill(tmp_path: Path, body: str, *, front: str = "", files: dict[str, str] | None = None):
    folder = tmp_path / "demo"
    folder.mkdir()
    (folder / "SKILL.md").write_text(
        f"---\nname: demo\ndescription: A demo skill for the tests.\n{front}---\n"
        + textwrap.dedent(body)
    )
    for rel, text in (files or {}).items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    spec = parse_skill_dir(folder)
    return build_manifest(spec, read_package(folder))


# -- finding commands ----------------------------------------------------------------------------


def test_shell_blocks_give_one_command_per_line_with_continuations_joined():
    text = textwrap.dedent(
        """\
        Intro.

        ```bash
        # a comment
        $ git status
        python3 x.py \\
          --out out/r.md
        ```

        ```console
        $ ls -la
        total 0
        ```

        ```python
        print("not a command")
        ```
        """
    )
    found = find_commands(text)
    assert [(c.text, c.line, c.form) for c in found] == [
        ("git status", 5, "block"),
        ("python3 x.py --out out/r.md", 6, "block"),
        ("ls -la", 11, "block"),
    ]


def test_inline_code_counts_only_when_it_reads_as_a_command():
    text = (
        "Run `git diff --cached` first. The file `config.yml` and `python3` are words.\n"
        "Then run `scripts/build.sh` and read `${CLAUDE_SKILL_DIR}/references/tone.md`.\n"
        "Do not run `git push --force` yourself.\n"
    )
    found = {c.text: c.negated for c in find_commands(text)}
    assert found == {
        "git diff --cached": False,
        "scripts/build.sh": False,
        "git push --force": True,
    }


def test_a_relative_path_to_a_skill_file_is_found_and_an_anchored_one_is_not():
    files = frozenset({"scripts/report.py", "SKILL.md"})
    assert relative_skill_paths("python3 scripts/report.py --x", files) == ["scripts/report.py"]
    assert relative_skill_paths("python3 ./scripts/report.py", files) == ["scripts/report.py"]
    assert relative_skill_paths("python3 ${CLAUDE_SKILL_DIR}/scripts/report.py", files) == []
    assert relative_skill_paths("cd {baseDir} && python3 scripts/report.py", files) == []
    assert relative_skill_paths("python3 scripts/other.py", files) == ["scripts/other.py"]


# -- the manifest ---------------------------------------------------------------------------------


def test_the_manifest_lists_allowed_tools_commands_context_commands_and_hooks(tmp_path):
    manifest = _skill(
        tmp_path,
        """\
        Date: !`date +%F`

        ```bash
        python3 ${CLAUDE_SKILL_DIR}/scripts/run.py "$ARGUMENTS"
        ```
        See [the steps](references/steps.md).
        """,
        front=(
            "allowed-tools: Bash(git log *) Read\n"
            "hooks:\n  PostToolUse:\n    - matcher: Bash\n      hooks:\n"
            "        - type: command\n          command: echo done\n"
        ),
        files={
            "scripts/run.py": "print(1)\n",
            "references/steps.md": "Then run:\n\n```sh\nmake report\n```\n",
        },
    )
    kinds = [(e.kind, e.text, e.where) for e in manifest.entries]
    assert kinds == [
        ("allowed-tool", "Bash(git log *)", "SKILL.md (frontmatter)"),
        ("allowed-tool", "Read", "SKILL.md (frontmatter)"),
        ("context-command", "date +%F", "SKILL.md:12"),
        ("hook", "echo done", "SKILL.md (frontmatter)"),
        ("command", 'python3 ${CLAUDE_SKILL_DIR}/scripts/run.py "$ARGUMENTS"', "SKILL.md:15"),
        ("command", "make report", "references/steps.md:4"),
    ]
    run = manifest.entries[4]
    assert run.consent and run.arguments
    assert run.words == (
        "Runs the skill's own Python script `scripts/run.py`, with the arguments typed after "
        "the skill's name."
    )
    assert "every PostToolUse of Bash event" in manifest.entries[3].words


def test_entries_that_would_consent_to_something_unseen_are_not_consented(tmp_path):
    manifest = _skill(
        tmp_path,
        """\
        ```bash
        python3 scripts/report.py
        python3 work/<name>.py
        python3 ${CLAUDE_SKILL_DIR}/scripts/report.py $ARGUMENTS | tee out/log
        ```
        Never run `rm -rf out`.
        """,
        front="allowed-tools: Bash(python3 scripts/report.py *) Bash(nope\n",
        files={"scripts/report.py": "print(1)\n"},
    )
    refused = {e.text: e.note for e in manifest.entries if not e.consent}
    assert set(refused) == {
        "Bash(python3 scripts/report.py *)",
        "Bash(nope",
        "python3 scripts/report.py",
        "python3 work/<name>.py",
        "python3 ${CLAUDE_SKILL_DIR}/scripts/report.py $ARGUMENTS | tee out/log",
        "rm -rf out",
    }
    assert "relative to the workspace" in refused["python3 scripts/report.py"]
    assert "`<name>` is a blank" in refused["python3 work/<name>.py"]
    assert (
        "more than one command"
        in refused["python3 ${CLAUDE_SKILL_DIR}/scripts/report.py $ARGUMENTS | tee out/log"]
    )
    assert "not to run it" in refused["rm -rf out"]


def test_the_manifest_digest_changes_with_any_entry_and_round_trips(tmp_path):
    manifest = _skill(tmp_path, "Run `git status --short` now.\n")
    again = Manifest.from_data(manifest.as_data())
    assert again == manifest and again.digest == manifest.digest
    changed = Manifest.from_data([{**manifest.as_data()[0], "consent": False}])
    assert changed.digest != manifest.digest
    assert Manifest.from_data("not a list").entries == ()


def test_the_bundled_skills_manifests_consent_only_to_what_their_text_asks_for():
    by_skill = {}
    for folder in sorted(BUNDLED.iterdir()):
        if (folder / "SKILL.md").is_file():
            spec = parse_skill_dir(folder, source="bundled")
            by_skill[folder.name] = build_manifest(spec, read_package(folder))
    commit = {e.text: e.consent for e in by_skill["commit-message"].entries}
    assert commit == {"git diff --cached": True, "git commit": False}  # "Do not run `git commit`"
    assert [e.text for e in by_skill["style-guide"].entries] == []  # files to read, no commands


# -- plain words -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        ("Bash", "Runs any command at all without asking: no limit."),
        ("Bash(git diff *)", "Runs `git diff`, with any arguments, without asking."),
        ("Bash(rm -rf *)", "Careful: it deletes any file it is given."),
        ("Bash(curl *)", "Careful: it can send or fetch anything on the network."),
        ("Bash(python3 *)", "Careful: the interpreter runs any code it is given."),
        ("Read(./docs/**)", "Reads files matching `./docs/**`."),
        ("WebFetch(domain:example.com)", "Fetches web pages from example.com."),
    ],
)
def test_rules_are_said_in_plain_words(rule, words):
    assert words in explain_rule(rule)


def test_commands_are_said_in_plain_words_without_their_prose():
    assert explain_command("git push origin main") == "Runs `git push`."
    assert explain_command("curl -s https://api.example.com/x | jq .") == (
        "Reaches the network with `curl` (api.example.com); then runs `jq`."
    )
    assert explain_command("python3 -c 'print(1)' > out/x.txt") == (
        "Runs Python code written on the command line; writes `out/x.txt`."
    )
    assert breadth_warning("python3 ${CLAUDE_SKILL_DIR}/scripts/x.py *") == ""


# -- the argument template ---------------------------------------------------------------------------


def test_a_template_takes_plain_words_in_its_slots_and_nothing_else():
    folder = "/ws/skills/demo"
    one = compile_template(
        'python3 ${CLAUDE_SKILL_DIR}/run.py --name="$1" "$ARGUMENTS"', skill_dir=folder
    )
    assert not isinstance(one, str)
    assert matches(one, f'python3 {folder}/run.py --name=Ada "Ada Lovelace"')
    assert matches(one, f'python3 {folder}/run.py --name=-x "y"')  # after literal text: fine
    assert not matches(one, f'python3 {folder}/run.py --name=Ada "--evil"')
    assert not matches(one, f'python3 {folder}/run.py --name=Ada "a" extra')
    rest = compile_template("${CLAUDE_SKILL_DIR}/count.sh $ARGUMENTS", skill_dir=folder)
    assert not isinstance(rest, str)
    assert matches(rest, f"{folder}/count.sh one two three")
    assert matches(rest, f"{folder}/count.sh")
    assert not matches(rest, f"{folder}/count.sh one -rf")
    assert not matches(rest, f"{folder}/count.sh one; id")
    assert compile_template("echo $1 > out/x", skill_dir=folder) == (
        "it uses the arguments and it redirects output to a file"
    )


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_whatever_is_typed_the_covered_call_stays_one_command_of_the_reviewed_program(args):
    template = compile_template('python3 /s/run.py "$ARGUMENTS"', skill_dir="/s")
    assert not isinstance(template, str)
    command = f'python3 /s/run.py "{args}"'
    if matches(template, command):
        from skills_app.core.permissions import analyze

        analysis = analyze(command)
        assert len(analysis.commands) == 1 and not analysis.opaque and not analysis.writes
        words = analysis.commands[0].words
        assert words[:2] == ("python3", "/s/run.py") and len(words) == 3


def test_a_consent_covers_its_exact_commands_and_filled_templates_only(tmp_path):
    manifest = _skill(
        tmp_path,
        """\
        ```bash
        git log --oneline -5
        python3 ${CLAUDE_SKILL_DIR}/scripts/run.py "$ARGUMENTS"
        ```
        """,
        files={"scripts/run.py": "print(1)\n"},
    )
    consent = Consent("demo", "d" * 64, "the review of demo v1 by rita", manifest.entries)
    folder = "/ws/skills/demo"

    def covered(command: str) -> bool:
        return covering_entry(consent, ToolCall("Bash", {"command": command}), folder) is not None

    assert covered("git log --oneline -5") and covered("  git log --oneline -5\n")
    assert not covered("git log --oneline -50") and not covered("git log --oneline -5; id")
    assert covered(f'python3 {folder}/scripts/run.py "two words"')
    assert not covered('python3 /elsewhere/scripts/run.py "two words"')
    assert covering_entry(consent, ToolCall("Read", {"file_path": "x"}), folder) is None


# -- MCP tools ---------------------------------------------------------------------------------------


def test_the_manifest_lists_the_mcp_tools_a_skill_asks_for(tmp_path):
    manifest = _skill(
        tmp_path,
        """\
        Look the ticket up with mcp__tickets__get_ticket, then add a comment with
        mcp__tickets__add_comment. Search the wiki with mcp__wiki__search if needed.
        """,
        front="allowed-tools: mcp__tickets__get_ticket mcp__wiki mcp__tickets__list_*\n",
    )
    entries = [(e.kind, e.tool, e.text, e.consent) for e in manifest.entries]
    assert entries == [
        ("allowed-tool", "mcp__tickets__get_ticket", "mcp__tickets__get_ticket", True),
        ("allowed-tool", "mcp__wiki", "mcp__wiki", True),
        ("allowed-tool", "mcp__tickets__list_*", "mcp__tickets__list_*", True),
        # Named in the text, not granted: listed so the reviewer sees it, never consented.
        ("mcp-tool", "mcp__tickets__add_comment", "mcp__tickets__add_comment", False),
    ]
    get, wiki, listing, comment = manifest.entries
    assert get.words == (
        "Calls the tool `get_ticket` of the MCP server `tickets`, with any arguments, "
        "without asking."
    )
    assert get.note == ""
    assert wiki.words.startswith("Calls any tool of the MCP server `wiki`")
    assert (
        wiki.note == "Careful: it covers every tool the server lists, and the tools it adds later."
    )
    assert "whose names start with `list_`" in listing.words
    assert "under that prefix too" in listing.note
    assert comment.where == "SKILL.md:7" and comment.kind_words == "MCP tool the text names"
    assert "List it in allowed-tools for a review to cover it." in comment.note


def test_a_malformed_mcp_rule_is_listed_and_consents_to_nothing(tmp_path):
    manifest = _skill(tmp_path, "Body.\n", front="allowed-tools: mcp__tickets__a*b\n")
    (entry,) = manifest.entries
    assert (entry.kind, entry.consent) == ("allowed-tool", False)
    assert "a * may only end the name" in entry.note


def test_a_consent_covers_the_mcp_tools_its_manifest_granted_and_no_other(tmp_path):
    from skills_app.core.permissions import PermissionContext, decide
    from skills_app.core.review import consent_rules

    manifest = _skill(
        tmp_path,
        "Use mcp__tickets__close_ticket when done.\n",
        front="allowed-tools: mcp__tickets__get_*\n",
    )
    consent = Consent("demo", "d" * 64, "the review of demo v1 by rita", manifest.entries)
    context = PermissionContext(
        workspace=Path("/ws"),
        active_skills=("demo",),
        skill_rules=tuple(consent_rules(consent, "/ws/skills/demo")),
    )
    allowed = decide(ToolCall("mcp__tickets__get_ticket", {"id": 7}), context)
    assert allowed.behavior == "allow"
    assert allowed.reason == "allowed by the review of demo v1 by rita: mcp__tickets__get_*"
    # Named in the text only, another server's tool, a tool outside the prefix: asked.
    for tool in ("mcp__tickets__close_ticket", "mcp__wiki__get_page", "mcp__tickets__getx"):
        assert decide(ToolCall(tool, {}), context).behavior == "ask", tool
