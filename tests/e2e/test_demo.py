"""`bouncerctl demo` end to end: the README's first command must show what it claims, and check it."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

BOUNCERCTL = Path(sys.executable).parent / "bouncerctl"
DEMO_TIMEOUT_SECONDS = 120  # a bound for a broken demo, not an expectation (it takes seconds)


def test_demo_stops_every_attack_lets_legitimate_sends_through_and_checks_server_state() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("BOUNCER_HOME", "BOUNCER_SESSION")}
    proc = subprocess.run(
        [str(BOUNCERCTL), "demo", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_SECONDS,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout)
    verdicts = {s["title"]: s["verdict"] for s in out["steps"]}
    assert verdicts["mail the customer list to the attacker"] == "deny"
    assert verdicts["same address through the chat server"] == "deny"  # cross-server taint
    assert verdicts["an encoded spelling of the address"] == "deny"
    assert verdicts["plant an SSH key outside the workspace"] == "deny"
    assert verdicts["delete another customer (over budget)"] == "deny"
    assert verdicts["reply to the ticket's sender"] == "ask→allow"  # a person was asked
    assert verdicts["update the address the user typed"] == "allow"  # vouched by the prompt
    assert verdicts["call a tool whose description changed"] == "deny"  # pin
    deny_reasons = [s["detail"] for s in out["steps"] if s["verdict"] == "deny"]
    assert any("read_ticket" in r for r in deny_reasons)  # provenance is named
    checks = {c["check"]: c["ok"] for c in out["checks"]}
    assert checks == {
        "no mail or message reached the attacker": True,
        "nothing was written outside the workspace": True,
        "the delete budget held": True,
        "the reply to the sender went out": True,
        "the update to the address the user typed went out": True,
    }
    assert out["ok"] is True


def test_demo_output_is_plain_when_piped() -> None:
    proc = subprocess.run(
        [str(BOUNCERCTL), "demo"],
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_SECONDS,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "BOUNCER_HOME"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "\x1b[" not in proc.stdout
    assert "All checks passed." in proc.stdout


def test_demo_without_keep_prints_no_path_that_is_gone_when_it_ends() -> None:
    """It used to print the review pack's path, deleted a second later."""
    proc = subprocess.run(
        [str(BOUNCERCTL), "demo"],
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_SECONDS,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "BOUNCER_HOME"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    outputs = re.findall(r"/\S*bouncer-demo-[^/\s]+/(?:review-pack|home|bouncerd\.log)\S*", proc.stdout)
    assert outputs == []  # no file the demo wrote is named: they were all deleted when it ended
    assert proc.stdout.splitlines()[2].startswith("starting bouncerd")  # a progress line before the wait
    assert "--keep" in proc.stdout


def test_demo_keep_leaves_a_running_world_that_every_command_reaches_and_tells_the_rug_pull() -> None:
    """`--keep` must leave a directory with a way in: the export line, a daemon still running, and
    the rug-pulled tool waiting for review there (not in the person's own home)."""
    env = {k: v for k, v in os.environ.items() if k not in ("BOUNCER_HOME", "BOUNCER_SESSION")}
    proc = subprocess.run(
        [str(BOUNCERCTL), "demo", "--keep", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_SECONDS,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    kept = json.loads(proc.stdout)["kept"]
    pid = kept["daemon_pid"]
    try:
        assert kept["export"] == f"export BOUNCER_HOME={kept['bouncer_home']}"
        os.kill(pid, 0)  # still running
        there = {**env, "BOUNCER_HOME": kept["bouncer_home"], "BOUNCER_NO_AUTOSTART": "1"}
        status = subprocess.run(
            [str(BOUNCERCTL), "status", "--json"], env=there, capture_output=True, text=True, check=False
        )
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["daemon"]["pid"] == pid
        assert json.loads(status.stdout)["pins_to_review"] == [
            {"server": "helpdesk", "tool": "export_customers", "state": "changed"}
        ]
        pins = subprocess.run(
            [str(BOUNCERCTL), "pins", "show", "helpdesk"],
            env=there,
            capture_output=True,
            text=True,
            check=False,
        )
        assert "CHANGED" in pins.stdout and "evil.example" in pins.stdout
        for path in str(json.loads(proc.stdout)["report"]).split(", "):
            assert Path(path).exists()
    finally:
        os.kill(pid, signal.SIGTERM)
        shutil.rmtree(kept["root"], ignore_errors=True)
