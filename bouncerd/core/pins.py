"""Tool pins: what a server's tools looked like when trusted, what it lists now, and what waits.

Theory of operation
-------------------
A pin is the SHA-256 of the parts of a tool the agent reads (name, description, input schema), taken
on first use or when a person accepts it. Each server (keyed by `ServerIdentity.key`) has:

- ``pins``: tool -> `Pin` (journaled by ``pin`` events);
- ``live``/``live_tools``: the latest tools/list of this daemon's lifetime (not journaled: a server
  lists its tools again on every connection, and a call is judged against the list it came with);
- ``seen``: tool -> `Seen`, the last form listed that its pin does not cover (changed, or new after
  the first-use window), with when and in which client's session. It is journaled (``pin_seen``
  events) so the form a person must review outlives the connection that showed it and a restart:
  `review` reads it and `Engine.accept_pins` pins it, whether or not the server is still connected.

`review` is the one place a tool's review state is decided; the daemon's ``pins`` op sends its
rows, and ``bouncerctl pins show``, ``status`` and ``report`` all read that op.

States: ``pinned`` (the pin covers the form listed, or nothing else was listed since the daemon
started), ``changed`` (pinned, but a different form was listed: calls are refused), ``new`` (listed
after the first-use window, never accepted: calls are refused), ``not listed`` (pinned, but the
server's latest list in this daemon's lifetime does not have it: calls are refused).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bouncerd.core.events import PinSeenEvent
from bouncerd.core.model import ToolCall, Verdict

REVIEW_STATES = ("pinned", "changed", "new", "not listed")
# The live digest of a tool name a server lists more than once in different forms: it matches no pin,
# and there is no one form to pin (the agent reads every form).
DUPLICATED_TOOL = "duplicated"


def tool_digest(tool: Mapping[str, Any]) -> str:
    """SHA-256 over the parts of a tool the agent reads: name, description, input schema."""
    body = {
        "name": tool.get("name"),
        "description": tool.get("description"),
        "inputSchema": tool.get("inputSchema"),
    }
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Pin:
    digest: str
    description: str | None
    input_schema: Any


@dataclass
class Seen:
    """A form of a tool its pin does not cover, as last listed (journaled: outlives the connection)."""

    digest: str
    description: str | None
    input_schema: Any
    ts: float
    client: str | None
    session: str


@dataclass
class ServerPins:
    pins: dict[str, Pin] = field(default_factory=dict)
    open_until: float | None = None  # the first-use window; None once closed
    live: dict[str, str] = field(default_factory=dict)  # tool -> digest in the latest tools/list
    live_tools: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    listed: bool = False  # a tools/list arrived since this daemon started (else `live` is unknown)
    seen: dict[str, Seen] = field(default_factory=dict)  # tool -> last unaccepted form listed

    def apply_seen(self, ev: PinSeenEvent) -> None:
        if ev["digest"] is None:
            self.seen.pop(ev["tool"], None)
            return
        self.seen[ev["tool"]] = Seen(
            ev["digest"],
            ev.get("description"),
            ev.get("schema"),
            ev.get("ts", 0.0),
            ev.get("client"),
            ev.get("session", ""),
        )

    def forms_to_accept(self) -> dict[str, tuple[str, Any, Any]]:
        """tool -> (digest, description, schema) a `pins accept` would pin: the live form while the
        server is listed, else the last one seen."""
        forms = {name: (s.digest, s.description, s.input_schema) for name, s in self.seen.items()}
        for name, tool in self.live_tools.items():
            if self.live[name] == DUPLICATED_TOOL:
                forms.pop(name, None)  # no one form to pin: the server must list the name once
                continue
            forms[name] = (self.live[name], tool.get("description"), tool.get("inputSchema"))
        return {
            name: form
            for name, form in forms.items()
            if (pin := self.pins.get(name)) is None or pin.digest != form[0]
        }


def seen_event(server_key: str, tool: str, seen: Seen) -> PinSeenEvent:
    return PinSeenEvent(
        ev="pin_seen",
        server=server_key,
        tool=tool,
        digest=seen.digest,
        description=seen.description,
        schema=seen.input_schema,
        ts=seen.ts,
        client=seen.client,
        session=seen.session,
    )


def review(sp: ServerPins) -> list[dict[str, Any]]:
    """One row per tool: name, state (REVIEW_STATES), inputSchema when known, and for a changed or
    new tool the form waiting (``live``: description and schema; ``seen``: when, client, session,
    digest, whether the server lists it now) and for a changed one the pinned form (``pinned``)."""
    rows = []
    for name in sorted(set(sp.pins) | set(sp.live) | set(sp.seen)):
        pin = sp.pins.get(name)
        live = sp.live.get(name)
        seen = sp.seen.get(name)
        if pin is None:
            state = "new"
        elif seen is not None or (live is not None and live != pin.digest):
            state = "changed"
        elif sp.listed and live is None:
            state = "not listed"
        else:
            state = "pinned"
        row: dict[str, Any] = {"name": name, "state": state}
        if live == DUPLICATED_TOOL:
            row["duplicated"] = True  # listed more than once in different forms: refused, not acceptable
        live_tool = sp.live_tools.get(name)
        if live_tool is not None and isinstance(live_tool.get("inputSchema"), dict):
            row["inputSchema"] = live_tool["inputSchema"]
        elif seen is not None and isinstance(seen.input_schema, dict):
            row["inputSchema"] = seen.input_schema
        elif pin is not None and isinstance(pin.input_schema, dict):
            row["inputSchema"] = pin.input_schema
        if state in ("changed", "new"):
            if live_tool is not None and (seen is None or seen.digest == live):
                waiting = {
                    "description": live_tool.get("description"),
                    "inputSchema": live_tool.get("inputSchema"),
                }
            elif seen is not None:
                waiting = {"description": seen.description, "inputSchema": seen.input_schema}
            else:
                waiting = {}
            row["live"] = waiting
            if seen is not None:
                row["seen"] = {
                    "digest": seen.digest,
                    "ts": seen.ts,
                    "client": seen.client,
                    "session": seen.session,
                    "listed_now": live == seen.digest,
                }
            if pin is not None:
                row["pinned"] = {"description": pin.description, "inputSchema": pin.input_schema}
        rows.append(row)
    return rows


def check(sp: ServerPins | None, call: ToolCall) -> Verdict | None:
    """The pin rule for one call: None if the pin covers the tool as the server lists it now."""
    name = call.tool
    if sp is not None and sp.live.get(name) == DUPLICATED_TOOL:
        return Verdict(
            "deny",
            "pin.duplicate_tool",
            f"server {call.server.name!r} lists tool {name!r} more than once with different "
            f"descriptions or schemas; the agent reads every form, so none of them can be trusted",
        )
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
