"""Helpers for tests that drive the real daemon, shim and MCP servers with the real `mcp` client.

Theory of operation
-------------------
A transparency test runs one scenario twice, at once: one run with the client talking to the server
directly, one through `bouncer-shim` (with a real `bouncerd` answering it); then it compares what the
client saw (`run_both`). This module provides the pieces:

- the daemon is the `daemon` fixture of tests/e2e/conftest.py (a real `bouncerd --foreground` in a
  short temp BOUNCER_HOME); `write_policy(home, text)` gives it a policy (read when it starts) and
  `audit_records(home)` reads the verdicts it wrote.
- `ServerSpec` plus `direct_params` / `shim_params`: the same server launched both ways. Both get the
  same environment (including BOUNCER_HOME), so a server that reports its environment sees no difference
  but the relay. The shim never starts a daemon of its own here (BOUNCER_NO_AUTOSTART=1): a test must
  use the daemon it started, in its own temp home, never the user's.
- `connect(params, mode)`: an `mcp.Client` with sampling, elicitation, logging and message callbacks
  that record everything the server sent the client (`Probe`).
- `normalise(value)`: results, notifications and requests as plain JSON values, with the volatile parts
  (temp paths, fields a caller names) replaced, so direct and relayed runs compare with `==`.

Nothing here asserts on timing: waits are bounded only so a broken relay fails instead of hanging.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientRequestContext
from pydantic import BaseModel

REPO = Path(__file__).resolve().parents[2]
FIXTURE_SERVERS = REPO / "tests" / "fixtures" / "servers"
NPM_BIN = REPO / "tests" / "npm" / "node_modules" / ".bin"
# The console scripts live next to the interpreter running the tests (the project's .venv).
BIN = Path(sys.executable).parent
SHIM = BIN / "bouncer-shim"


def short_tmpdir(prefix: str = "b") -> Path:
    """A fresh directory under /tmp with a short path (a socket path inside must stay under 108 bytes)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


# ---- the daemon ------------------------------------------------------------------------------------
# The daemon itself comes from the `daemon` fixture in tests/e2e/conftest.py (a `bouncerd --foreground`
# in a short temp BOUNCER_HOME, stopped with SIGTERM afterwards). These read what it left behind.


def write_policy(home: Path, text: str) -> Path:
    """Write the user's policy.yaml under `home` (the daemon reads it when it starts)."""
    config = home / "config"
    config.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = config / "policy.yaml"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    return path


def stop_autostarted_daemon(home: Path, timeout: float = 10.0) -> int | None:
    """SIGTERM the daemon named by the pid file under `home` (one a shim or hook started) and wait
    until it is gone; its pid, or None if none ran. A bound on the wait, not an expectation."""
    import signal
    import time

    try:
        text = (home / "run" / "bouncerd.pid").read_text().strip()
    except FileNotFoundError:
        return None
    if not text.isdigit():
        return None
    pid = int(text)
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return pid
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process_alive(pid):
        time.sleep(0.05)
    if process_alive(pid):
        os.kill(pid, signal.SIGKILL)
    return pid


def process_alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not: an orphan's reaper may be slow to collect it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return state not in (b"Z", b"X")


def audit_records(home: Path) -> list[dict[str, Any]]:
    """The daemon's audit log under `home`, one dict per line (empty if it wrote none yet)."""
    try:
        text = (home / "state" / "audit.jsonl").read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.strip()]


# ---- launching a server directly or through the shim -----------------------------------------------


@dataclass(frozen=True)
class ServerSpec:
    """How to start one upstream MCP server."""

    name: str  # the shim's --name
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None


def fixture_server(
    script: str, *, name: str | None = None, env: Mapping[str, str] | None = None
) -> ServerSpec:
    """One of tests/fixtures/servers/*.py, run by this interpreter."""
    path = FIXTURE_SERVERS / f"{script}.py"
    return ServerSpec(name=name or script, command=sys.executable, args=(str(path),), env=dict(env or {}))


def npm_server(binary: str, *args: str, name: str, env: Mapping[str, str] | None = None) -> ServerSpec:
    return ServerSpec(name=name, command=str(NPM_BIN / binary), args=args, env=dict(env or {}))


