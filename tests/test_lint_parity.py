"""The Agent Skills reference validator (`skills-ref`) is the judge of `skills validate --strict`.

Both run over the same skill folders: the reference's own test cases (rebuilt here, as its tests
build them in a temporary folder), every official skill (from a local snapshot of the public
anthropics/skills repository when there is one), this project's bundled and fixture skills, and
hostile inputs. Every verdict must agree, except the deliberate differences in `DELIBERATE`,
each with its reason (the same list is in docs/interop.md). A deliberate difference that stops
being one fails too, so the list stays true.
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from skills_ref.validator import validate as reference_validate

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "skills"
OFFICIAL = Path(
    os.environ.get("SKILLSCOPE_OFFICIAL_SKILLS") or "/work/.mirror/anthropics+skills/repo"
)

Make = Callable[[Path], Path]


def skill_md(folder: str, text: str | bytes, filename: str = "SKILL.md") -> Make:
    def make(root: Path) -> Path:
        path = root / folder
        path.mkdir(parents=True)
        data = text.encode("utf-8") if isinstance(text, str) else text
        (path / filename).write_bytes(data)
        return path

    return make


def fm(folder: str, frontmatter: str, body: str = "Do the thing.\n") -> Make:
    return skill_md(folder, f"---\n{frontmatter}\n---\n{body}")


def bare(folder: str) -> Make:
    def make(root: Path) -> Path:
        (root / folder).mkdir(parents=True)
        return root / folder

    return make


def missing(root: Path) -> Path:
    return root / "does-not-exist"


# -- the cases ----------------------------------------------------------------------------------

# The reference's own test cases (skills-ref/tests/test_validator.py, test_parser.py), by name.
REFERENCE_CASES: dict[str, Make] = {
    "valid": fm("my-skill", "name: my-skill\ndescription: A test skill"),
    "nonexistent-path": missing,
    "missing-skill-md": bare("my-skill"),
    "uppercase-name": fm("MySkill", "name: MySkill\ndescription: A test skill"),
    "name-too-long": fm("a" * 70, f"name: {'a' * 70}\ndescription: A test skill"),
    "leading-hyphen": fm("-my-skill", "name: -my-skill\ndescription: A test skill"),
    "consecutive-hyphens": fm("my--skill", "name: my--skill\ndescription: A test skill"),
    "invalid-characters": fm("my_skill", "name: my_skill\ndescription: A test skill"),
    "directory-mismatch": fm("wrong-name", "name: correct-name\ndescription: A test skill"),
    "unexpected-fields": fm(
        "my-skill", "name: my-skill\ndescription: A test skill\nunknown_field: x"
    ),
    "license-and-metadata": fm(
        "my-skill",
        "name: my-skill\ndescription: A test skill\nlicense: MIT\nmetadata:\n  author: Test\n  version: 1.0",
    ),
    "allowed-tools": fm(
        "my-skill",
        "name: my-skill\ndescription: A test skill\nallowed-tools: Bash(jq:*) Bash(git:*)",
    ),
    "chinese-name": fm("技能", "name: 技能\ndescription: A skill with Chinese name"),
    "russian-name-with-hyphens": fm("мой-навык", "name: мой-навык\ndescription: A Russian skill"),
    "russian-lowercase-name": fm("навык", "name: навык\ndescription: A Russian skill"),
    "russian-uppercase-name": fm("НАВЫК", "name: НАВЫК\ndescription: A Russian skill"),
    "description-too-long": fm("my-skill", f"name: my-skill\ndescription: {'x' * 1100}"),
    "valid-compatibility": fm(
        "my-skill",
        "name: my-skill\ndescription: A test skill\ncompatibility: Requires Python 3.11+",
    ),
    "compatibility-too-long": fm(
        "my-skill", f"name: my-skill\ndescription: A test skill\ncompatibility: {'x' * 550}"
    ),
    "nfkc-normalisation": fm("cafe\u0301", "name: caf\u00e9\ndescription: A test skill"),
    "no-frontmatter": skill_md("my-skill", "# No frontmatter\n\nJust a body.\n"),
    "unclosed-frontmatter": skill_md("my-skill", "---\nname: my-skill\ndescription: x\n"),
    "invalid-yaml": fm("my-skill", "name: [unclosed\ndescription: x"),
    "frontmatter-not-a-mapping": fm("my-skill", "- just\n- a list"),
    "lowercase-skill-file": skill_md(
        "my-skill", "---\nname: my-skill\ndescription: A test skill\n---\n", "skill.md"
    ),
    "missing-name": fm("my-skill", "description: A test skill"),
    "missing-description": fm("my-skill", "name: my-skill"),
}

# The disagreements issue #28 found, and other hostile or unusual input.
HOSTILE_CASES: dict[str, Make] = {
    "name-yes-in-folder-yes": fm("yes", "name: yes\ndescription: A skill named yes"),
    "name-no-in-folder-no": fm("no", "name: no\ndescription: A skill named no"),
    "name-number": fm("123", "name: 123\ndescription: A numbered skill"),
    "blank-line-before-frontmatter": skill_md(
        "my-skill", "\n---\nname: my-skill\ndescription: A test skill\n---\nBody.\n"
    ),
    "frontmatter-not-first": skill_md(
        "my-skill", "# Title\n---\nname: my-skill\ndescription: A test skill\n---\nBody.\n"
    ),
    "duplicate-name": fm("my-skill", "name: my-skill\ndescription: A test skill\nname: my-skill"),
    "duplicate-description": fm("my-skill", "name: my-skill\ndescription: one\ndescription: two"),
    "capitalised-keys": fm("my-skill", "Name: my-skill\nDescription: A test skill"),
    "capitalised-description": fm("my-skill", "name: my-skill\nDescription: A test skill"),
    "empty-frontmatter": skill_md("my-skill", "---\n---\nBody only.\n"),
    "empty-name": fm("my-skill", "name: ''\ndescription: A test skill"),
    "empty-description": fm("my-skill", "name: my-skill\ndescription: ''"),
    "description-number": fm("my-skill", "name: my-skill\ndescription: 42"),
    "description-exactly-1024": fm("my-skill", f"name: my-skill\ndescription: {'d' * 1024}"),
    "name-exactly-64": fm("a" * 64, f"name: {'a' * 64}\ndescription: A test skill"),
    "trailing-hyphen": fm("my-skill-", "name: my-skill-\ndescription: A test skill"),
    "name-with-space": fm("my skill", "name: my skill\ndescription: A test skill"),
    "alias-bomb": fm(
        "my-skill",
        "name: my-skill\ndescription: &a lol\nlicense: *a",
    ),
    "tab-indented-yaml": fm("my-skill", "name: my-skill\ndescription:\n\t- bad"),
    "crlf-line-endings": skill_md(
        "my-skill", "---\r\nname: my-skill\r\ndescription: A test skill\r\n---\r\nBody.\r\n"
    ),
    "not-utf8": skill_md("my-skill", b"---\nname: my-skill\ndescription: caf\xe9\n---\n"),
    "quoted-values": fm("my-skill", "name: 'my-skill'\ndescription: \"Quoted: fine\""),
    "block-scalar-description": fm("my-skill", "name: my-skill\ndescription: |\n  Two\n  lines"),
    "metadata-with-numbers": fm(
        "my-skill",
        "name: my-skill\ndescription: A test skill\nmetadata:\n  version: 2\n  beta: true",
    ),
    "claude-code-keys": fm(
        "my-skill",
        "name: my-skill\ndescription: A test skill\nwhen_to_use: When asked.\n"
        "argument-hint: '[file]'\ndisable-model-invocation: true\nuser-invocable: false\n"
        "model: inherit\ncontext: fork\nagent: Explore",
    ),
    "claude-code-key-only-hooks": fm(
        "my-skill",
        "name: my-skill\ndescription: A test skill\nhooks:\n  PreToolUse:\n    - matcher: Bash",
    ),
    "flow-style-tool-list": fm(
        "my-skill", "name: my-skill\ndescription: A test skill\nallowed-tools: [Read, Grep]"
    ),
    "license-list": fm(
        "my-skill", "name: my-skill\ndescription: A test skill\nlicense:\n  - MIT\n  - Apache-2.0"
    ),
    "byte-order-mark": skill_md(
        "my-skill", "\ufeff---\nname: my-skill\ndescription: A test skill\n---\nBody.\n"
    ),
    "body-over-500-lines": fm(
        "my-skill", "name: my-skill\ndescription: A test skill", body="line\n" * 600
    ),
}

# (strict verdict, reference verdict) where they differ on purpose, and why. docs/interop.md
# carries the same list.
DELIBERATE: dict[str, tuple[bool, bool, str]] = {
    "claude-code-keys": (
        True,
        False,
        "Claude Code's frontmatter keys (when_to_use, argument-hint, disable-model-invocation, "
        "user-invocable, model, context, agent, hooks, ...) are read here; the reference "
        "allows only the six spec keys",
    ),
    "claude-code-key-only-hooks": (
        True,
        False,
        "`hooks` is a Claude Code key (see claude-code-keys)",
    ),
    "flow-style-tool-list": (
        True,
        False,
        "Claude Code documents YAML lists for allowed-tools; the reference's strictyaml "
        "refuses flow-style YAML",
    ),
    "license-list": (
        False,
        True,
        "a field of the wrong type is an error here; the reference does not check the type "
        "of license",
    ),
    "byte-order-mark": (
        True,
        False,
        "a UTF-8 byte order mark (Windows editors add one) is removed before reading; the "
        "reference then finds no --- at the start",
    ),
}

ALL_CASES = {**REFERENCE_CASES, **HOSTILE_CASES}


def reference_verdict(path: Path) -> bool:
    """True when skills-ref finds no problem (its CLI exits 0)."""
    try:
        return reference_validate(path) == []
    except (UnicodeDecodeError, ValueError, TypeError, AttributeError):
        return False  # the reference crashes on some inputs: certainly not a pass


def strict_verdict(path: Path) -> tuple[bool, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        call_command("skills", "validate", "--strict", str(path), stdout=out, stderr=err)
    except CommandError as exc:
        return False, f"{out.getvalue()}{exc}"
    return True, out.getvalue()


def check(path: Path, case: str) -> None:
    ours, said = strict_verdict(path)
    theirs = reference_verdict(path)
    if case in DELIBERATE:
        want_ours, want_theirs, _why = DELIBERATE[case]
        assert (ours, theirs) == (want_ours, want_theirs), said
    else:
        assert ours == theirs, f"strict={ours} reference={theirs}: {said}"


@pytest.mark.parametrize("case", sorted(ALL_CASES))
def test_strict_validate_agrees_with_the_reference(tmp_path, case):
    check(ALL_CASES[case](tmp_path), case)


def test_every_deliberate_difference_is_a_case():
    assert set(DELIBERATE) <= set(ALL_CASES)


def test_the_deliberate_differences_are_the_documented_ones():
    doc = (ROOT / "docs" / "interop.md").read_text()
    for case in DELIBERATE:
        assert f"`{case}`" in doc, f"docs/interop.md does not list {case}"


# -- our own skills -----------------------------------------------------------------------------

OWN = sorted(
    [p for p in (ROOT / "skills").iterdir() if p.is_dir()]
    + [p for p in FIXTURES.iterdir() if p.is_dir() and p.name != "acme-tools"]
    + list((FIXTURES / "acme-tools" / "skills").iterdir())
)


SPEC_KEYS = {"name", "description", "license", "allowed-tools", "metadata", "compatibility"}


def explained(error: str) -> bool:
    """A reference error that one of the deliberate differences accounts for."""
    from skills_app.core.lint import KNOWN_KEYS

    if error.startswith("Unexpected fields in frontmatter: "):
        # claude-code-keys: every field it names is one Claude Code reads.
        fields = error.split(": ", 1)[1].split(". Only", 1)[0].split(", ")
        return all(f in KNOWN_KEYS for f in fields)
    # flow-style-tool-list: strictyaml refuses `[a, b]` and `{a: b}`.
    return "disallowed JSONesque flow" in error


@pytest.mark.parametrize("path", OWN, ids=lambda p: p.name)
def test_our_bundled_and_fixture_skills_get_the_reference_verdict(path):
    """Skills written for Claude Code use its keys and YAML lists: the reference's errors the
    deliberate differences explain are set aside, and what is left must agree."""
    ours, said = strict_verdict(path)
    errors = [e for e in reference_validate(path) if not explained(e)]
    assert ours == (errors == []), f"{said}\nreference: {errors}"


# -- the official skills ------------------------------------------------------------------------


def _official_names() -> list[str]:
    if not (OFFICIAL / "HEAD").is_file():
        return []
    listing = subprocess.run(
        ["git", f"--git-dir={OFFICIAL}", "ls-tree", "--name-only", "HEAD", "skills/"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    return sorted(line.split("/", 1)[1] for line in listing if "/" in line)


OFFICIAL_NAMES = _official_names()


@pytest.fixture(scope="module")
def official(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("official-skills")
    archive = subprocess.run(
        ["git", f"--git-dir={OFFICIAL}", "archive", "--format=tar", "HEAD", "skills"],
        capture_output=True,
        timeout=120,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target / "skills"


@pytest.mark.skipif(
    not OFFICIAL_NAMES,
    reason=f"no snapshot of github.com/anthropics/skills at {OFFICIAL}; set "
    "SKILLSCOPE_OFFICIAL_SKILLS to its git directory to run these",
)
@pytest.mark.parametrize("name", OFFICIAL_NAMES or ["none"])
def test_every_official_skill_gets_the_reference_verdict(official, name):
    ours, said = strict_verdict(official / name)
    assert ours == reference_verdict(official / name), said


@pytest.mark.skipif(not OFFICIAL_NAMES, reason="no snapshot of github.com/anthropics/skills")
def test_without_strict_the_official_overshoot_is_a_warning(official):
    """The one deliberate default: a description over 1,024 characters (an official skill has
    one) passes `validate` with a warning; --strict and the reference fail it."""
    long = [n for n in OFFICIAL_NAMES if "description-length" in _rules(official / n)]
    assert long, "no official skill has a description over 1,024 characters any more"
    for name in long:
        out = io.StringIO()
        call_command("skills", "validate", str(official / name), stdout=out)
        assert "warning" in out.getvalue()
        assert not strict_verdict(official / name)[0]
        assert not reference_verdict(official / name)


def _rules(path: Path) -> set[str]:
    from skills_app.core.skillfile import lint_skill_dir

    return {p.rule for p in lint_skill_dir(path)}
