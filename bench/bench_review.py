"""What the review costs a run: deciding a call (rules, reviewed manifests, the record), the
consent of the skills on offer, and the hidden-text index rebuilt after a person's message.

Run: .venv/bin/python bench/bench_review.py [--calls 500]
SQLite in a temp dir, no model. Prints the load average first (figures on a shared machine are
noisy; see bench/RESULTS.md). Measures:

1. `PermissionGate.rules` + the `PermissionDecision` row, per Bash call, three ways: a call a
   reviewed manifest covers exactly, one it covers through an argument slot, one it does not
   (the rules' default); the median and p95 per call, beside the rules alone (`decide` on the
   same call with no skill active: what a decision cost before reviews, without its record);
2. `registry.consents.consents_for` on every offered skill: cold (manifests derived from the
   bundled folders) and warm (cached by path and digest);
3. `visibility.hidden_index` of a conversation with one invocation of a skill: the rebuild a
   new message of the person causes (their own words are part of the index), and a cached read.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
_VAR_DIR = tempfile.mkdtemp(prefix="skillscope-bench-review-")
atexit.register(shutil.rmtree, _VAR_DIR, ignore_errors=True)
os.environ["SKILLSCOPE_VAR_DIR"] = _VAR_DIR
for name in ("DATABASE_URL", "REDIS_URL", "SQLITE_PATH"):
    os.environ.pop(name, None)

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402

from skills_app.accounts import roles  # noqa: E402
from skills_app.core.agent import TurnState  # noqa: E402
from skills_app.core.permissions import ToolCall, decide  # noqa: E402
from skills_app.models import Conversation, Message, Run, SkillInvocation  # noqa: E402
from skills_app.permissions.approvals import PermissionGate  # noqa: E402
from skills_app.registry import consents as consent_module  # noqa: E402
from skills_app.registry.consents import consents_for  # noqa: E402
from skills_app.registry.skills import skills_for_user  # noqa: E402
from skills_app.visibility import forget, hidden_index  # noqa: E402
from skills_app.workspaces import workspace_for  # noqa: E402
from tests.support.review_helpers import GREET_MARKER, publish  # noqa: E402


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    return f"median {statistics.median(ordered) * 1000:.2f} ms, p95 {p95 * 1000:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}")
    call_command("migrate", verbosity=0, interactive=False)
    users = get_user_model().objects
    mona = users.create_user("mona")
    roles.grant(mona, roles.get_role("skill-manager"))
    alice = users.create_user("alice")
    version = publish(mona)
    conversation = Conversation.objects.create(owner=alice, title="bench")
    run = Run.objects.create(conversation=conversation, status=Run.RUNNING, started_by=alice)
    workspace = workspace_for(conversation.pk)
    folder = str(workspace.skills_dir / "org-greet")

    provider = skills_for_user(alice.pk)
    specs = provider.skills()
    consent_module._installed.clear()
    started = time.perf_counter()
    book = consents_for(specs)
    cold = time.perf_counter() - started
    warm_samples = []
    for _ in range(20):
        started = time.perf_counter()
        consents_for(specs)
        warm_samples.append(time.perf_counter() - started)
    print(f"consents_for, {len(specs)} skills ({len(book)} with a consent): "
          f"cold {cold * 1000:.1f} ms; warm {_ms(warm_samples)}")  # fmt: skip

    async def record(*_a: object, **_k: object) -> int:
        return 0

    gate = PermissionGate(
        conversation_id=conversation.pk,
        run_id=run.pk,
        user_id=alice.pk,
        workspace=workspace,
        record=record,
        consents=book,
    )
    turn = TurnState(active_skills=["org-greet"])
    cases = {
        "exact (allowed-tools entry)": f"python3 {folder}/scripts/greet.py --version",
        "argument slot": f'python3 {folder}/scripts/greet.py "Ada Lovelace"',
        "not covered (default ask)": "date +%Y",
    }
    for label, command in cases.items():
        samples, bare, ruled = [], [], []
        call = ToolCall("Bash", {"command": command})
        for _ in range(args.calls):
            started = time.perf_counter()
            gate._checked(call, turn)
            samples.append(time.perf_counter() - started)
            started = time.perf_counter()
            gate.rules(call, turn)
            ruled.append(time.perf_counter() - started)
            started = time.perf_counter()
            decide(call, gate.context(TurnState()))  # what deciding cost before reviews
            bare.append(time.perf_counter() - started)
        behaviour = gate.rules(call, turn).behavior
        print(f"{label} -> {behaviour} ({args.calls} calls): decide + record {_ms(samples)}; "
              f"decide without the record {_ms(ruled)}; "
              f"the rules alone, no skill {_ms(bare)}")  # fmt: skip

    SkillInvocation.objects.create(
        conversation=conversation, skill="org-greet", source="uploaded", version=version,
        digest=version.digest, caller="user", args="Ada", decision="allowed",
        injected_text=f"Base directory for this skill: {folder}\n\n{GREET_MARKER}. " * 50,
    )  # fmt: skip
    rebuilds, reads = [], []
    for seq in range(1, 21):
        Message.objects.create(
            conversation=conversation, seq=seq, role="user", kind="text",
            content=[{"type": "text", "text": f"message number {seq} of the person"}],
        )  # fmt: skip
        forget()
        started = time.perf_counter()
        hidden_index(conversation.pk)
        rebuilds.append(time.perf_counter() - started)
        started = time.perf_counter()
        hidden_index(conversation.pk)
        reads.append(time.perf_counter() - started)
    print(f"hidden_index after a new message (rebuild): {_ms(rebuilds)}; cached: {_ms(reads)}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
