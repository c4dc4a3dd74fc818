"""The fault suite: infrastructure failing during a long streamed answer, on real services.

One cluster for the whole module (PostgreSQL, a Redis that can be restarted, two daphne web
processes and two Channels workers, started as the units start them) and bench/live.py's fake
model, which streams `paced R D` answers: R deltas a second for D seconds, each delta its own
send time `<1764600000.123456>`, so every piece of an answer is unique and ordered. Each case
starts an answer in a tab, breaks something mid-answer, and then checks what a user and an
operator would:

- nothing lost and nothing duplicated: the stored answer holds every delta the model sent, once,
  in order (a run a `kill -9` ended keeps a partial answer instead, and that one is in order);
- the stored answer is at least as long as what the tab showed, and the tab never replaced text
  it showed with less (`Tab` applies frames as chat.js does and records any shrink or hole);
- the tab's text equals the stored text once the answer is stored;
- the workers serve again without a hand: every process is still running (a killed worker is
  started again, as systemd would), and a new message is answered.

The cases: PostgreSQL stopped for 10 s, Redis restarted, Redis stopped for 25 s. A web process
restarted and a worker killed with `kill -9` are tested in real browsers, with the same checks of
what a tab showed against what was stored, by tests/multiprocess/test_browser_faults.py (and the
partial answer a killed worker leaves by test_deployment.py). The outage is used for more than waiting: a tab opens and
a message is sent and answered while Redis is away, the probes say why they are not ready, and the
logs stay quiet. 25 s is longer than any reconnect backoff of the processes (so each retries
several times while Redis is away); the minute an earlier version waited added nothing it checked.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bench.live import STAMP
from skills_app.chat.database_away import DATABASE_AWAY
from tests.multiprocess.cluster import WEBS, WORKERS, Cluster, running_cluster
from tests.multiprocess.conftest import PUBLIC_HOST
from tests.multiprocess.wsclient import ConnectionClosed, WebSocket

pytestmark = [pytest.mark.multiprocess, pytest.mark.timeout(300)]

# How long Redis stays stopped in the outage case, in seconds.
REDIS_AWAY = 25

Key = tuple[int, int, int, str]


@pytest.fixture(scope="module")
def cluster(migrated, collected_static, tmp_path_factory) -> Iterator[Cluster]:
    with running_cluster(migrated, collected_static, tmp_path_factory.mktemp("faults")) as started:
        yield started


# -- a tab, as chat.js applies frames --------------------------------------------------------------


class Tab:
    """One browser tab: applies streamed text by offset, keeps its seq, reconnects like chat.js.

    It records what a person would notice: text replaced by less (`shrunk`), a piece that would
    leave a hole (`holes`), and the most text each block ever showed (`shown`).
    """

    def __init__(self, cluster: Cluster, conversation: int, session: str) -> None:
        self.cluster, self.conversation, self.session = cluster, conversation, session
        self.ws: WebSocket | None = None
        self.web = ""
        self.blocks: dict[Key, str] = {}
        self.shown: dict[Key, str] = {}
        self.shrunk: list[str] = []
        self.holes: list[str] = []
        self.last_seq = 0
        self.statuses: list[str] = []
        self.frames: list[dict[str, Any]] = []

    async def connect(self, web: str, *, timeout: float = 30) -> None:
        """Open (or reopen) the socket through `web` and resume after the last applied seq."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.ws = await WebSocket.connect(
                    "127.0.0.1",
                    self.cluster.port(web),
                    f"/ws/conversations/{self.conversation}/",
                    headers={
                        "Host": PUBLIC_HOST,
                        "Origin": f"https://{PUBLIC_HOST}",
                        "Cookie": f"sessionid={self.session}",
                    },
                )
                break
            except (OSError, ConnectionClosed):
                # A refused upgrade (an HTTP 500) is a failure, not something to wait out.
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        self.web = web
        await self.ws.send_json({"action": "resume", "after": self.last_seq})
        await self.until(lambda f: f.get("type") == "resumed")

    async def send(self, text: str) -> None:
        assert self.ws is not None
        await self.ws.send_json({"action": "send", "text": text})

    def apply(self, frame: dict[str, Any]) -> None:
        self.frames.append(frame)
        kind = frame.get("type", "")
        if kind in ("text.delta", "thinking.delta"):
            key: Key = (frame["run"], frame["call"], frame["index"], kind)
            have, offset, piece = self.blocks.get(key, ""), frame["offset"], frame["text"]
            if offset > len(have):
                self.holes.append(f"{key}: piece at {offset}, tab has {len(have)}")
                return
            new = have[:offset] + piece if offset + len(piece) >= len(have) else have
            if offset == 0 and len(new) < len(have):
                # chat.js sets the block's text at offset 0: this would show less than before.
                self.shrunk.append(f"{key}: {len(have)} characters replaced by {len(new)}")
            self.blocks[key] = new
            if len(new) > len(self.shown.get(key, "")):
                self.shown[key] = new
        if "seq" in frame:
            self.last_seq = max(self.last_seq, int(frame["seq"]))
        if kind == "resumed":
            self.last_seq = max(self.last_seq, int(frame["last_seq"]))
        if kind == "run.finished":
            self.statuses.append(frame["data"]["status"])

    async def until(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        *,
        timeout: float = 60,
        reconnect: tuple[str, ...] = (),
    ) -> dict[str, Any]:
        """Read frames until one matches; a closed socket reconnects through `reconnect`."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                kinds = [f.get("type") for f in self.frames[-20:]]
                raise AssertionError(f"no matching frame within {timeout} s; last: {kinds}")
            assert self.ws is not None
            try:
                frame = await self.ws.receive_frame(timeout=min(left, 1.0))
            except TimeoutError:
                continue
            except ConnectionClosed:
                if not reconnect:
                    raise
                seen = len(self.frames)
                await self.connect(reconnect[0], timeout=max(1.0, left))
                # The resume replays what was stored meanwhile: the frame awaited may be in it.
                for replayed in self.frames[seen:]:
                    if predicate(replayed):
                        return replayed
                continue
            self.apply(frame)
            if predicate(frame):
                return frame

    async def read_for(self, seconds: float) -> None:
        """Apply whatever arrives for `seconds` (a browser reads, and answers pings, all along)."""
        deadline = time.monotonic() + seconds
        assert self.ws is not None
        while (left := deadline - time.monotonic()) > 0:
            try:
                self.apply(await self.ws.receive_frame(timeout=left))
            except TimeoutError:
                return

    def text(self, run_id: int | None = None) -> str:
        """The longest text the tab showed for the run's answer (its text blocks, in order)."""
        keys = sorted(k for k in self.shown if k[3] == "text.delta" and run_id in (None, k[0]))
        return "".join(self.shown[k] for k in keys)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()


