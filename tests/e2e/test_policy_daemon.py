"""Policy at the daemon: a bad file at start, a bad reload, a bad shim --policy. Never a silent allow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harness import audit_records

from bouncerd.client import Client
from bouncerd.errors import DaemonRequestError

BOUNCERD = Path(sys.executable).parent / "bouncerd"
BAD = 'tools:\n  send_email:\n    max_calls: "1"\n'


def test_daemon_refuses_to_start_on_a_bad_policy_naming_file_line_and_key(tmp_path_factory: Any) -> None:
    """A typo in policy.yaml must stop the daemon, not load a policy with the rule silently dropped."""
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="b", dir="/tmp"))
    (home / "config").mkdir(mode=0o700)
    (home / "config" / "policy.yaml").write_text(BAD)
    env = {**os.environ, "BOUNCER_HOME": str(home)}
    proc = subprocess.run(
        [str(BOUNCERD), "--foreground"], env=env, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 1
    assert "policy.yaml:3" in proc.stderr and "max_calls" in proc.stderr
    assert not (home / "run" / "bouncerd.sock").exists()


def test_bad_reload_keeps_old_policy_and_status_says_so(daemon: Any) -> None:
    daemon.paths.config.mkdir(parents=True, exist_ok=True)
    daemon.paths.policy.write_text(BAD)
    with Client.connect(daemon.paths.socket, role="ctl") as c:
        reply = c.request("reload")
        assert reply["error"] and "max_calls" in reply["error"]
        status = c.request("status")
    assert status["policy"]["state"] == "reload failed"
    assert "max_calls" in status["policy"]["reload_error"]
    lines = daemon.paths.audit.read_text().splitlines()
    assert any('"policy.reload_failed"' in line for line in lines)


def _shim_hello_refusal(daemon: Any, policy_file: Path) -> str:
    """Say hello as a shim with `policy_file` as its --policy; the daemon must refuse it: the reason."""
    with pytest.raises(DaemonRequestError) as refused:
        Client.connect(
            daemon.paths.socket,
            role="shim",
            session="s",
            server="gmail",
            upstream=["x"],
            policy_path=str(policy_file),
        )
    return str(refused.value)


def test_shim_hello_with_bad_policy_is_refused_with_the_reason(daemon: Any, tmp_path: Path) -> None:
    bad = tmp_path / "shim-policy.yaml"
    bad.write_text("tools:\n  send_email:\n    sink_parms: [to]\n")
    reason = _shim_hello_refusal(daemon, bad)
    assert "sink_parms" in reason and "shim-policy.yaml:3" in reason


def test_shim_policy_with_settings_is_refused_not_silently_ignored(daemon: Any, tmp_path: Path) -> None:
    """A per-server file that seemed to change taint_scope, and did not, would mislead its author."""
    shim_file = tmp_path / "shim-policy.yaml"
    shim_file.write_text("tools:\n  send_email:\n    exfiltrating: true\non_tainted_identity: deny\n")
    reason = _shim_hello_refusal(daemon, shim_file)
    assert "shim-policy.yaml:4" in reason and "on_tainted_identity" in reason


def test_schema_invalid_call_is_denied_and_audited(daemon: Any) -> None:
    """The reference 0.1.4 refused a call with non-object arguments without an audit line."""
    with Client.connect(daemon.paths.socket, role="shim", session="s", server="mail", upstream=["m"]) as c:
        c.request("tools", tools=[{"name": "send_email", "inputSchema": {"type": "object"}}])
        reply = c.request("verdict", request_id=9, tool="send_email", arguments={}, invalid="not an object")
    assert reply["verdict"] == "deny" and reply["rule"] == "call.invalid_arguments"
    lines = [
        line for line in daemon.paths.audit.read_text().splitlines() if '"call.invalid_arguments"' in line
    ]
    assert len(lines) == 1 and '"request_id":9' in lines[0]


GOOD_BUDGET = "tools:\n  send_email:\n    max_calls: 0\n"
# Issue 15 item 2: nested 10,000 deep, this once raised RecursionError out of the reload, and status
# went on saying "loaded" with no failure note.
DEEP = "tools:\n  send_email:\n    arg_patterns: " + "[" * 10_000 + "]" * 10_000 + "\n"


def _send(c: Client) -> dict[str, Any]:
    return c.request("verdict", request_id=1, tool="send_email", arguments={"to": "a@example.com"})


def test_status_after_a_failed_reload_names_file_line_reason_and_when_and_the_last_good_policy_serves(
    daemon: Any,
) -> None:
    daemon.paths.config.mkdir(parents=True, exist_ok=True)
    daemon.paths.policy.write_text(GOOD_BUDGET)
    with Client.connect(daemon.paths.socket, role="shim", session="s", server="mail", upstream=["m"]) as c:
        c.request("tools", tools=[{"name": "send_email"}])
        c.request("pins_accept", server="mail")
        assert c.request("reload")["error"] is None
        loaded_at = c.request("status")["policy"]["loaded_at"]
        for text, line in ((DEEP, 3), (BAD, 3)):
            daemon.paths.policy.write_text(text)
            assert c.request("reload")["error"]
            policy = c.request("status")["policy"]
            assert policy["state"] == "reload failed", policy
            failure = policy["reload_failure"]
            assert failure["file"] == str(daemon.paths.policy) and failure["line"] == line
            assert failure["reason"] and failure["at"] >= loaded_at
            assert policy["loaded_at"] == loaded_at  # the policy in force is still the one loaded then
            assert _send(c)["rule"] == "budget.forbidden"  # and it still decides: max_calls 0
        daemon.paths.policy.write_text("tools: {}\n")
        assert c.request("reload")["error"] is None
        policy = c.request("status")["policy"]
        assert policy["state"] == "loaded" and policy["reload_failure"] is None
        assert _send(c)["rule"] != "budget.forbidden"
    reasons = [r for r in audit_records(daemon.home) if r.get("rule") == "policy.reload_failed"]
    assert len(reasons) == 2 and all("stays in force" in r["reason"] for r in reasons)