def bouncer_env(home: Path, *, session: str | None = None) -> dict[str, str]:
    """What every launched process gets: the test's BOUNCER_HOME, and never an autostarted daemon."""
    env = {"BOUNCER_HOME": str(home), "BOUNCER_NO_AUTOSTART": "1", "BOUNCER_NO_NOTIFY": "1"}
    if session is not None:
        env["BOUNCER_SESSION"] = session
    return env


def direct_params(spec: ServerSpec, home: Path, *, session: str | None = None) -> StdioServerParameters:
    """The server as the client would start it without Bouncer (same environment as through the shim)."""
    env = {**spec.env, **bouncer_env(home, session=session)}
    return StdioServerParameters(command=spec.command, args=list(spec.args), env=env, cwd=spec.cwd)


def shim_params(spec: ServerSpec, home: Path, *, session: str | None = None) -> StdioServerParameters:
    """The same server launched the Bouncer way: `bouncer-shim --name NAME -- CMD ARGS...`.

    `session` sets BOUNCER_SESSION; leave it None to let the shim derive the key from its parent (the
    client process), as it would under a real MCP client.
    """
    env = {**spec.env, **bouncer_env(home, session=session)}
    args = ["--name", spec.name, "--", spec.command, *spec.args]
    return StdioServerParameters(command=str(SHIM), args=args, env=env, cwd=spec.cwd)


# ---- a recording client ----------------------------------------------------------------------------

ElicitAnswer = Callable[[types.ElicitRequestParams], types.ElicitResult]


def default_elicit_answer(params: types.ElicitRequestParams) -> types.ElicitResult:
    """Accept, filling each requested property the fixture servers ask for with a fixed value."""
    content: dict[str, Any] = {}
    schema = getattr(params, "requested_schema", None) or {}
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    canned: dict[str, Any] = {
        "confirm": True,
        "note": "ok",
        "name": "Ann Example",
        "check": True,
        "integer": 7,
    }
    for key in properties:
        if key in canned:
            content[key] = canned[key]
    return types.ElicitResult(action="accept", content=content)


SAMPLING_MODEL = "fixture-model"


@dataclass
class Probe:
    """A connected client and everything the server sent it besides results."""

    client: Client
    kind: str  # "direct" or "shim"
    notifications: list[dict[str, Any]] = field(default_factory=list)
    logs: list[dict[str, Any]] = field(default_factory=list)
    sampling_requests: list[dict[str, Any]] = field(default_factory=list)
    elicitation_requests: list[dict[str, Any]] = field(default_factory=list)
    roots_requests: int = 0
    errors: list[str] = field(default_factory=list)

    def methods(self) -> list[str]:
        return [n["method"] for n in self.notifications]

    async def wait_for(self, predicate: Callable[[Probe], bool], timeout: float = 10.0) -> None:
        """Poll until `predicate(self)` holds. The bound only turns a lost message into a failure."""
        with anyio.fail_after(timeout):
            while not predicate(self):
                await anyio.sleep(0.01)


@asynccontextmanager
async def connect(
    params: StdioServerParameters,
    mode: str,
    *,
    elicit_answer: ElicitAnswer | None = default_elicit_answer,
    log_level: types.LoggingLevel | None = "debug",
    roots: Sequence[str] | None = None,
    kind: str = "direct",
) -> AsyncIterator[Probe]:
    """`mcp.Client` over stdio in `mode` ("legacy" or "auto"), with recording callbacks.

    `roots` (file:// URIs) makes the client declare the roots capability and answer roots/list with them.
    `elicit_answer=None` makes a client that cannot elicit (no capability declared), like Claude Desktop.
    """
    box: list[Probe] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, Exception):
            box[0].errors.append(repr(message))
        elif isinstance(message, BaseModel):
            box[0].notifications.append(normalise(message))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        box[0].logs.append(normalise(params))

    async def on_sampling(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        box[0].sampling_requests.append(normalise(params))
        prompt = params.messages[0].content
        text = prompt.text if isinstance(prompt, types.TextContent) else "?"
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"echo of {text!r}"),
            model=SAMPLING_MODEL,
            stop_reason="endTurn",
        )

    async def on_elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        box[0].elicitation_requests.append(normalise(params))
        assert elicit_answer is not None
        return elicit_answer(params)

    async def on_list_roots(context: ClientRequestContext) -> types.ListRootsResult | types.ErrorData:
        box[0].roots_requests += 1
        return types.ListRootsResult(roots=[types.Root.model_validate({"uri": uri}) for uri in roots or ()])

    client = Client(
        params,
        mode=mode,
        sampling_callback=on_sampling,
        elicitation_callback=on_elicit if elicit_answer is not None else None,
        list_roots_callback=on_list_roots if roots is not None else None,
        logging_callback=on_log,
        message_handler=on_message,
        log_level=log_level,
        # Caching would let the second listing skip the wire: every request must reach the relay.
        cache=None,
    )
    box.append(Probe(client=client, kind=kind))
    async with client:
        yield box[0]


