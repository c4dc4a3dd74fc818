"""Benchmark: prompt caching over a 5-turn conversation with one skill load, per delivery profile.

Run: .venv/bin/python bench/bench_cache.py [--generated 50] [--verbose]
Replays the same conversation in each delivery profile through the real SDK, the agent loop
(`runs.supervisor`, as tests/support/loop_helpers.py drives it) and the fake Anthropic server, which reports
usage the way the API does: tokens read from prefixes it cached before, tokens written, and the
uncached rest (characters / 4 per block). Turn 1 loads the release-notes skill, turn 2 runs a
tool, turns 3 to 5 are plain questions: 7 model calls per profile.

Prints, per profile, the share of input tokens read from the cache and the conversation's cost at
the default model's prices (with and without caching). Target: >= 80 % read in meta-message.
Three set-ups: the bundled skills, and the bundled skills plus N generated ones (a catalog near
its 15,000-character budget, as an organisation with many skills has), both with the model's
minimum cacheable prefix as on the API (4,096 tokens for claude-opus-4-8: a shorter prompt is
never cached); then the bundled skills with every breakpoint cached, to see the placement alone.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
os.environ["SKILLSCOPE_VAR_DIR"] = tempfile.mkdtemp(prefix="skillscope-bench-")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from bench.bench_skills import generate  # noqa: E402
from skills_app.core.model_catalog import DEFAULT_MODEL  # noqa: E402
from skills_app.core.pricing import USAGE_FIELDS, cost_usd, format_usd, input_total  # noqa: E402
from skills_app.models import Conversation, PermissionRule, Run  # noqa: E402
from skills_app.runs import supervisor as runs  # noqa: E402
from tests.support.fake_anthropic import FakeAnthropic, Reply  # noqa: E402

TARGET_SHARE = 0.80
SKILL = "release-notes"
PROFILES = ("meta-message", "tool-result", "system-prompt")
CHANGES = "\n".join(
    f"- {line}"
    for line in (
        "Add CSV export to the reports page (#412)",
        "Fix crash when an upload is empty (#420)",
        "Refactor the storage layer (#421)",
        "Bump the CI image to Debian 13",
        "Speed up search on large workspaces by indexing titles (#430)",
        "Rename the setting EXPORT_DIR to REPORTS_EXPORT_DIR (#433)",
        "Fix dates shown in UTC instead of the user's time zone (#436)",
        "Add keyboard shortcuts to the editor (#440)",
    )
)
TURNS = (
    f"Please write the release notes for version 2.1 from these changes:\n{CHANGES}",
    "Which files are in my workspace? I want to save the notes next to the others.",
    "Make the breaking change more prominent and say exactly what people must rename.",
    "Now give me a two-sentence version for the newsletter.",
    "Thanks. Which change do you think users will notice first, and why?",
)
NOTES = (
    "## 2.1 (today)\n\nReports can now be exported as CSV.\n\n### Breaking changes\n"
    "- The setting EXPORT_DIR is now REPORTS_EXPORT_DIR: rename it in your configuration (#433).\n"
    "### New\n- Export any report as CSV (#412).\n- Keyboard shortcuts in the editor (#440).\n"
    "### Improved\n- Search is faster on large workspaces (#430).\n### Fixed\n"
    "- Empty uploads no longer crash the page (#420).\n- Dates show in your time zone (#436).\n"
)
ANSWERS = (
    NOTES,
    "Your workspace has work/ and out/; I suggest out/release-notes-2.1.md next to the others.",
    NOTES.replace("### Breaking changes", "### Breaking changes (action needed)"),
    "Version 2.1 adds CSV export for reports and keyboard shortcuts, and makes search faster. "
    "If you set EXPORT_DIR, rename it to REPORTS_EXPORT_DIR before upgrading.",
    "Probably the faster search: everyone searches every day, while CSV export and shortcuts "
    "serve fewer people. The rename matters most to administrators, once.",
)


def load_reply(profile: str) -> Reply:
    """The model's call that loads the skill, in this profile's tool."""
    if profile == "meta-message":
        return Reply.tool_use("Skill", {"skill": SKILL, "args": "2.1"})
    if profile == "tool-result":
        return Reply.tool_use("load_skill", {"name": SKILL})
    return Reply.tool_use("skill_load", {"skill": SKILL})


def script(profile: str) -> list[Reply]:
    """The fake model's replies, in order: 7 model calls over 5 turns."""
    return [
        load_reply(profile),
        Reply.text(ANSWERS[0]),
        Reply.tool_use("Glob", {"pattern": "*"}),
        Reply.text(ANSWERS[1]),
        *(Reply.text(answer) for answer in ANSWERS[2:]),
    ]


