"""The cost of the organisation's policy checks with 1,000 users in 100 groups (not a test).

Run: .venv/bin/python bench/bench_policy.py [--users 1000] [--groups 100] [--calls 2000]
     (DATABASE_URL=postgres://... to measure PostgreSQL; default: SQLite in a temp folder)

Builds 100 groups with policies (models, half with budgets), 1,000 users in 3 groups each, 200
skills restricted to groups and 60 rules limited to groups or people. Then measures, for random
users:
- per model call, in runs of 20 calls: the model check and room for the call from the run's
  budget lease before it, and its reported cost settled into the lease after
  (`runs.spending.Spending`); the lease itself is renewed in the database (`policy.budgets`,
  an atomic reservation) when it runs out, about every 4 calls. The target: under 1 ms for the
  check before a call (median, renewals included);
- per run: reading a person's policy (`policy_for`: groups, models, hidden skills, limits);
- per permission decision: loading the admin rules that apply to the person (`admin_rules`).
Prints median and 95th percentile of each, and PASS/MISS against the target.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
_VAR_DIR = tempfile.mkdtemp(prefix="skillscope-bench-policy-")
atexit.register(shutil.rmtree, _VAR_DIR, ignore_errors=True)
os.environ["SKILLSCOPE_VAR_DIR"] = _VAR_DIR
for name in ("REDIS_URL", "SQLITE_PATH"):
    os.environ.pop(name, None)

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.auth.models import Group  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from skills_app.core.llm import ModelRequest  # noqa: E402
from skills_app.models import GroupPolicy, PermissionRule, SkillAccess  # noqa: E402
from skills_app.permissions.approvals import admin_rules  # noqa: E402
from skills_app.policy.access import policy_for  # noqa: E402
from skills_app.runs.spending import Spending  # noqa: E402

TARGET_CHECK = 0.001
MODELS = ["claude-opus-4-8", "claude-sonnet-5", "claude-haiku-4-5"]


def build(users: int, groups: int, rng: random.Random) -> list[int]:
    call_command("migrate", verbosity=0, interactive=False)
    made = Group.objects.bulk_create([Group(name=f"team-{i:03d}") for i in range(groups)])
    made = list(Group.objects.filter(name__startswith="team-").order_by("pk"))
    GroupPolicy.objects.bulk_create(
        GroupPolicy(
            group=g,
            directory_name=f"cn=team-{i:03d}",
            allowed_models=[rng.choice(MODELS)],
            daily_limit_usd=Decimal("500") if i % 2 else None,
            monthly_limit_usd=Decimal("5000") if i % 2 else None,
        )
        for i, g in enumerate(made)
    )
    people = get_user_model().objects.bulk_create(
        get_user_model()(username=f"person{i:04d}") for i in range(users)
    )
    people = list(get_user_model().objects.filter(username__startswith="person"))
    through = get_user_model().groups.through
    through.objects.bulk_create(
        through(user_id=p.pk, group_id=g.pk) for p in people for g in rng.sample(made, 3)
    )
    for i in range(200):
        access = SkillAccess.objects.create(skill=f"skill-{i:03d}")
        access.groups.set(rng.sample(made, 2))
    for i in range(60):
        rule = PermissionRule.objects.create(behavior="deny", rule_text=f"Bash(tool{i} *)")
        if i % 3 == 0:
            rule.applies_to_groups.set(rng.sample(made, 3))
        elif i % 3 == 1:
            rule.applies_to_users.set(rng.sample(people, 5))
    return [p.pk for p in people]


def timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def report(label: str, samples: list[float], target: float | None = None) -> None:
    median = statistics.median(samples)
    p95 = sorted(samples)[int(len(samples) * 0.95) - 1]
    verdict = "" if target is None else ("  PASS" if median < target else "  MISS")
    print(f"{label:<58} median {median * 1000:7.3f} ms  p95 {p95 * 1000:7.3f} ms{verdict}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=1000)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    rng = random.Random(26)
    started = time.perf_counter()
    people = build(args.users, args.groups, rng)
    print(
        f"{connection.vendor}: {len(people)} users, {args.groups} groups (3 each), 200 restricted "
        f"skills, 60 limited rules; built in {time.perf_counter() - started:.1f} s"
    )
    request = ModelRequest(
        model="claude-haiku-4-5",
        system="You help.",
        tools=[],
        messages=[{"role": "user", "content": [{"type": "text", "text": "hello " * 200}]}],
        max_tokens=2000,
    )
    policies = [policy_for(pk) for pk in rng.sample(people, 200)]
    admits: list[float] = []
    settles: list[float] = []
    renews: list[float] = []
    closes: list[float] = []
    answer = {"model": "claude-haiku-4-5", "usage": {"input_tokens": 300, "output_tokens": 200}}

    async def one_run(spending: Spending, calls: int) -> None:
        for _ in range(calls):
            lease = spending.lease
            started = time.perf_counter()
            ticket = await spending.admit(request)
            took = time.perf_counter() - started
            admits.append(took)
            if spending.lease is not lease:
                renews.append(took)
            started = time.perf_counter()
            await spending.settle(ticket, message=answer, model=request.model)
            settles.append(time.perf_counter() - started)
        started = time.perf_counter()
        await spending.close()
        closes.append(time.perf_counter() - started)

    async def all_runs() -> None:
        for _ in range(args.calls // 20):
            await one_run(Spending(rng.choice(policies), "turn"), 20)

    asyncio.run(all_runs())
    report("per model call: model offered + room from the lease (before)", admits, TARGET_CHECK)
    report("per model call: its cost settled into the lease (after)", settles)
    report(f"  of which lease renewals in the database ({len(renews)} of {len(admits)})", renews)
    report("per run: what was spent written, the lease given back", closes)
    report(
        "per run: policy_for (groups, models, hidden skills, limits)",
        timed(lambda: policy_for(rng.choice(people)), 300),
    )
    report(
        "per decision: admin_rules for the person",
        timed(lambda: admin_rules(rng.choice(people)), 300),
    )


if __name__ == "__main__":
    main()
