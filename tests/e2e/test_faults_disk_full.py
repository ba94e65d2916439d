"""Fault: the daemon's state directory fills up, then space comes back, while the same shim runs on.

A real daemon whose state directory is a small tmpfs, the workplace fixture server behind a real
bouncer-shim, the real `mcp` client. The disk is filled until a large output cannot be journalled.
Before, that shim refused every call until the client restarted, saying the daemon "was
unreachable"; a failed append had also left half an entry in the journal, which the next start cut
with everything after it. Now the calls are refused saying the output could not be recorded, the same
shim judges calls again once space is back, and the journal reads whole at the next start.

Mounting a tmpfs needs root; elsewhere the test is skipped (the unit tests simulate the full disk
through the write call: test_journal_checksums.py, test_outbox_unrecorded.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from daemons import RunningDaemon, short_home, spawn_daemon, wait_until_serving
from harness import blocked_text, connect, fixture_server, shim_params

pytestmark = pytest.mark.e2e

TEST_TIMEOUT = 60
TMPFS_BYTES = 4 * 1024 * 1024  # small enough to fill in a moment
BIG_TEXT = "x" * (512 * 1024)  # an output larger than the space left
RETRIES = 50  # calls 0.2 s apart while the shim sends the output again (every second)


@pytest.fixture
def small_disk_daemon() -> Iterator[RunningDaemon]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs for the state directory needs root")
    home = short_home()
    state = home / "state"
    state.mkdir(mode=0o700)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES},mode=0700", "tmpfs", str(state)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        shutil.rmtree(home, ignore_errors=True)
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode(errors='replace').strip()}")
    running = spawn_daemon(home)
    try:
        wait_until_serving(running)
        yield running
    finally:
        running.stop()
        subprocess.run(["umount", "-l", str(state)], check=False)
        shutil.rmtree(home, ignore_errors=True)


def _fill(directory: Path, leave: int) -> Path:
    """A file that takes all the space of `directory`'s filesystem but `leave` bytes."""
    filler = directory / "filler"
    with filler.open("wb") as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * 65536)
            fh.flush()
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    os.truncate(filler, filler.stat().st_size - max(0, leave - free))
    return filler


@pytest.mark.asyncio
async def test_full_disk_refuses_calls_saying_why_and_the_same_shim_recovers_when_space_returns(
    small_disk_daemon: RunningDaemon, tmp_path: Path
) -> None:
    daemon = small_disk_daemon
    data = tmp_path / "workplace.json"
    data.write_text(json.dumps({"files": {"big.txt": BIG_TEXT}}))
    outbox = tmp_path / "outbox.json"
    server = fixture_server("workplace", env={"FIXTURE_WORKPLACE": str(data), "FIXTURE_OUTBOX": str(outbox)})
    with anyio.fail_after(TEST_TIMEOUT):
        async with connect(shim_params(server, daemon.home, session="disk"), "legacy") as probe:
            await probe.client.list_tools()
            assert blocked_text(await probe.client.call_tool("read_inbox", {})) is None
            filler = _fill(daemon.paths.state, leave=64 * 1024)  # room for verdicts, not for the file
            read = await probe.client.call_tool("read_file", {"file_path": "big.txt"})
            assert blocked_text(read) is None  # the client gets it; the daemon could not record it
            refused = blocked_text(await probe.client.call_tool("read_inbox", {}))
            assert refused is not None and "could not record this server's latest output" in refused
            assert "unreachable" not in refused
            filler.unlink()  # space is back
            for _ in range(RETRIES):
                again = blocked_text(await probe.client.call_tool("read_inbox", {}))
                if again is None:
                    break
                assert "could not record" in again
                await anyio.sleep(0.2)
            assert again is None  # the same shim, no client restart
    daemon.stop()
    daemon.restart()
    log = daemon.stderr()
    assert "DAMAGED" not in log and "torn tail" not in log  # the failed append was cut back at once
