"""The policy check of every model call: the model must be offered, the budget must hold it.

`Spending.admit` runs before a call is sent (it raises `CallRefused`, which ends a run with a
plain notice); `Spending.settle` runs when it ended, with the usage the API reported. Every
entrance that calls the model goes through one: a run's turns and subagents (the ports), titles
and summaries (`chat.summaries.recorded_call`), trigger runs (`triggers.executor`).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone

from skills_app.core.admission import CallRefused
from skills_app.core.context_window import estimate_input_tokens
from skills_app.core.llm import ModelRequest
from skills_app.core.pricing import ceiling_usd, cost_usd
from skills_app.policy import budgets
from skills_app.policy.access import Policy


def not_offered(model: str, policy: Policy) -> str:
    offered = ", ".join(policy.models) or "none"
    return (
        f"The model {model} is not offered to you (your groups allow: {offered}). Pick one of "
        "those in the model picker, or ask an administrator to add it to one of your groups."
    )


def answered_cost(message: dict[str, Any], fallback_model: str) -> Decimal | None:
    """What an answered call cost, from the usage the API reported."""
    usage = message.get("usage")
    model = str(message.get("model") or fallback_model)
    try:
        return cost_usd(model, usage if isinstance(usage, dict) else {}, on=timezone.localdate())
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Spending:
    """The checks of one person's model calls for one purpose (turn, fork, title...)."""

    policy: Policy
    purpose: str
    is_demo: bool = False
    # False for the title model: the operator's choice, paid from the budget but not picked.
    check_model: bool = True

    def ceiling(self, request: ModelRequest) -> Decimal:
        if self.is_demo:
            return Decimal(0)
        return ceiling_usd(request.model, estimate_input_tokens(request), request.output_limit)

    def admit_sync(self, request: ModelRequest) -> budgets.Reservation | None:
        """The model check and the reservation (sync: it writes the database)."""
        if self.is_demo:
            return None  # the offline demo model answers every request, for nothing
        if self.check_model and not self.policy.offers(request.model):
            raise CallRefused(not_offered(request.model, self.policy), code="model")
        return budgets.reserve(
            self.policy, model=request.model, amount=self.ceiling(request), purpose=self.purpose
        )

    async def admit(self, request: ModelRequest) -> budgets.Reservation | None:
        return await sync_to_async(self.admit_sync)(request)

    async def settle(
        self,
        reservation: budgets.Reservation | None,
        *,
        message: dict[str, Any] | None = None,
        model: str = "",
        unknown: bool = False,
    ) -> None:
        """Settle with the answer's cost; `unknown`: it ended mid-way (charged in full), else an
        error before any answer (nothing owed)."""
        if reservation is None:
            return
        if message is not None:
            actual = answered_cost(message, model)
        else:
            actual = reservation.amount if unknown else Decimal(0)
        await sync_to_async(budgets.settle)(reservation, actual)
