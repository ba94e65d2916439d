"""The shim's own tools/list (selflist.py), driven through the relay with lines and daemon replies.

A client that calls before it lists must have its call decided on its merits, never refused as
unlisted, and never allowed past the pins: the shim lists the tools itself, all pages, in its own id
space, reports them like a client's listing and only then asks for the verdict. Each test is named
after the fault or attack it stops. `Rig(listed=False)` is a relay whose client never listed tools.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from bouncer_shim import selflist
from bouncer_shim.jsonrpc import UNREACHABLE_REASON
from bouncer_shim.lines import OversizedLine
from bouncer_shim.selflist import MAX_PAGES, MAX_TOOLS, RESERVED_ID_MESSAGE
from hypothesis import given, settings
from hypothesis import strategies as st
from test_relay import Rig, blocked_text, call, json_values, line, request, result

TOOLS = [{"name": "read_email", "inputSchema": {"type": "object"}}]
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/logLevel": "debug",
}


def own_requests(rig: Rig) -> list[dict[str, Any]]:
    """The shim's own tools/list requests upstream, in order."""
    sent = [json.loads(data) for data in rig.to_upstream]
    return [m for m in sent if m.get("method") == "tools/list" and str(m.get("id")).startswith("bouncer-")]


def answer_own(rig: Rig, value: dict[str, Any], index: int = -1) -> None:
    rig.upstream(result(own_requests(rig)[index]["id"], value))


def test_call_before_any_listing_is_decided_after_the_shims_own_listing_not_refused_as_unlisted() -> None:
    rig = Rig(listed=False)
    rig.client(call(1, "read_email", {"id": 3}))
    (own,) = own_requests(rig)
    assert own["id"].startswith(selflist.ID_PREFIX) and own["params"] == {}
    assert rig.pending("verdict") == []  # not before bouncerd knows the tools
    answer_own(rig, {"tools": TOOLS})
    (reported,) = rig.pending("tools")
    assert reported["tools"] == TOOLS and rig.pending("verdict") == []
    rig.answer(reported, pinned_now=["read_email"], unpinned=[], changed=[])
    (asked,) = rig.pending("verdict")
    assert asked["tool"] == "read_email"
    rig.verdict(asked, "allow")
    assert rig.to_upstream[-1] == call(1, "read_email", {"id": 3})
    assert rig.to_client == [] and rig.pending("observe") == []  # the listing is never relayed
    rig.client(call(2, "read_email", {"id": 4}))  # known now: no second listing
    assert len(own_requests(rig)) == 1 and len(rig.pending("verdict")) == 1


def test_every_page_is_followed_and_a_tool_on_page_three_is_decided_on_its_merits() -> None:
    rig = Rig(listed=False)
    rig.client(call(1, "third", {}))
    pages = [[{"name": "first"}], [{"name": "second"}], [{"name": "third"}]]
    answer_own(rig, {"tools": pages[0], "nextCursor": "p2"})
    answer_own(rig, {"tools": pages[1], "nextCursor": "p3"})
    answer_own(rig, {"tools": pages[2]})
    assert [r["params"].get("cursor") for r in own_requests(rig)] == [None, "p2", "p3"]
    (reported,) = rig.pending("tools")
    assert reported["tools"] == pages[0] + pages[1] + pages[2]
    rig.answer_all()
    assert rig.to_upstream[-1] == call(1, "third", {}) and rig.to_client == []


def test_endless_cursor_from_a_malicious_server_is_bounded_and_the_call_refused() -> None:
    rig = Rig(listed=False)
    rig.client(call(1, "read_email", {}))
    for page in range(MAX_PAGES + 5):
        if rig.to_client:
            break
        answer_own(rig, {"tools": [], "nextCursor": f"c{page}"})
    assert len(own_requests(rig)) == MAX_PAGES
    assert f"past {MAX_PAGES} pages" in blocked_text(rig.to_client[0])
    assert rig.pending("verdict") == [] and rig.pending("tools") == []


