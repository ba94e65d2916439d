"""`bouncerctl status`: what the daemon knows, as JSON and as text; exit 3 when there is no daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from bouncerctl.app import main
from click.testing import CliRunner

from bouncerd.client import Client

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
    servers = {s["name"]: s for s in session["servers"]}
    assert servers["mail"]["upstream"] == ["npx", "-y", "mail server"]
    assert servers["mail"]["tools"] == 3 and servers["chat"]["tools"] == 1
    assert not servers["chat"]["connected"]  # its shim is gone; the session still lists it
    assert isinstance(servers["mail"]["shim_pid"], int)


def test_status_text_shows_the_same_aligned(daemon: Any) -> None:
    _activity(daemon)
    done = _ctl(daemon.env, "status")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"pid {daemon.proc.pid}" in out and str(daemon.paths.socket) in out
    assert "claude-code 2.0.1 (protocol 2025-06-18)" in out
    assert "allow 1  deny 1  ask 0" in out
    rows = [line for line in out.splitlines() if line.startswith("  ")]
    header, *servers = rows
    assert header.split() == ["SERVER", "STATE", "TOOLS", "SHIM", "PID", "UPSTREAM"]
    column = header.index("UPSTREAM")  # every row's command starts under its heading
    assert sorted(row[column:] for row in servers) == ["chat", "npx -y 'mail server'"]


def test_status_without_a_daemon_says_so_in_one_line_and_exits_3() -> None:
    home = Path(tempfile.mkdtemp(prefix="b", dir="/tmp"))
    env = {**os.environ, "BOUNCER_HOME": str(home)}
    done = _ctl(env, "status")
    home.rmdir()  # still empty: asking for status creates nothing
    assert done.returncode == 3
    assert done.stdout == ""
    assert done.stderr == f"bouncerd is not running (no socket at {home / 'run' / 'bouncerd.sock'})\n"


def test_status_reads_bouncer_home_at_call_time(daemon: Any) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["status", "--json"], env={"BOUNCER_HOME": str(daemon.home)})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["daemon"]["pid"] == daemon.proc.pid
    elsewhere = tempfile.mkdtemp(prefix="b", dir="/tmp")
    result = runner.invoke(main, ["status"], env={"BOUNCER_HOME": elsewhere})
    os.rmdir(elsewhere)
    assert result.exit_code == 3 and "is not running" in result.stderr


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
