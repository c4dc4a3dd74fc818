"""The MCP project's reference test server, @modelcontextprotocol/server-everything (installed
from npm by `scripts/setup.sh test`, pinned in tests/mcp_everything/package-lock.json), registered,
reviewed and called from a run as an admin and a person would: over stdio in the bubblewrap
sandbox, and over Streamable HTTP on loopback."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import time

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command

from skills_app.models import AuditEvent, Conversation, McpToolDefinition, PermissionRule
from tests.support.fake_anthropic import Reply, tool_use_block
from tests.support.loop_helpers import accepted, rows, run_turn, use_fake_model
from tests.support.paths import TESTS

PACKAGE_FOLDER = TESTS / "mcp_everything"
ENTRY = PACKAGE_FOLDER / "node_modules/@modelcontextprotocol/server-everything/dist/index.js"

# Distinctive values of Skillscope's own secrets, so a leak into the server would be seen.
APP_SECRETS = {
    "SECRET_KEY": "probe-secret-key-4f1c9e",
    "ANTHROPIC_API_KEY": "sk-ant-probe-api-key-7d2b",
    "DATABASE_URL": "postgres://probe:pw-81aa@db.invalid/skillscope",
    "REDIS_URL": "redis://:pw-93cc@redis.invalid:6379/0",
}


def node() -> str:
    """The host's node, or a skip naming what is missing (as the OIDC provider's tests do)."""
    found = shutil.which("node")
    if found is None or not ENTRY.is_file():
        pytest.skip(
            "Node.js or tests/mcp_everything/node_modules is missing: run `scripts/setup.sh test`"
        )
    return os.path.realpath(found)


def tool_results(conversation) -> list[dict]:
    return [
        block for row in rows(conversation) if row.kind == "tool_result" for block in row.content
    ]


def result_text(block: dict) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(c.get("text", "") for c in content)


def review(name: str, *tools: str) -> None:
    call_command("mcp", "test", name)
    for tool in tools:
        shown = McpToolDefinition.objects.get(server__name=name, tool=tool, current=True)
        call_command(
            "mcp", "review", name, "--approve", "--hash", shown.content_hash, "--as", "bob"
        )


@pytest.fixture
def everything_http(tmp_path):
    """server-everything on Streamable HTTP on a free port; yields its loopback URL."""
    program = node()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # The package reads PORT and has no address setting: it listens on every interface of this
    # machine for the length of the test.
    process = subprocess.Popen(
        [program, str(ENTRY), "streamableHttp"],
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and process.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise AssertionError("server-everything did not start on Streamable HTTP")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.mark.django_db(transaction=True)
async def test_the_stdio_server_runs_in_the_sandbox_without_any_app_secret(
    alice, bob, settings, fake_anthropic, monkeypatch
):
    program = node()
    use_fake_model(settings, fake_anthropic)
    settings.SANDBOX = "bwrap"
    for key, value in APP_SECRETS.items():
        monkeypatch.setenv(key, value)
        setattr(settings, key, value)
    await sync_to_async(call_command)(
        "mcp", "add", "everything", "--as", "alice", "--everyone",
        "--read-only", os.path.dirname(program), "--read-only", str(PACKAGE_FOLDER),
        "--env", "EVERYTHING_NOTE=yes",
        "--argv", shlex.join([program, str(ENTRY), "stdio"]),
    )  # fmt: skip
    await sync_to_async(review)("everything", "get-env", "echo")
    await PermissionRule.objects.acreate(behavior="allow", rule_text="mcp__everything")
    conversation = await Conversation.objects.acreate(owner=alice, title="everything")
    fake_anthropic.enqueue(
        Reply.blocks(
            [
                tool_use_block("mcp__everything__get-env"),
                tool_use_block("mcp__everything__echo", {"message": "round trip 31"}),
            ]
        ),
        Reply.text("done"),
    )
    run = await run_turn(conversation, "use the tools", alice)
    assert run.status == "done", run.error
    offered = sorted(
        t["name"] for t in accepted(fake_anthropic)[0]["tools"] if "mcp__" in t["name"]
    )
    assert offered == ["mcp__everything__echo", "mcp__everything__get-env"]  # only the reviewed
    env_block, echo_block = await sync_to_async(tool_results)(conversation)
    assert not env_block.get("is_error") and not echo_block.get("is_error")
    assert "Echo: round trip 31" in result_text(echo_block)
    dumped = result_text(env_block)
    env = json.loads(dumped[dumped.index("{") :])
    # Positive controls: this is the sandboxed process's own environment, declared key included.
    assert env["HOME"] == "/tmp" and env["EVERYTHING_NOTE"] == "yes"
    sent = json.dumps(accepted(fake_anthropic)[-1]["messages"])
    assert json.dumps(dumped)[1:-1] in sent  # the model got the whole dump
    for key, value in APP_SECRETS.items():
        assert key not in env
        assert value not in dumped and value not in sent
    called = [e.detail["tool"] async for e in AuditEvent.objects.filter(action="mcp.called")]
    assert sorted(called) == ["echo", "get-env"]


@pytest.mark.django_db(transaction=True)
async def test_the_streamable_http_server_is_reviewed_and_called_from_a_run(
    alice, bob, settings, fake_anthropic, everything_http
):
    use_fake_model(settings, fake_anthropic)
    await sync_to_async(call_command)(
        "mcp", "add", "everything-web", "--as", "alice", "--url", everything_http, "--everyone"
    )
    await sync_to_async(review)("everything-web", "get-sum")
    await PermissionRule.objects.acreate(behavior="allow", rule_text="mcp__everything-web__get-sum")
    conversation = await Conversation.objects.acreate(owner=alice, title="everything over http")
    fake_anthropic.enqueue(
        Reply.tool_use("mcp__everything-web__get-sum", {"a": 19, "b": 23}), Reply.text("done")
    )
    run = await run_turn(conversation, "use the tools", alice)
    assert run.status == "done", run.error
    [block] = await sync_to_async(tool_results)(conversation)
    assert not block.get("is_error") and "The sum of 19 and 23 is 42." in result_text(block)
    assert "The sum of 19 and 23 is 42." in json.dumps(accepted(fake_anthropic)[-1]["messages"])
