"""Audit events as OpenTelemetry spans: a real run against the fake Anthropic server, the SDK's
in-memory exporter reading what a collector would get, and the OTLP/HTTP exporter sending to a
collector on loopback.

The attack first: a skill's hidden body must not leave in any span unless the operator turns
that on; the positive controls show the model did get it, and that with the setting on it is
there (so its absence is not an accident of the fixture).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from skills_app.models import Conversation, PermissionRule
from skills_app.runs import observers
from skills_app.telemetry import setup
from skills_app.telemetry.spans import SCHEMA_URL, SEMCONV_VERSION
from tests.fake_anthropic import Reply
from tests.loop_helpers import run_turn, use_fake_model, write_skills

pytestmark = pytest.mark.django_db(transaction=True)
MARKER = "GREETER-BODY-MARKER"


@pytest.fixture
def exporter():
    memory = InMemorySpanExporter()
    yield memory
    setup.uninstall()


def everything_in(spans) -> str:
    """Every name, attribute, event and status text of the spans, as one string to search."""
    parts = []
    for span in spans:
        parts.append(span.name)
        parts.append(json.dumps(dict(span.attributes or {}), default=str))
        parts += [json.dumps(dict(e.attributes or {}), default=str) + e.name for e in span.events]
        parts.append(str(span.status.description or ""))
    return "\n".join(parts)


async def a_run_with_a_skill(settings, fake_anthropic, tmp_path, alice):
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills")]
    use_fake_model(settings, fake_anthropic)
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill(greeter)")
    conversation = await Conversation.objects.acreate(owner=alice, title="traced")
    fake_anthropic.enqueue(
        Reply.tool_use("Skill", {"skill": "greeter", "args": "Bob"}, text="Loading it."),
        Reply.tool_use("Read", {"file_path": "missing.txt"}),
        Reply.text("Hello Bob."),
    )
    run = await run_turn(conversation, "greet Bob", alice)
    assert run.status == "done", run.error
    return conversation, run


def test_it_is_off_unless_an_otlp_endpoint_is_configured():
    assert not setup.wanted({})
    assert setup.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert setup.wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})
    assert not setup.wanted(
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"}
    )
    # This test process has no endpoint: nothing watches runs.
    assert not any(type(o).__name__ == "GenAiTracer" for o in observers._observers)


async def test_a_run_becomes_genai_spans_with_the_skill_and_the_decisions(
    settings, fake_anthropic, tmp_path, alice, exporter
):
    setup.install(processor=SimpleSpanProcessor(exporter))
    conversation, run = await a_run_with_a_skill(settings, fake_anthropic, tmp_path, alice)
    spans = exporter.get_finished_spans()
    by_name = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)

    [root] = by_name["invoke_agent skillscope"]
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.provider.name"] == "anthropic"
    assert root.attributes["gen_ai.conversation.id"] == str(conversation.pk)
    assert root.attributes["skillscope.run.id"] == run.pk
    assert root.attributes["skillscope.run.status"] == "done"
    assert root.instrumentation_scope.schema_url == SCHEMA_URL
    assert SEMCONV_VERSION in SCHEMA_URL

    chats = sorted(
        (s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"),
        key=lambda s: s.attributes["skillscope.model_call.number"],
    )
    assert len(chats) == 3 == len(fake_anthropic.requests)
    for chat in chats:
        assert chat.name == f"chat {chat.attributes['gen_ai.request.model']}"
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
        assert chat.attributes["gen_ai.response.id"]
        assert chat.kind.name == "CLIENT"
    assert [c.attributes["gen_ai.response.finish_reasons"] for c in chats] == [
        ("tool_use",),
        ("tool_use",),
        ("end_turn",),
    ]
    # The calls after the skill loaded are attributed to it.
    assert [c.attributes.get("skillscope.skill.name") for c in chats] == [
        None,
        "greeter",
        "greeter",
    ]

    [skill_tool] = by_name["execute_tool Skill"]
    assert skill_tool.attributes["gen_ai.tool.name"] == "Skill"
    assert skill_tool.attributes["skillscope.permission.decision"] == "allowed"
    assert skill_tool.attributes["skillscope.skill.name"] == "greeter"
    [activation] = by_name["invoke_skill greeter"]
    assert activation.attributes["skillscope.skill.name"] == "greeter"
    assert activation.attributes["skillscope.skill.caller"] == "model"
    assert activation.attributes["skillscope.permission.decision"] == "allowed"
    assert activation.parent.span_id == skill_tool.context.span_id

    [read] = by_name["execute_tool Read"]
    assert read.attributes["skillscope.permission.decision"]
    assert read.attributes["skillscope.skill.name"] == "greeter"
    assert read.attributes["error.type"] == "tool_error"  # missing.txt does not exist

    # One trace: every span is the run's or its descendants'.
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}
    assert all(s.parent is not None for s in spans if s is not root)


async def test_hidden_text_is_absent_from_every_span_by_default(
    settings, fake_anthropic, tmp_path, alice, exporter
):
    setup.install(processor=SimpleSpanProcessor(exporter))
    await a_run_with_a_skill(settings, fake_anthropic, tmp_path, alice)
    spans = exporter.get_finished_spans()
    assert len(spans) >= 6  # the run produced its spans
    assert MARKER not in everything_in(spans)
    assert "missing.txt" not in everything_in(spans)  # no tool input either
    # Positive control: the model was sent the hidden body.
    assert MARKER in json.dumps([r["messages"] for r in fake_anthropic.requests])


async def test_with_the_operators_setting_the_hidden_text_is_there(
    settings, fake_anthropic, tmp_path, alice, exporter
):
    setup.install(processor=SimpleSpanProcessor(exporter), include_hidden=True)
    await a_run_with_a_skill(settings, fake_anthropic, tmp_path, alice)
    spans = exporter.get_finished_spans()
    text = everything_in(spans)
    assert MARKER in text
    chats = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert MARKER in chats[-1].attributes["gen_ai.input.messages"]
    [read] = [s for s in spans if s.name == "execute_tool Read"]
    assert json.loads(read.attributes["gen_ai.tool.call.arguments"]) == {"file_path": "missing.txt"}


def test_an_observer_that_fails_never_breaks_the_run_it_watches(caplog):
    def broken(context, event):
        raise RuntimeError("observer bug")

    observers.subscribe(broken)
    try:
        observers.notify(observers.RunContext(1, 2, 3), observers.ModelCallEnded(call=1))
    finally:
        observers.unsubscribe(broken)
    assert "a run observer failed on ModelCallEnded" in caplog.text


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, str, bytes]] = []
    arrived = threading.Event()

    def do_POST(self):  # noqa: N802 - the http.server spelling
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Collector.received.append((self.path, self.headers["Content-Type"], body))
        _Collector.arrived.set()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_spans_go_over_otlp_http_to_the_configured_endpoint(monkeypatch):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    server = HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{server.server_port}")
        assert setup.wanted()
        tracer = setup.install()  # the OTLP exporter, configured from the environment
        tracer(observers.RunContext(7, 70, 1), observers.ModelCallEnded(call=1))
        from skills_app.core.events import RunFinished

        tracer(observers.RunContext(7, 70, 1), RunFinished(run_id=70, status="done"))
        tracer.provider.force_flush()
        assert _Collector.arrived.wait(timeout=10), "the collector got nothing"
    finally:
        setup.uninstall()
        server.shutdown()
    path, content_type, body = _Collector.received[-1]
    assert (path, content_type) == ("/v1/traces", "application/x-protobuf")
    request = ExportTraceServiceRequest.FromString(body)
    names = [s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert names == ["invoke_agent skillscope"]


FORKER = """\
---
description: Researches a question on its own and reports back.
context: fork
---
FORK-BODY-MARKER: look into $ARGUMENTS and answer in one line.
"""


async def test_a_forked_skills_subagent_run_is_a_span_under_its_parent_run(
    settings, fake_anthropic, tmp_path, alice, exporter
):
    setup.install(processor=SimpleSpanProcessor(exporter))
    use_fake_model(settings, fake_anthropic)
    settings.SKILLS_DIRS = [write_skills(tmp_path / "skills", {"forker": FORKER})]
    await PermissionRule.objects.acreate(behavior="allow", rule_text="Skill")

    def respond(request):
        if "FORK-BODY-MARKER" in json.dumps(request["messages"][0]):
            return Reply.text("Subagent final answer: 42")
        last = request["messages"][-1]
        if any(b.get("type") == "tool_result" for b in last["content"]):
            return Reply.text("Parent done.")
        return Reply.tool_use("Skill", {"skill": "forker", "args": "the meaning"})

    fake_anthropic.set_responder(respond)
    conversation = await Conversation.objects.acreate(owner=alice, title="fork")
    run = await run_turn(conversation, "research this", alice)
    assert run.status == "done", run.error
    spans = exporter.get_finished_spans()
    agents = [s for s in spans if s.name == "invoke_agent skillscope"]
    parent = next(s for s in agents if s.attributes["skillscope.run.id"] == run.pk)
    [child] = [s for s in agents if s is not parent]
    assert child.parent.span_id == parent.context.span_id
    assert child.context.trace_id == parent.context.trace_id
    child_chats = [
        s for s in spans if s.name.startswith("chat ") and s.parent.span_id == child.context.span_id
    ]
    assert len(child_chats) == 1 and child_chats[0].attributes["gen_ai.usage.output_tokens"] > 0
    assert "FORK-BODY-MARKER" not in everything_in(spans)
