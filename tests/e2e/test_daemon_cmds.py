"""`bouncerctl stop`, `restart`, `logs` and `doctor` against a real daemon, for whoever runs it without
a service manager. Commands run in-process (CliRunner) where they start nothing, as processes where
they start a daemon (which outlives the command)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bouncerctl.app import main
from click.testing import CliRunner
from harness import stop_autostarted_daemon

from bouncerd import autostart
from bouncerd.client import Client
from bouncerd.paths import resolve

pytestmark = pytest.mark.e2e

BOUNCERCTL = Path(sys.executable).parent / "bouncerctl"
# Bounds a command or a follower's line; each takes well under a second.
WAIT_SECONDS = 30.0


@pytest.fixture
def user_home() -> Iterator[Path]:
    """A HOME of its own, so `doctor` reads no real client config."""
    path = Path(tempfile.mkdtemp(prefix="h", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _invoke(home: Path, *args: str, user_home: Path | None = None) -> Any:
    env = {"BOUNCER_HOME": str(home), "HOME": str(user_home or home)}
    return CliRunner().invoke(main, list(args), env=env)


def _ctl(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BOUNCER_HOME": str(home), "BOUNCER_NO_NOTIFY": "1"}
    env.pop("BOUNCER_NO_AUTOSTART", None)
    return subprocess.run(
        [str(BOUNCERCTL), *args], env=env, capture_output=True, text=True, timeout=WAIT_SECONDS, check=False
    )


def _ping_pid(home: Path) -> int:
    with Client.connect(resolve({"BOUNCER_HOME": str(home)}), timeout=5.0) as client:
        client.request("ping")
        pid = client.hello_reply["daemon_pid"]
    assert isinstance(pid, int)
    return pid


# ---- stop ----------------------------------------------------------------------------------------------


def test_stop_terminates_the_daemon_cleanly_and_says_shims_may_start_it_again(daemon: Any) -> None:
    result = _invoke(daemon.home, "stop")
    assert result.exit_code == 0, result.output
    assert f"stopped bouncerd (pid {daemon.proc.pid})" in result.stdout
    assert "start it again" in result.stdout
    assert daemon.proc.wait(WAIT_SECONDS) == 0  # SIGTERM: a clean exit, journal and audit synced
    assert not daemon.paths.socket.exists() and not daemon.paths.pidfile.exists()


def test_stop_without_a_daemon_exits_3_in_one_line() -> None:
    home = Path(tempfile.mkdtemp(prefix="b", dir="/tmp"))
    try:
        result = _invoke(home, "stop")
    finally:
        home.rmdir()
    assert result.exit_code == 3
    assert result.stderr == f"bouncerd is not running (nothing answers on {home / 'run' / 'bouncerd.sock'})\n"


def test_stop_never_signals_a_process_a_stale_pid_file_names() -> None:
    """A daemon killed with -9 leaves its pid file; the pid may now be anyone's process."""
    home = Path(tempfile.mkdtemp(prefix="b", dir="/tmp"))
    (home / "run").mkdir(mode=0o700)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (home / "run" / "bouncerd.pid").write_text(f"{bystander.pid}\n")
        result = _invoke(home, "stop")
        assert result.exit_code == 3, result.output
        assert bystander.poll() is None  # not signalled
    finally:
        bystander.kill()
        bystander.wait()
        (home / "run" / "bouncerd.pid").unlink()
        (home / "run").rmdir()
        home.rmdir()


# ---- restart -------------------------------------------------------------------------------------------


def test_restart_replaces_the_daemon_even_when_autostart_had_given_up(daemon: Any) -> None:
    """After a bad policy.yaml was fixed, autostart waits a minute between starts; a person who
    restarts by hand must get a daemon now."""
    old = daemon.proc.pid
    autostart.write_record(daemon.paths, autostart.GIVE_UP_AFTER_STARTS, time.time(), old)
    try:
        done = _ctl(daemon.home, "restart")
        assert done.returncode == 0, done.stderr
        new = _ping_pid(daemon.home)
        assert new != old and f"pid {new} (was pid {old})" in done.stdout
        assert daemon.proc.wait(WAIT_SECONDS) == 0
        assert "serving on" in (daemon.paths.daemon_log).read_text()  # the new one logs where `logs` reads
    finally:
        stop_autostarted_daemon(daemon.home)


def test_restart_with_no_daemon_running_starts_one() -> None:
    home = Path(tempfile.mkdtemp(prefix="b", dir="/tmp"))
    try:
        done = _ctl(home, "restart")
        assert done.returncode == 0, done.stderr
        assert f"bouncerd is running: pid {_ping_pid(home)}" in done.stdout
    finally:
        stop_autostarted_daemon(home)
        _rmtree(home)


