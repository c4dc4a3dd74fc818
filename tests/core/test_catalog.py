from __future__ import annotations

from pathlib import Path

from skills_app.core.catalog import CATALOG_INTRO, ELLIPSIS, build_catalog
from skills_app.core.skillfile import parse_skill_text


def spec(name: str, description: str = "d", *, when: str | None = None, extra: str = ""):
    lines = [f"description: {description!r}"]
    if when:
        lines.append(f"when_to_use: {when!r}")
    text = "---\n" + "\n".join(lines) + f"\n{extra}---\nBody.\n"
    return parse_skill_text(text, directory=Path("/nowhere") / name, name=name)


def entries(catalog: str) -> list[str]:
    inside = catalog.split("<available_skills>\n", 1)[1].split("</available_skills>", 1)[0]
    return inside.splitlines()


def test_it_puts_the_intro_before_the_tagged_list():
    catalog = build_catalog(
        [spec("b-skill", "Does B.", when="When B."), spec("a-skill", "Does A.")]
    )
    assert catalog.startswith(CATALOG_INTRO + "\n\n<available_skills>\n")
    assert catalog.endswith("</available_skills>")
    assert entries(catalog) == ['"a-skill": Does A.', '"b-skill": Does B. - When B.']


def test_the_intro_explains_the_skill_tool_slash_names_and_loaded_skills():
    assert "Skill tool" in CATALOG_INTRO
    assert '"/<name>"' in CATALOG_INTRO
    assert "already loaded" in CATALOG_INTRO


def test_it_lists_only_model_invocable_skills_with_mode_skills_first_under_a_heading():
    skills = [
        spec("zeta"),
        spec("alpha"),
        spec("hidden", extra="disable-model-invocation: true\n"),
        spec("moded", extra="mode: true\n"),
    ]
    assert entries(build_catalog(skills)) == [
        "Mode Commands:",
        '"moded": d',
        "",
        "Skills:",
        '"alpha": d',
        '"zeta": d',
    ]


def test_without_mode_skills_there_are_no_headings():
    assert entries(build_catalog([spec("alpha")])) == ['"alpha": d']
    assert entries(build_catalog([spec("moded", extra="mode: true\n")])) == [
        "Mode Commands:",
        '"moded": d',
    ]


def test_a_skill_without_description_or_when_to_use_is_left_out():
    text = "---\nname: bare\n---\nThe first paragraph would have been the description.\n"
    bare = parse_skill_text(text, directory=Path("/nowhere/bare"), name="bare")
    when = spec("when-only", "", when="When asked.")
    assert bare.description  # discovery still has a fallback, the catalog does not use it
    assert entries(build_catalog([bare, when, spec("alpha")])) == [
        '"alpha": d',
        # when_to_use alone is enough; the description is then the body's first paragraph.
        '"when-only": Body. - When asked.',
    ]


def test_a_plugin_skill_names_its_plugin_after_the_description():
    plugin = spec("tools:pdf", "Extracts text.", when="When a PDF is given.")
    assert entries(build_catalog([plugin])) == [
        '"tools:pdf": Extracts text. (plugin:tools) - When a PDF is given.'
    ]


def test_it_puts_each_entry_on_one_line():
    text = "---\ndescription: |\n  Line one.\n    Line two.\n---\n"
    multi = parse_skill_text(text, directory=Path("/nowhere/multi"), name="multi")
    assert multi.description == "Line one.\n  Line two.\n"
    assert entries(build_catalog([multi])) == ['"multi": Line one. Line two.']


def test_it_caps_description_and_when_to_use_together():
    catalog = build_catalog([spec("capped", "x" * 100, when="y" * 100)], entry_cap=150)
    [line] = entries(catalog)
    text = line.split(": ", 1)[1]
    assert len(text) == 150
    assert text.startswith("x" * 100 + " - y")
    assert text.endswith(ELLIPSIS)


def test_it_keeps_everything_when_within_budget():
    skills = [spec(f"s{i}", "word " * 20) for i in range(5)]
    catalog = build_catalog(skills)
    assert ELLIPSIS not in catalog
    assert len(catalog) < 15_000


def test_300_long_descriptions_fit_the_budget_with_every_name():
    skills = [spec(f"skill-{i:03d}", ("lorem ipsum " * 130)[:1500]) for i in range(300)]
    catalog = build_catalog(skills, budget=15_000)
    assert len(catalog) <= 15_000
    names = [e.split('"')[1] for e in entries(catalog)]
    assert names == [f"skill-{i:03d}" for i in range(300)]
    assert all(": lorem" in e for e in entries(catalog))  # shortened, not dropped


def test_it_shortens_the_longest_descriptions_first():
    skills = [spec("short", "Short and whole."), spec("long", "long " * 400)]
    budget = len(build_catalog([spec("short", "Short and whole."), spec("long", "x")])) + 200
    catalog = build_catalog(skills, budget=budget)
    assert len(catalog) <= budget
    lines = dict(e.split(": ", 1) for e in entries(catalog))
    assert lines['"short"'] == "Short and whole."
    assert lines['"long"'].endswith(ELLIPSIS)
    assert len(lines['"long"']) > 150


def test_when_cuts_would_be_useless_it_drops_the_longest_descriptions():
    skills = [spec("tiny", "Tiny."), *(spec(f"big-{i}", "b" * 500) for i in range(10))]
    head, tail = f"{CATALOG_INTRO}\n\n<available_skills>\n", "</available_skills>"
    bare = len(head) + len(tail) + sum(len(s.name) + 3 for s in skills)
    catalog = build_catalog(skills, budget=bare + 60)
    assert len(catalog) <= bare + 60
    assert '"tiny": Tiny.' in entries(catalog)
    assert '"big-0"' in entries(catalog)


def test_it_lists_every_name_even_when_bare_names_overflow():
    skills = [spec(f"overflowing-name-{i}", "desc") for i in range(50)]
    catalog = build_catalog(skills, budget=200)
    assert len(catalog) > 200
    assert entries(catalog) == sorted(f'"overflowing-name-{i}"' for i in range(50))