def finished(status: str = "") -> Callable[[dict[str, Any]], bool]:
    return lambda f: (
        f.get("type") == "run.finished" and (not status or f["data"]["status"] == status)
    )


def stamps(text: str) -> list[float]:
    return [float(s) for s in STAMP.findall(text)]


async def shows_stamps(tab: Tab, count: int, timeout: float = 30) -> None:
    """Read until the tab shows at least `count` deltas of the answer."""
    await tab.until(lambda f: len(stamps(tab.text())) >= count, timeout=timeout)


def answer_of(state: dict[str, Any]) -> dict[str, Any]:
    rows = [r for r in state["rows"] if r["role"] == "assistant" and r["kind"] == "text"]
    assert rows, state["rows"]
    return rows[-1]


def check_whole(tab: Tab, state: dict[str, Any], *, expected: int) -> None:
    """Nothing lost, nothing duplicated, the tab never showed less, and it shows what is stored."""
    stored = answer_of(state)["text"]
    got = stamps(stored)
    assert len(got) == expected, f"stored {len(got)} deltas of {expected}"
    assert got == sorted(got) and len(set(got)) == len(got), "duplicated or out of order"
    assert not tab.shrunk and not tab.holes, (tab.shrunk, tab.holes)
    shown = tab.text()
    assert len(stored) >= len(shown.rstrip()) and stored.startswith(shown.rstrip())


