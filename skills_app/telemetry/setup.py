"""Turning telemetry on: a tracer provider exporting over OTLP, and the run observer.

Called once per process from the app's `ready()`. The OTLP exporter reads the standard
`OTEL_EXPORTER_OTLP_*` variables itself (endpoint, headers, timeout, compression); spans leave in
batches on the SDK's own thread, so a slow collector never slows a run.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from skills_app.runs import observers
from skills_app.telemetry.spans import SCHEMA_URL, GenAiTracer

logger = logging.getLogger(__name__)
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")

_installed: GenAiTracer | None = None


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether telemetry is on: an OTLP endpoint is configured and the SDK is not disabled."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def _otlp_processor() -> SpanProcessor:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return BatchSpanProcessor(OTLPSpanExporter())


def install(
    *,
    processor: SpanProcessor | None = None,
    include_hidden: bool = False,
    service_name: str | None = None,
) -> GenAiTracer:
    """Subscribe a GenAiTracer whose spans go to `processor` (default: OTLP in batches)."""
    global _installed
    uninstall()
    resource = Resource.create(
        {SERVICE_NAME: service_name or os.environ.get("OTEL_SERVICE_NAME") or "skillscope"}
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(processor or _otlp_processor())
    tracer = provider.get_tracer("skillscope", schema_url=SCHEMA_URL)
    _installed = GenAiTracer(tracer, include_hidden=include_hidden)
    _installed.provider = provider
    observers.subscribe(_installed)
    return _installed


def uninstall() -> None:
    """Stop watching runs (tests; a second install replaces the first)."""
    global _installed
    if _installed is not None:
        observers.unsubscribe(_installed)
        if _installed.provider is not None:
            _installed.provider.shutdown()
        _installed = None


def install_from_settings(include_hidden: bool) -> None:
    """From the app's ready(): on only when an OTLP endpoint is configured."""
    if not wanted():
        return
    install(include_hidden=include_hidden)
    if include_hidden:
        logger.warning(
            "TELEMETRY_INCLUDE_HIDDEN_TEXT is on: spans carry skill prompts, tool inputs and "
            "results to the OTLP endpoint"
        )
