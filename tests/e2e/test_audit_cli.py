"""`bouncerctl audit verify` and `bouncerctl tail`: every kind of tampering named at its line; tail readable.

Logs are written by the daemon's own writer (`bouncerd.server.audit.AuditLog`) in a temp directory,
then tampered with the way an attacker or a crash would. Each command runs through click's CliRunner
(exit code, stdout and stderr checked apart); `tail -f` also runs as a real process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import pytest
from bouncerctl.app import main
from bouncerctl.tail import Follower, format_record
from click.testing import CliRunner

from bouncerd.client import Client
from bouncerd.core import audit as chainlib
from bouncerd.server import audit
from bouncerd.server.audit import AuditLog, predecessors

if TYPE_CHECKING:
    from daemons import RunningDaemon

pytestmark = pytest.mark.e2e

NOW = 1_767_225_600.0
BOUNCERCTL = Path(sys.executable).parent / "bouncerctl"
# Bounds the wait for `tail -f` output; it prints within a poll interval, this only stops a hang.
FOLLOW_WAIT_SECONDS = 30.0


def _write(path: Path, n: int = 6, start: int = 0) -> str:
    log, _ = AuditLog.open(path, NOW)
    for i in range(start, start + n):
        log.append(
            {
                "session": "s1",
                "client": "claude-code",
                "server": "mail",
                "tool": "send_email",
                "arguments": {"to": f"user{i}@example.com"},
                "verdict": ("allow", "ask", "deny")[i % 3],
                "rule": "default.allow",
                "reason": f"reason {i}",
            },
            NOW + i,
        )
    log.close()
    return log.head


def _verify(*args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner().invoke(main, ["audit", "verify", *args], env=env)


def test_intact_log_verifies_in_one_line_on_stdout(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    head = _write(path)
    result = _verify(str(path))
    assert result.exit_code == 0, result.output
    assert result.stdout == f"audit chain intact: 6 records in 1 file (audit.jsonl), head {head}\n"
    assert result.stderr == ""


def test_default_log_is_the_one_under_bouncer_home(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    head = _write(tmp_path / "state" / "audit.jsonl", 2)
    result = _verify(env={"BOUNCER_HOME": str(tmp_path)})
    assert result.exit_code == 0 and head in result.stdout


def _edit(lines: list[bytes]) -> None:
    lines[2] = lines[2].replace(b"user2@example.com", b"evil@attacker.example")


def _edit_and_rehash(lines: list[bytes]) -> None:
    record = json.loads(lines[2])
    record["verdict"] = "allow"
    record["hash"] = chainlib.record_hash(record)
    lines[2] = chainlib.encode_line(record)


def _delete(lines: list[bytes]) -> None:
    del lines[2]


def _reorder(lines: list[bytes]) -> None:
    lines[1], lines[2] = lines[2], lines[1]


def _repeat(lines: list[bytes]) -> None:
    lines.insert(3, lines[1])


def _tear(lines: list[bytes]) -> None:
    lines[-1] = lines[-1][:40]


def _garble(lines: list[bytes]) -> None:
    lines[3] = b"this is not json\n"


@pytest.mark.parametrize(
    ("tamper", "line", "kind", "words"),
    [
        (_edit, 3, "edited", "does not match its hash"),
        (_edit_and_rehash, 4, "deleted", "edited and its hash recomputed"),
        (_delete, 3, "deleted", "deleted"),
        (_reorder, 2, "reordered", "comes later"),
        (_repeat, 4, "inserted", "audit.jsonl:1"),
        (_tear, 6, "truncated", "no newline"),
        (_garble, 4, "not_json", "not a JSON object"),
    ],
    ids=["edited", "edited-rehashed", "deleted", "reordered", "repeated", "torn", "not-json"],
)
def test_tampering_is_named_at_the_first_line_it_breaks(
    tmp_path: Path, tamper: Callable[[list[bytes]], None], line: int, kind: str, words: str
) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path)
    lines = path.read_bytes().splitlines(keepends=True)
    tamper(lines)
    path.write_bytes(b"".join(lines))
    result = _verify(str(path))
    assert result.exit_code == 1
    assert result.stdout == ""
    first, second = result.stderr.splitlines()
    assert first.startswith(f"audit chain broken at audit.jsonl line {line}: {kind}: ")
    assert words in first
    assert second.startswith("(") and "last good hash" in second


def test_records_cut_from_the_end_are_found_only_against_a_recorded_head(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    head = _write(path)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:4]))
    assert _verify(str(path)).exit_code == 0  # a shorter chain is still a chain
    result = _verify(str(path), "--head", head)
    assert result.exit_code == 1
    assert "audit.jsonl line 5: truncated" in result.stderr and head in result.stderr


def test_rotated_files_are_verified_oldest_first_as_one_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit, "ROTATE_AFTER_BYTES", 1500)
    path = tmp_path / "audit.jsonl"
    head = _write(path, 30)
    older = predecessors(path)
    assert len(older) >= 2
    result = _verify(str(path), "--head", head)
    assert result.exit_code == 0, result.stderr
    n = len(older) + 1
    assert f"in {n} files ({older[0].name} … audit.jsonl), head {head}" in result.stdout
    victim = older[1]
    victim.write_bytes(victim.read_bytes().replace(b'"reason ', b'"REASON ', 1))
    result = _verify(str(path))
    assert result.exit_code == 1
    assert f"audit chain broken at {victim.name} line 2: edited" in result.stderr


def test_missing_log_is_an_error_not_a_pass(tmp_path: Path) -> None:
    result = _verify(str(tmp_path / "audit.jsonl"))
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == f"no audit log at {tmp_path / 'audit.jsonl'}\n"


def test_json_result_for_scripts(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path)
    _delete_line = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(_delete_line[:1] + _delete_line[2:]))
    result = _verify(str(path), "--json")
    assert result.exit_code == 1
    body = json.loads(result.stdout)
    assert body["ok"] is False and body["break"]["line"] == 2 and body["break"]["kind"] == "deleted"


def test_a_torn_tail_moved_aside_is_mentioned(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, 2)
    with path.open("ab") as fh:
        fh.write(b'{"ts":"2026')
    AuditLog.open(path, NOW)[0].close()  # what the daemon does on start
    result = _verify(str(path))
    assert result.exit_code == 0
    assert "3 records" in result.stdout  # two, plus the record of the repair
    assert "holds a torn line bouncerd moved aside" in result.stderr


# ---- tail ------------------------------------------------------------------------------------------


def _events_log(path: Path) -> None:
    _write(path, 3)
    log, _ = AuditLog.open(path, NOW)
    log.append({"rule": "policy.reloaded", "reason": "policy loaded from /x/policy.yaml"}, NOW + 10)
    log.close()
    with path.open("ab") as fh:
        fh.write(b"garbage\n")


def test_tail_prints_the_last_records_plain_when_piped(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _events_log(path)
    result = CliRunner().invoke(main, ["tail", "-n", "3", "--file", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    assert "\x1b[" not in result.stdout
    assert "send_email" in lines[0] and "DENY" in lines[0] and "reason 2" in lines[0]
    assert "POLICY" in lines[1] and "policy.reloaded" in lines[1]
    assert "not an audit record" in lines[2]
    assert "user2@example.com" not in result.stdout  # arguments are never shown


def test_tail_colours_verdicts_on_a_terminal(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, 3)
    result = CliRunner().invoke(main, ["tail", "--file", str(path)], color=True)
    allow, ask, deny = result.stdout.splitlines()
    assert "\x1b[32m" in allow and "\x1b[33m" in ask and "\x1b[31m" in deny  # green, yellow, red
    assert "\x1b[1m" in deny
    assert [click.unstyle(line).split()[5] for line in (allow, ask, deny)] == ["ALLOW", "ASK", "DENY"]


def test_tail_wraps_a_long_reason_under_its_record_and_never_cuts_it() -> None:
    """A reason cut at the terminal's edge hid why a call was refused (~91 fixed columns)."""
    record = {"ts": "2026-01-01T00:00:00.000Z", "server": "mail", "tool": "send", "verdict": "deny"}
    reason = " ".join(f"word{i}" for i in range(100))
    text = click.unstyle(format_record({**record, "rule": "sink.x", "reason": reason}, width=80))
    first, *under = text.splitlines()
    assert "DENY" in first and "mail/send" in first and "sink.x" in first
    assert all(len(line) <= 80 for line in text.splitlines())
    assert under and all(line.startswith("    ") for line in under)
    assert " ".join(line.strip() for line in under) == reason
    short = click.unstyle(format_record({**record, "rule": "sink.x", "reason": "no"}, width=80))
    assert short.count("\n") == 0 and short.endswith("sink.x  no")
    assert reason in format_record({**record, "reason": reason}, width=None)  # piped: one whole line


