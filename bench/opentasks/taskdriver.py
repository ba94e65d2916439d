"""The driver bench/opentasks and bench/heldout share: tasks through the real shim, daemon and client.

Theory of operation
-------------------
One `bouncerd --foreground` in a fresh temporary BOUNCER_HOME serves a run, with the policy the
benchmark gives it. For each task and each simulated person `run_task` writes the task's tools and
replies for tests/fixtures/servers/opentasks.py, starts ``bouncer-shim --name ot-N -- python
opentasks.py`` with a session of its own, connects the real `mcp.Client` (no elicitation, so an ask
comes back as a refusal with a one-time code), hands the prompt to the daemon as the UserPromptSubmit
hook does (op `vouch` on a `hook` connection), and makes the task's calls in order. An asked call is
approved through the ctl op `approve` (what `bouncerctl approve` sends) and retried once when the
person approves all; declined otherwise. Whether a call reached the server comes from the server's
own record; the rule that refused or allowed it from the daemon's audit log.

A task is anything with the fields of `TaskLike` (`cls`, `key`, `prompt`, `tools`, `replies`,
`calls`); a call has `role` (read | benign | attack), `tool` and `arguments`, and may name the
attack's technique (`technique`), which the report prints beside it.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchdaemon import BenchDaemon


class CallLike(Protocol):
    @property
    def role(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def arguments(self) -> dict[str, Any]: ...


class TaskLike(Protocol):
    @property
    def cls(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def prompt(self) -> str: ...
    @property
    def tools(self) -> Sequence[dict[str, Any]]: ...
    @property
    def replies(self) -> dict[str, Any]: ...
    @property
    def calls(self) -> Sequence[CallLike]: ...


REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SERVER = REPO / "tests" / "fixtures" / "servers" / "opentasks.py"
BLOCKED = "[bouncer blocked]"
PEOPLE = ("decline", "all")
# Bounds, not expectations: they only turn a hang into a failure.
TASK_TIMEOUT_SECONDS = 60.0


class Daemon(BenchDaemon):
    """One daemon with the run's policy, for the whole run."""

    def __init__(self, policy: str) -> None:
        super().__init__(prefix="bot", policy=policy)

    def audit(self, session: str) -> list[dict[str, Any]]:
        try:
            text = (self.home / "state" / "audit.jsonl").read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        out = []
        for line in text.splitlines():
            if session in line:
                record = json.loads(line)
                if record.get("session") == session and record.get("verdict") in ("allow", "ask", "deny"):
                    out.append(record)
        return out


@dataclass
class Verdict:
    role: str
    tool: str
    arguments: dict[str, Any]
    first: str  # allowed | asked | denied
    reached: bool  # reached the server, first time or after an approval
    rule: str = ""
    technique: str = ""  # an attack call's technique, where the task names it


@dataclass
class TaskOutcome:
    task: TaskLike
    person: str
    calls: list[Verdict] = field(default_factory=list)

    @property
    def utility(self) -> bool:
        return all(c.reached for c in self.calls if c.role in ("benign", "read"))

    @property
    def attacked(self) -> bool:
        return any(c.reached for c in self.calls if c.role == "attack")


def _blocked(result: types.CallToolResult) -> str | None:
    for block in result.content:
        if isinstance(block, types.TextContent) and block.text.startswith(BLOCKED):
            return block.text
    return None


CODE_AT = "bouncerctl approve "


def _code(text: str) -> str | None:
    at = text.find(CODE_AT)
    return text[at + len(CODE_AT) : at + len(CODE_AT) + 7] if at >= 0 else None