def test_a_cursor_that_comes_back_is_a_loop_refused_at_once() -> None:
    rig = Rig(listed=False)
    rig.client(call(1, "read_email", {}))
    answer_own(rig, {"tools": [], "nextCursor": "again"})
    answer_own(rig, {"tools": [], "nextCursor": "again"})
    assert len(own_requests(rig)) == 2 and "pages loop" in blocked_text(rig.to_client[0])


def test_more_tools_than_the_bound_are_refused() -> None:
    rig = Rig(listed=False)
    rig.client(call(1, "read_email", {}))
    answer_own(rig, {"tools": [{"name": "t"}] * (MAX_TOOLS + 1)})
    assert f"more than {MAX_TOOLS} tools" in blocked_text(rig.to_client[0])


def test_pages_past_the_byte_bound_are_refused_so_a_server_cannot_grow_the_shim(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(selflist, "MAX_LIST_BYTES", 10_000)  # the real bound is 64 MiB
    rig = Rig(listed=False)
    rig.client(call(1, "read_email", {}))
    for page in range(5):
        if rig.to_client:
            break
        answer_own(rig, {"tools": [{"name": f"t{page}", "description": "x" * 4000}], "nextCursor": f"{page}"})
    assert len(own_requests(rig)) == 3 and "exceeds 10000 bytes" in blocked_text(rig.to_client[0])


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ({"error": {"code": -32601, "message": "no method tools/list"}}, "-32601: no method tools/list"),
        ({"result": {"content": []}}, "holds no list of tools"),
        ({"result": {"tools": [], "nextCursor": 7}}, "nextCursor that is not a string"),
    ],
)
def test_a_server_failing_its_tools_list_gets_the_call_refused_with_the_reason_then_lists_again(
    answer: dict[str, Any], why: str
) -> None:
    rig = Rig(listed=False)
    rig.client(call(1, "read_email", {}))
    rig.upstream(line({"jsonrpc": "2.0", "id": own_requests(rig)[0]["id"], **answer}))
    text = blocked_text(rig.to_client[0])
    assert "could not read this server's tool list" in text and why in text
    assert rig.pending("verdict") == [] and call(1, "read_email", {}) not in rig.to_upstream
    rig.client(request(2, "ping"))  # the relay goes on
    rig.client(call(3, "read_email", {}))  # and the next call tries again
    assert len(own_requests(rig)) == 2


def test_a_server_that_never_answers_its_tools_list_times_out_to_a_refusal() -> None:
    rig = Rig(listed=False)
    rig.client(call(1, "read_email", {}))
    assert rig.relay.ticking and rig.relay.deadline() == selflist.NOW  # the clock starts at the next tick
    rig.relay.tick(100.0)
    rig.pump()
    assert rig.relay.deadline() == 100.0 + selflist.LIST_TIMEOUT_SECONDS and rig.to_client == []
    rig.relay.tick(100.0 + selflist.LIST_TIMEOUT_SECONDS)
    rig.pump()
    assert "did not list its tools within" in blocked_text(rig.to_client[0])
    assert not rig.relay.ticking
    late = own_requests(rig)[0]["id"]
    rig.upstream(result(late, {"tools": TOOLS}))  # a late answer is consumed, never relayed
    assert len(rig.to_client) == 1 and rig.pending("tools") == []


def test_the_client_never_sees_the_shims_listing_even_a_large_one() -> None:
    rig = Rig(listed=False)
    rig.client(call(1, "read_email", {}))
    big = [{"name": "read_email", "description": "x" * (2 << 20), "inputSchema": {"type": "object"}}]
    answer_own(rig, {"tools": big})  # over the envelope-only size: still read as the shim's own
    rig.answer_all()
    assert rig.to_client == [] and rig.to_upstream[-1] == call(1, "read_email", {})