async def serves_again(cluster: Cluster, name: str, web: str = "web-b") -> None:
    """A new conversation's message is answered: the workers serve without a hand."""
    conversation, session = cluster.user(name)
    tab = Tab(cluster, conversation, session)
    await tab.connect(web)
    try:
        await tab.send("paced 20 1")
        await tab.until(finished(), timeout=60)
        assert tab.statuses == ["done"]
    finally:
        await tab.close()
    assert all(cluster.all_running().values()), cluster.all_running()


async def refused_code(cluster: Cluster, web: str, conversation: int, session: str) -> int:
    """The close code of a new websocket to `web` that the server closes at once."""
    ws = await WebSocket.connect(
        "127.0.0.1",
        cluster.port(web),
        f"/ws/conversations/{conversation}/",
        headers={
            "Host": PUBLIC_HOST,
            "Origin": f"https://{PUBLIC_HOST}",
            "Cookie": f"sessionid={session}",
        },
    )
    try:
        frame = await ws.receive_frame(timeout=15)
    except ConnectionClosed as closed:
        return int(str(closed).rsplit(" ", 1)[-1], 16)
    finally:
        await ws.close()
    raise AssertionError(f"not closed: {frame}")


def log_sizes(cluster: Cluster) -> dict[str, int]:
    return {name: len(cluster.deployment.log(name)) for name in (*WEBS, *WORKERS)}


def outage_lines(cluster: Cluster, name: str, what: str) -> list[str]:
    return [
        str(e.get("state"))
        for e in cluster.deployment.log_entries(name)
        if e.get("outage", "").startswith(what)
    ]


def fail_with_logs(cluster: Cluster) -> None:
    print(cluster.deployment.all_logs())


# -- the cases -----------------------------------------------------------------------------------


async def test_postgresql_stopped_for_10_seconds_mid_answer(cluster):
    conversation, session = cluster.user("faults-pg")
    tab = Tab(cluster, conversation, session)
    await tab.connect("web-a")
    try:
        await tab.send("paced 20 20")
        await shows_stamps(tab, 40)
        await asyncio.to_thread(cluster.postgres.stop)
        await tab.read_for(10)  # the outage itself (the model goes on streaming meanwhile)
        code, _, body = cluster.deployment.get("web-b", "/readyz")
        assert code == 503 and '"database": "unreachable"' in body, body
        # A tab that connects meanwhile is told why (4503), each time it tries.
        for _ in range(3):
            assert await refused_code(cluster, "web-b", conversation, session) == DATABASE_AWAY
        await asyncio.to_thread(cluster.postgres.start)
        await tab.until(finished(), timeout=90)
        # Not taken for dead: the answer finished, nobody was interrupted or buried.
        assert tab.statuses[-1] == "done", tab.statuses
        check_whole(tab, cluster.state(conversation), expected=400)
        for name in WORKERS:
            messages = [e["message"] for e in cluster.deployment.log_entries(name)]
            assert not any("taken for dead" in m for m in messages), name
            assert "back" in outage_lines(cluster, name, "the database"), name
        await serves_again(cluster, "faults-pg-after")
        # The web process logged the outage once and its end once, not a traceback per try.
        entries = cluster.deployment.log_entries("web-b")
        refused = [
            e["state"] for e in entries if e["message"].startswith("websocket connections: ")
        ]
        assert refused == ["lost", "back"], refused
        assert "Exception inside application" not in cluster.deployment.log("web-b")
    except BaseException:
        fail_with_logs(cluster)
        raise
    finally:
        await tab.close()


