"""``bouncerctl hook claude-code``: the command Claude Code runs for UserPromptSubmit, PreToolUse and
PostToolUse (installed by `bouncerctl init`, see `bouncerctl.hook_settings`).

Theory of operation
-------------------
Claude Code starts the hook once per event and writes one JSON object to its stdin: the common
fields ``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, and per event ``prompt``
(UserPromptSubmit), ``tool_name``, ``tool_input``, ``tool_use_id`` (PreToolUse) and also
``tool_response`` (PostToolUse). (Claude Code hooks reference, "Hook input":
https://code.claude.com/docs/en/hooks.)

What the hook answers, in the documented forms (same reference, "Hook output"):
- Exit 0 with nothing on stdout: no objection. For PreToolUse this leaves the call to Claude Code's
  own permission rules; the hook never answers ``"allow"``, which would skip them.
- PreToolUse, exit 0 with ``{"hookSpecificOutput": {"hookEventName": "PreToolUse",
  "permissionDecision": "deny" | "ask", "permissionDecisionReason": ...}}``: "deny" stops the call and
  shows the reason to Claude; "ask" shows the reason to the person, who decides.
- Exit 2: a blocking error; stderr is shown to Claude and a PreToolUse call is blocked. Used when the
  hook itself fails on a network tool.
- Any other exit code: a non-blocking error; stderr is shown to the person and the call goes on. Used
  to say that a prompt could not be vouched or an output could not be recorded.
  (An uncaught Python exception exits 1, which Claude Code treats as "go on": that is why every
  failure here is caught and mapped on purpose.)
- UserPromptSubmit: stdout on exit 0 is added to Claude's context, so the hook prints nothing there.

Per event:
- UserPromptSubmit: the prompt goes to the daemon (``vouch``); destinations the person typed are
  trusted for the session. The prompt is never blocked.
- PostToolUse of a tool that is not an MCP tool: ``tool_response`` goes to the daemon as untrusted
  output (``observe_text``), acknowledged once it is journalled.
- PreToolUse of WebFetch, or of a Bash command that reaches the network
  (`bouncerd.core.builtin_tools.network_destinations`, read here without the daemon): the daemon's
  verdict (``check_builtin``). A Bash command that reaches nothing is let through without asking.
- PreToolUse and PostToolUse of an MCP tool (``mcp__<server>__<tool>``) whose server no shim fronts
  (a remote server, one from managed settings): the verdict, and the output recorded as that
  server's untrusted output (`bouncerctl.hook_mcp`). A shimmed server's tools are left to its shim.

Starting the daemon: a hook that finds no daemon starts one exactly as a shim does, through
`bouncerd.autostart` (the same start lock, backoff and ``BOUNCER_NO_AUTOSTART``), waits until it
listens, and says so once on stderr. So hooks installed before any MCP server ran still get verdicts.

Failure: a network tool is denied when the daemon cannot be reached (or started), does not answer
within `DAEMON_TIMEOUT_SECONDS`, answers with an error, or the hook itself fails (exit 2). Anything
else fails open with a line on stderr.

Speed: this module is imported before click and the command group (`bouncerctl.__main__` dispatches
``hook`` first). It loads the shell reader at start and the wire codec and client only when it
talks to the daemon.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from bouncerd.core.builtin_tools import GATED_TOOLS, WEB_FETCH, is_mcp_tool, network_destinations
from bouncerd.errors import BouncerError

if TYPE_CHECKING:
    from bouncerd.client import Client

CLIENTS: Final = ("claude-code",)
# How long the hook waits for the daemon. A verdict first waits until earlier outputs are indexed,
# which for a large one (tens of MB through the worker) takes seconds; ten is generous, and well under
# the timeout init installs (hook_settings.HOOK_TIMEOUT_SECONDS), so the hook always denies first.
DAEMON_TIMEOUT_SECONDS: Final = 10.0
# The shim accepts upstream lines up to 64 MiB; a hook input larger than that is not a tool's output.
MAX_INPUT_BYTES: Final = 64 * 1024 * 1024

EXIT_BLOCK: Final = 2  # Claude Code: blocking error, stderr to Claude
EXIT_WARN: Final = 1  # Claude Code: non-blocking error, stderr to the person
PREFIX: Final = "bouncer: "

Connect = Callable[..., "Client"]  # connect(**hello fields added to the hook's own, e.g. server)
Keys = Callable[[], "Sequence[str]"]  # the hook's candidate session keys, nearest first


class Outcome(NamedTuple):
    exit_code: int = 0
    stdout: str = ""
    stderr: str = ""


def _decision(decision: str, reason: str) -> Outcome:
    body = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }
    return Outcome(0, json.dumps(body, ensure_ascii=False) + "\n")


def is_network_call(event: Mapping[str, Any]) -> bool:
    """Whether a failure on this event must deny: a PreToolUse of a gated tool (WebFetch, Bash) or of
    an MCP tool (which may send; whether a shim fronts it is not known without the daemon)."""
    tool = event.get("tool_name")
    return (
        event.get("hook_event_name") == "PreToolUse"
        and isinstance(tool, str)
        and (tool in GATED_TOOLS or is_mcp_tool(tool))
    )


def _no_keys() -> Sequence[str]:
    return []


def run(event: Mapping[str, Any], connect: Connect, keys: Keys = _no_keys) -> Outcome:
    """The answer to one hook event. Raises only on a bug (the caller maps that by `is_network_call`)."""
    name = event.get("hook_event_name")
    tool = event.get("tool_name")
    if name in ("PreToolUse", "PostToolUse") and isinstance(tool, str) and is_mcp_tool(tool):
        return _mcp_pre(event, connect, keys) if name == "PreToolUse" else _mcp_post(event, connect, keys)
    if name == "UserPromptSubmit":
        return _prompt(event, connect)
    if name == "PreToolUse":
        return _pre_tool(event, connect)
    if name == "PostToolUse":
        return _post_tool(event, connect)
    return Outcome()


def _mcp_pre(event: Mapping[str, Any], connect: Connect, keys: Keys) -> Outcome:
    from bouncerctl import hook_mcp

    tool_name = str(event.get("tool_name"))
    split = hook_mcp.split_name(tool_name)
    tool_input = event.get("tool_input")
    if split is None or not isinstance(tool_input, dict):
        return _decision("deny", f"[bouncer blocked] {tool_name}: the hook input cannot be checked")
    server, tool = split
    try:
        reply = hook_mcp.verdict(connect, keys(), server, tool, tool_input, event.get("tool_use_id"))
    except BouncerError as exc:
        return _decision(
            "deny",
            f"[bouncer blocked] {tool_name}: Bouncer could not check this call ({exc}), so it is refused. "
            "Start bouncerd (or `bouncerctl service install`) and try again",
        )
    if reply is None:
        return Outcome()  # its shim gates it
    verdict, reason = reply.get("verdict"), str(reply.get("reason") or "")
    if verdict == "allow":
        return Outcome()
    if verdict == "ask":
        return _decision("ask", f"Bouncer asks: {reason}")
    return _decision("deny", f"[bouncer blocked] {reason}")


def _mcp_post(event: Mapping[str, Any], connect: Connect, keys: Keys) -> Outcome:
    from bouncerctl import hook_mcp

    tool_name = str(event.get("tool_name"))
    split = hook_mcp.split_name(tool_name)
    response = event.get("tool_response")
    if split is None or response is None:
        return Outcome()
    server, tool = split
    try:
        hook_mcp.observe(connect, keys(), server, tool, response, event.get("tool_use_id"))
    except BouncerError as exc:
        return Outcome(
            EXIT_WARN,
            stderr=f"{PREFIX}the output of {tool_name} was NOT recorded as untrusted ({exc}); an address "
            "planted in it will not be recognised later\n",
        )
    return Outcome()


def _request(connect: Connect, op: str, **fields: Any) -> dict[str, Any]:
    with connect() as client:
        return client.request(op, **fields)


def _prompt(event: Mapping[str, Any], connect: Connect) -> Outcome:
    prompt = event.get("prompt")
    if not isinstance(prompt, str):
        return Outcome(EXIT_WARN, stderr=PREFIX + "the hook input carries no prompt; nothing was vouched\n")
    try:
        _request(connect, "vouch", text=prompt)
    except BouncerError as exc:
        return Outcome(
            EXIT_WARN,
            stderr=f"{PREFIX}bouncerd did not see your prompt ({exc}); addresses you typed are not "
            "trusted yet, so sending to them will be asked about\n",
        )
    return Outcome()


def _post_tool(event: Mapping[str, Any], connect: Connect) -> Outcome:
    tool = event.get("tool_name")
    if not isinstance(tool, str) or is_mcp_tool(tool):
        return Outcome()
    response = event.get("tool_response")
    if response is None:
        return Outcome()
    text = response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)
    tool_use_id = event.get("tool_use_id")
    try:
        _request(
            connect,
            "observe_text",
            tool=tool,
            text=text,
            request_id=tool_use_id if isinstance(tool_use_id, str) else None,
        )
    except BouncerError as exc:
        return Outcome(
            EXIT_WARN,
            stderr=f"{PREFIX}the output of {tool} was NOT recorded as untrusted ({exc}); an address "
            "planted in it will not be recognised later\n",
        )
    return Outcome()


def _pre_tool(event: Mapping[str, Any], connect: Connect) -> Outcome:
    tool = event.get("tool_name")
    if not isinstance(tool, str) or is_mcp_tool(tool) or tool not in GATED_TOOLS:
        return Outcome()
    tool_input = event.get("tool_input")
    if not isinstance(tool_input, dict):
        return _decision("deny", f"[bouncer blocked] {tool}: the hook input has no tool_input to check")
    if tool != WEB_FETCH and not network_destinations(tool, tool_input):
        return Outcome()  # a shell command that reaches nothing: Bouncer has nothing to say
    tool_use_id = event.get("tool_use_id")
    try:
        reply = _request(
            connect,
            "check_builtin",
            tool=tool,
            input=tool_input,
            request_id=tool_use_id if isinstance(tool_use_id, str) else None,
        )
    except BouncerError as exc:
        return _decision(
            "deny",
            f"[bouncer blocked] {tool}: Bouncer could not check this call ({exc}), so it is refused. "
            "Start bouncerd (or `bouncerctl service install`) and try again",
        )
    verdict, reason = reply.get("verdict"), str(reply.get("reason") or "")
    if verdict == "allow":
        return Outcome()
    if verdict == "ask":
        return _decision("ask", f"Bouncer asks: {reason}")
    return _decision("deny", f"[bouncer blocked] {reason}")


# ---- the process --------------------------------------------------------------------------------------


def _connector(environ: Mapping[str, str], notes: list[str]) -> Connect:
    """Connect as this hook; start the daemon if none runs. What a person should know (that a daemon
    was started) goes to `notes`, once."""

    def connect(**extra: Any) -> Client:
        # Imported here: a shell command that reaches nothing is answered without them.
        from bouncerctl.hook_session import hook_session
        from bouncerd import autostart
        from bouncerd.client import Client
        from bouncerd.errors import DaemonUnavailableError
        from bouncerd.paths import resolve

        who = hook_session(environ)
        hello: dict[str, Any] = {"session": who.session, "candidates": who.candidates, **extra}
        if who.client_pid is not None:
            hello["client_pid"] = who.client_pid
        paths = resolve(environ)
        try:
            return Client.connect(paths, role="hook", timeout=DAEMON_TIMEOUT_SECONDS, **hello)
        except DaemonUnavailableError as exc:
            if not autostart.autostart_enabled(environ):
                raise
            outcome = autostart.ensure_running(paths, environ)
            if outcome.kind == autostart.STARTED:
                notes.append(f"{PREFIX}{outcome.message}\n")
            elif outcome.kind != autostart.RUNNING:
                raise DaemonUnavailableError(outcome.message or str(exc)) from None
        return Client.connect(paths, role="hook", timeout=DAEMON_TIMEOUT_SECONDS, **hello)

    return connect


def _keys(environ: Mapping[str, str]) -> Sequence[str]:
    from bouncerctl.hook_session import hook_session

    who = hook_session(environ)
    return who.candidates or [who.session]


def _write(stream: Any, text: str) -> None:
    if text:
        stream.write(text)
        stream.flush()


def main(argv: Sequence[str]) -> int:
    """`bouncerctl hook CLIENT`, stdin to exit status. Every failure is mapped, never raised."""
    if list(argv) not in ([c] for c in CLIENTS):
        _write(sys.stderr, f"usage: bouncerctl hook {'|'.join(CLIENTS)}  (reads the hook's JSON on stdin)\n")
        return EXIT_BLOCK
    event: Mapping[str, Any] = {}
    notes: list[str] = []  # said once on stderr before the outcome's own lines
    try:
        raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
        if len(raw) > MAX_INPUT_BYTES:
            raise ValueError(f"the hook input exceeds {MAX_INPUT_BYTES} bytes")
        parsed = json.loads(raw)
        if not isinstance(parsed, dict):
            raise ValueError("the hook input is not a JSON object")
        event = parsed
        outcome = run(event, _connector(os.environ, notes), lambda: _keys(os.environ))
    except Exception as exc:  # the hook's own failure: closed for network tools, open for the rest
        why = f"{PREFIX}the hook failed ({type(exc).__name__}: {exc})"
        if not event or is_network_call(event):
            outcome = Outcome(EXIT_BLOCK, stderr=f"[bouncer blocked] {why}; the call is refused\n")
        else:
            outcome = Outcome(EXIT_WARN, stderr=why + "\n")
    try:
        _write(sys.stdout, outcome.stdout)
        _write(sys.stderr, "".join(notes) + outcome.stderr)
    except OSError:
        return EXIT_BLOCK if not event or is_network_call(event) else EXIT_WARN
    return outcome.exit_code
