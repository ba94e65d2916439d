"""`bouncerctl status`: what the daemon knows, as JSON and as text; exit 3 when there is no daemon."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from bouncerctl.app import main
from bouncerctl.common import NOT_RUNNING_NEXT
from click.testing import CliRunner

from bouncerd.client import Client
from bouncerd.paths import entry_env, resolve

pytestmark = pytest.mark.e2e

BOUNCERCTL = Path(sys.executable).parent / "bouncerctl"


def _ctl(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BOUNCERCTL), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def _activity(daemon: Any) -> None:
    """One client session with two servers; one of them disconnects."""
    mail = Client.connect(
        daemon.paths, role="shim", session="proc:1:2", server="mail", upstream=["npx", "-y", "mail server"]
    )
    with mail:
        mail.request("client", name="claude-code", version="2.0.1", protocol="2025-06-18")
        mail.request("tools", tools=[{"name": "read"}, {"name": "send"}, {"name": "list"}])
        mail.request("verdict", tool="read", arguments={})
        mail.request("verdict", tool="nope", arguments={})
        with Client.connect(
            daemon.paths, role="shim", session="proc:1:2", server="chat", upstream=["chat"]
        ) as chat:
            chat.request("tools", tools=[{"name": "post"}])
        status = mail.request("status")
    assert status["ok"]


def test_status_json_lists_sessions_servers_and_counts(daemon: Any) -> None:
    _activity(daemon)
    done = _ctl(daemon.env, "status", "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    info = body["daemon"]
    assert info["pid"] == daemon.proc.pid
    assert info["socket"] == str(daemon.paths.socket)
    assert info["state_dir"] == str(daemon.paths.state) and info["audit"] == str(daemon.paths.audit)
    assert info["uptime"] >= 0 and info["started"] > 0 and info["version"]
    [session] = body["sessions"]
    assert session["key"] == "proc:1:2"
    assert session["client"] == {"name": "claude-code", "version": "2.0.1", "protocol": "2025-06-18"}
    assert session["counts"] == {"allow": 1, "deny": 1, "ask": 0}
    assert session["client_pid"] is None and session["started"] > 0  # no client pid in this hello
    servers = {s["name"]: s for s in session["servers"]}
    assert servers["mail"]["upstream"] == ["npx", "-y", "mail server"]
    assert servers["mail"]["tools"] == 3 and servers["chat"]["tools"] == 1
    assert not servers["chat"]["connected"]  # its shim is gone; the session still lists it
    assert isinstance(servers["mail"]["shim_pid"], int)


def test_status_text_names_live_sessions_by_client_and_pid_and_counts_ended_ones(daemon: Any) -> None:
    """Dead sessions piling up as `gone` rows buried the live one; a session key is not a name."""
    _activity(daemon)  # a session whose shims have all gone: ended
    mail = Client.connect(
        daemon.paths,
        role="shim",
        session="proc:4242:7",
        server="mail",
        upstream=["npx", "-y", "mail server"],
        client_pid=4242,
    )
    with mail:
        mail.request("client", name="claude-code", version="2.0.1", protocol="2025-06-18")
        mail.request("tools", tools=[{"name": "read"}, {"name": "send"}, {"name": "list"}])
        mail.request("verdict", tool="read", arguments={})
        with Client.connect(
            daemon.paths, role="shim", session="proc:4242:7", server="chat", upstream=["chat"]
        ) as chat:
            chat.request("tools", tools=[{"name": "post"}])
        done = _ctl(daemon.env, "status")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    first = out.splitlines()[0]
    assert first.startswith("● bouncerd ") and f"pid {daemon.proc.pid}" in first
    assert "1 session (1 ended)" in first and "policy loaded" in first
    assert str(daemon.paths.socket) in out
    assert "claude-code 2.0.1, pid 4242 (protocol 2025-06-18)" in out
    assert "allow 1  deny 0  ask 0  (session proc:4242:7)" in out
    assert "proc:1:2" not in out  # the ended session is counted, not listed
    assert "1 ended session (no server connected; --json lists them)" in out
    rows = [line for line in out.splitlines() if line.startswith("  ") and "session" not in line]
    header, *servers = rows
    assert header.split() == ["SERVER", "STATE", "TOOLS", "SHIM", "PID", "UPSTREAM"]
    column = header.index("UPSTREAM")  # every row's command starts under its heading
    assert sorted(row[column:] for row in servers) == ["chat", "npx -y 'mail server'"]
    assert [row.split()[1] for row in servers] == ["connected", "gone"]


def test_status_without_a_daemon_says_so_and_what_to_do_next_and_exits_3() -> None:
    home = Path(tempfile.mkdtemp(prefix="b", dir="/tmp"))
    env = {**os.environ, "BOUNCER_HOME": str(home)}
    done = _ctl(env, "status")
    home.rmdir()  # still empty: asking for status creates nothing
    assert done.returncode == 3
    assert done.stdout == ""
    first, *rest = done.stderr.splitlines()
    assert first == f"bouncerd is not running (no socket at {home / 'run' / 'bouncerd.sock'})"
    assert rest == [NOT_RUNNING_NEXT]  # and what a newcomer does next


def test_status_reads_bouncer_home_at_call_time(daemon: Any) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["status", "--json"], env={"BOUNCER_HOME": str(daemon.home)})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["daemon"]["pid"] == daemon.proc.pid
    elsewhere = tempfile.mkdtemp(prefix="b", dir="/tmp")
    result = runner.invoke(main, ["status"], env={"BOUNCER_HOME": elsewhere})
    os.rmdir(elsewhere)
    assert result.exit_code == 3 and "is not running" in result.stderr


def test_ctl_refuses_a_symlinked_runtime_dir_instead_of_following_it(daemon: Any) -> None:
    """A runtime dir that is a symlink to a directory where some daemon answers: bouncerd and the shim
    refuse it, and so must bouncerctl (it carries approvals and reloads to whoever listens there)."""
    home = Path(tempfile.mkdtemp(prefix="b", dir="/tmp"))
    try:
        (home / "run").symlink_to(daemon.paths.runtime)
        done = _ctl({**os.environ, "BOUNCER_HOME": str(home)}, "status", "--json")
    finally:
        (home / "run").unlink()
        home.rmdir()
    assert done.returncode == 3
    assert done.stdout == ""
    assert "is a symlink" in done.stderr and "not connecting" in done.stderr


ECHO = Path(__file__).resolve().parent / "upstreams" / "echo.py"
# Bounds a shim's answer or a daemon's exit; a working relay answers in milliseconds.
WAIT_SECONDS = 30.0


def _shim_session(env: dict[str, str], session: str) -> subprocess.Popen[bytes]:
    """A shim in front of the echo server, initialized and listed, kept open."""
    shim = subprocess.Popen(
        [str(BOUNCERCTL.parent / "bouncer-shim"), "--name", "echo", "--", sys.executable, str(ECHO)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**env, "BOUNCER_SESSION": session},
    )
    assert shim.stdin is not None and shim.stdout is not None
    init = {
        "protocolVersion": "2025-11-25",
        "clientInfo": {"name": session, "version": "1"},
        "capabilities": {},
    }
    for rid, method, params in ((1, "initialize", init), (2, "tools/list", {})):
        shim.stdin.write(
            json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode()
        )
        shim.stdin.write(b"\n")
        shim.stdin.flush()
        assert json.loads(shim.stdout.readline())["id"] == rid
    return shim


def test_status_lists_the_sessions_of_a_client_that_strips_the_environment() -> None:
    """Codex starts servers with only HOME and PATH. With what `init` writes into the entry
    (`paths.entry_env`), its shim reaches the daemon of the person's shell, and `bouncerctl status`
    there lists both clients' sessions, not only the shell's."""
    root = Path(tempfile.mkdtemp(prefix="b", dir="/tmp"))
    for name in ("run", "state", "config", "home"):
        (root / name).mkdir(mode=0o700)
    shell = {
        "PATH": os.environ["PATH"],
        "HOME": str(root / "home"),
        "XDG_RUNTIME_DIR": str(root / "run"),
        "XDG_STATE_HOME": str(root / "state"),
        "XDG_CONFIG_HOME": str(root / "config"),
        "BOUNCER_NO_NOTIFY": "1",
    }
    carried = entry_env(shell)
    stripped = {"PATH": shell["PATH"], "HOME": shell["HOME"], **carried}
    assert resolve(stripped) == resolve(shell)
    shims: list[subprocess.Popen[bytes]] = []
    try:
        shims.append(_shim_session(shell, "proc:claude"))  # autostarts the daemon
        shims.append(_shim_session(stripped, "proc:codex"))
        done = _ctl(shell, "status", "--json")
    finally:
        for shim in shims:
            shim.kill()
            shim.wait(WAIT_SECONDS)
            for pipe in (shim.stdin, shim.stdout):
                if pipe is not None:
                    pipe.close()
        pidfile = resolve(shell).pidfile
        if pidfile.exists():
            os.kill(int(pidfile.read_text()), signal.SIGTERM)
            deadline = time.monotonic() + WAIT_SECONDS
            while pidfile.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        shutil.rmtree(root, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    assert {s["key"] for s in json.loads(done.stdout)["sessions"]} == {"proc:claude", "proc:codex"}
    assert set(carried) == {"XDG_RUNTIME_DIR", "XDG_STATE_HOME", "XDG_CONFIG_HOME"}


def test_status_text_after_a_failed_reload_says_the_earlier_policy_serves_and_when_it_failed(
    daemon: Any,
) -> None:
    """After a failed reload, status once still read [loaded] with no failure note."""
    daemon.paths.config.mkdir(parents=True, exist_ok=True)
    daemon.paths.policy.write_text('tools:\n  send_email:\n    max_calls: "1"\n')
    with Client.connect(daemon.paths, role="ctl") as ctl:
        assert ctl.request("reload")["error"]
    done = _ctl(daemon.env, "status")
    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stdout.splitlines() if line.startswith("policy")]
    assert "[loaded]" not in line and "RELOAD FAILED, the earlier policy is still in force" in line
    assert "policy.yaml:3: tools.send_email.max_calls" in line and " UTC)" in line
