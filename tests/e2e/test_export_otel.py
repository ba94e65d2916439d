"""Audit export the way an OpenTelemetry collector expects it: the standard OTEL_EXPORTER_OTLP_*
variables configure the exporter, and each record carries the MCP and GenAI semantic attributes
beside Bouncer's own.

A real bouncerd (started with the variables in its environment and `otlp: true` in its policy) sends
to a real OTLP/HTTP receiver (`OtlpReceiver`, decoding the protobuf requests), through the official
OpenTelemetry exporter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from test_export_daemon import OtlpReceiver, _attr, _call, _verdict_lines, _wait, needs_otel

pytestmark = [pytest.mark.e2e, needs_otel]


def test_the_standard_variables_configure_the_collector_and_records_carry_the_semantic_attributes(
    start: Callable[..., Any],
) -> None:
    """Stops: a collector configured the OpenTelemetry way getting nothing, or records it cannot
    group by tool and session (only our own bouncer.* keys)."""
    otlp = OtlpReceiver()
    base = otlp.endpoint.removesuffix("/v1/logs")
    try:
        daemon = start(
            "audit_export:\n  otlp: true\n",
            OTEL_EXPORTER_OTLP_ENDPOINT=base,  # a base URL: the exporter appends /v1/logs
            OTEL_EXPORTER_OTLP_HEADERS="x-tenant=team%20a",
            OTEL_EXPORTER_OTLP_TIMEOUT="3000",
        )
        _call(daemon, 2)
        local = _verdict_lines(daemon.home)

        def verdicts() -> list[Any]:
            return [r for r in otlp.records if _attr(r, "bouncer.verdict")]

        assert _wait(lambda: len(verdicts()) >= 2)
        for record, log_record in zip(local, verdicts(), strict=True):
            assert _attr(log_record, "bouncer.hash") == record["hash"]
            assert _attr(log_record, "mcp.method.name") == "tools/call"
            assert _attr(log_record, "mcp.session.id") == record["session"]
            assert _attr(log_record, "gen_ai.tool.name") == "read_note"
            assert _attr(log_record, "gen_ai.operation.name") == "execute_tool"
            assert _attr(log_record, "jsonrpc.request.id") == str(record["request_id"])
        assert otlp.headers and all(h.get("x-tenant") == "team a" for h in otlp.headers)
    finally:
        otlp.kill()
