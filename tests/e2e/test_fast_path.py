"""Calls decided before they are asked, through the real shim, daemon and fixture server.

A read-only tool (`read_inbox`: pinned, no budget, no sink, no argument) is forwarded before the
daemon is asked once the shim holds the fast-path set; the daemon still gets one allow record per
call. The attack on that shape is losing the record: a daemon killed between the forward and the
record must find it after a restart (the shim replays it). The other is a stale set: a budget added
by a reload must hold from the next call on. A third is a set used after the daemon died: the call
made next must be refused.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import anyio
import pytest
from bouncerctl.app import main
from click.testing import CliRunner
from harness import audit_records, blocked_text, connect, fixture_server, shim_params, write_policy

from bouncerd.client import Client as DaemonClient
from bouncerd.errors import DaemonRequestError

pytestmark = pytest.mark.e2e

TOOL = "read_inbox"
# Calls made to get the set: the first closes the first-use window and takes the round trip; the
# set arrives a round trip later. A bounded number, so a shim that never gets it fails the test.
CALLS_TO_GET_THE_SET = 50


def _calls(home: Path) -> list[dict[str, Any]]:
    return [r for r in audit_records(home) if r.get("tool") == TOOL]


async def _until_fast(probe: Any, home: Path) -> int:
    """Call until a call is recorded as forwarded on the fast path; the number of calls made."""
    for n in range(1, CALLS_TO_GET_THE_SET + 1):
        result = await probe.client.call_tool(TOOL, {})
        assert blocked_text(result) is None
        if any("fast_path" in r for r in _calls(home)):
            return n
        await anyio.sleep(0.05)
    raise AssertionError(f"no call was forwarded on the fast path in {CALLS_TO_GET_THE_SET} calls")


async def _until_recorded(home: Path, count: int) -> list[dict[str, Any]]:
    with anyio.fail_after(20):
        while len(records := _calls(home)) < count:
            await anyio.sleep(0.05)
    return records


@pytest.mark.asyncio
async def test_every_forwarded_call_has_one_allow_record(start: Any) -> None:
    daemon = start()
    spec = fixture_server("full")
    with anyio.fail_after(60):
        async with connect(shim_params(spec, daemon.home, session="f1"), "legacy", kind="shim") as probe:
            await probe.client.list_tools()
            made = await _until_fast(probe, daemon.home)
            for _ in range(10):
                assert blocked_text(await probe.client.call_tool(TOOL, {})) is None
            made += 10
            records = await _until_recorded(daemon.home, made)
    assert len(records) == made  # one record per call, none twice
    assert all(r["verdict"] == "allow" and r["rule"] == "default.allow" for r in records)
    fast = [r for r in records if "fast_path" in r]
    assert len(fast) >= 10
    assert len({(r["fast_path"]["instance"], r["fast_path"]["seq"]) for r in fast}) == len(fast)


@pytest.mark.asyncio
async def test_record_of_a_forwarded_call_survives_kill_9_of_the_daemon(start: Any) -> None:
    """The daemon is stopped (SIGSTOP) so it cannot read the record, the call is forwarded and
    answered all the same, then the daemon is killed with SIGKILL and started again: the shim
    replays the record, and the audit log has it."""
    daemon = start()
    spec = fixture_server("full")
    with anyio.fail_after(90):
        async with connect(shim_params(spec, daemon.home, session="f2"), "legacy", kind="shim") as probe:
            await probe.client.list_tools()
            made = await _until_fast(probe, daemon.home)
            await _until_recorded(daemon.home, made)
            daemon.proc.send_signal(signal.SIGSTOP)
            try:
                result = await probe.client.call_tool(TOOL, {})  # no daemon reads anything now
                assert blocked_text(result) is None
                assert "deals@shop.example" in json.dumps(result.model_dump(mode="json"))
            finally:
                daemon.proc.send_signal(signal.SIGKILL)
                daemon.proc.wait()
            before = _calls(daemon.home)
            assert len(before) == made  # the killed daemon never read the record
            daemon.restart()
            seen_before = [b.get("fast_path") for b in before]
            with anyio.fail_after(20):
                while not [
                    r for r in _calls(daemon.home)[len(before) :] if r.get("fast_path") not in seen_before
                ]:
                    await anyio.sleep(0.05)
            records = _calls(daemon.home)
    # The record of the call made while the daemon was stopped is there once, after the restart. A
    # record the dead daemon had audited but not yet answered is replayed and written again, with the
    # same instance and sequence number (docs/how-it-works.md, "Decided before it is asked", limits).
    replayed = records[len(before) :]
    new = [r for r in replayed if r.get("fast_path") not in seen_before]
    assert len(new) == 1, replayed
    assert new[0]["verdict"] == "allow" and "fast_path" in new[0]
    assert all(r.get("fast_path") is not None for r in replayed)


@pytest.mark.asyncio
async def test_a_read_made_right_after_the_daemon_died_is_refused_not_forwarded(start: Any) -> None:
    """Right after a forwarded read the shim owes bouncerd nothing but acknowledgements and does not
    watch its socket for them; a daemon killed then must still be noticed before the next call is
    handled, so that call is refused (fail closed) rather than forwarded on a set nobody holds."""
    daemon = start()
    spec = fixture_server("full")
    with anyio.fail_after(60):
        async with connect(shim_params(spec, daemon.home, session="f4"), "legacy", kind="shim") as probe:
            await probe.client.list_tools()
            await _until_fast(probe, daemon.home)
            assert blocked_text(await probe.client.call_tool(TOOL, {})) is None  # forwarded
            daemon.proc.send_signal(signal.SIGKILL)
            daemon.proc.wait()
            result = await probe.client.call_tool(TOOL, {})
    refusal = blocked_text(result)
    assert refusal is not None and "unreachable" in refusal
    assert "deals@shop.example" not in json.dumps(result.model_dump(mode="json"))


@pytest.mark.asyncio
async def test_budget_added_by_a_reload_holds_from_the_next_call(start: Any) -> None:
    """A reload withdraws the set before the new policy is in force: a read that was forwarded at
    once is now counted and, past its budget, denied."""
    daemon = start()
    spec = fixture_server("full")
    with anyio.fail_after(60):
        async with connect(shim_params(spec, daemon.home, session="f3"), "legacy", kind="shim") as probe:
            await probe.client.list_tools()
            made = await _until_fast(probe, daemon.home)
            write_policy(daemon.home, f"tools:\n  {TOOL}:\n    max_calls: {made + 1}\n")
            env = {"BOUNCER_HOME": str(daemon.home)}
            reloaded = await anyio.to_thread.run_sync(lambda: CliRunner().invoke(main, ["reload"], env=env))
            assert reloaded.exit_code == 0, reloaded.output
            assert blocked_text(await probe.client.call_tool(TOOL, {})) is None  # attempt made + 1
            refusal = blocked_text(await probe.client.call_tool(TOOL, {}))
    assert refusal is not None and "may be called" in refusal
    records = _calls(daemon.home)
    assert records[-1]["rule"] == "budget.exceeded" and "fast_path" not in records[-1]


def test_a_connection_without_a_server_is_refused_a_set_at_once(daemon: Any) -> None:
    """bouncerctl's connection names no server: its fastpath request is an error, never a wait."""
    with DaemonClient.connect(daemon.paths) as client, pytest.raises(DaemonRequestError) as refused:
        client.request("fastpath", holding=None)
    assert refused.value.code == "no_server"


