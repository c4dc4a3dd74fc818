"""Many reservations at once against one budget, in a child process with its own database.

`python -m tests.policy.race_tool THREADS AMOUNT LIMIT` (DATABASE_URL or SQLITE_PATH set, migrated):
makes a user whose daily limit is LIMIT dollars, then THREADS threads, each with its own database
connection, reserve AMOUNT dollars at the same moment (a barrier). Prints JSON: how many got a
reservation, and the counter's reserved total. The database's atomicity is all that stands
between them and overspending.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from decimal import Decimal


def main(threads: int, amount: Decimal, limit: Decimal) -> dict[str, object]:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from skills_app.models import SpendCounter, UserPolicy
    from skills_app.policy import budgets
    from skills_app.policy.access import policy_for

    user = get_user_model().objects.create_user(f"racer{os.getpid()}")
    UserPolicy.objects.create(user=user, daily_limit_usd=limit)
    policy = policy_for(user.pk)
    connection.close()
    barrier = threading.Barrier(threads)
    granted: list[int] = []
    refused: list[str] = []
    errors: list[str] = []

    def one() -> None:
        try:
            barrier.wait(timeout=30)
            granted.append(
                budgets.reserve(policy, model="claude-opus-4-8", amount=amount, purpose="race").id
            )
        except budgets.BudgetExceeded as exc:
            refused.append(exc.message)
        except Exception as exc:  # reported, so the test shows what went wrong
            errors.append(repr(exc))
        finally:
            connection.close()

    workers = [threading.Thread(target=one) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    day = SpendCounter.objects.get(
        scope=SpendCounter.USER, scope_id=user.pk, period=SpendCounter.DAY
    )
    return {
        "granted": len(granted),
        "refused": len(refused),
        "errors": errors,
        "reserved": str(day.reserved_usd),
        "vendor": connection.vendor,
        "sample_refusal": refused[0] if refused else "",
    }


if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    import django

    django.setup()
    threads, amount, limit = int(sys.argv[1]), Decimal(sys.argv[2]), Decimal(sys.argv[3])
    print(json.dumps(main(threads, amount, limit)))
