"""Every message the shim makes itself is valid for the protocol version the client speaks.

Checked against the SDK's own per-version wire models (the shim may not import them: start-up cost;
the tests may).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from bouncer_shim import jsonrpc
from mcp_types import _v2025_11_25 as legacy
from mcp_types import _v2026_07_28 as modern

STAMP = {"name": "mail", "version": "3.1"}


@pytest.mark.parametrize("request_id", [1, "abc", 0, -5, "ü\u2028"])
def test_blocked_result_is_a_valid_2025_tool_result(request_id: Any) -> None:
    data = jsonrpc.blocked_result(request_id, "a@x.test came from mail/read_email", modern=False)
    message = json.loads(data)
    response = legacy.JSONRPCResultResponse.model_validate(message)
    assert response.id == request_id
    result = legacy.CallToolResult.model_validate(message["result"])
    assert result.is_error is True
    assert result.content[0].text.startswith("[bouncer blocked] a@x.test")  # type: ignore[union-attr]
    assert set(message["result"]) == {"content", "isError"}


@pytest.mark.parametrize("stamp", [None, STAMP])
def test_blocked_result_is_a_valid_2026_tool_result(stamp: dict[str, str] | None) -> None:
    data = jsonrpc.blocked_result(7, "no", modern=True, server_info=stamp)
    message = json.loads(data)
    response = modern.CallToolResultResponse.model_validate(message)
    assert isinstance(response.result, modern.CallToolResult)
    assert response.result.result_type == "complete"
    assert response.result.is_error is True
    if stamp is None:
        assert "_meta" not in message["result"]
    else:
        assert message["result"]["_meta"] == {"io.modelcontextprotocol/serverInfo": stamp}


def test_a_stamp_that_cannot_be_written_is_dropped_not_fatal() -> None:
    message = json.loads(jsonrpc.blocked_result(1, "no", modern=True, server_info={"n": float("nan")}))
    modern.CallToolResultResponse.model_validate(message)
    assert "_meta" not in message["result"]


@pytest.mark.parametrize("request_id", [None, 3, "x"])
@pytest.mark.parametrize("code", [jsonrpc.PARSE_ERROR, jsonrpc.INVALID_REQUEST, jsonrpc.INTERNAL_ERROR])
def test_error_responses_are_valid_in_both_eras(request_id: Any, code: int) -> None:
    message = json.loads(jsonrpc.error_response(request_id, code, "Parse error"))
    for version in (legacy, modern):
        response = version.JSONRPCErrorResponse.model_validate(message)
        assert response.error.code == code and response.id == request_id


def test_made_messages_are_ascii_whatever_they_carry() -> None:
    """A lone surrogate in an id or reason must still give valid UTF-8 on the wire."""
    for data in (
        jsonrpc.blocked_result("\ud800", "reason \udfff", modern=False),
        jsonrpc.error_response("\ud800", -32600, "x"),
        jsonrpc.serialise({"id": "\ud800"}),
    ):
        data.decode("ascii")


def test_id_keys_keep_string_and_number_ids_apart() -> None:
    assert jsonrpc.id_key(1) != jsonrpc.id_key("1")
    assert jsonrpc.id_key(None) == ("z", None)
    assert jsonrpc.id_key(True) is None
    assert jsonrpc.id_key([1]) is None
