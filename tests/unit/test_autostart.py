"""bouncerd.autostart's decisions that start nothing: the backoff, the start record, the start lock.

Real files, a real flock and a real listening socket in a short temporary BOUNCER_HOME; the starts
themselves are driven end to end in tests/e2e (test_shim_failures.py, test_hooks.py).
"""

from __future__ import annotations

import fcntl
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bouncerd import autostart
from bouncerd.paths import Paths, ensure_private_dir, resolve


@pytest.fixture
def paths() -> Iterator[Paths]:
    home = Path(tempfile.mkdtemp(prefix="b", dir="/tmp"))
    found = resolve({"BOUNCER_HOME": str(home)})
    ensure_private_dir(found.runtime)
    ensure_private_dir(found.state)
    yield found
    for path in sorted(home.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
    home.rmdir()


ENV = {"PATH": os.environ.get("PATH", "")}


def test_backoff_doubles_to_its_ceiling_then_gives_up_to_once_a_minute() -> None:
    delays = [autostart.restart_delay(n) for n in range(autostart.GIVE_UP_AFTER_STARTS + 2)]
    assert delays[0] == 0.0  # a healthy daemon died: restart at once
    assert delays[1] == autostart.FIRST_RESTART_DELAY_SECONDS
    quick = delays[1 : autostart.GIVE_UP_AFTER_STARTS]
    assert quick == sorted(quick) and max(quick) <= autostart.MAX_RESTART_DELAY_SECONDS
    assert delays[autostart.GIVE_UP_AFTER_STARTS :] == [autostart.GIVE_UP_DELAY_SECONDS] * 2


def test_a_daemon_that_just_died_is_not_restarted_before_its_backoff(paths: Paths) -> None:
    now = time.time()
    autostart.write_record(paths, 3, now, 999_999_999)  # pid of no process
    outcome = autostart.start_daemon(paths, ENV, now=now + 0.1)
    assert outcome.kind == autostart.WAITING and not outcome.broken
    assert outcome.retry_after == pytest.approx(autostart.restart_delay(3) - 0.1)
    assert str(paths.daemon_log) in outcome.message


def test_a_daemon_that_keeps_failing_is_refused_with_its_log_and_last_line(paths: Paths) -> None:
    paths.daemon_log.write_text("x\nERROR refusing to start: policy.yaml:3: servers.x.bad: unknown key\n")
    now = time.time()
    autostart.write_record(paths, autostart.GIVE_UP_AFTER_STARTS, now - 10, 999_999_999)
    outcome = autostart.start_daemon(paths, ENV, now=now)
    assert outcome.kind == autostart.WAITING and outcome.broken
    assert "6 starts in a row" in outcome.message and "servers.x.bad: unknown key" in outcome.message


def test_a_start_record_from_the_future_never_blocks_a_start_for_long(paths: Paths) -> None:
    """/tmp/bouncer-UID survives a reboot with a clock set back: the record must not hold for hours."""
    autostart.write_record(paths, 1, time.time() + 3600, 999_999_999)
    assert autostart.read_record(paths)[0] == 1
    outcome = autostart._decide(paths, {**ENV, "BOUNCER_HOME": str(paths.runtime.parent)}, time.time())
    assert outcome.kind == autostart.STARTED  # a stale record: started at once
    assert outcome.process is not None
    outcome.process.kill()
    outcome.process.wait()


@pytest.mark.parametrize("garbage", [b"", b"nonsense", b"1 nan 5\n", b"-3 1.0 5\n", b"1 1.0 0\n", b"9" * 300])
def test_an_unreadable_start_record_counts_as_none(paths: Paths, garbage: bytes) -> None:
    (paths.runtime / autostart.STARTS_NAME).write_bytes(garbage)
    assert autostart.read_record(paths) == (0, 0.0, None)


def test_a_live_recent_start_is_waited_for_not_repeated(paths: Paths) -> None:
    autostart.write_record(paths, 1, time.time(), os.getpid())  # a live pid: "it is coming up"
    outcome = autostart.start_daemon(paths, ENV, now=time.time())
    assert outcome.kind == autostart.STARTING and outcome.pid == os.getpid()


def test_someone_holding_the_start_lock_means_starting_not_a_second_start(paths: Paths) -> None:
    fd = os.open(paths.runtime / autostart.START_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        outcome = autostart.start_daemon(paths, ENV, now=time.time())
    finally:
        os.close(fd)
    assert outcome.kind == autostart.STARTING
    assert not (paths.runtime / autostart.STARTS_NAME).exists()  # nothing was started


def test_a_listening_daemon_is_running_and_the_record_is_left_alone(paths: Paths) -> None:
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(paths.socket))
        listener.listen()
        outcome = autostart.start_daemon(paths, ENV, now=time.time())
    paths.socket.unlink()
    assert outcome.kind == autostart.RUNNING


def test_autostart_off_starts_nothing(paths: Paths) -> None:
    outcome = autostart.start_daemon(paths, {**ENV, "BOUNCER_NO_AUTOSTART": "1"}, now=time.time())
    assert outcome.kind == autostart.DISABLED and "BOUNCER_NO_AUTOSTART=1" in outcome.message


def test_symlinked_runtime_dir_is_refused_before_any_start(paths: Paths, tmp_path: Path) -> None:
    for child in paths.runtime.iterdir():
        child.unlink()
    paths.runtime.rmdir()
    paths.runtime.symlink_to(tmp_path)
    outcome = autostart.start_daemon(paths, ENV, now=time.time())
    assert outcome.kind == autostart.FAILED and "symlink" in outcome.message
    assert list(tmp_path.iterdir()) == []  # no lock file planted through the link


def test_healthy_daemon_clears_the_record(paths: Paths) -> None:
    autostart.write_record(paths, 4, time.time(), 999_999_999)
    autostart.mark_healthy(paths)
    assert autostart.read_record(paths) == (0, 0.0, None)
    autostart.mark_healthy(paths)  # twice is fine


def test_exit_code_of_a_daemon_that_lost_the_lock_is_the_daemons_own() -> None:
    from bouncerd.server import run

    assert autostart.EXIT_ALREADY_RUNNING == run.EXIT_ALREADY_RUNNING