ScenarioResult = Any
Scenario = Callable[[Probe], Awaitable[ScenarioResult]]
KINDS = ("direct", "shim")


async def run_both(
    spec: ServerSpec | Callable[[str], ServerSpec],
    home: Path,
    mode: str,
    scenario: Scenario,
    *,
    session: str | None = None,
    elicit_answer: ElicitAnswer | None = default_elicit_answer,
    roots: Sequence[str] | None = None,
) -> tuple[ScenarioResult, ScenarioResult]:
    """Run `scenario` directly and through the shim, both at once; return (direct, relayed).

    Concurrent because most of a run is process start-up, and two start-ups overlap on two cores. The
    runs share nothing but the daemon (only the shim run talks to it): a server keeps its state per
    process, and anything a scenario writes to disk must be named per run, so pass `spec` as a function
    of the run's kind ("direct" or "shim"), which is also `probe.kind` inside the scenario.
    """
    results: dict[str, ScenarioResult] = {}

    async def run(kind: str) -> None:
        one = spec(kind) if callable(spec) else spec
        if kind == "direct":
            params = direct_params(one, home, session=session)
        else:
            params = shim_params(one, home, session=session)
        async with connect(params, mode, elicit_answer=elicit_answer, roots=roots, kind=kind) as probe:
            results[kind] = await scenario(probe)

    async with anyio.create_task_group() as tg:
        for kind in KINDS:
            tg.start_soon(run, kind)
    return results["direct"], results["shim"]


# ---- normalising results for comparison ------------------------------------------------------------


def normalise(
    value: Any,
    *,
    drop: Sequence[str] = (),
    replace: Mapping[str, str] | None = None,
    patterns: Sequence[tuple[str, str]] = (),
) -> Any:
    """A JSON value for `value` (pydantic models dumped by alias, as on the wire).

    `drop`: keys removed wherever they occur (the caller says why each one is volatile).
    `replace`: substrings replaced in every string (e.g. a per-run temp directory by a placeholder).
    `patterns`: (regex, replacement) pairs applied to every string after `replace` (e.g. a clock time).
    """
    if isinstance(value, BaseModel):
        value = value.model_dump(by_alias=True, mode="json", exclude_none=True)
    elif isinstance(value, BaseException):
        error = getattr(value, "error", None)
        described: dict[str, Any] = {"exception": type(value).__name__, "text": str(value)}
        if isinstance(error, BaseModel):
            described["error"] = error.model_dump(by_alias=True, mode="json", exclude_none=True)
        value = described
    rules = _Rules(frozenset(drop), dict(replace or {}), [(re.compile(p), r) for p, r in patterns])
    return _walk(value, rules)


@dataclass(frozen=True)
class _Rules:
    drop: frozenset[str]
    replace: dict[str, str]
    patterns: list[tuple[re.Pattern[str], str]]


def _walk(value: Any, rules: _Rules) -> Any:
    if isinstance(value, BaseModel):
        return _walk(value.model_dump(by_alias=True, mode="json", exclude_none=True), rules)
    if isinstance(value, dict):
        return {k: _walk(v, rules) for k, v in value.items() if k not in rules.drop}
    if isinstance(value, list | tuple):
        return [_walk(v, rules) for v in value]
    if isinstance(value, str):
        for old, new in rules.replace.items():
            value = value.replace(old, new)
        for pattern, replacement in rules.patterns:
            value = pattern.sub(replacement, value)
        return value
    return value


def blocked_text(result: types.CallToolResult) -> str | None:
    """The text of a Bouncer refusal, or None if `result` is not one."""
    for block in result.content:
        if isinstance(block, types.TextContent) and block.text.startswith("[bouncer blocked]"):
            return block.text
    return None
