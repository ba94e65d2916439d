"""kill -9 during heavy audit writing, then start again: the chain is intact, or the torn tail is
moved aside and recorded; and no verdict the agent was told about is missing.

A shim-role client pins one tool and pipelines verdict requests with large arguments (each record is
a quarter megabyte, written whole, so the kill can land inside a write). After a number of replies
the daemon is killed with SIGKILL while requests are still queued, then restarted on the same home.
"""

from __future__ import annotations

import json
import signal
from typing import TYPE_CHECKING

import pytest
from bouncerctl.app import main
from click.testing import CliRunner

from bouncerd.client import Client
from bouncerd.core import audit as chainlib
from bouncerd.errors import DaemonUnavailableError
from bouncerd.server.audit import chain_files

if TYPE_CHECKING:
    from daemons import RunningDaemon

pytestmark = pytest.mark.e2e

# Each argument this large makes each audit line a quarter megabyte: a write the kill can interrupt.
ARGUMENT_BYTES = 256 * 1024
# Requests in flight at once, and replies awaited before the kill: enough that the daemon is busy
# writing when the signal lands, few enough that a round takes a second or two.
IN_FLIGHT = 60
REPLIES_BEFORE_KILL = 15
ROUNDS = 3
TOOLS = [{"name": "store", "description": "Store a blob", "inputSchema": {"type": "object"}}]


def _hammer(daemon: RunningDaemon, round_no: int) -> set[str]:
    """Pipeline verdicts, kill the daemon mid-stream; return the request ids that got a reply."""
    replied: set[str] = set()
    client = Client.connect(
        daemon.paths,
        role="shim",
        session="crash",
        server="blobs",
        upstream=["blobs"],
        instance=f"i{round_no}",
    )
    try:
        client.request("tools", tools=TOOLS)
        ids = []
        for i in range(IN_FLIGHT):
            rid = f"r{round_no}-{i}"
            blob = chr(ord("a") + i % 26) * ARGUMENT_BYTES
            ids.append((client.send("verdict", tool="store", arguments={"blob": blob}, request_id=rid), rid))
        for n, (wire_id, rid) in enumerate(ids):
            if n == REPLIES_BEFORE_KILL:
                daemon.proc.send_signal(signal.SIGKILL)
            try:
                reply = client.wait(wire_id)
            except DaemonUnavailableError:
                break
            assert reply["ok"] and reply["verdict"] == "allow"
            replied.add(rid)
    finally:
        client.close()
    daemon.proc.wait()
    assert daemon.proc.returncode == -signal.SIGKILL
    return replied


def test_kill_9_while_writing_leaves_a_chain_that_verifies_after_restart(daemon: RunningDaemon) -> None:
    told: set[str] = set()
    for round_no in range(ROUNDS):
        told |= _hammer(daemon, round_no)
        daemon.restart()  # the start repairs a torn tail, if the kill left one
        files = chain_files(daemon.paths.audit)
        result = chainlib.walk((p.name, p.read_bytes().splitlines(keepends=True)) for p in files)
        assert result.ok, result.describe()
        records = [json.loads(line) for p in files for line in p.read_bytes().splitlines()]
        asides = sorted(daemon.paths.state.glob("audit.jsonl.torn-*"))
        repairs = [r for r in records if r["rule"] == chainlib.REPAIRED_RULE]
        assert len(repairs) == len(asides)  # every torn tail moved aside is recorded, and only those
        for record, aside in zip(repairs, asides, strict=True):
            assert (
                aside.name in record["reason"] and f"moved {aside.stat().st_size} bytes" in record["reason"]
            )
        logged = {r["request_id"] for r in records if r.get("tool") == "store"}
        assert told <= logged  # a verdict is written before its reply is sent
    result = CliRunner().invoke(main, ["audit", "verify"], env={"BOUNCER_HOME": str(daemon.home)})
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("audit chain intact:")
