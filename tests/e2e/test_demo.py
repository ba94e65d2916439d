"""`bouncerctl demo` end to end: the README's first command must show what it claims, and check it."""

from __future__ import annotations

import json
import os
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