async def replay(profile: str, fake: FakeAnthropic, user: Any) -> list[Run]:
    conversation = await Conversation.objects.acreate(owner=user, title=profile, profile=profile)
    fake.enqueue(*script(profile))
    done: list[Run] = []
    for text in TURNS:
        run = await runs.start_run(conversation.pk, text, user_id=user.pk)
        await runs.wait_for_run(run.pk, timeout=60)
        run = await Run.objects.aget(pk=run.pk)
        if run.status != Run.DONE:
            raise SystemExit(f"{profile}: turn {text[:30]!r} ended {run.status}: {run.error}")
        done.append(run)
    return done


def add_usage(usages: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Sum usage dicts field by field."""
    total = dict.fromkeys(USAGE_FIELDS, 0)
    for usage in usages:
        for key in USAGE_FIELDS:
            total[key] += int(usage.get(key) or 0)
    return total


async def measure(profile: str, *, minimum: bool, user: Any, verbose: bool) -> dict[str, Any]:
    with FakeAnthropic(cache_minimum=minimum) as fake:
        settings.ANTHROPIC_API_KEY = "sk-bench"
        settings.ANTHROPIC_BASE_URL = fake.base_url
        settings.ANTHROPIC_MODEL = DEFAULT_MODEL
        done = await replay(profile, fake, user)
        calls = [r for r in fake.requests if r.status == 200]
    if len(calls) != 7:
        raise SystemExit(
            f"{profile}: expected 7 model calls, the fake server answered {len(calls)}"
        )
    usage = add_usage(run.usage for run in done)
    # The app's stored usage must be what the server reported.
    assert usage["cache_read_input_tokens"] == sum(
        c.usage["cache_read_input_tokens"] for c in calls
    )
    prompt = input_total(usage)
    uncached = {"input_tokens": prompt, "output_tokens": usage["output_tokens"]}
    if verbose:
        for i, call in enumerate(calls, 1):
            u = call.usage
            print(
                f"  {profile} call {i}: uncached {u['input_tokens']:,}, written "
                f"{u['cache_creation_input_tokens']:,}, read {u['cache_read_input_tokens']:,}"
            )
    return {
        "profile": profile,
        "usage": usage,
        "prompt": prompt,
        "share": usage["cache_read_input_tokens"] / prompt,
        "cost": cost_usd(DEFAULT_MODEL, usage) or Decimal(0),
        "cost_uncached": cost_usd(DEFAULT_MODEL, uncached) or Decimal(0),
    }


async def scenario(title: str, *, minimum: bool, user: Any, verbose: bool) -> float:
    print(f"\n### {title}\n")
    print(
        "| profile | prompt tokens | uncached | written | read | read share "
        "| cost | cost without caching |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for profile in PROFILES:
        r = await measure(profile, minimum=minimum, user=user, verbose=verbose)
        u = r["usage"]
        print(
            f"| {r['profile']} | {r['prompt']:,} | {u['input_tokens']:,} "
            f"| {u['cache_creation_input_tokens']:,} | {u['cache_read_input_tokens']:,} "
            f"| {r['share'] * 100:.1f} % | {format_usd(r['cost'])} "
            f"| {format_usd(r['cost_uncached'])} |"
        )
        if profile == "meta-message":
            meta = float(r["share"])
    verdict = "PASS" if meta >= TARGET_SHARE else "MISS"
    print(f"\nmeta-message read share {meta * 100:.1f} % (target >= {TARGET_SHARE:.0%}): {verdict}")
    return meta


async def run_all(generated: int, verbose: bool) -> None:
    user = await get_user_model().objects.acreate(username="bench")
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")
    print(
        f"5 turns, 1 skill load ({SKILL}), 7 model calls per profile; prices of {DEFAULT_MODEL} "
        "(per million tokens: $5 input, $6.25 cache write, $0.50 cache read, $25 output)"
    )
    settings.SKILLS_DIRS = []
    await scenario("Bundled skills, model minimum on", minimum=True, user=user, verbose=verbose)
    with tempfile.TemporaryDirectory() as extra:
        generate(Path(extra), generated)
        settings.SKILLS_DIRS = [Path(extra)]
        await scenario(
            f"Bundled + {generated} generated skills, model minimum on",
            minimum=True,
            user=user,
            verbose=verbose,
        )
    settings.SKILLS_DIRS = []
    await scenario(
        "Bundled skills, every breakpoint cached (no minimum)",
        minimum=False,
        user=user,
        verbose=verbose,
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--generated", type=int, default=50, help="extra generated skills")
    parser.add_argument("--verbose", action="store_true", help="usage of every model call")
    opts = parser.parse_args()
    call_command("migrate", verbosity=0)
    # One event loop for every run: the SDK's connection pool belongs to the loop that opened it.
    asyncio.run(run_all(opts.generated, opts.verbose))
    return 0


if __name__ == "__main__":
    sys.exit(main())
