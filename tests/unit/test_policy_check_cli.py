"""`bouncerctl policy check`: every error at once, one verdict line, the policy in force by default.

Run through click's runner with BOUNCER_HOME set to a temporary directory (no daemon there, so the
command falls back to this environment's policy.yaml). Each test names the mistake it stops.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from bouncerctl.app import main
from click.testing import CliRunner

from bouncerd.core.policy import load_policy
from bouncerd.errors import PolicyError

FOUR_MISTAKES = """\
taint_scop: user
tools:
  send_email:
    exfiltrating: "yes"
  delete_file:
    max_calls: -1
  fine:
    max_calls: 2
servers:
  gmail:
    tool: {}
"""

GOOD = """\
approval_timeout: 60
tools:
  send_email:
    exfiltrating: true
    sink_params: [to, cc, bcc]
"""


def _check(tmp_path: Path, *args: str) -> Any:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    result: Any = CliRunner().invoke(
        main, ["policy", "check", *args], env={"BOUNCER_HOME": str(home), "BOUNCER_NO_AUTOSTART": "1"}
    )
    return result


def test_every_error_is_printed_not_only_the_first_then_one_verdict(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(FOUR_MISTAKES)
    result = _check(tmp_path, str(bad))
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert [ln.split(":")[2] for ln in lines if ln.startswith("error:")] == ["1", "4", "6", "11"]
    assert 'taint_scop: unknown key (did you mean "taint_scope"?)' in result.output
    assert "servers.gmail.tool: unknown key" in result.output
    assert lines[-1] == "Error: 4 errors; nothing was loaded"


@pytest.mark.parametrize(
    "text",
    [
        FOUR_MISTAKES,
        GOOD,
        "tools:\n  a: {max_calls: 1}\n  a: {max_calls: 2}\n",  # a duplicate stops the whole mapping
        "tools: [send_email]\n",
        "servers:\n  s:\n    tools:\n      t: {exfiltrating: maybe}\n      u: {deletion: true}\n",
        "",
    ],
)
def test_collecting_errors_accepts_exactly_what_the_daemon_accepts(text: str) -> None:
    """The collecting loader must not turn a file the daemon refuses into one it passes (or the
    reverse), and its first error is the daemon's error."""
    errors: list[PolicyError] = []
    collected = load_policy(text, "p.yaml", errors=errors)
    try:
        strict = load_policy(text, "p.yaml")
    except PolicyError as exc:
        assert errors and str(errors[0]) == str(exc)
    else:
        assert errors == [] and collected == strict


def test_success_is_short_and_says_ok_with_details_behind_verbose(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    short = _check(tmp_path, str(good))
    assert short.exit_code == 0, short.output
    assert short.output.splitlines() == [
        "OK: 1 file(s), 1 tool entry, 1 setting(s); --verbose shows the effective rule of each"
    ]
    verbose = _check(tmp_path, "--verbose", str(good))
    assert "sink_params: to, cc, bcc" in verbose.output and verbose.output.splitlines()[-1].startswith("OK:")


def test_note_never_contradicts_the_sinks_the_policy_declares(tmp_path: Path) -> None:
    """It said `sink_params: to, cc, bcc` and then "no parameter looks like a destination"."""
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    out = _check(tmp_path, "--verbose", str(good)).output
    notes = [ln for ln in out.splitlines() if "no parameter looks like a destination" in ln]
    assert notes and all("the fallback's guess; the sink gate is set by" in ln for ln in notes)


def test_without_a_file_it_checks_the_policy_in_force_instead_of_a_usage_error(tmp_path: Path) -> None:
    absent = _check(tmp_path)
    assert absent.exit_code == 0 and absent.output.startswith("OK: ")
    assert "built-in packs and defaults are in force" in absent.output
    policy = tmp_path / "home" / "config" / "policy.yaml"
    policy.parent.mkdir(parents=True)
    policy.write_text(FOUR_MISTAKES)
    bad = _check(tmp_path)
    assert bad.exit_code == 1
    assert f"checking {policy}" in bad.output and "4 errors" in bad.output