def test_tail_escapes_bidi_and_invisible_characters_and_shows_a_shortened_destination_whole() -> None:
    """A right-to-left override in a tool name reorders the line on screen; a destination the reason
    shortens ("…") can hide the domain it would go to."""
    destination = "a" * 150 + "@evil.example"
    record = {
        "ts": "2026-01-01T00:00:00.000Z",
        "server": "mail",
        "tool": "send\u202egnp.exe",
        "verdict": "ask",
        "rule": "sink.unproven",
        "reason": f"destination '{destination[:60]}…' is not allowlisted",
        "destination": destination,
    }
    for width in (80, None):
        text = click.unstyle(format_record(record, width=width))
        assert "\u202e" not in text and "send\\u202egnp.exe" in text
        assert destination in "".join(text.split()).replace("destination:", "")
    plain = {**record, "reason": f"destination '{destination}' is not allowlisted"}
    assert click.unstyle(format_record(plain, width=None)).count(destination) == 1  # whole once: not repeated


def _mixed_log(path: Path, now: float) -> None:
    log, _ = AuditLog.open(path, now - 7200)
    for i, (server, verdict, age) in enumerate(
        [("mail", "deny", 7200), ("files", "allow", 3600), ("mail", "allow", 600), ("files", "ask", 60)]
    ):
        log.append(
            {"server": server, "tool": "t", "verdict": verdict, "rule": "r", "reason": f"n{i}"}, now - age
        )
    log.close()


