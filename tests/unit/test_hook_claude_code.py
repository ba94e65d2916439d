"""`bouncerctl hook claude-code` without a daemon: what it answers Claude Code, and how it fails.

The daemon is replaced by a fake connection, so each test states one rule of the hook's contract
(Claude Code hooks reference, "Hook output"): deny and ask in hookSpecificOutput, nothing for "no
objection", exit 2 when the hook itself fails on a network tool, exit 1 (the call goes on, the person
is told) for everything else. The same rules against a real daemon: tests/e2e/test_hooks.py.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from bouncerctl import hook
from bouncerctl.hook_session import parse_ps_table, parse_stat

from bouncerd.errors import DaemonUnavailableError


class FakeDaemon:
    def __init__(self, reply: dict[str, Any] | None = None, error: Exception | None = None) -> None:
        self.reply = reply or {"ok": True}
        self.error = error
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.hellos: list[dict[str, Any]] = []

    def __call__(self, **hello: Any) -> FakeDaemon:
        self.hellos.append(hello)
        if self.error is not None:
            raise self.error
        return self

    def __enter__(self) -> FakeDaemon:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        self.requests.append((op, fields))
        return self.reply


DOWN = DaemonUnavailableError("bouncerd is not running (no socket at /tmp/x)")


def _pre(tool: str, **tool_input: Any) -> dict[str, Any]:
    return {"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input, "tool_use_id": "t1"}


def _decision(outcome: hook.Outcome) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(outcome.stdout)["hookSpecificOutput"]
    return out


def test_deny_verdict_becomes_a_permission_decision_deny_with_the_reason_for_claude() -> None:
    fake = FakeDaemon({"ok": True, "verdict": "deny", "reason": "planted host"})
    got = hook.run(_pre("WebFetch", url="https://evil.example/x", prompt="p"), fake)
    assert got.exit_code == 0
    assert _decision(got) == {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": "[bouncer blocked] planted host",
    }
    assert fake.requests[0][0] == "check_builtin" and fake.requests[0][1]["request_id"] == "t1"


def test_ask_verdict_is_put_to_the_person() -> None:
    fake = FakeDaemon({"ok": True, "verdict": "ask", "reason": "evicted"})
    assert (
        _decision(hook.run(_pre("WebFetch", url="https://a.example/"), fake))["permissionDecision"] == "ask"
    )


def test_allow_verdict_never_skips_claude_codes_own_permission_prompt() -> None:
    got = hook.run(
        _pre("Bash", command="curl -d x https://a.example/"), FakeDaemon({"ok": True, "verdict": "allow"})
    )
    assert got == hook.Outcome()  # no "allow" decision: that would bypass the person's permission rules


def test_web_fetch_is_denied_when_the_daemon_is_unreachable() -> None:
    got = hook.run(_pre("WebFetch", url="https://a.example/"), FakeDaemon(error=DOWN))
    assert _decision(got)["permissionDecision"] == "deny"
    assert "not running" in _decision(got)["permissionDecisionReason"]


def test_shell_command_reaching_the_network_is_denied_when_the_daemon_is_unreachable() -> None:
    got = hook.run(_pre("Bash", command="ls | nc a.example 80"), FakeDaemon(error=DOWN))
    assert _decision(got)["permissionDecision"] == "deny"


def test_shell_command_reaching_nothing_does_not_need_the_daemon() -> None:
    fake = FakeDaemon(error=DOWN)
    assert hook.run(_pre("Bash", command="pytest -q && git status"), fake) == hook.Outcome()


SHIMMED = {
    "ok": True,
    "sessions": [
        {"key": "proc:7:1", "servers": [{"name": "mail", "upstream": ["mail-server"], "connected": True}]}
    ],
}


def test_mcp_tools_of_a_shimmed_server_are_left_to_its_shim() -> None:
    # A call must never be gated twice: the shim in front of "mail" already asked for a verdict.
    fake = FakeDaemon(SHIMMED)
    keys = lambda: ["proc:7:1"]  # noqa: E731
    assert hook.run(_pre("mcp__mail__send_email", to="a@evil.example"), fake, keys) == hook.Outcome()
    post = {"hook_event_name": "PostToolUse", "tool_name": "mcp__mail__read_inbox", "tool_response": "x"}
    assert hook.run(post, fake, keys) == hook.Outcome()
    assert [op for op, _ in fake.requests] == ["status", "status"]  # no verdict, no observation


def test_mcp_tool_of_a_server_no_shim_fronts_gets_the_daemons_verdict() -> None:
    fake = FakeDaemon({"ok": True, "sessions": [], "verdict": "deny", "reason": "planted address"})
    got = hook.run(_pre("mcp__tracker__send_email", to="a@evil.example"), fake, lambda: ["proc:7:1"])
    assert _decision(got)["permissionDecision"] == "deny"
    assert [op for op, _ in fake.requests] == ["status", "tools", "verdict"]
    assert fake.hellos[-1] == {"server": "tracker", "upstream": ["claude-code-hook", "send_email"]}
    assert fake.requests[-1][1]["arguments"] == {"to": "a@evil.example"}


def test_mcp_tool_is_denied_when_the_daemon_is_unreachable() -> None:
    # Whether a shim fronts it cannot be known without the daemon: fail closed, as for a network tool.
    got = hook.run(_pre("mcp__tracker__send_email", to="a@evil.example"), FakeDaemon(error=DOWN))
    assert _decision(got)["permissionDecision"] == "deny"
    post = {"hook_event_name": "PostToolUse", "tool_name": "mcp__tracker__read", "tool_response": "x"}
    assert hook.run(post, FakeDaemon(error=DOWN)).exit_code == hook.EXIT_WARN


def test_prompt_is_vouched_and_nothing_is_added_to_claudes_context() -> None:
    fake = FakeDaemon()
    got = hook.run({"hook_event_name": "UserPromptSubmit", "prompt": "mail carol@partner.example"}, fake)
    assert got == hook.Outcome()  # stdout of a UserPromptSubmit hook would be injected into the context
    assert fake.requests == [("vouch", {"text": "mail carol@partner.example"})]


def test_prompt_is_never_blocked_when_the_daemon_is_unreachable() -> None:
    got = hook.run({"hook_event_name": "UserPromptSubmit", "prompt": "hi"}, FakeDaemon(error=DOWN))
    assert (got.exit_code, got.stdout) == (hook.EXIT_WARN, "")
    assert "not trusted" in got.stderr


def test_tool_output_is_sent_as_untrusted_text() -> None:
    fake = FakeDaemon({"ok": True, "recorded": True})
    response = {"stdout": "see https://evil.example/x", "stderr": "", "interrupted": False}
    event = {
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_response": response,
        "tool_use_id": "t9",
    }
    assert hook.run(event, fake) == hook.Outcome()
    op, fields = fake.requests[0]
    assert op == "observe_text" and fields["tool"] == "Bash" and fields["request_id"] == "t9"
    assert json.loads(fields["text"]) == response


def test_tool_output_that_cannot_be_recorded_is_reported_to_the_person() -> None:
    event = {
        "hook_event_name": "PostToolUse",
        "tool_name": "Read",
        "tool_response": {"file": {"content": "x"}},
    }
    got = hook.run(event, FakeDaemon(error=DOWN))
    assert got.exit_code == hook.EXIT_WARN and "NOT recorded" in got.stderr


def _main(monkeypatch: pytest.MonkeyPatch, stdin: bytes, fake: Any) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setattr(hook, "_connector", lambda environ, notes: fake)
    return hook.main(["claude-code"]), out.getvalue(), err.getvalue()


def test_a_crash_of_the_hook_on_a_network_tool_blocks_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    boom = FakeDaemon(error=RuntimeError("bug"))
    code, out, err = _main(monkeypatch, json.dumps(_pre("WebFetch", url="https://a.example/")).encode(), boom)
    assert (code, out) == (hook.EXIT_BLOCK, "") and "[bouncer blocked]" in err


def test_a_crash_of_the_hook_on_a_prompt_lets_it_through(monkeypatch: pytest.MonkeyPatch) -> None:
    boom = FakeDaemon(error=RuntimeError("bug"))
    event = {"hook_event_name": "UserPromptSubmit", "prompt": "hi"}
    code, out, err = _main(monkeypatch, json.dumps(event).encode(), boom)
    assert (code, out) == (hook.EXIT_WARN, "") and "RuntimeError" in err


def test_unreadable_hook_input_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = _main(monkeypatch, b"{not json", FakeDaemon())
    assert code == hook.EXIT_BLOCK and "failed" in err


def test_an_unknown_client_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    assert hook.main(["cursor"]) == hook.EXIT_BLOCK and "usage" in err.getvalue()


def test_proc_stat_with_a_parenthesis_in_the_command_name_is_read_after_the_last_one() -> None:
    data = b"4242 (we ird) (name) S 17 4242 4242 0 -1 4194560 " + b"0 " * 12 + b"987654 rest"
    proc = parse_stat(data)
    assert proc is not None and (proc.pid, proc.ppid, proc.name) == (4242, 17, "we ird) (name")


def test_ps_table_of_macos_is_read_with_paths_and_login_shells() -> None:
    table = parse_ps_table(
        "  501   1 /Applications/Claude.app/Contents/MacOS/Claude\n  777 501 -zsh\nbad line\n"
    )
    assert table[501].name == "Claude" and table[777].name == "zsh" and table[777].ppid == 501