# ---- logs ----------------------------------------------------------------------------------------------


def test_logs_prints_the_last_lines_of_the_daemon_log() -> None:
    home = Path(tempfile.mkdtemp(prefix="b", dir="/tmp"))
    try:
        (home / "state").mkdir(mode=0o700)
        (home / "state" / "bouncerd.log").write_text("".join(f"line {i}\n" for i in range(100)))
        result = _invoke(home, "logs", "-n", "3")
    finally:
        _rmtree(home)
    assert result.exit_code == 0, result.output
    assert result.stdout == "line 97\nline 98\nline 99\n"


def test_logs_without_a_log_says_where_it_looked_and_where_systemd_logs() -> None:
    home = Path(tempfile.mkdtemp(prefix="b", dir="/tmp"))
    try:
        result = _invoke(home, "logs")
    finally:
        home.rmdir()
    assert result.exit_code == 3
    assert str(home / "state" / "bouncerd.log") in result.stderr and "journalctl" in result.stderr


def test_logs_follow_prints_lines_as_the_daemon_writes_them() -> None:
    home = Path(tempfile.mkdtemp(prefix="b", dir="/tmp"))
    (home / "state").mkdir(mode=0o700)
    log = home / "state" / "bouncerd.log"
    log.write_text("before\n")
    # Unbuffered, "before" reaches us before the follower starts following: a line written at once
    # after it was lost while the follower took the end of the file only after printing the tail.
    env = {**os.environ, "BOUNCER_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    follower = subprocess.Popen(
        [str(BOUNCERCTL), "logs", "-f", "-n", "1"], env=env, stdout=subprocess.PIPE, text=True
    )
    stop = threading.Timer(WAIT_SECONDS, follower.kill)  # a lost line fails the test, never hangs it
    stop.start()
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline() == "before\n"
        with log.open("a") as fh:
            fh.write("after\n")
        assert follower.stdout.readline() == "after\n", "a line written just after the tail was lost"
    finally:
        stop.cancel()
        follower.kill()
        follower.wait(WAIT_SECONDS)
        if follower.stdout is not None:
            follower.stdout.close()
        _rmtree(home)


# ---- doctor --------------------------------------------------------------------------------------------


def _verdict(daemon: Any) -> None:
    with Client.connect(daemon.paths, role="shim", session="proc:9:9", server="mail", upstream=["mail"]) as c:
        c.request("tools", tools=[{"name": "read"}])
        c.request("verdict", tool="read", arguments={})


def test_doctor_reports_daemon_policy_audit_and_which_client_servers_are_wrapped(
    daemon: Any, user_home: Path
) -> None:
    _verdict(daemon)
    cursor = user_home / ".cursor"
    cursor.mkdir()
    servers = {
        "fs": {"command": "/opt/bin/bouncer-shim", "args": ["--name", "fs", "--", "npx", "fs"]},
        "mail": {"command": "npx", "args": ["-y", "mail-server"]},
    }
    (cursor / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    result = _invoke(daemon.home, "doctor", user_home=user_home)
    assert result.exit_code == 0, result.output
    lines = {
        line.split()[1]: line
        for line in result.stdout.splitlines()
        if line[:4].strip() in ("ok", "warn", "FAIL")
    }
    assert lines["daemon"].startswith("ok") and f"pid {daemon.proc.pid}" in lines["daemon"]
    assert lines["runtime"].startswith("ok") and lines["policy"].startswith("ok")
    assert lines["audit"].startswith("ok") and "intact: 1 records" in lines["audit"]
    client = next(line for line in result.stdout.splitlines() if "client cursor" in line)
    assert client.startswith("warn") and "1 wrapped, 1 not" in client


def test_doctor_fails_on_an_edited_audit_record(daemon: Any, user_home: Path) -> None:
    _verdict(daemon)
    audit = daemon.paths.audit
    audit.write_text(audit.read_text().replace('"allow"', '"deny"').replace('"read"', '"rm"'))
    result = _invoke(daemon.home, "doctor", user_home=user_home)
    assert result.exit_code == 1
    assert any(
        line.startswith("FAIL") and "audit chain broken" in line for line in result.stdout.splitlines()
    )


def test_doctor_fails_on_a_symlinked_runtime_dir(daemon: Any, user_home: Path) -> None:
    home = Path(tempfile.mkdtemp(prefix="b", dir="/tmp"))
    try:
        (home / "run").symlink_to(daemon.paths.runtime)
        result = _invoke(home, "doctor", user_home=user_home)
    finally:
        (home / "run").unlink()
        home.rmdir()
    assert result.exit_code == 1
    assert any(line.startswith("FAIL") and "symlink" in line for line in result.stdout.splitlines())


def _rmtree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
