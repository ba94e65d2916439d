"""The managed policy at a real daemon: it binds the user's policy.yaml at start, at reload and in a
shim's --policy; an unsafe managed file stops the daemon; status names the managed rules."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from daemons import BOUNCERD
from harness import short_tmpdir, write_policy

from bouncerd.client import Client
from bouncerd.errors import DaemonRequestError
from bouncerd.managedpolicy import MANAGED_POLICY_ENV, TEST_OWNER_ENV

MANAGED = """\
tools:
  wire_money:
    max_calls: 0
  send_email:
    exfiltrating: true
    sink_params: [to]
"""
LOOSENING = "tools:\n  wire_money:\n    max_calls: 5\n"


@pytest.fixture
def managed_file() -> Iterator[Path]:
    d = short_tmpdir("m")
    os.chmod(d, 0o755)
    f = d / "policy.yaml"
    f.write_text(MANAGED)
    os.chmod(f, 0o644)
    yield f
    shutil.rmtree(d, ignore_errors=True)


def _env(managed: Path) -> dict[str, str]:
    # Tests cannot be root: the expected owner is this test's own uid (production: root only).
    return {MANAGED_POLICY_ENV: str(managed), TEST_OWNER_ENV: str(os.getuid())}


def _run_foreground(home: Path, managed: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BOUNCER_HOME": str(home), **_env(managed)}
    return subprocess.run(
        [str(BOUNCERD), "--foreground"], env=env, capture_output=True, text=True, timeout=30
    )


def test_daemon_refuses_to_start_when_the_user_policy_lifts_a_managed_ban(managed_file: Path) -> None:
    """An agent that edits policy.yaml to allow a tool the company forbids must not get a daemon."""
    home = short_tmpdir()
    try:
        user = write_policy(home, LOOSENING)
        proc = _run_foreground(home, managed_file)
        assert proc.returncode == 1
        assert f"{user}:2: tools.wire_money.max_calls" in proc.stderr
        assert f"{managed_file}:2: max_calls" in proc.stderr
        assert not (home / "run" / "bouncerd.sock").exists()
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_daemon_refuses_to_run_on_a_user_writable_managed_file(managed_file: Path) -> None:
    """Fail closed: a managed file anyone could edit is not silently ignored, the daemon stops."""
    os.chmod(managed_file, 0o666)
    home = short_tmpdir()
    try:
        proc = _run_foreground(home, managed_file)
        assert proc.returncode == 1
        assert str(managed_file) in proc.stderr and "group or others can write it" in proc.stderr
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _wire(c: Client) -> dict[str, Any]:
    c.request("tools", tools=[{"name": "wire_money", "inputSchema": {"type": "object"}}])
    return c.request("verdict", request_id=1, tool="wire_money", arguments={"amount": 1})


def test_reload_of_a_loosening_user_policy_fails_naming_both_files_and_the_ban_holds(
    start: Callable[..., Any], managed_file: Path
) -> None:
    daemon = start(**_env(managed_file))
    user = write_policy(daemon.home, LOOSENING)
    with Client.connect(daemon.paths.socket, role="ctl") as ctl:
        error = ctl.request("reload")["error"]
        status = ctl.request("status")
    assert error and str(user) in error and str(managed_file) in error and "max_calls" in error
    assert status["policy"]["state"] == "reload failed"
    with Client.connect(daemon.paths.socket, role="shim", session="s", server="bank", upstream=["b"]) as c:
        reply = _wire(c)
    assert reply["verdict"] == "deny" and reply["rule"] == "budget.forbidden"


def test_shim_policy_that_loosens_a_managed_rule_is_refused_at_hello(
    start: Callable[..., Any], managed_file: Path, tmp_path: Path
) -> None:
    daemon = start(**_env(managed_file))
    shim_file = tmp_path / "shim-policy.yaml"
    shim_file.write_text("tools:\n  send_email:\n    exfiltrating: false\n")
    with pytest.raises(DaemonRequestError) as refused:
        Client.connect(
            daemon.paths.socket,
            role="shim",
            session="s",
            server="mail",
            upstream=["m"],
            policy_path=str(shim_file),
        )
    assert str(shim_file) in str(refused.value) and str(managed_file) in str(refused.value)
    assert "exfiltrating" in str(refused.value)


def test_status_names_the_managed_policy_and_its_rules(start: Callable[..., Any], managed_file: Path) -> None:
    daemon = start("tools:\n  wire_money:\n    untrusted_output: true\n", **_env(managed_file))
    with Client.connect(daemon.paths.socket, role="ctl") as ctl:
        policy = ctl.request("status")["policy"]
    assert policy["managed_policy"] == str(managed_file) and policy["managed_policy_present"]
    assert "tools.wire_money.max_calls" in policy["managed_rules"]
    assert "tools.send_email.sink_params" in policy["managed_rules"]
    # and the person sees it: `bouncerctl status` names the file and the rules a user cannot loosen
    done = subprocess.run(
        [str(BOUNCERD.parent / "bouncerctl"), "status"],
        env={**os.environ, "BOUNCER_HOME": str(daemon.paths.state.parent), "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    managed = " ".join(
        line.strip() for line in done.stdout.splitlines() if "managed" in line or "wire_money" in line
    )
    assert str(managed_file) in managed and "tools.wire_money.max_calls" in managed
    assert "cannot loosen" in done.stdout
