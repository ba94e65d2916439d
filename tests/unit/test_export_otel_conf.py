"""The OTLP target completed from the standard OTEL_EXPORTER_OTLP_* variables, and the semantic
attributes of each exported record. Pure: a policy text, an environment mapping, a record in."""

from __future__ import annotations

import pytest

from bouncerd.core.exportconf import OtlpTarget, otlp_target
from bouncerd.core.exportformat import otel_attributes
from bouncerd.core.policy import load_policy
from bouncerd.errors import PolicyError

BASE = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}


def _target(policy: str, environ: dict[str, str]) -> OtlpTarget:
    config = load_policy(policy, "policy.yaml").audit_export
    assert config is not None and config.otlp is not None
    return otlp_target(config.otlp, environ)


def test_otlp_true_takes_the_collector_from_the_standard_variables() -> None:
    got = _target("audit_export:\n  otlp: true\n", {**BASE, "OTEL_EXPORTER_OTLP_TIMEOUT": "2500"})
    assert got.endpoint == "http://collector:4318/v1/logs"  # a base URL gets the signal's path
    assert got.timeout == 2.5  # milliseconds, as the variable is defined


def test_the_logs_variables_win_over_the_general_ones_and_are_taken_as_they_are() -> None:
    environ = {
        **BASE,
        "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "https://logs.example/ingest",
        "OTEL_EXPORTER_OTLP_HEADERS": "a=1,b=2",
        "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "authorization=Bearer%20t0k",
    }
    got = _target("audit_export:\n  otlp: true\n", environ)
    assert got.endpoint == "https://logs.example/ingest"
    assert dict(got.headers) == {"authorization": "Bearer t0k"}


def test_what_the_policy_sets_wins_and_the_variables_fill_the_rest() -> None:
    policy = "audit_export:\n  otlp:\n    endpoint: http://mine:4318/v1/logs\n    headers: {x-a: policy}\n"
    environ = {**BASE, "OTEL_EXPORTER_OTLP_HEADERS": "x-a=env,x-b=env", "OTEL_EXPORTER_OTLP_TIMEOUT": "1000"}
    got = _target(policy, environ)
    assert got.endpoint == "http://mine:4318/v1/logs"
    assert dict(got.headers) == {"x-a": "policy", "x-b": "env"}
    assert got.timeout == 1.0


def test_without_any_endpoint_the_target_is_unavailable_naming_the_variable() -> None:
    """Stops: export silently off; the daemon reports the target unavailable with this reason."""
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_ENDPOINT"):
        _target("audit_export:\n  otlp: true\n", {})


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "0"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "no-equals-sign"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector"),
    ],
)
def test_a_variable_that_cannot_be_used_is_an_error_naming_it(variable: str, value: str) -> None:
    with pytest.raises(ValueError, match=variable):
        _target("audit_export:\n  otlp: true\n", {**BASE, variable: value})


def test_the_variables_alone_never_turn_export_on() -> None:
    """Audit records leave the machine only where a policy says so, whatever the environment holds."""
    assert load_policy("approval_timeout: 60\n", "policy.yaml").audit_export is None
    off = load_policy("audit_export:\n  otlp: false\n", "policy.yaml").audit_export
    assert off is None or off.otlp is None


def test_a_mapping_still_names_its_endpoint() -> None:
    with pytest.raises(PolicyError, match=r"audit_export\.otlp\.endpoint: missing"):
        load_policy("audit_export:\n  otlp:\n    timeout: 5\n", "policy.yaml")


RECORD = {"hash": "h", "prev": "p", "session": "proc:1:2", "server": "mail", "request_id": 7}


def test_a_tool_call_verdict_carries_the_mcp_and_gen_ai_attributes_beside_ours() -> None:
    got = otel_attributes({**RECORD, "tool": "send_email", "verdict": "deny", "rule": "sink.tainted"})
    assert got["bouncer.tool"] == "send_email" and got["bouncer.verdict"] == "deny"
    assert got["mcp.method.name"] == "tools/call"
    assert got["mcp.session.id"] == "proc:1:2"
    assert got["gen_ai.tool.name"] == "send_email"
    assert got["gen_ai.operation.name"] == "execute_tool"
    assert got["jsonrpc.request.id"] == "7"


def test_other_requests_and_events_carry_only_what_they_are() -> None:
    read = otel_attributes({**RECORD, "tool": "file:///x", "verdict": "allow", "kind": "resource"})
    assert read["mcp.method.name"] == "resources/read" and "gen_ai.tool.name" not in read
    event = otel_attributes({"hash": "h", "prev": "p", "rule": "policy.reloaded", "verdict": None})
    assert not any(key.startswith(("mcp.", "gen_ai.")) for key in event)
