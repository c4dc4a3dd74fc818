"""Audit events as OpenTelemetry spans (GenAI semantic conventions), exported over OTLP.

Off by default. On when an OTLP endpoint is configured the standard way
(`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, with the other
`OTEL_EXPORTER_OTLP_*` variables for headers, protocol and timeouts) and `OTEL_SDK_DISABLED` is
not true. `spans.GenAiTracer` watches runs as an observer (`runs.observers`): `runs` never
imports this package. No span carries text that may be hidden (skill prompts, tool inputs and
results, the messages sent to the model) unless `TELEMETRY_INCLUDE_HIDDEN_TEXT` is on.
"""
