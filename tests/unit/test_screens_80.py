"""The first screens a newcomer sees, at 80 columns and at 200: nothing cut in the middle of a word.

The commands run through click's runner with COLUMNS set (as a terminal of that width sets it) in a
temporary HOME and BOUNCER_HOME with no daemon: `doctor`, `status` (not running: it must say what to do
next), `policy check` on a file with mistakes, `policy init` then `policy check`, and `init --dry-run`'s
diff. The screens that need a daemon's reply are built by the same functions the commands call, from
replies of the daemon's shape: the `approve` screen, the `pins show` list and a `tail` line of an ask.

"Nothing cut" is checked the way a reader would notice: every line fits the width, and each word of
what was said (a key such as ``approval_timeout``, a package name, a command) is whole on one line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from bouncerctl import approve, pins, tail, term
from bouncerctl.app import main
from click.testing import CliRunner, Result

WIDTHS = (80, 200)
PACKAGE = "@modelcontextprotocol/server-filesystem"
MISTAKES = "approval_timeout: soon\ntools:\n  send_email:\n    exfiltrating: maybe\n"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("BOUNCER_HOME", str(tmp_path / "b"))
    monkeypatch.setenv("BOUNCER_NO_AUTOSTART", "1")
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    (tmp_path / "home").mkdir()
    monkeypatch.chdir(tmp_path / "home")
    yield tmp_path


def run(width: int, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env={"COLUMNS": str(width), "NO_COLOR": "1"})


def assert_fits_with_words_whole(text: str, width: int, words: Iterable[str]) -> None:
    lines = term.plain(text).splitlines()
    too_wide = [line for line in lines if term.cells(line) > width]
    assert not too_wide, f"wider than {width}: {too_wide}"
    for word in words:
        assert any(word in line for line in lines), f"{word!r} is not whole on any line:\n{text}"


@pytest.mark.parametrize("width", WIDTHS)
def test_doctor_wraps_its_details_at_spaces(home: Path, width: int) -> None:
    """Stops: doctor's long details left to the terminal, which cut words in two at the edge."""
    result = run(width, "doctor")
    assert_fits_with_words_whole(
        result.stdout, width, ["`bouncerctl", "restart`", "(`bouncerctl", "FILE`)", "(defaults);"]
    )
    clients = "no known client config found (`bouncerctl init --config FILE`)"
    on_one_line = any(clients in line for line in result.stdout.splitlines())
    assert on_one_line == (width == 200)  # wrapped at 80 (at a space, above), whole where it fits


@pytest.mark.parametrize("width", WIDTHS)
def test_status_without_a_daemon_says_what_to_do_next(home: Path, width: int) -> None:
    """Stops: "bouncerd is not running" (exit 3) and nothing else, right after init."""
    result = run(width, "status")
    assert result.exit_code == 3
    assert_fits_with_words_whole(result.stderr, width, ["`bouncerctl", "restart`.", "doctor`", "setup."])
    assert "restart the client" in " ".join(result.stderr.split())


@pytest.mark.parametrize("width", WIDTHS)
def test_policy_check_errors_never_cut_a_key_in_two(home: Path, width: int) -> None:
    """Stops: `"a` / `pproval_timeout"` at 80 columns."""
    bad = home / "bad.yaml"
    bad.write_text(MISTAKES)
    result = run(width, "policy", "check", str(bad))
    assert result.exit_code == 1
    assert_fits_with_words_whole(
        result.stdout, width, ["approval_timeout:", "tools.send_email.exfiltrating:"]
    )
    assert [line for line in result.stdout.splitlines() if line.startswith("error:")] != []
    assert " ".join(result.stdout.split()).count("error: ") == 2  # one per entry, each whole


THREE_MISTAKES = "approval_timeout: soon\ntools:\n  send_email:\n    sink: maybe\n    bogus: 1\n"


@pytest.mark.parametrize("width", WIDTHS)
def test_policy_check_reports_every_mistake_of_one_entry(home: Path, width: int) -> None:
    """Stops: three mistakes reported as two (one per entry: the second key of an entry never shown)."""
    bad = home / "three.yaml"
    bad.write_text(THREE_MISTAKES)
    result = run(width, "policy", "check", str(bad))
    assert result.exit_code == 1
    flat = " ".join(result.stdout.split())
    assert flat.count("error: ") == 3
    assert "tools.send_email.sink: unknown key" in flat and "tools.send_email.bogus: unknown key" in flat
    assert "3 errors; nothing was loaded" in " ".join(result.stderr.split())
    assert_fits_with_words_whole(result.stdout, width, ["tools.send_email.sink:", "tools.send_email.bogus:"])


@pytest.mark.parametrize("width", WIDTHS)
def test_policy_init_writes_a_starter_that_policy_check_accepts(home: Path, width: int) -> None:
    """Stops: install.md's `policy check ~/.config/bouncer/policy.yaml` failing on a fresh install
    (no such file, and nothing to start one from)."""
    absent = run(width, "policy", "check")
    assert absent.exit_code == 0 and "`bouncerctl policy init`" in " ".join(absent.stdout.split())
    made = run(width, "policy", "init")
    assert made.exit_code == 0, made.output
    written = home / "b" / "config" / "policy.yaml"
    assert written.read_text().startswith("# Bouncer policy")
    assert (written.stat().st_mode & 0o777) == 0o600
    checked = run(width, "policy", "check", str(written))
    assert checked.exit_code == 0, checked.output
    assert "OK: 1 file(s), 0 tool entries, 0 setting(s)" in " ".join(checked.stdout.split())
    # every commented example is itself a policy the checker accepts
    uncommented = "\n".join(
        line.replace("# ", "", 1)
        if line.startswith(("# you", "# approval", "# tools", "# servers", "#  "))
        else line
        for line in written.read_text().splitlines()
    )
    (home / "all.yaml").write_text(uncommented)
    every = run(width, "policy", "check", str(home / "all.yaml"))
    assert every.exit_code == 0, every.output
    assert "4 tool entries, 2 setting(s)" in " ".join(every.stdout.split())
    again = run(width, "policy", "init")  # never overwrites
    assert again.exit_code == 1 and "not overwritten" in again.stderr