def test_a_shim_connection_is_granted_its_reads_and_a_reload_withdraws_them_first(daemon: Any) -> None:
    """The daemon's side alone: a shim that listed a read and closed the first-use window gets it;
    asking again holding that epoch waits. A reload that puts a budget on the read answers that
    request with a withdrawal; the shim's acknowledgement is granted from the policy after the
    reload, without the read."""
    tools = [{"name": "read_inbox", "description": "Read the inbox", "inputSchema": {"type": "object"}}]
    with DaemonClient.connect(
        daemon.paths, role="shim", session="f4", server="mail", upstream=["mail"], instance="i4"
    ) as client:
        client.request("tools", tools=tools)
        client.request("verdict", tool="read_inbox", arguments={})  # closes the first-use window
        grant = client.request("fastpath", holding=None)
        assert grant["tools"] == {"read_inbox": []}
        waiting = client.send("fastpath", holding=grant["epoch"])
        write_policy(daemon.home, "tools:\n  read_inbox:\n    max_calls: 5\n")
        with DaemonClient.connect(daemon.paths) as ctl:
            reload = ctl.send("reload")
            withdrawn = client.wait(waiting)
            assert withdrawn["ok"] and withdrawn["tools"] is None
            acknowledged = client.send("fastpath", holding=None)
            assert ctl.wait(reload)["ok"]
        regrant = client.wait(acknowledged)
    assert regrant["tools"] == {} and regrant["epoch"] > grant["epoch"]
