"""Smaller faults of the daemon's input: each answered with a clear error, never a traceback."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from bouncerd.client import Client
from bouncerd.errors import DaemonRequestError

if TYPE_CHECKING:
    from daemons import RunningDaemon

pytestmark = pytest.mark.e2e


def test_bytes_inside_a_tools_frame_is_refused_with_a_reason_not_a_traceback(daemon: RunningDaemon) -> None:
    """msgpack can carry a bytes key or value deep inside a tool where JSON cannot: before, pinning it
    raised inside the daemon (a traceback in its log, an `internal` error)."""
    with Client.connect(daemon.paths, role="shim", session="s", server="m", upstream=["m"]) as shim:
        with pytest.raises(DaemonRequestError) as refused:
            shim.request("tools", tools=[{"name": "t", "inputSchema": {b"type": "object"}}])
        assert refused.value.code == "bad_tools"
        assert shim.request("tools", tools=[{"name": "t", "inputSchema": {"type": "object"}}])["ok"]
    assert "Traceback" not in daemon.stderr()


def test_only_bouncerctl_may_accept_the_loss_of_the_journals_state(daemon: RunningDaemon) -> None:
    """A shim or hook connection speaks for the agent: a fooled agent must not lift the restricted
    state that a damaged journal put the daemon in."""
    with Client.connect(daemon.paths, role="shim", session="s", server="m", upstream=["m"]) as shim:
        with pytest.raises(DaemonRequestError) as refused:
            shim.request("accept_loss")
        assert refused.value.code == "not_ctl"
    with Client.connect(daemon.paths, role="ctl") as ctl:
        assert ctl.request("accept_loss")["accepted"] is False  # nothing to accept: not restricted