def _reasons(result: Any) -> list[str]:
    return [json.loads(line)["reason"] for line in result.stdout.splitlines()]


def test_tail_filters_select_by_server_verdict_and_since(tmp_path: Path) -> None:
    """Filters that let a record through (or drop one) would mislead the person reviewing an incident."""
    path = tmp_path / "audit.jsonl"
    _mixed_log(path, time.time())
    runner = CliRunner()

    def tail(*args: str) -> list[str]:
        result = runner.invoke(main, ["tail", "--json", "--file", str(path), *args])
        assert result.exit_code == 0, result.output
        return _reasons(result)

    assert tail() == ["n0", "n1", "n2", "n3"]
    assert tail("--server", "mail") == ["n0", "n2"]
    assert tail("--verdict", "allow", "--verdict", "ask") == ["n1", "n2", "n3"]
    assert tail("--since", "30m") == ["n2", "n3"]
    assert tail("--since", "1h30m", "--server", "files") == ["n1", "n3"]
    assert tail("--server", "mail", "-n", "1") == ["n2"]
    since = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 5400))  # local, no zone
    assert tail("--since", since) == ["n1", "n2", "n3"]
    bad = runner.invoke(main, ["tail", "--file", str(path), "--since", "yesterday"])
    assert bad.exit_code == 2 and "'yesterday' is neither a duration" in bad.stderr


