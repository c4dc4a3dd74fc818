"""The policy check of every model call: the model must be offered, the budget must hold it.

`Spending.admit` runs before a call is sent (it raises `CallRefused`, which ends a run with a
plain notice); `Spending.settle` runs when it ended, with the usage the API reported (both in
`model_calls.metered`, the one seam every model call streams through: a run's turns and
subagents, titles and summaries, trigger attempts); `close` when the run (or trigger run, title,
summary) is over.

Budgets are held in the database by a lease: the first call of a run reserves room for a few
calls at once (`LEASE_CALLS` times its ceiling, or what is left if less), atomically against
every other run (`policy.budgets.renew`); the calls after it are admitted from the lease in
memory and the database is written again only when the lease runs out. So the check before a
call costs microseconds, and no call is ever sent without room reserved for it in the database,
calls in flight at once included: their room is held until they are settled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone

from skills_app.core.admission import CallRefused
from skills_app.core.llm import ModelRequest
from skills_app.core.pricing import ceiling_usd, cost_usd
from skills_app.core.token_bound import input_token_bound
from skills_app.policy import budgets
from skills_app.policy.access import Policy

# A lease holds room for this many calls like the one that asked for it.
LEASE_CALLS = 4


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
class Ticket:
    """Room promised to one call from the lease (its ceiling)."""

    amount: Decimal


@dataclass(slots=True)
class Spending:
    """The checks of one person's model calls for one purpose (turn, fork, title, trigger...).

    Used from one event loop (a run's calls, a trigger run's concurrent attempts): the lease
    is changed only there, so its arithmetic needs no lock.
    """

    policy: Policy
    purpose: str
    is_demo: bool = False
    # False for the title model: the operator's choice, paid from the budget but not picked.
    check_model: bool = True
    # The reservations held in the database; more than one only while calls are in flight
    # when room runs out (a trigger run's parallel attempts).
    _leases: list[budgets.Reservation] = field(default_factory=list, init=False)
    _free: Decimal = field(default=Decimal(0), init=False)  # of the leases, not promised
    _spent: Decimal = field(default=Decimal(0), init=False)  # settled calls, not yet written
    _in_flight: Decimal = field(default=Decimal(0), init=False)  # promised, not yet settled

    def ceiling(self, request: ModelRequest) -> Decimal:
        if self.is_demo:
            return Decimal(0)
        # The byte bound, not the context window's estimate: a prompt of emoji or another
        # script counts several tokens a character, and the ceiling must hold whatever it is.
        return ceiling_usd(request.model, input_token_bound(request), request.output_limit)

    def check(self, request: ModelRequest) -> Decimal:
        """The model check; the call's ceiling (0 for the demo model, which answers for free)."""
        if self.is_demo:
            return Decimal(0)
        if self.check_model and not self.policy.offers(request.model):
            raise CallRefused(not_offered(request.model, self.policy), code="model")
        return self.ceiling(request)

    async def admit(self, request: ModelRequest) -> Ticket | None:
        """Room for this call, from the lease or a new one; CallRefused when none is left."""
        amount = self.check(request)
        if self.is_demo:
            return None
        if amount > self._free:
            await self._renew(amount, request.model)
        self._free -= amount
        self._in_flight += amount
        return Ticket(amount)

    async def _renew(self, amount: Decimal, model: str) -> None:
        """Take a new lease with room for at least `amount`. With no call in flight, what was
        spent is written and the old leases given back first; with calls in flight their room
        stays held (giving it back would let others spend it) and the new lease adds to it."""
        if self._in_flight == 0:
            await self._write()
        lease = await sync_to_async(budgets.renew)(
            self.policy,
            None,
            Decimal(0),
            need=amount,
            want=amount * LEASE_CALLS,
            purpose=self.purpose,
            model=model,
        )
        self._leases.append(lease)
        self._free += lease.amount

    async def _write(self) -> None:
        """Settle every lease with what was spent on them (in order, the rest on the last)."""
        leases, self._leases = self._leases, []
        spent, self._spent = self._spent, Decimal(0)
        self._free = Decimal(0)
        for n, lease in enumerate(leases):
            share = spent if n == len(leases) - 1 else min(spent, lease.amount)
            spent -= share
            await sync_to_async(budgets.settle)(lease, share)

    async def settle(
        self,
        ticket: Ticket | None,
        *,
        message: dict[str, Any] | None = None,
        model: str = "",
        unknown: bool = False,
    ) -> None:
        """A call ended: its cost (the answer's; in full when it ended mid-way, `unknown`;
        nothing for an error before any answer) is spent, the rest of its room is free again."""
        if ticket is None:
            return
        if message is not None:
            actual = answered_cost(message, model) or Decimal(0)
        else:
            actual = ticket.amount if unknown else Decimal(0)
        self._spent += actual
        self._free += ticket.amount - actual
        self._in_flight -= ticket.amount

    async def close(self) -> None:
        """Write what was spent and give the rest of the leases back (when it is all over)."""
        self._in_flight = Decimal(0)
        await self._write()

    @property
    def lease(self) -> budgets.Reservation | None:
        """The newest lease, if any."""
        return self._leases[-1] if self._leases else None
