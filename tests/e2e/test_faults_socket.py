"""Fault: the daemon's socket file is deleted (or replaced) while the daemon runs.

Before, the daemon kept its lock and served nobody: autostarted daemons exited "already running", new
shims were refused, `status` said "not running" and `doctor` said the shims would start one, which
they could not. Now the daemon binds the path again within `SOCKET_CHECK_SECONDS`, and while a file
that is not its socket stands in the way, `status` and `doctor` say a daemon is running that cannot
be reached, not that none runs.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from bouncerctl.app import main
from click.testing import CliRunner
from harness import blocked_text, connect, fixture_server, shim_params

from bouncerd.server.serving import SOCKET_CHECK_SECONDS

if TYPE_CHECKING:
    from daemons import RunningDaemon

pytestmark = pytest.mark.e2e

TEST_TIMEOUT = 60
# Bound, not expectation: the daemon checks every SOCKET_CHECK_SECONDS.
BACK_WITHIN_SECONDS = 10 * SOCKET_CHECK_SECONDS


def _ctl(daemon: RunningDaemon, *args: str) -> Any:
    return CliRunner().invoke(main, list(args), env={"BOUNCER_HOME": str(daemon.home), "COLUMNS": "200"})


def _wait_for(predicate: Any) -> bool:
    deadline = time.monotonic() + BACK_WITHIN_SECONDS
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.asyncio
async def test_deleted_socket_is_bound_again_and_shims_reach_the_same_daemon(daemon: RunningDaemon) -> None:
    pid = daemon.proc.pid
    daemon.paths.socket.unlink()
    assert _wait_for(daemon.paths.socket.exists)
    assert "was deleted while bouncerd ran; listening on it again" in daemon.stderr()
    status = _ctl(daemon, "status", "--json")
    assert status.exit_code == 0 and f'"pid": {pid}' in status.stdout
    with anyio.fail_after(TEST_TIMEOUT):
        async with connect(shim_params(fixture_server("mail"), daemon.home), "legacy") as probe:
            await probe.client.list_tools()
            assert blocked_text(await probe.client.call_tool("read_inbox", {})) is None
    daemon.stop()
    assert not daemon.paths.socket.exists()  # the socket it serves now is removed at exit


def test_socket_replaced_by_another_file_is_named_as_a_running_daemon_out_of_reach(
    daemon: RunningDaemon,
) -> None:
    pid = daemon.proc.pid
    daemon.paths.socket.unlink()
    daemon.paths.socket.write_text("not a socket")  # before the daemon looks again: it must leave it
    assert _wait_for(lambda: "is no longer this daemon's socket" in daemon.stderr())
    status = _ctl(daemon, "status")
    assert status.exit_code == 3
    assert f"bouncerd is running (pid {pid}) but does not answer" in " ".join(status.stderr.split())
    doctor = _ctl(daemon, "doctor")
    assert doctor.exit_code == 1 and "FAIL daemon" in " ".join(doctor.stdout.split())
    assert "shims and hooks start it" not in doctor.stdout
    daemon.paths.socket.unlink()  # cleared: the daemon binds it again
    assert _wait_for(lambda: _ctl(daemon, "status", "--json").exit_code == 0)