@pytest.mark.parametrize("width", WIDTHS)
def test_init_diff_breaks_a_long_line_at_a_space(home: Path, width: int) -> None:
    """Stops: init's diff folding a JSON line in the middle of a package name."""
    config = home / "home" / "mcp.json"
    args = ["-y", PACKAGE, "/home/ana/projects/quarterly-reports"]
    entry = f'"fs": {{"command": "npx", "args": {json.dumps(args)}}}'
    config.write_text('{\n  "mcpServers": {\n    ' + entry + "\n  }\n}\n")
    shim = home / "bouncer-shim"
    shim.write_text("#!/bin/sh\n")
    shim.chmod(0o755)
    result = run(width, "init", "--dry-run", "--config", str(config), "--shim", str(shim))
    assert result.exit_code == 0, result.output
    assert_fits_with_words_whole(result.stdout, width, [f'"{PACKAGE}"', '"--name"'])
    if width == 200:
        assert f'"args": ["--name", "fs", "--", "npx", "-y", "{PACKAGE}"' in result.stdout


CODE = {
    "code": "K7Q-4XM",
    "session": "proc:4242:1733262000",
    "server": "mail",
    "tool": "send_email",
    "parameter": "to",
    "destination": "accountant-quarterly-reports@partner-firm.example",
    "destinations": [],
    "expires": time.time() + 600,
    "question": (
        "send_email would send to accountant-quarterly-reports@partner-firm.example, an address "
        "first seen in the output of read_inbox (untrusted) and never in anything you typed. "
        "Allow this one call?"
    ),
}


@pytest.mark.parametrize("width", WIDTHS)
def test_approve_screen_wraps_the_question_at_spaces(width: int) -> None:
    """Stops: the approve screen's question cut mid-word at the terminal's edge."""
    screen = approve.render(dict(CODE), width=width)
    assert_fits_with_words_whole(screen, width, [*str(CODE["question"]).split(), "K7Q-4XM", "send_email"])
    if width == 200:
        assert str(CODE["question"]) in screen


@pytest.mark.parametrize("width", WIDTHS)
def test_pins_show_header_keeps_the_package_name_whole(width: int) -> None:
    """Stops: the `pins show` header breaking the server's command inside its package name."""
    upstream = ["npx", "-y", PACKAGE, "/home/ana/projects/quarterly-reports", "--read-only"]
    tools = [{"name": "read_file", "state": "ok"}, {"name": "write_file", "state": "new", "live": {}}]
    screen = pins.render([{"name": "filesystem", "upstream": upstream, "tools": tools}], width)
    assert_fits_with_words_whole(screen, width, [PACKAGE, "filesystem", "write_file", "UNLISTED"])
    if width == 200:
        assert f"filesystem  ({' '.join(upstream)})" in screen


@pytest.mark.parametrize("width", WIDTHS)
def test_tail_shows_an_asks_code(width: int) -> None:
    """Stops: `tail` showing an ask without the code that approves it."""
    record = {
        "ts": "2026-12-03T10:00:00Z",
        "server": "mail",
        "tool": "send_email",
        "verdict": "ask",
        "rule": "sink.unproven_destination",
        "reason": "send_email would send to an address the session has not seen in anything you typed",
        "code": "K7Q-4XM",
    }
    line = term.plain(tail.format_record(record, width=width))
    assert_fits_with_words_whole(line, width, ["code: K7Q-4XM", "`bouncerctl approve K7Q-4XM`"])
    piped = term.plain(tail.format_record(record, width=None))
    assert "code: K7Q-4XM" in piped and "\n" not in piped
    answered = term.plain(tail.format_record({**record, "verdict": "allow", "code": None}, width=width))
    assert "code:" not in answered  # the benign twin: no code, nothing offered


@pytest.mark.parametrize("width", WIDTHS)
def test_status_explains_an_ended_session_a_health_check_leaves(width: int) -> None:
    """Stops: "1 ended session (no server connected)" right after `claude mcp list` showed the servers
    connected, with nothing to say why (its health check starts them and leaves)."""
    from bouncerctl import status

    ended = {
        "key": "proc:42:1",
        "client": {"name": "claude-code"},
        "servers": [{"name": "fs", "connected": False}],
    }
    body = {
        "daemon": {
            "pid": 7,
            "socket": "/run/user/1000/bouncer/bouncerd.sock",
            "state_dir": "/s",
            "audit": "/a",
        },
        "policy": None,
        "pins_to_review": [],
        "pending": [],
        "sessions": [ended],
        "unprotected": [],
    }
    screen = term.plain(status.render(body, width))
    assert_fits_with_words_whole(screen, width, ["`claude", "list`", "(no", "connected;"])
    flat = " ".join(screen.split())
    assert "1 ended session (no server connected; --json lists them)" in flat
    assert "a client that started its servers and left, as a health check like `claude mcp list` does" in flat