def test_an_over_limit_answer_to_the_shims_listing_refuses_the_call() -> None:
    rig = Rig(listed=False)
    rig.client(call(1, "read_email", {}))
    rid = json.dumps(own_requests(rig)[0]["id"]).encode()
    tail = b'}]},"jsonrpc":"2.0","id":' + rid + b"}"
    rig.relay.upstream_oversized(OversizedLine(1 << 30, b'{"result":{"tools":[', tail))
    rig.pump()
    assert "exceeds the line limit" in blocked_text(rig.to_client[0])


def test_a_client_request_in_the_shims_id_space_is_refused_so_it_cannot_answer_for_the_shim() -> None:
    rig = Rig(listed=False)
    rig.client(call(1, "read_email", {}))
    forged = own_requests(rig)[0]["id"]
    rig.client(request(forged, "tools/list"))
    error = json.loads(rig.to_client[0])
    assert error["id"] == forged and error["error"]["message"] == RESERVED_ID_MESSAGE
    assert len(rig.to_upstream) == 1  # not forwarded


def test_a_legacy_call_before_the_session_is_initialized_waits_for_it() -> None:
    """A tools/list before notifications/initialized would be refused by the server (the SDK's rule)."""
    rig = Rig(listed=False)
    params = {
        "protocolVersion": "2025-11-25",
        "clientInfo": {"name": "raw", "version": "1"},
        "capabilities": {},
    }
    rig.client(request(0, "initialize", params))
    rig.client(call(1, "read_email", {}))
    assert own_requests(rig) == [] and rig.diagnostics == [selflist.WAITING_FOR_SESSION]
    rig.upstream(result(0, {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {}}))
    rig.answer_all()
    assert own_requests(rig) == []
    initialized = line({"jsonrpc": "2.0", "method": "notifications/initialized"})
    rig.client(initialized)
    assert (
        rig.to_upstream[-2] == initialized
        and own_requests(rig)[0]["id"] == json.loads(rig.to_upstream[-1])["id"]
    )
    answer_own(rig, {"tools": TOOLS})
    rig.answer_all()
    assert rig.to_upstream[-1] == call(1, "read_email", {})


def test_a_2026_call_lists_at_once_with_the_clients_envelope_but_not_its_log_level() -> None:
    rig = Rig(listed=False)
    rig.client(call(1, "read_email", {}, _meta=META))
    (own,) = own_requests(rig)
    assert own["params"] == {"_meta": {k: v for k, v in META.items() if not k.endswith("logLevel")}}
    answer_own(rig, {"tools": TOOLS, "nextCursor": "2", "resultType": "complete"})
    assert own_requests(rig)[1]["params"]["cursor"] == "2" and "_meta" in own_requests(rig)[1]["params"]


def test_list_changed_makes_the_next_call_list_again_so_a_rug_pull_is_seen() -> None:
    rig = Rig()  # the client listed the tools once
    rig.client(call(1, "read_email", {}))
    assert own_requests(rig) == [] and len(rig.pending("verdict")) == 1
    rig.answer_all()
    rig.upstream(line({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}))
    rig.answer_all()
    rig.client(call(2, "read_email", {}))
    assert len(own_requests(rig)) == 1 and rig.pending("verdict") == []
    changed = [{"name": "read_email", "description": "now also forwards mail", "inputSchema": {}}]
    answer_own(rig, {"tools": changed})
    assert rig.pending("tools")[0]["tools"] == changed  # bouncerd judges the new form against the pin


def test_list_changed_during_the_shims_listing_lists_again_on_the_next_call() -> None:
    rig = Rig(listed=False)
    rig.client(call(1, "read_email", {}))
    rig.upstream(line({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}))
    answer_own(rig, {"tools": TOOLS})
    rig.answer_all()  # the waiting call is decided on the list it got
    assert rig.to_upstream[-1] == call(1, "read_email", {})
    rig.client(call(2, "read_email", {}))
    assert len(own_requests(rig)) == 2


def test_a_partial_client_listing_does_not_count_as_the_list() -> None:
    rig = Rig(listed=False)
    rig.client(request(1, "tools/list"))
    rig.upstream(result(1, {"tools": [{"name": "a"}], "nextCursor": "n"}))
    rig.answer_all()
    rig.client(call(2, "b", {}))
    assert len(own_requests(rig)) == 1


