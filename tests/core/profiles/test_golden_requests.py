"""Golden requests: what each delivery profile sends, compared field by field with stored JSON.

For every profile and every execution pattern of the bundled skills (instructions, script,
library, docs, orchestration) one scripted conversation runs through the real SDK against the
fake Anthropic server, with the "same base prompt": Skillscope's own request format, which no
outside code judges ("as the source design" is judged by the designs' own code:
`tests/support/design_oracles/`). Every request the server accepted is normalised and compared with
`tests/golden/<profile>/<pattern>.json`, field by field, so a change to any wire format fails
with the field named.

Normalised, because it legitimately varies between runs: tool_use ids (numbered in order of
appearance), the paths of the test's temporary folders (and the sizes Write reports, since a
written script may hold one), the bundled skills' folder, the timestamp in a report's file name, run-folder ids and
durations. Nothing else.

Regenerate after an intended change (then read the diff before committing it):

    UPDATE_GOLDENS=1 .venv/bin/python -m pytest tests/core/profiles/test_golden_requests.py -p no:cacheprovider
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings as django_settings

from skills_app.models import Conversation, Message, PermissionRule, Run
from skills_app.workspaces import workspace_for
from tests.skills.test_example_skills import (
    CHANGES,
    NOTES,
    SALES,
    SCRIPT_BODY,
    ScriptedModel,
    follow,
    last_result,
    scout_steps,
)
from tests.support.fake_anthropic import Reply
from tests.support.loop_helpers import accepted, run_turn, use_fake_model
from tests.support.paths import GOLDEN

# Only the tests that run code in other threads (async ones) need real transactions.
pytestmark = pytest.mark.django_db

GOLDEN = GOLDEN
PROFILES = ["meta-message", "tool-result", "system-prompt"]
PATTERNS = ["instructions", "script", "library", "docs", "orchestration"]
UPDATE = os.environ.get("UPDATE_GOLDENS") == "1"


# -- the scripted conversations ----------------------------------------------------------------


def instructions(model: ScriptedModel, ws: Any) -> tuple[str, list[Any], Any]:
    steps = [lambda r: model.load("release-notes", "2.1"), lambda r: Reply.text(NOTES)]
    return "Release notes for 2.1: Add CSV export; Fix crash on empty upload", steps, None


def script(model: ScriptedModel, ws: Any) -> tuple[str, list[Any], Any]:
    (ws.work_dir / "notes.txt").write_text("one two three\nfour five\n")

    def run_script(request):
        body = model.body(request, "text-stats") or ""
        command = re.search(r"```bash\n(.+?)\n```", body, re.S).group(1).strip()
        command = model.resolve(command, "text-stats").replace("$ARGUMENTS", "work/notes.txt")
        return model.shell("text-stats", command, outputs=("out/*.json",))

    steps = [
        lambda r: model.load("text-stats", "work/notes.txt"),
        run_script,
        lambda r: Reply.text("Done: " + model.output(r).splitlines()[0]),
    ]
    return "Count the words in work/notes.txt", steps, None


def library(model: ScriptedModel, ws: Any) -> tuple[str, list[Any], Any]:
    (ws.work_dir / "sales.csv").write_text(SALES)

    def write_script(request):
        body = model.body(request, "table-kit") or ""
        # The body says in words which folder to put first on sys.path (test_example_skills).
        folder = re.search(r"put\s+`(.+?)`\s+\(the library's folder\)", body).group(1)
        header = f'import sys\nsys.path.insert(0, "{folder}")\nimport tablekit\n'
        code = model.resolve(header, "table-kit") + SCRIPT_BODY
        return Reply.tool_use("Write", {"file_path": "work/sales_summary.py", "content": code})

    steps = [
        lambda r: model.load("table-kit", "work/sales.csv"),
        write_script,
        lambda r: model.shell("table-kit", "python3 work/sales_summary.py", ("out/*.json",)),
        lambda r: Reply.text(model.output(r).splitlines()[0]),
    ]
    return "Profile work/sales.csv", steps, None


def docs(model: ScriptedModel, ws: Any) -> tuple[str, list[Any], Any]:
    def pick_reference(request):
        body = model.body(request, "style-guide") or ""
        row = next(line for line in body.splitlines() if line.startswith("| voice, tone"))
        path = model.resolve(re.search(r"`([^`]+)`", row).group(1), "style-guide")
        if model.profile == "system-prompt":
            relative = path.split("/style-guide/", 1)[1]
            return Reply.tool_use("skill_select_docs", {"skill": "style-guide", "docs": [relative]})
        return Reply.tool_use("Read", {"file_path": path})

    steps = [
        lambda r: model.load("style-guide"),
        pick_reference,
        lambda r: Reply.text('Use the export button. ("utilise" becomes "use")'),
    ]
    return 'Review in our style: "Simply utilise export!"', steps, None


def orchestration(model: ScriptedModel, ws: Any) -> tuple[str, list[Any], Any]:
    (ws.work_dir / "changes.txt").write_text(CHANGES)
    (ws.work_dir / "src").mkdir()
    (ws.work_dir / "src" / "settings.py").write_text(
        "EXPORT_MAX_ROWS = 10_000  # BREAKING: renamed from EXPORT_LIMIT\n"
    )

    def write_brief(request):
        risks = [line for line in last_result(request).splitlines() if line.startswith("- [")]
        brief = "\n".join(["# Release 2.0", "", "## Risks", *risks])
        return Reply.tool_use("Write", {"file_path": "out/release-prep-2.0.md", "content": brief})

    steps = [
        lambda r: model.load("release-prep", "2.0 work/changes.txt work/src"),
        lambda r: Reply.tool_use("Read", {"file_path": "work/changes.txt"}),
        lambda r: model.load("change-scout", "work/src"),
        write_brief,
        lambda r: Reply.text("Wrote out/release-prep-2.0.md."),
    ]
    return "Get 2.0 ready to ship", steps, scout_steps()


SCRIPTS = {
    "instructions": instructions,
    "script": script,
    "library": library,
    "docs": docs,
    "orchestration": orchestration,
}


# -- normalising and comparing ------------------------------------------------------------------


def normalise(requests: list[dict[str, Any]], replacements: dict[str, str]) -> list[dict[str, Any]]:
    """The requests with what legitimately varies replaced by stable placeholders."""
    ids: dict[str, str] = {}

    def fix_id(m: re.Match[str]) -> str:
        return ids.setdefault(m[0], f"toolu_{len(ids) + 1:02d}")

    def fix(text: str) -> str:
        for real, placeholder in replacements.items():
            text = text.replace(real, placeholder)
        text = re.sub(r"toolu_fake\d+", fix_id, text)
        text = re.sub(r"text-stats-\d{8}-\d{6}(?:-\d+)?", "text-stats-<stamp>", text)
        text = re.sub(r"run-[0-9a-f]{12}", "run-<id>", text)
        # The size a Write reports (the library pattern's script holds a temporary path).
        text = re.sub(r"((?:Created|Updated) \S+ \()\d+( bytes\)\.)", r"\g<1><size>\2", text)
        return re.sub(r'(\\?"duration_ms\\?": )\d+', r"\g<1>0", text)

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return fix(value)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    return [walk(dict(r)) for r in requests]


def pack(requests: list[dict[str, Any]]) -> dict[str, Any]:
    """The file's form: each distinct tool list stored once, requests naming theirs."""
    tool_sets: dict[str, Any] = {}
    packed = []
    for request in requests:
        tools = request.get("tools", [])
        key = next((k for k, v in tool_sets.items() if v == tools), None)
        if key is None:
            key = f"tools-{len(tool_sets) + 1}"
            tool_sets[key] = tools
        packed.append({**request, "tools": key})
    return {"tool_sets": tool_sets, "requests": packed}