async def test_redis_restarted_mid_answer(cluster):
    conversation, session = cluster.user("faults-redis-restart")
    tab = Tab(cluster, conversation, session)
    await tab.connect("web-b")
    try:
        await tab.send("paced 20 10")
        await shows_stamps(tab, 30)
        cluster.redis.stop()
        cluster.redis.start()
        await tab.until(finished(), timeout=60)
        assert tab.statuses[-1] == "done"
        check_whole(tab, cluster.state(conversation), expected=200)
        # The first websocket after the restart opens (it was an HTTP 500: a stale connection).
        for web in WEBS:
            fresh = Tab(cluster, *cluster.user(f"faults-fresh-{web}"))
            await fresh.connect(web, timeout=2)
            await fresh.close()
        await serves_again(cluster, "faults-redis-restart-after")
    except BaseException:
        fail_with_logs(cluster)
        raise
    finally:
        await tab.close()


async def test_redis_stopped_for_25_seconds_mid_answer(cluster):
    conversation, session = cluster.user("faults-redis-away")
    tab = Tab(cluster, conversation, session)
    await tab.connect("web-a")
    try:
        await tab.send("paced 10 33")
        await shows_stamps(tab, 20)
        before = log_sizes(cluster)
        cluster.redis.stop()
        stopped = time.monotonic()

        # While Redis is away: a tab opens (no HTTP 500), a message is sent and answered (the
        # worker takes it from the queue and streams it into the database), and the probes say
        # what is missing.
        other_conversation, other_session = cluster.user("faults-redis-away-2")
        other = Tab(cluster, other_conversation, other_session)
        await other.connect("web-b", timeout=5)
        await other.send("paced 20 5")

        async def answered_meanwhile() -> bool:
            state = await asyncio.to_thread(cluster.state, other_conversation)
            return [r["status"] for r in state["runs"]] == ["done"]

        async def both_tabs_read(seconds: float) -> None:
            await asyncio.gather(tab.read_for(seconds), other.read_for(seconds))

        while not await answered_meanwhile():
            assert time.monotonic() - stopped < REDIS_AWAY - 2, "the message sent meanwhile waited"
            await both_tabs_read(1)
        code, _, body = cluster.deployment.get("web-a", "/readyz")
        assert code == 503 and '"channel_layer": "unreachable"' in body, body

        await both_tabs_read(max(0.0, REDIS_AWAY - (time.monotonic() - stopped)))
        assert cluster.all_running() == dict.fromkeys(cluster.pids, True)
        during = {n: len(cluster.deployment.log(n)) - before[n] for n in before}
        cluster.redis.start()

        # Both tabs catch up from the database; the long answer finishes, whole.
        await other.until(finished(), timeout=60)
        assert other.statuses == ["done"]
        check_whole(other, cluster.state(other_conversation), expected=100)
        await tab.until(finished(), timeout=90)
        assert tab.statuses[-1] == "done"
        check_whole(tab, cluster.state(conversation), expected=330)
        await other.close()

        # Quiet logs: a few lines per process for the time away, one when Redis was lost and
        # one when it was back, with no readiness 503 logged as an error.
        assert all(size < 16_000 for size in during.values()), during
        for name in (*WEBS, *WORKERS):
            states = outage_lines(cluster, name, "the channel layer")
            assert "lost" in states and "back" in states, (name, states)
            assert states.count("lost") <= 2, (name, states)
            errors = [
                e["message"]
                for e in cluster.deployment.log_entries(name)
                if e.get("level") == "ERROR"
            ]
            assert not errors, (name, errors[:5])
        assert cluster.all_running() == dict.fromkeys(cluster.pids, True)
        await serves_again(cluster, "faults-redis-away-after")
    except BaseException:
        fail_with_logs(cluster)
        raise
    finally:
        await tab.close()
