"""What an event loop owns (`core/loop_owned.py`) is opened once per loop and exited on that loop
before it ends: by the loop's shutdown of async generators, or by `close_for_running_loop`."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field

from skills_app.core import loop_owned


@dataclass
class Resource:
    """An async context manager that records on which loop it was entered and exited."""

    name: str
    entered_on: asyncio.AbstractEventLoop | None = None
    exited_on: list[asyncio.AbstractEventLoop] = field(default_factory=list)

    async def __aenter__(self) -> Resource:
        self.entered_on = asyncio.get_running_loop()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.exited_on.append(asyncio.get_running_loop())


class Opener:
    """Makes a new Resource per call and keeps them all."""

    def __init__(self) -> None:
        self.made: list[Resource] = []

    def __call__(self) -> Resource:
        self.made.append(Resource(f"resource {len(self.made) + 1}"))
        return self.made[-1]


def test_a_value_is_opened_once_per_loop_and_exited_on_it_when_asyncio_run_ends() -> None:
    opener = Opener()
    key = object()

    async def use_twice() -> tuple[Resource, Resource]:
        return await loop_owned.get(key, opener), await loop_owned.get(key, opener)

    first, again = asyncio.run(use_twice())
    assert first is again
    assert first.exited_on == [first.entered_on]
    second, _ = asyncio.run(use_twice())
    assert second is not first
    assert second.exited_on == [second.entered_on]
    assert second.entered_on is not first.entered_on
    assert len(opener.made) == 2


def test_each_key_has_its_own_value_and_all_are_exited() -> None:
    opener = Opener()

    async def use() -> list[Resource]:
        return [await loop_owned.get(key, opener) for key in ("a", "b", "a")]

    a, b, a_again = asyncio.run(use())
    assert a is a_again and a is not b
    assert [len(r.exited_on) for r in (a, b)] == [1, 1]


def test_loops_in_other_threads_own_their_own_values() -> None:
    opener = Opener()
    key = object()
    release = threading.Event()
    seen: list[Resource] = []

    async def hold() -> None:
        seen.append(await loop_owned.get(key, opener))
        await asyncio.to_thread(release.wait, 10)

    thread = threading.Thread(target=asyncio.run, args=(hold(),))
    thread.start()
    try:

        async def use() -> Resource:
            return await loop_owned.get(key, opener)

        here = asyncio.run(use())
    finally:
        release.set()
        thread.join(10)
    there = seen[0]
    assert here is not there
    assert here.exited_on == [here.entered_on] and there.exited_on == [there.entered_on]


def test_a_loop_that_never_shuts_down_its_generators_is_closed_by_hand() -> None:
    """What daphne's process does: its reactor stops the loop without asyncio.run's shutdown."""
    opener = Opener()
    key = object()
    loop = asyncio.new_event_loop()
    try:
        first = loop.run_until_complete(loop_owned.get(key, opener))
        loop.run_until_complete(loop_owned.get("another", opener))
        assert loop.run_until_complete(loop_owned.close_for_running_loop()) == 2
        assert first.exited_on == [loop] and opener.made[1].exited_on == [loop]
        # Closed, the next use opens afresh, and the loop's end exits that one too.
        second = loop.run_until_complete(loop_owned.get(key, opener))
        assert second is not first and second.exited_on == []
        loop.run_until_complete(loop.shutdown_asyncgens())
        assert second.exited_on == [loop]
        assert first.exited_on == [loop]
    finally:
        loop.close()


def test_a_loop_with_nothing_owned_closes_nothing() -> None:
    assert asyncio.run(loop_owned.close_for_running_loop()) == 0
