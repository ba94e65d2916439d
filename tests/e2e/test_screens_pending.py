"""`bouncerctl pending` against a real daemon: the codes of sessions that have ended come apart from
the ones a person can still act on.

Two sessions ask (a real bouncerd, the synchronous client speaking for each shim): one keeps its shim
connected, the other's shim leaves (the session `status` counts as ended: no server connected).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from daemons import RunningDaemon

from bouncerd.client import Client

pytestmark = pytest.mark.e2e

BOUNCERCTL = Path(sys.executable).parent / "bouncerctl"
TOOLS = [{"name": "send_mail", "description": "Send mail", "inputSchema": {"type": "object"}}]
HEADING = "of ended sessions (no server connected"


def _shim(daemon: RunningDaemon, session: str) -> Client:
    client = Client.connect(daemon.paths, role="shim", session=session, server="mail", upstream=["mail"])
    client.request("tools", tools=TOOLS)
    return client


def _ask(client: Client, to: str) -> str:
    code: str = client.request("verdict", tool="send_mail", arguments={"to": to})["code"]
    return code


def _pending(daemon: RunningDaemon) -> str:
    done = subprocess.run(
        [str(BOUNCERCTL), "pending"], env=daemon.env, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_pending_puts_the_codes_of_ended_sessions_apart_from_the_live_ones(start: Any) -> None:
    """Stops: `pending` offering, among the live ones, a code whose agent is gone."""
    daemon = start()
    with _shim(daemon, "gone") as leaving:
        ended_code = _ask(leaving, "eve@gone.example")
    with _shim(daemon, "here") as staying:
        live_code = _ask(staying, "bob@here.example")
        out = _pending(daemon)
    live_part, _, ended_part = out.partition(HEADING)
    assert live_code in live_part and ended_code not in live_part
    assert ended_code in ended_part


def test_pending_without_ended_sessions_has_no_such_heading(start: Any) -> None:
    """The benign twin: a live session's code is listed as before, with no heading of ended ones."""
    daemon = start()
    with _shim(daemon, "here") as staying:
        live_code = _ask(staying, "bob@here.example")
        out = _pending(daemon)
    assert live_code in out and HEADING not in out
