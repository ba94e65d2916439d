"""`bouncerctl approve` and `bouncerctl pending`, driven as a person would: through a pseudo-terminal.

`approve` must only work for a person at a terminal: the tests run it under a pty (os.openpty, the
child's stdin, stdout and stderr on the pty's slave side), read what it shows, and answer the
``Approve? [y/N]`` prompt. The agent's side is the synchronous client speaking for the shim: after an
approval, the retry of the same call (a ``verdict`` with the same arguments) must run once and only
once. Without a terminal, approve exits non-zero and approves nothing.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from daemons import RunningDaemon
from harness import audit_records

from bouncerd.client import Client
from bouncerd.core import approvals as ap

pytestmark = pytest.mark.e2e

BOUNCERCTL = Path(sys.executable).parent / "bouncerctl"
BOB = "bob@partner.example"
EVE = "eve@elsewhere.example"
TOOLS = [{"name": "send_mail", "description": "Send mail", "inputSchema": {"type": "object"}}]
ARGS = {"to": BOB}
PROMPT = b"Approve? [y/N]"
EXIT_NOT_A_TERMINAL = 4
RUN_SECONDS = 30.0  # a bound for a command that takes well under a second; never an expectation


def shim(daemon: RunningDaemon) -> Client:
    client = Client.connect(daemon.paths, role="shim", session="s1", server="mail", upstream=["mail"])
    client.request("tools", tools=TOOLS)
    return client


def verdict(daemon: RunningDaemon, args: dict[str, Any] = ARGS) -> dict[str, Any]:
    with shim(daemon) as client:
        return client.request("verdict", tool="send_mail", arguments=args)


def in_pty(daemon: RunningDaemon, *argv: str, answer: str | None = None) -> tuple[int, str]:
    """Run `bouncerctl ARGV` on a pseudo-terminal; type `answer` at the prompt. (exit status, screen)."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        [str(BOUNCERCTL), *argv],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=daemon.env,
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    screen, typed = b"", False
    deadline = time.monotonic() + RUN_SECONDS
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    chunk = b""
                if not chunk:
                    break
                screen += chunk
                if answer is not None and not typed and PROMPT in screen:
                    os.write(master, answer.encode())
                    typed = True
            elif proc.poll() is not None:
                break
        else:
            proc.kill()
            raise AssertionError(f"bouncerctl {argv} did not finish:\n{screen.decode(errors='replace')}")
        return proc.wait(RUN_SECONDS), screen.decode("utf-8", "replace").replace("\r\n", "\n")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def piped(
    daemon: RunningDaemon, *argv: str, stdin: Any = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BOUNCERCTL), *argv],
        env=daemon.env,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
    )


def test_approve_in_a_terminal_lets_the_retry_run_once_and_only_once(start: Any) -> None:
    daemon = start()
    code = verdict(daemon)["code"]
    status, screen = in_pty(daemon, "approve", code, answer="y\n")
    assert status == 0, screen
    before_prompt = screen.split("Approve?")[0]
    for shown in ("mail", "send_mail", "parameter", "to", f'"{BOB}"', "expires", time.strftime("%Z")):
        assert shown in before_prompt
    assert "Approved" in screen
    first, second = verdict(daemon), verdict(daemon)
    assert (first["verdict"], first["rule"]) == ("allow", "approval.once")
    assert second["verdict"] == "ask"
    granted = [r for r in audit_records(daemon.home) if r["rule"] == "approval.granted"]
    assert [(r["channel"], r["code"]) for r in granted] == [("code", code)]


def test_approve_shows_the_arguments_that_would_leave_escaped_when_the_log_keeps_them(start: Any) -> None:
    """Approving blind: the person saw only argument lengths. With `audit_arguments: full` (the
    default) approve prints every argument as it would be sent, a hidden escape sequence escaped."""
    daemon = start()
    args = {"to": BOB, "body": "quarterly numbers\x1b[2K attached"}
    code = verdict(daemon, args)["code"]
    status, screen = in_pty(daemon, "approve", code, answer="n\n")
    assert status == 1, screen
    before_prompt = screen.split("Approve?")[0]
    assert f'to = "{BOB}"' in before_prompt
    assert 'body = "quarterly numbers\\u001b[2K attached"' in before_prompt  # escaped, not obeyed
    assert "\x1b[2K" not in screen


def test_arguments_stay_hidden_by_default_when_the_policy_keeps_only_their_digest(start: Any) -> None:
    daemon = start(policy="audit_arguments: digest\n")
    code = verdict(daemon, {"to": BOB, "body": "SECRET-BODY-7f3a"})["code"]
    status, screen = in_pty(daemon, "approve", code, answer="n\n")
    assert status == 1 and "SECRET-BODY-7f3a" not in screen
    status, screen = in_pty(daemon, "approve", "--show-arguments", code, answer="n\n")
    assert status == 1 and 'body = "SECRET-BODY-7f3a"' in screen  # asked for: shown from memory
    assert all("SECRET-BODY-7f3a" not in json.dumps(r) for r in audit_records(daemon.home))


