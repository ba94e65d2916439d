"""Every `bouncerctl` command a person reads, in a real 80-column terminal: fitted, whole, coloured right.

Each command runs as a real `bouncerctl` process on the slave side of a pseudo-terminal sized 80
columns with TIOCSWINSZ (no COLUMNS in its environment: it must ask the terminal), against a real
daemon holding a live session, verdicts and an open code whose reason is long. The output is
measured in terminal cells as a terminal would (East Asian wide and full-width characters take two,
with `unicodedata.east_asian_width`, independently of bouncerctl's own measure) after removing the
colour sequences.

What these stop: a reason cut at the terminal's edge (the person cannot see why a call was refused,
or where it would have sent data), lines wider than the terminal (wrapped by the terminal mid-word,
columns torn), colour codes in a pipe or under NO_COLOR (garbage in logs and scripts), and `--json`
that says something other than the text.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import struct
import subprocess
import sys
import termios
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bouncerd.client import Client

if TYPE_CHECKING:
    from daemons import RunningDaemon

pytestmark = pytest.mark.e2e

BOUNCERCTL = Path(sys.executable).parent / "bouncerctl"
COLUMNS = 80
ROWS = 50
# Bounds one command's run in the pty; they finish in well under a second, this only stops a hang.
COMMAND_TIMEOUT_SECONDS = 30.0
# A destination long enough that no 80-column layout can hold its reason on one line, with
# full-width letters (two cells each) that a character count would measure wrong.
DESTINATION = "ATTACKER+backup-of-every-customer-record-" + "x" * 70 + "@ＥＶＩＬ.example"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
SEND = {"name": "send_email", "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}}}}


def cells(line: str) -> int:
    total = 0
    for ch in line:
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf", "Cc"):
            continue
        total += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return total


def _env(daemon: RunningDaemon, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in daemon.env.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")}
    return {**env, "TERM": "xterm-256color", **extra}


def run_in_pty(argv: list[str], env: dict[str, str], columns: int = COLUMNS) -> str:
    """What a terminal of `columns` shows when `argv` runs in it (colour sequences kept)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, columns, 0, 0))
    proc = subprocess.Popen(argv, env=env, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + COMMAND_TIMEOUT_SECONDS
    try:
        while time.monotonic() < deadline:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed its side
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        if proc.poll() is None and time.monotonic() >= deadline:
            proc.kill()
        proc.wait(timeout=COMMAND_TIMEOUT_SECONDS)
    assert proc.returncode == 0, b"".join(chunks).decode("utf-8", "replace")
    return b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def _piped(argv: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_SECONDS)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _assert_fits(text: str, what: str) -> None:
    for line in ANSI.sub("", text).splitlines():
        assert cells(line) <= COLUMNS, f"{what}: {cells(line)} cells: {line!r}"


def _whole(needle: str, text: str) -> bool:
    """`needle` appears in `text` with only line breaks and indents added (wrapping, never cutting)."""
    return "".join(needle.split()) in "".join(ANSI.sub("", text).split())


@pytest.fixture(scope="module")
def world(shared_daemon: RunningDaemon) -> Iterator[dict[str, Any]]:
    """A live session (claude-code, pid 4242) with a long-reasoned ask, an open code, a new tool: one
    for the module's tests that only run commands reading it (the others get a daemon of their own)."""
    daemon = shared_daemon
    with Client.connect(
        daemon.paths,
        role="shim",
        session="proc:4242:1",
        server="mail",
        upstream=[
            "npx",
            "-y",
            "@modelcontextprotocol/server-everything",
            "--long-option",
            "value with spaces",
        ],
        client_pid=4242,
        instance="i1",
    ) as shim:
        shim.request("client", name="claude-code", version="2.0.1", protocol="2025-06-18")
        shim.request("tools", tools=[SEND, {"name": "read_inbox"}])
        shim.request("verdict", tool="read_inbox", arguments={})
        asked = shim.request("verdict", tool="send_email", arguments={"to": DESTINATION})
        assert asked["verdict"] == "ask" and len(asked["reason"]) > 2 * COLUMNS
        shim.request("tools", tools=[SEND, {"name": "read_inbox"}, {"name": "purge_all"}])
        # the audit record's reason: the agent's, without the `bouncerctl approve` hint (the client may
        # answer the ask itself, so the log offers no code)
        records = [json.loads(line) for line in daemon.paths.audit.read_text().splitlines()]
        logged = [r["reason"] for r in records if r.get("tool") == "send_email"]
        assert len(logged) == 1 and len(logged[0]) > 2 * COLUMNS and logged[0] in asked["reason"]
        yield {"reason": logged[0], "code": asked["code"]}


COMMANDS = [
    ["status"],
    ["tail"],
    ["tail", "-n", "50"],
    ["pending"],
    ["pins", "show"],
    ["audit", "verify"],
    ["--help"],
    ["tail", "--help"],
    ["status", "--help"],
    ["pins", "--help"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_every_command_fits_80_columns_in_a_real_terminal(
    shared_daemon: RunningDaemon, world: dict[str, Any], args: list[str]
) -> None:
    """Lines wider than the terminal are wrapped by it mid-word: columns tear and text is hard to read."""
    out = run_in_pty([str(BOUNCERCTL), *args], _env(shared_daemon))
    assert out.strip()
    _assert_fits(out, " ".join(args))


def test_the_long_reason_and_destination_reach_the_terminal_whole(
    shared_daemon: RunningDaemon, world: dict[str, Any]
) -> None:
    """A reason cut with "…" hid where the data would go (tail dropped it at ~91 columns)."""
    env = _env(shared_daemon)
    tail = run_in_pty([str(BOUNCERCTL), "tail"], env)
    assert _whole(world["reason"], tail)
    assert ANSI.sub("", tail).count("…") == world["reason"].count("…")  # none added by bouncerctl
    assert _whole("destination: " + DESTINATION, tail)  # the reason shortens it; the record has it whole
    record = [line for line in ANSI.sub("", tail).splitlines() if "send_email" in line]
    assert record and "ASK" in record[0]  # the verdict is on the record's first line
    for args in (["status"], ["pending"]):
        out = run_in_pty([str(BOUNCERCTL), *args], env)
        assert _whole(DESTINATION, out), args
        assert world["code"] in out


def test_status_opens_with_one_coloured_health_line_and_names_the_session(
    shared_daemon: RunningDaemon, world: dict[str, Any]
) -> None:
    out = run_in_pty([str(BOUNCERCTL), "status"], _env(shared_daemon))
    first = out.splitlines()[0]
    assert first.startswith("\x1b[")  # the dot is coloured: yellow, something waits for a person
    assert "\x1b[33m" in first
    plain = ANSI.sub("", out)
    assert plain.startswith("● bouncerd ") and f"pid {shared_daemon.proc.pid}" in plain.splitlines()[0]
    health = " ".join(plain.split("\n\n", 1)[0].split())  # the health line, wrapped between its parts
    assert "1 ask waiting · 1 tool to review" in health and "policy loaded" in health
    assert "claude-code 2.0.1, pid 4242" in plain


@pytest.mark.parametrize("args", [["status"], ["tail"], ["pending"], ["pins", "show"]], ids=" ".join)
def test_colour_on_a_terminal_only_and_never_under_no_color(
    shared_daemon: RunningDaemon, world: dict[str, Any], args: list[str]
) -> None:
    """Escape codes in a pipe or a log file are garbage; NO_COLOR (no-color.org) must be honoured."""
    argv = [str(BOUNCERCTL), *args]
    tty = run_in_pty(argv, _env(shared_daemon))
    if args[0] in ("status", "tail"):
        assert "\x1b[" in tty
    assert "\x1b[" not in run_in_pty(argv, _env(shared_daemon, NO_COLOR="1"))
    assert "\x1b[" not in _piped(argv, _env(shared_daemon))
    assert "\x1b[" not in _piped(argv, _env(shared_daemon, NO_COLOR="1", FORCE_COLOR="1"))  # NO_COLOR wins
    if args[0] in ("status", "tail"):
        assert "\x1b[" in _piped(argv, _env(shared_daemon, FORCE_COLOR="1"))


def test_json_carries_the_same_records_as_the_text(
    shared_daemon: RunningDaemon, world: dict[str, Any]
) -> None:
    """Scripts read --json; it must parse and hold what the person sees, argument values aside."""
    env = _env(shared_daemon)
    written = [json.loads(line) for line in shared_daemon.paths.audit.read_text().splitlines()]
    tailed = [
        json.loads(line) for line in _piped([str(BOUNCERCTL), "tail", "--json", "-n", "50"], env).splitlines()
    ]
    assert tailed == written
    assert [r["reason"] for r in tailed if r.get("tool") == "send_email"] == [world["reason"]]
    status = json.loads(_piped([str(BOUNCERCTL), "status", "--json"], env))
    [session] = status["sessions"]
    assert session["client"]["name"] == "claude-code" and session["client_pid"] == 4242
    pending = json.loads(_piped([str(BOUNCERCTL), "pending", "--json"], env))
    assert [c["code"] for c in pending] == [world["code"]] and pending[0]["destination"] == DESTINATION
    pins = json.loads(_piped([str(BOUNCERCTL), "pins", "show", "--json"], env))
    assert {t["name"]: t["state"] for t in pins[0]["tools"]}["purge_all"] == "new"
    tail_text = _piped([str(BOUNCERCTL), "tail", "-n", "50"], env)
    assert len(tail_text.splitlines()) == len(tailed)  # piped: one line per record, the same records


def test_tail_filters_in_a_terminal_select_the_records_asked_for(
    shared_daemon: RunningDaemon, world: dict[str, Any]
) -> None:
    env = _env(shared_daemon)
    asks = ANSI.sub("", run_in_pty([str(BOUNCERCTL), "tail", "--verdict", "ask", "--since", "10m"], env))
    assert "ASK" in asks and "ALLOW" not in asks and _whole(world["reason"], asks)
    other = ANSI.sub("", run_in_pty([str(BOUNCERCTL), "tail", "--server", "chat"], env))
    assert other == ""
    old = ANSI.sub("", run_in_pty([str(BOUNCERCTL), "tail", "--since", "2000-01-01"], env))
    assert "ALLOW" in old and "ASK" in old


def test_init_diff_is_fitted_and_coloured(daemon: RunningDaemon, tmp_path: Path) -> None:
    """`init` showed 250-column diff lines without colour: the change to a config could not be read."""
    config = tmp_path / "mcp.json"
    args = [
        "-y",
        "@modelcontextprotocol/server-filesystem",
        *(f"/home/someone/projects/p{i}" for i in range(8)),
    ]
    config.write_text(json.dumps({"mcpServers": {"files": {"command": "npx", "args": args}}}, indent=2))
    out = run_in_pty([str(BOUNCERCTL), "init", "--config", str(config), "--dry-run"], _env(daemon))
    _assert_fits(out, "init --dry-run")
    assert "\x1b[32m" in out  # added lines green
    assert _whole("/home/someone/projects/p7", out)


def test_the_demo_fits_80_columns_and_keeps_every_reason(tmp_path: Path) -> None:
    """The demo wrapped mid-word at 80 columns and cut each reason at 300 characters."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "NO_COLOR", "FORCE_COLOR")}
    env.update(BOUNCER_HOME=str(tmp_path), BOUNCER_NO_NOTIFY="1", TERM="xterm-256color")
    out = run_in_pty([str(BOUNCERCTL), "demo"], env)
    _assert_fits(out, "demo")
    plain = ANSI.sub("", out)
    assert "All checks passed." in plain
    assert _whole("add it to trusted_destinations in your policy", plain)
    assert "\x1b[" in out


def test_init_and_its_undo_fit_80_columns_when_they_write(daemon: RunningDaemon, tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    args = [
        "-y",
        "@modelcontextprotocol/server-filesystem",
        *(f"/home/someone/projects/p{i}" for i in range(8)),
    ]
    config.write_text(json.dumps({"mcpServers": {"files": {"command": "npx", "args": args}}}, indent=2))
    for flags in (["--yes"], ["--undo", "--yes"]):
        out = run_in_pty([str(BOUNCERCTL), "init", "--config", str(config), *flags], _env(daemon))
        _assert_fits(out, f"init {' '.join(flags)}")
        assert _whole("Restart the client", out) and _whole(str(config), out)


def test_a_failed_reload_turns_the_health_line_red(daemon: RunningDaemon) -> None:
    """A policy that failed to load must not look like a healthy daemon at a glance."""
    policy = daemon.paths.config / "policy.yaml"
    policy.parent.mkdir(parents=True, exist_ok=True)
    policy.write_text("servers: [\n")
    reload = subprocess.run([str(BOUNCERCTL), "reload"], env=_env(daemon), capture_output=True, text=True)
    assert reload.returncode == 1
    out = run_in_pty([str(BOUNCERCTL), "status"], _env(daemon))
    first = out.split("\n\n", 1)[0]
    assert "\x1b[31m" in first and "\x1b[33m" not in first  # red, not yellow or green
    assert "policy RELOAD FAILED" in " ".join(ANSI.sub("", first).split())
    _assert_fits(out, "status after a failed reload")