def unpack(stored: dict[str, Any]) -> list[dict[str, Any]]:
    return [{**r, "tools": stored["tool_sets"][r["tools"]]} for r in stored["requests"]]


def first_difference(expected: Any, actual: Any, path: str = "") -> str | None:
    """The path of the first field that differs, with both values, or None."""
    if type(expected) is not type(actual):
        return f"{path or '.'}: expected {expected!r}, got {actual!r}"
    if isinstance(expected, dict):
        for key in sorted(set(expected) | set(actual)):
            if key not in actual or key not in expected:
                side = "missing" if key not in actual else "unexpected"
                return f"{path}.{key}: {side}"
            found = first_difference(expected[key], actual[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list):
        if len(expected) != len(actual):
            return f"{path}: {len(expected)} items expected, {len(actual)} sent"
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            found = first_difference(e, a, f"{path}[{i}]")
            if found:
                return found
        return None
    if expected == actual:
        return None
    if isinstance(expected, str) and len(expected) + len(actual) > 160:
        # Long texts: where they part, with some context on each side.
        at = next(
            (i for i, (e, a) in enumerate(zip(expected, actual, strict=False)) if e != a), None
        )
        at = min(len(expected), len(actual)) if at is None else at
        start = max(0, at - 40)
        return (
            f"{path}: differs at character {at}: expected ...{expected[start : at + 40]!r}..., "
            f"got ...{actual[start : at + 40]!r}..."
        )
    return f"{path}: expected {expected!r}, got {actual!r}"


# -- the tests --------------------------------------------------------------------------------


@pytest.fixture
def fake(settings, fake_anthropic):
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = []  # only the bundled skills
    settings.ANTHROPIC_EFFORT = ""
    settings.SKILL_STATE_LIFETIME = "turn"
    settings.TOOL_RESULT_SUBSTITUTIONS = False
    PermissionRule.objects.create(behavior="allow", rule_text="Skill")
    return fake_anthropic


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.django_db(transaction=True)
async def test_the_requests_match_the_golden_ones(fake, alice, tmp_path, profile, pattern):
    conversation = await Conversation.objects.acreate(
        owner=alice, title=f"golden {profile} {pattern}", profile=profile, base_prompt="shared"
    )
    ws = await sync_to_async(workspace_for)(conversation.pk)
    model = ScriptedModel(profile)
    prompt, steps, child_steps = SCRIPTS[pattern](model, ws)
    follow(fake, steps, child_steps)
    run = await run_turn(conversation, prompt, alice, answer="allow_once")
    assert run.status == Run.DONE, run.error
    # Every kind a profile stores is a declared choice (skill_state was once missing).
    stored = Message.objects.filter(conversation=conversation).values_list("kind", flat=True)
    assert {kind async for kind in stored} <= set(Message.Kind.values)

    replacements = {
        str(ws.root): "<WORKSPACE>",
        str(Path(django_settings.BUNDLED_SKILLS_DIR).resolve()): "<BUNDLED>",
        str(tmp_path): "<TMP>",
    }
    sent = normalise(accepted(fake), replacements)
    assert not any("SCRIPT FAILED" in json.dumps(r) for r in sent), "a scripted step failed"
    path = GOLDEN / profile / f"{pattern}.json"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        stored = json.dumps(pack(sent), indent=2, ensure_ascii=False, sort_keys=True)
        path.write_text(stored + "\n")
    expected = unpack(json.loads(path.read_text()))
    assert len(sent) == len(expected), f"{len(expected)} requests expected, {len(sent)} sent"
    for i, (want, got) in enumerate(zip(expected, sent, strict=True)):
        for field in sorted(set(want) | set(got)):
            difference = first_difference(want.get(field), got.get(field), field)
            assert difference is None, f"request {i + 1} of {len(sent)}: {difference}"


def test_the_comparison_names_the_first_differing_field():
    """Positive control for the comparison itself."""
    want = {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]}]}
    got = {"messages": [{"role": "user", "content": [{"type": "text", "text": "b"}]}]}
    assert first_difference(want, got) == ".messages[0].content[0].text: expected 'a', got 'b'"
    assert first_difference(want, want) is None
    assert first_difference({"a": 1}, {"a": 1, "b": 2}) == ".b: unexpected"
    long_a, long_b = "x" * 100 + "specialized", "x" * 100 + "specialised"
    assert first_difference(long_a, long_b, "system") == (
        "system: differs at character 108: expected ...'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxspecialized'"
        "..., got ...'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxspecialised'..."
    )