def test_the_log_offers_no_approve_code_for_an_ask_the_client_may_answer_itself(start: Any) -> None:
    """An ask answered in the client still showed `bouncerctl approve CODE` in tail: the record's
    reason must not offer it (the agent's reply does; the code stays in its own field)."""
    daemon = start()
    reply = verdict(daemon)
    assert f"bouncerctl approve {reply['code']}" in reply["reason"]  # what a client without asking sees
    asks = [r for r in audit_records(daemon.home) if r.get("verdict") == "ask"]
    assert [r["code"] for r in asks] == [reply["code"]]
    assert "bouncerctl approve" not in asks[0]["reason"]


def test_approve_shows_a_lookalike_destination_as_what_it_is(start: Any) -> None:
    daemon = start()
    code = verdict(daemon, {"to": "bob\u200b@p\u0430rtner.example"})["code"]
    status, screen = in_pty(daemon, "approve", code, answer="n\n")
    assert status != 0
    assert '"bob\\u200b@p\u0430rtner.example"' in screen
    assert "U+0430 CYRILLIC SMALL LETTER A" in screen


def test_answering_no_or_nothing_approves_nothing(start: Any) -> None:
    daemon = start()
    code = verdict(daemon)["code"]
    for answer in ("n\n", "\n", "yes please\n"):
        status, screen = in_pty(daemon, "approve", code, answer=answer)
        assert status != 0 and "Not approved" in screen
    assert verdict(daemon)["verdict"] == "ask"
    assert verdict(daemon)["code"] == code  # still open: a person may still say yes


@pytest.mark.parametrize("stdin_is_tty", [False, True], ids=["no_terminal", "stdout_piped"])
def test_approve_without_a_terminal_exits_nonzero_and_approves_nothing(
    start: Any, stdin_is_tty: bool
) -> None:
    """An agent with a shell tool runs commands with pipes: it must not approve its own call."""
    daemon = start()
    code = verdict(daemon)["code"]
    master, slave = os.openpty()
    try:
        piped_in = {"stdin": slave} if stdin_is_tty else {"input": "y\ny\n"}  # an agent would type y
        result = subprocess.run(
            [str(BOUNCERCTL), "approve", code],
            env=daemon.env,
            capture_output=True,
            text=True,
            timeout=RUN_SECONDS,
            check=False,
            **piped_in,
        )
    finally:
        os.close(master)
        os.close(slave)
    assert result.returncode == EXIT_NOT_A_TERMINAL
    assert "terminal" in result.stderr and "Nothing was approved" in result.stderr
    assert PROMPT.decode() not in result.stdout
    assert verdict(daemon)["verdict"] == "ask"
    assert not [r for r in audit_records(daemon.home) if r["rule"] == "approval.granted"]


def test_approve_has_no_yes_flag(start: Any) -> None:
    daemon = start()
    code = verdict(daemon)["code"]
    for flag in ("--yes", "-y"):
        status, screen = in_pty(daemon, "approve", flag, code)
        assert status == 2 and "No such option" in screen
    assert verdict(daemon)["verdict"] == "ask"


def test_code_for_one_destination_does_not_approve_another_call(start: Any) -> None:
    daemon = start()
    code = verdict(daemon)["code"]
    status, _ = in_pty(daemon, "approve", code, answer="y\n")
    assert status == 0
    assert verdict(daemon, {"to": EVE})["verdict"] == "ask"
    assert verdict(daemon, {"to": BOB, "cc": EVE})["verdict"] == "ask"  # same person, different call
    assert verdict(daemon)["rule"] == "approval.once"


def test_expired_code_does_nothing(start: Any) -> None:
    daemon = start("approval_timeout: 1\n", BOUNCER_CODE_TTL_SECONDS="1")
    asked = verdict(daemon)
    time.sleep(max(0.0, asked["expires"] - time.time()) + 0.2)
    status, screen = in_pty(daemon, "approve", asked["code"], answer="y\n")
    assert status != 0 and "expired" in screen
    assert PROMPT.decode() not in screen
    assert verdict(daemon)["verdict"] == "ask"


def test_wrong_codes_are_rate_limited(start: Any) -> None:
    daemon = start()
    code = verdict(daemon)["code"]
    status, screen = in_pty(daemon, "approve", "AAA-AAA", answer="y\n")
    assert status != 0 and "no open code AAA-AAA" in screen
    with Client.connect(daemon.paths, role="ctl") as guesser:  # the rest of the guesses, faster
        for guess in ("BBB-BBB", "CCC-CCC", "DDD-DDD", "EEE-EEE"):
            assert guesser.wait(guesser.send("approve", code=guess))["error"]["code"] == "unknown_code"
    status, screen = in_pty(daemon, "approve", code, answer="y\n")
    assert status != 0 and "too many wrong codes" in screen
    assert verdict(daemon)["verdict"] == "ask"
    assert (
        len([r for r in audit_records(daemon.home) if r["rule"] == "approval.wrong_code"])
        == ap.MAX_WRONG_CODES
    )


def test_pending_lists_open_codes_as_text_and_json(start: Any) -> None:
    daemon = start()
    assert piped(daemon, "pending").stdout.strip() == "no open codes"
    code = verdict(daemon, {"to": BOB, "body": "the secret numbers"})["code"]
    text = piped(daemon, "pending")
    assert text.returncode == 0
    assert code in text.stdout and "send_mail" in text.stdout and BOB in text.stdout
    listed = piped(daemon, "pending", "--json")
    [entry] = json.loads(listed.stdout)
    assert (entry["code"], entry["server"], entry["destination"]) == (code, "mail", BOB)
    assert "secret numbers" not in text.stdout + listed.stdout