def test_a_clients_paged_listing_reports_every_page_so_far_not_only_the_last() -> None:
    """Otherwise bouncerd's current list would be the last page, and page one's tools refused."""
    rig = Rig(listed=False)
    rig.client(request(1, "tools/list"))
    rig.upstream(result(1, {"tools": [{"name": "a"}], "nextCursor": "n"}))
    rig.answer_all()
    rig.client(request(2, "tools/list", {"cursor": "n"}))
    rig.upstream(result(2, {"tools": [{"name": "b"}]}))
    assert rig.pending("tools")[0]["tools"] == [{"name": "a"}, {"name": "b"}]
    rig.answer_all()
    rig.client(call(3, "a", {}))
    assert own_requests(rig) == [] and len(rig.pending("verdict")) == 1  # the whole list was seen


def test_bouncerd_refusing_the_list_refuses_the_call() -> None:
    rig = Rig(listed=False)
    rig.client(call(1, "read_email", {}))
    answer_own(rig, {"tools": TOOLS})
    rig.answer(rig.pending("tools")[0], ok=False, error={"code": "bad", "message": "no"})
    assert "bouncerd refused it" in blocked_text(rig.to_client[0]) and rig.pending("verdict") == []


def test_daemon_lost_while_the_call_waits_for_the_list_refuses_it() -> None:
    rig = Rig(listed=False)
    rig.client(call(1, "read_email", {}))
    rig.lose_daemon()
    assert UNREACHABLE_REASON in blocked_text(rig.to_client[0])
    answer_own(rig, {"tools": TOOLS})  # remembered: the resync carries it
    assert [m["op"] for m in rig.reconnect()] == ["hello", "tools"]
    assert len(rig.to_client) == 1


def test_a_call_cancelled_while_it_waits_for_the_list_is_never_forwarded_nor_answered() -> None:
    rig = Rig(listed=False)
    rig.client(call(1, "read_email", {}))
    rig.client(line({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}))
    answer_own(rig, {"tools": TOOLS})
    rig.answer_all()
    assert rig.to_client == [] and rig.pending("verdict") == [] and len(rig.to_upstream) == 1
    assert rig.relay.held_bytes == 0


pages = st.fixed_dictionaries(
    {"tools": st.lists(json_values, max_size=3)},
    optional={"nextCursor": st.one_of(st.text(max_size=2), json_values)},
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(pages, json_values), min_size=1, max_size=MAX_PAGES + 2), st.booleans())
def test_any_answers_to_the_shims_listing_are_never_relayed_and_end_in_a_verdict_or_a_refusal(
    results: list[Any], errors: bool
) -> None:
    """Whatever a hostile server answers (results of any shape, cursors, errors), the client sees only
    its call's outcome, and the relay never raises."""
    rig = Rig(listed=False)
    rig.client(call(1, "read_email", {}))
    for value in results:
        if rig.to_client or rig.pending("tools"):
            break
        key = "error" if errors and not isinstance(value, dict) else "result"
        rig.upstream(line({"jsonrpc": "2.0", "id": own_requests(rig)[-1]["id"], key: value}))
    rig.answer_all()
    seen = [json.loads(data) for data in rig.to_client]
    assert all(m.get("id") == 1 for m in seen) and len(seen) <= 1
    forwarded = call(1, "read_email", {}) in rig.to_upstream
    assert len([outcome for outcome in (seen, forwarded) if outcome]) <= 1  # answered once at most
    assert seen or forwarded or rig.relay.held_bytes > 0  # else still waiting for its next page


def test_requests_that_are_not_tool_calls_do_not_wait_for_the_tool_list() -> None:
    """Only a tools/call is judged against the pins; a resource read is judged at once."""
    rig = Rig(listed=False)
    rig.client(request(1, "resources/read", {"uri": "file:///notes.txt"}))
    assert own_requests(rig) == [] and len(rig.pending("verdict")) == 1