def test_tail_reaches_back_across_a_rotation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`-n` after a rotation showed only what the new file held, hiding the records just before it."""
    monkeypatch.setattr(audit, "ROTATE_AFTER_BYTES", 1500)
    path = tmp_path / "audit.jsonl"
    log, _ = AuditLog.open(path, NOW)
    for i in range(30):
        log.append(
            {"server": "mail", "tool": "t", "verdict": "allow", "rule": "r", "reason": f"n{i}"}, NOW + i
        )
    log.close()
    assert predecessors(path)
    result = CliRunner().invoke(
        main, ["tail", "--json", "--verdict", "allow", "-n", "12", "--file", str(path)]
    )
    assert _reasons(result) == [f"n{i}" for i in range(18, 30)]


def test_tail_json_carries_the_records_as_written_and_marks_foreign_lines(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _events_log(path)
    result = CliRunner().invoke(main, ["tail", "--json", "--file", str(path)])
    *records, foreign = [json.loads(line) for line in result.stdout.splitlines()]
    written = [json.loads(line) for line in path.read_bytes().splitlines()[:-1]]
    assert records == written
    assert foreign == {"not_a_record": "garbage"}


def test_tail_without_a_log_says_so(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["tail", "--file", str(tmp_path / "none.jsonl")])
    assert result.exit_code == 1 and "no audit log at" in result.stderr


def test_follower_reads_on_across_a_rotation_without_losing_or_repeating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(audit, "ROTATE_AFTER_BYTES", 1500)
    path = tmp_path / "audit.jsonl"
    log, _ = AuditLog.open(path, NOW)
    follower = Follower(path, path.open("rb"))
    seen: list[dict[str, Any]] = []
    for i in range(40):
        log.append({"tool": "t", "verdict": "allow", "rule": f"r{i}"}, NOW)
        if i % 7 == 0:
            seen += [json.loads(line) for line in follower.poll()]
    log.close()
    seen += [json.loads(line) for line in follower.poll()]
    follower.close()
    assert predecessors(path)  # it did rotate
    rules = [r["rule"] for r in seen if r["rule"] != chainlib.ROTATED_RULE]
    assert rules == [f"r{i}" for i in range(40)]


def test_tail_follow_prints_records_as_the_daemon_writes_them(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    _write(path, 1)
    env = {**os.environ, "BOUNCER_HOME": str(tmp_path)}
    with subprocess.Popen(
        [str(BOUNCERCTL), "tail", "-f", "-n", "1", "--file", str(path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as proc:
        watchdog = threading.Timer(FOLLOW_WAIT_SECONDS, proc.kill)  # a hung tail fails, never hangs
        watchdog.start()
        try:
            assert proc.stdout is not None
            assert "reason 0" in proc.stdout.readline()  # it has read the file and now follows it
            _write(path, 2, start=7)
            got = [proc.stdout.readline(), proc.stdout.readline()]
            assert "reason 7" in got[0] and "reason 8" in got[1]
        finally:
            watchdog.cancel()
            proc.terminate()


# ---- status ----------------------------------------------------------------------------------------


def test_status_shows_the_chain_head_that_verify_proves_and_what_waits_for_a_person(
    daemon: RunningDaemon,
) -> None:
    send = {"name": "send_email", "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}}}}
    with Client.connect(
        daemon.paths, role="shim", session="s1", server="mail", upstream=["mail"], instance="i1"
    ) as shim:
        shim.request("tools", tools=[send])
        asked = shim.request("verdict", tool="send_email", arguments={"to": "bob@corp.example"})
        shim.request("tools", tools=[send, {"name": "purge_all"}])  # listed after first use: new
    runner = CliRunner()
    env = {"BOUNCER_HOME": str(daemon.home)}
    body = json.loads(runner.invoke(main, ["status", "--json"], env=env).stdout)
    head = body["daemon"]["head"]
    assert body["daemon"]["records"] == 1
    assert body["pins_to_review"] == [{"server": "mail", "tool": "purge_all", "state": "new"}]
    assert body["policy"]["state"] == "loaded"
    verified = runner.invoke(main, ["audit", "verify", "--head", head], env=env)
    assert verified.exit_code == 0 and verified.stdout.endswith(f"head {head}\n")
    text = runner.invoke(main, ["status"], env=env).stdout
    assert f"head       {head}  (1 records written since start)" in text
    assert "review     1 tool(s) refused until reviewed: mail/purge_all (new)" in text
    assert "policy     " in text and "[loaded]" in text
    assert (asked["verdict"], len(body["pending"])) == ("ask", 1)  # no elicitation: a code is minted
    assert "approvals  1 waiting: " in text and "mail/send_email to bob@corp.example" in text