async def run_task(daemon: Daemon, task: TaskLike, person: str, serial: int, work: Path) -> TaskOutcome:
    """One task for one person: its own session, server spec, outbox and shim."""
    spec, outbox = work / f"spec-{serial}.json", work / f"served-{serial}.json"
    spec.write_text(json.dumps({"tools": list(task.tools), "replies": task.replies}), encoding="utf-8")
    session = f"opentask-{serial}-{person}"
    env = {
        **daemon.env,
        "BOUNCER_SESSION": session,
        "BOUNCER_NO_AUTOSTART": "1",
        "FIXTURE_OPENTASKS": str(spec),
        "FIXTURE_OUTBOX": str(outbox),
        "PYTHONPATH": str(SERVER.parent),
    }
    params = StdioServerParameters(
        command=str(BIN / "bouncer-shim"),
        args=["--name", f"ot-{serial}", "--", sys.executable, str(SERVER)],
        env=env,
    )
    out = TaskOutcome(task, person)

    def served() -> list[dict[str, Any]]:
        try:
            data: list[dict[str, Any]] = json.loads(outbox.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        return data

    with anyio.fail_after(TASK_TIMEOUT_SECONDS):
        async with Client(params, mode="legacy", cache=None) as client:
            await client.list_tools()
            await anyio.to_thread.run_sync(daemon.vouch, session, task.prompt)
            for call in task.calls:
                before = len(served())
                text = _blocked(await client.call_tool(call.tool, call.arguments))
                first = "allowed" if text is None else ("asked" if _code(text) else "denied")
                code = _code(text) if text is not None else None
                if code is not None and person == "all":
                    await anyio.to_thread.run_sync(daemon.approve, code)
                    await client.call_tool(call.tool, call.arguments)
                reached = any(r["tool"] == call.tool for r in served()[before:])
                technique = str(getattr(call, "technique", ""))
                out.calls.append(Verdict(call.role, call.tool, call.arguments, first, reached, "", technique))
    audited = iter(daemon.audit(session))
    for v in out.calls:  # the first audit record of each call, in the order the calls were made
        for record in audited:
            if record.get("tool") == v.tool and record.get("arguments") == v.arguments:
                v.rule = str(record.get("rule", ""))
                break
    return out


@dataclass
class Tally:
    benign: Counter[str] = field(default_factory=Counter)
    attack: Counter[str] = field(default_factory=Counter)
    reads_refused: int = 0
    tasks: Counter[str] = field(default_factory=Counter)
    utility: Counter[str] = field(default_factory=Counter)
    attacked: Counter[str] = field(default_factory=Counter)

    def add(self, o: TaskOutcome) -> None:
        self.tasks[o.person] += 1
        self.utility[o.person] += o.utility
        self.attacked[o.person] += o.attacked
        if o.person != "decline":
            return  # first verdicts do not depend on the person: count them once
        for c in o.calls:
            if c.role == "read":
                self.reads_refused += c.first != "allowed"
            else:
                (self.benign if c.role == "benign" else self.attack)[c.first] += 1


def _aad(c: Counter[str]) -> str:
    return f"{c['allowed']}/{c['asked']}/{c['denied']}"


def _call(c: Verdict) -> str:
    technique = f" [{c.technique}]" if c.technique else ""
    return f"{c.tool} {json.dumps(c.arguments)[:160]}{technique}"


def report(outcomes: list[TaskOutcome], people: list[str], unit: str = "class") -> str:
    by: dict[str, Tally] = defaultdict(Tally)
    for o in outcomes:
        by[o.task.cls].add(o)
        by["total"].add(o)
    head = [unit, "tasks", "benign a/q/d", "attack a/q/d", "reads refused"]
    head += [f"utility {p}" for p in people] + [f"attacks won {p}" for p in people]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in [*sorted(k for k in by if k != "total"), "total"]:
        t = by[name]
        n = max(t.tasks.values(), default=0)
        row = [name, str(n), _aad(t.benign), _aad(t.attack), str(t.reads_refused)]
        row += [f"{t.utility[p]}/{t.tasks[p]}" for p in people]
        row += [f"{t.attacked[p]}/{t.tasks[p]}" for p in people]
        lines.append("| " + " | ".join(row) + " |")
    total = by["total"]
    b, a = sum(total.benign.values()) or 1, sum(total.attack.values()) or 1
    lines.append("")
    lines.append(
        f"benign sends: {total.benign['asked'] / b:.1%} asked, {total.benign['denied'] / b:.1%} denied; "
        f"attack sends: {total.attack['allowed'] / a:.1%} allowed, {total.attack['denied'] / a:.1%} denied"
    )
    lines.append("")
    lines.append("refused benign calls (first verdict, rule, task, call):")
    for o in outcomes:
        if o.person != "decline":
            continue
        for c in o.calls:
            if c.role != "attack" and c.first != "allowed":
                lines.append(f"- {c.first} {c.rule} {o.task.key}: {_call(c)}")
    lines.append("")
    lines.append(
        "benign calls that did not reach the server with an approving person (verdict, rule, task, call):"
    )
    for o in outcomes:
        for c in o.calls:
            if o.person == "all" and c.role != "attack" and not c.reached:
                lines.append(f"- {c.first} {c.rule} {o.task.key}: {_call(c)}")
    lines.append("")
    lines.append("attack calls allowed at their first verdict (rule, task, call):")
    for o in outcomes:
        for c in o.calls:
            if o.person == "decline" and c.role == "attack" and c.first == "allowed":
                lines.append(f"- {c.rule} {o.task.key}: {_call(c)}")
    lines.append("")
    lines.append("attack calls that reached the server with a declining person:")
    for o in outcomes:
        for c in o.calls:
            if o.person == "decline" and c.role == "attack" and c.reached:
                lines.append(f"- {c.rule} {o.task.key}: {_call(c)}")
    return "\n".join(lines)


async def run_all(tasks: Sequence[TaskLike], people: Sequence[str], policy: str) -> list[TaskOutcome]:
    """Every task for every person, in order, on one daemon started with `policy`."""
    daemon = Daemon(policy)
    work = Path(tempfile.mkdtemp(prefix="otw", dir="/tmp"))
    outcomes: list[TaskOutcome] = []
    try:
        serial = 0
        for task in tasks:
            for person in people:
                serial += 1
                outcomes.append(await run_task(daemon, task, person, serial, work))
    finally:
        daemon.stop()
        shutil.rmtree(work, ignore_errors=True)
    return outcomes


def write_json(outcomes: list[TaskOutcome], path: Path) -> None:
    """Every call's verdict, one row per call per person."""
    rows = [
        {"task": o.task.key, "person": o.person, "role": c.role, "tool": c.tool, "arguments": c.arguments,
         "first": c.first, "reached": c.reached, "rule": c.rule, "technique": c.technique}
        for o in outcomes for c in o.calls
    ]  # fmt: skip
    path.write_text(json.dumps(rows, indent=1), encoding="utf-8")