def test_packing_stores_each_tool_list_once_and_unpacks_to_the_requests():
    requests = [{"tools": [{"name": "a"}], "n": 1}, {"tools": [{"name": "a"}], "n": 2}]
    packed = pack(requests)
    assert packed["tool_sets"] == {"tools-1": [{"name": "a"}]}
    assert unpack(packed) == requests


def test_normalising_keeps_everything_but_what_varies():
    requests = [
        {
            "system": "You are a coding agent at /tmp/x/ws/1.",
            "messages": [
                {"id": "toolu_fake000123", "other": "toolu_fake000123 toolu_fake000124"},
                '{"duration_ms": 412, "stdout": "out/text-stats-20260101-120000-7.json"}',
            ],
        }
    ]
    (fixed,) = normalise(requests, {"/tmp/x/ws/1": "<WORKSPACE>"})
    assert fixed["system"] == "You are a coding agent at <WORKSPACE>."
    assert fixed["messages"][0] == {"id": "toolu_01", "other": "toolu_01 toolu_02"}
    (written,) = normalise([{"content": "Created work/x.py (453 bytes)."}], {})
    assert written == {"content": "Created work/x.py (<size> bytes)."}
    assert fixed["messages"][1] == ('{"duration_ms": 0, "stdout": "out/text-stats-<stamp>.json"}')
