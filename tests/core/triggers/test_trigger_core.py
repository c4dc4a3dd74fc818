"""Trigger tests, the plain-Python half: the skill-choice rule, the metrics, the JSON of a set,
reading a choice through each delivery profile and the probe request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skills_app.core.agent import AgentConfig
from skills_app.core.profiles import get_profile
from skills_app.core.skill_choice import (
    MIN_OVERLAP,
    CatalogEntry,
    choose_skill,
    content_words,
    loader_call,
    read_catalog,
)
from skills_app.core.skillfile import parse_skill_text
from skills_app.core.tools import default_tools
from skills_app.core.triggers.cases import (
    MAX_CASES,
    TriggerCase,
    TriggerSetError,
    dump_cases,
    read_set,
)
from skills_app.core.triggers.metrics import (
    FALSE_TRIGGER,
    MISSED_TRIGGER,
    QueryOutcome,
    misses,
    percent,
    score,
)
from skills_app.core.triggers.probe import WithVersion, chosen_skill, probe_request

CATALOG = [
    CatalogEntry("pdf-tables", "Extract tables from PDF files into spreadsheets."),
    CatalogEntry("release-notes", "Draft release notes from the git log of a repository."),
    CatalogEntry("slide-deck", "Build a slide deck presentation from an outline."),
]


def spec(name: str, description: str, *, frontmatter_name: str | None = None, extra: str = ""):
    text = f"---\nname: {frontmatter_name or name}\ndescription: {description}\n{extra}---\nBODY-{name}\n"
    return parse_skill_text(text, directory=Path("/nowhere") / name, name=name)


class Provider:
    def __init__(self, *specs):
        self.specs = {s.name: s for s in specs}

    def get(self, name):
        return self.specs.get(name)

    def skills(self):
        return sorted(self.specs.values(), key=lambda s: s.name)


# --- the skill-choice rule --------------------------------------------------------------------


def test_content_words_fold_plurals_and_drop_stop_words():
    assert content_words("Please extract the Tables from these PDFs") == {
        "extract",
        "table",
        "pdf",
    }
    # "this" is a stop word before folding, not the plural of "thi"; "class" keeps its ss.
    assert content_words("this class is ok") == {"class"}


def test_a_named_skill_wins_with_the_rest_as_arguments():
    choice = choose_skill("run release-notes for v2.1 please", CATALOG)
    assert choice is not None
    assert (choice.entry.name, choice.reason, choice.args) == (
        "release-notes",
        "named",
        "for v2.1 please",
    )


def test_overlap_picks_the_skill_sharing_the_most_words():
    choice = choose_skill("get the tables out of this pdf into a spreadsheet", CATALOG)
    assert choice is not None
    assert (choice.entry.name, choice.reason, choice.score) == ("pdf-tables", "overlap", 3)


def test_below_the_minimum_overlap_no_skill_is_chosen():
    assert MIN_OVERLAP == 2
    assert choose_skill("what is in this pdf", CATALOG) is None  # one shared word
    assert choose_skill("what is the capital of France", CATALOG) is None


def test_a_tie_goes_to_the_skill_listed_first():
    tied = [CatalogEntry("b-skill", "alpha beta"), CatalogEntry("a-skill", "alpha beta")]
    choice = choose_skill("alpha beta gamma", tied)
    assert choice is not None and choice.entry.name == "b-skill"


def test_the_catalog_is_read_from_the_skill_tool_or_the_system_prompt():
    tools = [
        {
            "name": "Skill",
            "description": 'intro\n<available_skills>\n"pdf-tables": Extract tables.\n"bare"\n</available_skills>',
        }
    ]
    assert read_catalog("", tools) == [
        CatalogEntry("pdf-tables", "Extract tables."),
        CatalogEntry("bare", ""),
    ]
    system = "Base.\nSkills available:\n  - pdf-tables: Extract tables.\n  - other: Else.\n\nMore."
    assert [e.name for e in read_catalog(system, [])] == ["pdf-tables", "other"]


def test_the_loader_call_follows_the_tools_offered():
    assert loader_call([{"name": "Skill"}], "x", "a") == ("Skill", {"skill": "x", "args": "a"})
    assert loader_call([{"name": "skill_load"}], "x", "a") == ("skill_load", {"skill": "x"})
    load = {"name": "load_skill", "input_schema": {"properties": {"name": {}}}}
    assert loader_call([load], "x", "") == ("load_skill", {"name": "x"})


# --- metrics ----------------------------------------------------------------------------------


def outcome(query, should, attempts, triggered, chosen=None, **kw):
    return QueryOutcome(query, should, attempts, triggered, chosen or {}, **kw)


def test_counts_are_per_attempt_and_ratios_follow():
    outcomes = [
        outcome("a", True, 3, 3),
        outcome("b", True, 3, 1, {"other": 2}),
        outcome("c", False, 3, 1),
        outcome("d", False, 3, 0, {"other": 3}),
    ]
    m = score(outcomes)
    assert (m.tp, m.fn, m.fp, m.tn) == (4, 2, 1, 5)
    assert m.attempts == 12
    assert m.precision == pytest.approx(4 / 5)
    assert m.recall == pytest.approx(4 / 6)
    assert m.accuracy == pytest.approx(9 / 12)
    # A query passes on the right side of one half: a (3/3) yes, b (1/3) no, c (1/3) yes, d yes.
    assert (m.queries, m.queries_passed) == (4, 3)


def test_undefined_ratios_are_none_and_shown_as_a_dash():
    m = score([outcome("a", False, 3, 0)])
    assert m.precision is None and m.recall is None and m.accuracy == 1.0
    assert percent(m.precision) == "—" and percent(m.accuracy) == "100 %"
    empty = score([outcome("a", True, 0, 0, errors=3)])
    assert (empty.attempts, empty.queries, empty.errors, empty.accuracy) == (0, 0, 3, None)


def test_misses_list_false_triggers_then_missed_ones_with_what_was_chosen():
    outcomes = [
        outcome("fine", True, 3, 3),
        outcome("stolen", True, 3, 0, {"xlsx": 2}),
        outcome("near miss", False, 3, 2),
    ]
    found = misses(outcomes)
    assert [(m.kind, m.outcome.query, m.wrong) for m in found] == [
        (FALSE_TRIGGER, "near miss", 2),
        (MISSED_TRIGGER, "stolen", 3),
    ]
    assert found[1].instead == (("xlsx", 2), ("", 1))


def test_an_impossible_outcome_is_refused():
    with pytest.raises(ValueError):
        outcome("x", True, 2, 3)


# --- the JSON of a trigger set ------------------------------------------------------------------


def test_a_set_round_trips_through_json():
    cases = [TriggerCase("turn this PDF into a table", True), TriggerCase("hi", False, True)]
    text = dump_cases(cases)
    assert json.loads(text)[1] == {"query": "hi", "should_trigger": False, "held_out": True}
    assert read_set(text).cases == cases


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Nothing to import"),
        ("[{", "not valid JSON (line 1, column 3"),
        ('{"query": "x"}', "got an object: put the queries in [ ]"),
        ('["just text"]', 'Item 1 is "just text", not an object'),
        ('[{"should_trigger": true}]', 'Item 1 has no "query"'),
        ('[{"query": 5, "should_trigger": true}]', '"query" must be text'),
        ('[{"query": "  ", "should_trigger": true}]', "Item 1's query is empty"),
        ('[{"query": "/pdf x", "should_trigger": true}]', "Every query (1) is a slash command"),
        ('[{"query": "x"}]', 'has no "should_trigger": add "should_trigger": true'),
        (
            '[{"query": "x", "should_trigger": "yes"}]',
            'must be true or false (without quotes), not "yes"',
        ),
        (
            '[{"query": "x", "should_trigger": true, "held_out": 1}]',
            '"held_out" must be true or false',
        ),
        (
            '[{"query": "Same", "should_trigger": true}, {"query": "same ", "should_trigger": false}]',
            "Item 2 repeats the query of item 1",
        ),
    ],
)
def test_bad_json_gets_an_error_that_says_what_to_write(text, message):
    with pytest.raises(TriggerSetError) as caught:
        read_set(text)
    assert message in caught.value.message


def test_a_set_too_long_is_refused_and_unknown_keys_are_ignored():
    many = json.dumps([{"query": f"q{i}", "should_trigger": True} for i in range(MAX_CASES + 1)])
    with pytest.raises(TriggerSetError, match="at most 200"):
        read_set(many)
    kept = read_set('[{"query": "q", "should_trigger": false, "note": "from elsewhere"}]').cases
    assert kept == [TriggerCase("q", False)]


# --- what the model chose, read through each profile ----------------------------------------------

SKILLS = [
    spec("pdf-tables", "Extract tables."),
    spec("notes", "Notes.", frontmatter_name="meeting-notes"),
]


@pytest.mark.parametrize(
    ("profile", "block", "expected"),
    [
        ("meta-message", {"name": "Skill", "input": {"skill": "pdf-tables"}}, "pdf-tables"),
        ("meta-message", {"name": "Skill", "input": {"command": "pdf-tables"}}, "pdf-tables"),
        ("tool-result", {"name": "load_skill", "input": {"name": "pdf-tables"}}, "pdf-tables"),
        # The tool-result design lists a skill under its frontmatter name.
        ("tool-result", {"name": "load_skill", "input": {"name": "meeting-notes"}}, "notes"),
        ("system-prompt", {"name": "skill_load", "input": {"skill": "notes"}}, "notes"),
        ("system-prompt", {"name": "skill_list", "input": {}}, ""),
        # Another profile's tool, or an ordinary tool, is no choice in this profile.
        ("meta-message", {"name": "load_skill", "input": {"name": "pdf-tables"}}, ""),
        ("tool-result", {"name": "Read", "input": {"file_path": "x"}}, ""),
        ("meta-message", {"name": "Skill", "input": {"skill": "invented"}}, "invented"),
    ],
)
def test_the_choice_is_read_through_the_profile(profile, block, expected):
    content = [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "t1", **block}]
    assert chosen_skill(content, get_profile(profile), SKILLS) == expected


def test_a_text_answer_chooses_nothing():
    assert (
        chosen_skill([{"type": "text", "text": "Sure."}], get_profile("meta-message"), SKILLS) == ""
    )


# --- the probe request -----------------------------------------------------------------------------


def test_the_probe_is_a_fresh_conversation_with_the_candidate_in_the_catalog():
    active = spec("pdf-tables", "OLD-DESCRIPTION of tables.")
    candidate = spec("pdf-tables", "NEW-DESCRIPTION of tables.")
    other = spec("slide-deck", "Build slides.")
    skills = WithVersion(Provider(active, other), candidate)
    config = AgentConfig(model="claude-opus-4-8")
    request = probe_request("make a table", tools=default_tools(), skills=skills, config=config)
    assert request.messages == [
        {"role": "user", "content": [{"type": "text", "text": "make a table"}]}
    ]
    catalog = next(t for t in request.tools if t["name"] == "Skill")["description"]
    assert "NEW-DESCRIPTION" in catalog and "OLD-DESCRIPTION" not in catalog
    assert '"slide-deck"' in catalog
    assert "BODY-pdf-tables" not in json.dumps(request.tools) + request.system


def test_a_removed_skill_tool_leaves_no_way_to_choose():
    skills = Provider(spec("pdf-tables", "Tables."))
    config = AgentConfig(model="claude-opus-4-8", profile="tool-result")
    request = probe_request(
        "x", tools=default_tools(), skills=skills, config=config, removed={"Skill"}
    )
    assert all(t["name"] != "load_skill" for t in request.tools)
    assert "Skills available" not in request.system


# --- trigger sets as skill authors ship them (issue #28) -----------------------------------------


def test_slash_command_queries_are_skipped_and_reported_never_refusing_the_set():
    items = [{"query": f"plain request {i}", "should_trigger": i % 2 == 0} for i in range(23)]
    items.insert(7, {"query": "/pdf-tables report.pdf", "should_trigger": True})
    found = read_set(json.dumps(items))
    assert len(found.cases) == 23
    assert found.skipped == (
        "Item 8 (/pdf-tables report.pdf) is a slash command: it runs a skill directly instead of "
        "letting the model choose, so there is nothing to measure; it was skipped.",
    )


@pytest.mark.parametrize(
    "text",
    [
        # The Agent Skills guide's eval_queries.json and skill-creator's eval set: a plain list.
        '[{"query": "make a chart", "should_trigger": true}]',
        # Published variants: the list under a key, with other names for the two fields.
        '{"description_under_test": "d", "cases": [{"id": "a", "prompt": "make a chart", '
        '"expected_trigger": true, "rationale": "r"}]}',
        '{"queries": [{"query": "make a chart", "should_trigger": true}]}',
        # skill-creator's run_eval output: its results re-import as the set they measured.
        '{"skill_name": "s", "description": "d", "results": [{"query": "make a chart", '
        '"should_trigger": true, "trigger_rate": 1.0, "triggers": 3, "runs": 3, "pass": true}], '
        '"summary": {"total": 1, "passed": 1, "failed": 0}}',
    ],
)
def test_it_reads_the_shapes_skill_authors_publish(text):
    assert read_set(text).cases == [TriggerCase("make a chart", True)]


def test_an_output_quality_eval_file_is_named_in_the_error():
    evals = {
        "skill_name": "pdf",
        "evals": [{"id": 1, "prompt": "Fill the form", "expected_output": "A filled PDF"}],
    }
    with pytest.raises(TriggerSetError) as caught:
        read_set(json.dumps(evals))
    assert caught.value.message.startswith("This is skill-creator's output-quality eval file")
    assert "evals/trigger-eval.json" in caught.value.message
