"""The engine: all state the daemon keeps, changed only by events, and the decision over it.

Theory of operation
-------------------
Everything that must survive a crash (pins, taint, budget counts, approvals) changes only through
*events*: plain dicts that msgpack and JSON can carry. A method that changes state returns the
events it produced *after* applying them; the daemon appends them to its journal before it answers
the shim. On start the daemon replays the journal through `apply`, and ends up in the same state.
`snapshot` returns a minimal event list that rebuilds the current state (journal compaction).

The engine never reads a clock, the environment or a file: `now` is passed in, policy is a value.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bouncerd.core import taint
from bouncerd.core.model import Provenance, ServerIdentity, ToolCall, Verdict

Event = dict[str, Any]

# Trust on first use: a server's first tool list is pinned as it is. Some servers register more tools
# right after `notifications/initialized` (and send list_changed), so the pin set of a server seen for
# the first time stays open for this long, or until its first tools/call, whichever comes first. A tool
# whose description or schema *changed* is never pinned automatically.
FIRST_USE_WINDOW_SECONDS = 30.0


def tool_digest(tool: Mapping[str, Any]) -> str:
    """SHA-256 over the parts of a tool the agent reads: name, description, input schema."""
    body = {
        "name": tool.get("name"),
        "description": tool.get("description"),
        "inputSchema": tool.get("inputSchema"),
    }
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canon.encode()).hexdigest()


@dataclass
class Pin:
    digest: str
    description: str | None
    input_schema: Any


@dataclass
class ServerPins:
    pins: dict[str, Pin] = field(default_factory=dict)
    open_until: float | None = None  # the first-use window; None once closed
    live: dict[str, str] = field(default_factory=dict)  # tool -> digest in the latest tools/list
    live_tools: dict[str, Mapping[str, Any]] = field(default_factory=dict)


@dataclass
class SessionState:
    taint: taint.TaintIndex = field(default_factory=taint.TaintIndex)
    attempts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (server, tool) -> calls tried


@dataclass(frozen=True)
class PinReport:
    pinned_now: tuple[str, ...]  # newly pinned by first use
    unpinned: tuple[str, ...]  # new tools waiting for `bouncerctl pins accept`
    changed: tuple[str, ...]  # pinned tools whose description or schema changed


class Engine:
    def __init__(self) -> None:
        self.servers: dict[str, ServerPins] = {}
        self.sessions: dict[str, SessionState] = {}

    # ---- events -------------------------------------------------------------------------------

    def apply(self, ev: Mapping[str, Any]) -> None:
        kind = ev["ev"]
        if kind == "pin":
            sp = self.servers.setdefault(ev["server"], ServerPins())
            sp.pins[ev["tool"]] = Pin(ev["digest"], ev.get("description"), ev.get("schema"))
        elif kind == "pin_window":
            self.servers.setdefault(ev["server"], ServerPins()).open_until = ev["until"]
        elif kind == "taint":
            state = self.session(ev["session"])
            state.taint.add(taint.TokenRecord(tok, Provenance(**prov)) for tok, prov in ev["records"])
        elif kind == "attempt":
            self.session(ev["session"]).attempts[(ev["server"], ev["tool"])] += ev.get("n", 1)
        else:
            raise ValueError(f"unknown event {kind!r}")

    def _emit(self, events: list[Event], ev: Event) -> None:
        self.apply(ev)
        events.append(ev)

    def snapshot(self) -> list[Event]:
        out: list[Event] = []
        for key, sp in self.servers.items():
            for name, pin in sp.pins.items():
                out.append(
                    {
                        "ev": "pin",
                        "server": key,
                        "tool": name,
                        "digest": pin.digest,
                        "description": pin.description,
                        "schema": pin.input_schema,
                    }
                )
            if sp.open_until is not None:
                out.append({"ev": "pin_window", "server": key, "until": sp.open_until})
        for sid, state in self.sessions.items():
            records = [[tok, prov.as_dict()] for tok, prov in state.taint.items()]
            if records:
                out.append({"ev": "taint", "session": sid, "records": records})
            for (server, tool), n in state.attempts.items():
                out.append({"ev": "attempt", "session": sid, "server": server, "tool": tool, "n": n})
        return out

    def session(self, key: str) -> SessionState:
        state = self.sessions.get(key)
        if state is None:
            state = self.sessions[key] = SessionState()
        return state

    # ---- pins ---------------------------------------------------------------------------------

    def tools_listed(
        self, server: ServerIdentity, tools: Iterable[Mapping[str, Any]], now: float
    ) -> tuple[PinReport, list[Event]]:
        events: list[Event] = []
        sp = self.servers.get(server.key)
        if sp is None:
            self._emit(
                events, {"ev": "pin_window", "server": server.key, "until": now + FIRST_USE_WINDOW_SECONDS}
            )
            sp = self.servers[server.key]
        window_open = sp.open_until is not None and now < sp.open_until
        pinned_now: list[str] = []
        unpinned: list[str] = []
        changed: list[str] = []
        live: dict[str, str] = {}
        live_tools: dict[str, Mapping[str, Any]] = {}
        for tool in tools:
            name = tool.get("name")
            if not isinstance(name, str):
                continue
            digest = tool_digest(tool)
            live[name] = digest
            live_tools[name] = tool
            pin = sp.pins.get(name)
            if pin is None:
                if window_open:
                    self._emit(
                        events,
                        {
                            "ev": "pin",
                            "server": server.key,
                            "tool": name,
                            "digest": digest,
                            "description": tool.get("description"),
                            "schema": tool.get("inputSchema"),
                        },
                    )
                    pinned_now.append(name)
                else:
                    unpinned.append(name)
            elif pin.digest != digest:
                changed.append(name)
        sp.live = live
        sp.live_tools = live_tools
        return PinReport(tuple(pinned_now), tuple(unpinned), tuple(changed)), events

    def _check_pin(self, call: ToolCall) -> Verdict | None:
        sp = self.servers.get(call.server.key)
        name = call.tool
        if sp is None or name not in sp.pins:
            return Verdict(
                "deny",
                "pin.unknown_tool",
                f"tool {name!r} is not in the pinned tool list of server {call.server.name!r}; "
                f"if you trust it, run: bouncerctl pins accept {call.server.name} {name}",
            )
        live = sp.live.get(name)
        if live is None:
            return Verdict(
                "deny",
                "pin.unlisted_tool",
                f"tool {name!r} is not in server {call.server.name!r}'s current tool list",
            )
        if live != sp.pins[name].digest:
            return Verdict(
                "deny",
                "pin.changed_tool",
                f"the description or input schema of tool {name!r} changed since it was pinned; "
                f"review it with: bouncerctl pins show {call.server.name} "
                f"and accept it with: bouncerctl pins accept {call.server.name} {name}",
            )
        return None

    # ---- outputs ------------------------------------------------------------------------------

    def observe(self, session: str, payload: Any, source: taint.Source) -> list[Event]:
        records = taint.extract(payload, source)
        return self.record_taint(session, records)

    def record_taint(self, session: str, records: list[taint.TokenRecord]) -> list[Event]:
        if not records:
            return []
        events: list[Event] = []
        self._emit(
            events,
            {
                "ev": "taint",
                "session": session,
                "records": [[r.token, r.provenance.as_dict()] for r in records],
            },
        )
        return events

    # ---- the decision -------------------------------------------------------------------------

    def decide(self, call: ToolCall, now: float) -> Verdict:
        events: list[Event] = []
        sp = self.servers.get(call.server.key)
        if sp is not None and sp.open_until is not None:
            # The first call closes the first-use window: from now on new tools need a person.
            self._emit(events, {"ev": "pin_window", "server": call.server.key, "until": None})
            sp.open_until = None
        self._emit(
            events, {"ev": "attempt", "session": call.session, "server": call.server.name, "tool": call.tool}
        )
        verdict = (
            self._check_pin(call)
            or self._check_taint(call)
            or Verdict("allow", "default.allow", "no rule objected")
        )
        return Verdict(
            verdict.verdict,
            verdict.rule,
            verdict.reason,
            verdict.destination,
            verdict.parameter,
            verdict.provenance,
            tuple(events),
        )

    def _check_taint(self, call: ToolCall) -> Verdict | None:
        index = self.session(call.session).taint
        for path, text in _argument_strings(call.arguments, ""):
            for tok in taint.destination_tokens(text):
                hit = index.lookup(tok)
                if hit is None:
                    continue
                prov = hit.provenance
                where = (
                    f"in the output of {prov.server}/{prov.tool}" if prov else "in earlier untrusted output"
                )
                return Verdict(
                    "deny",
                    "taint.tainted_destination",
                    f"destination {tok!r} in argument {path or '(root)'!r} first appeared {where}; "
                    f"a send to it could carry your data to whoever planted it",
                    destination=tok,
                    parameter=path or None,
                    provenance=prov,
                )
        return None


def _argument_strings(value: Any, path: str) -> Iterable[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            sub = f"{path}.{k}" if path else str(k)
            yield sub, str(k)
            yield from _argument_strings(v, sub)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _argument_strings(v, f"{path}[{i}]")
