"""Smaller faults of the daemon's input: each answered with a clear error, never a traceback."""

from __future__ import annotations

import resource
import socket
import time
from typing import TYPE_CHECKING

import pytest

from bouncerd.client import Client
from bouncerd.errors import DaemonRequestError

if TYPE_CHECKING:
    from daemons import RunningDaemon

pytestmark = pytest.mark.e2e

# A descriptor limit the daemon reaches with a few dozen connections.
FD_LIMIT = 48


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


@pytest.mark.skipif(
    not hasattr(resource, "prlimit"), reason="lowering another process's fd limit needs prlimit"
)
def test_accept_at_the_descriptor_limit_is_logged_with_its_reason_not_ten_times_a_second(
    daemon: RunningDaemon,
) -> None:
    """Before, each failed accept logged "accept failed:" with no reason, ten times a second."""
    resource.prlimit(daemon.proc.pid, resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))
    held: list[socket.socket] = []
    try:
        for _ in range(FD_LIMIT + 20):  # past the limit: the kernel queues them, accept() fails
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(2.0)
            try:
                sock.connect(str(daemon.paths.socket))
            except OSError:
                sock.close()
                break
            held.append(sock)
        time.sleep(2.0)  # twenty accept() retries' worth
    finally:
        for sock in held:
            sock.close()
    lines = [ln for ln in daemon.stderr().splitlines() if "accept failed" in ln]
    assert len(lines) == 1, lines
    assert "Too many open files" in lines[0]
