"""Tool pins: what a server's tools looked like when trusted, what it lists now, and what waits.

Theory of operation
-------------------
A pin is the SHA-256 of a tool as the server lists it: every part of it, not a chosen few. A client
shows or acts on the name, the title, the description, the input and output schemas, the annotations
(``readOnlyHint``, ``destructiveHint``: a client may run a "read-only" tool without asking), the icons
and ``_meta``, and a client may pass any of them to the model, so a server that changes any part after
it was trusted (a rug pull) is ``pin.changed_tool`` until a person accepts the new form. It is taken on
first use, on the first listing to a client capability profile the server was never listed to (for
tools nobody was listed before: see `capability_profile`), or when a person accepts it. Each server
(keyed by `ServerIdentity.key`) has:

- ``pins``: tool -> `Pin` (journaled by ``pin`` events);
- ``live``/``live_tools``: the latest tools/list of this daemon's lifetime (not journaled: a server
  lists its tools again on every connection, and a call is judged against the list it came with);
- ``seen``: tool -> `Seen`, the last form listed that its pin does not cover (changed, or new after
  the first-use window), with when and in which client's session. It is journaled (``pin_seen``
  events) so the form a person must review outlives the connection that showed it and a restart:
  `review` reads it and `accept` pins it, whether or not the server is still connected.

`listing` is what a tools/list does (pin on first use, journal what waits), `review` is the one
place a tool's review state is decided (the daemon's ``pins`` op sends its rows, and ``bouncerctl
pins show``, ``status`` and ``report`` all read that op), and `check` is the pin rule of a call.

Digest versions: a digest is ``v2:`` and the hex of the whole tool. A pin journaled before the digest
covered every part is bare hex over the name, description and input schema (`legacy_digest`). When a
server lists a tool whose legacy parts still match such a pin, the pin is taken again over the whole
tool as listed (one ``pin`` event): the parts the old pin vouched for are unchanged, and the newly
covered ones are trusted on that first listing, as every part is on first use. If a legacy part
changed, the tool is ``changed`` as before. So an upgrade locks no tool out, and a tool never gains
trust in a part that changed since a person or first use trusted it.

States: ``pinned`` (the pin covers the form listed, or nothing else was listed since the daemon
started), ``changed`` (pinned, but a different form was listed: calls are refused), ``new`` (listed
after the first-use window, never accepted: calls are refused), ``not listed`` (pinned, but the
server's latest list in this daemon's lifetime does not have it: calls are refused).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from bouncerd.core.events import PinEvent, PinSeenEvent, PinWindowEvent
from bouncerd.core.model import ServerIdentity, ToolCall, Verdict

REVIEW_STATES = ("pinned", "changed", "new", "not listed")
# The live digest of a tool name a server lists more than once in different forms: it matches no pin,
# and there is no one form to pin (the agent reads every form).
DUPLICATED_TOOL = "duplicated"
# The version of a digest over the whole tool. A digest without it is a legacy one (name, description
# and input schema only), journaled before: see the theory of operation for how such a pin is carried.
DIGEST_PREFIX = "v2:"
# What a legacy digest covered: the parts a review showed before every part was pinned.
LEGACY_PARTS = ("name", "description", "inputSchema")

# Trust on first use: a server's first tool list is pinned as it is. Some servers register more tools
# right after `notifications/initialized` (and send list_changed), so the pin set of a server seen for
# the first time stays open for this long, or until its first tools/call, whichever comes first. A tool
# of which any part *changed* is never pinned automatically.
FIRST_USE_WINDOW_SECONDS = 30.0

# Servers list more tools to a client that can do more (the reference server registers its elicitation
# and sampling tools only for clients that declare them). So the first-use window opens again, once,
# when a server is listed to a client whose capability profile it has not been listed to before: the
# tools that client is the first to see are pinned as they are, as every tool was on first use. A tool
# listed before (pinned, changed or waiting for review) is never pinned by such a window, and a
# server whose profiles were not recorded (a journal from before) records the profile it is listed to
# without opening one, so an upgrade reopens nothing.

ListingEvent = PinEvent | PinSeenEvent | PinWindowEvent


def _sha256(body: Mapping[str, Any]) -> str:
    # surrogatepass: a JSON string may hold a lone surrogate ("\ud800"); it must digest, not raise.
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def tool_digest(tool: Mapping[str, Any]) -> str:
    """The digest of every part of a tool as listed: whatever a client shows, acts on or passes on."""
    return DIGEST_PREFIX + _sha256(tool)


def legacy_digest(tool: Mapping[str, Any]) -> str:
    """The digest pins had before `DIGEST_PREFIX`: over the name, description and input schema."""
    return _sha256({part: tool.get(part) for part in LEGACY_PARTS})


def is_legacy(digest: str) -> bool:
    return not digest.startswith(DIGEST_PREFIX)


def tool_form(tool: Mapping[str, Any]) -> dict[str, Any]:
    """What a review shows of a tool: every part but its name (the row names it)."""
    return {k: v for k, v in tool.items() if k != "name"}


@dataclass
class Pin:
    digest: str
    description: str | None
    input_schema: Any
    form: Mapping[str, Any] | None = None  # every part but the name; None for a pin journaled before

    def shown(self) -> dict[str, Any]:
        return dict(self.form) if self.form is not None else _legacy_form(self.description, self.input_schema)


@dataclass
class Seen:
    """A form of a tool its pin does not cover, as last listed (journaled: outlives the connection)."""

    digest: str
    description: str | None
    input_schema: Any
    ts: float
    client: str | None
    session: str
    form: Mapping[str, Any] | None = None

    def shown(self) -> dict[str, Any]:
        return dict(self.form) if self.form is not None else _legacy_form(self.description, self.input_schema)


def _legacy_form(description: str | None, schema: Any) -> dict[str, Any]:
    return {"description": description, "inputSchema": schema}


@dataclass(frozen=True)
class PinReport:
    pinned_now: tuple[str, ...]  # newly pinned by first use
    unpinned: tuple[str, ...]  # new tools waiting for `bouncerctl pins accept`
    changed: tuple[str, ...]  # pinned tools of which a part changed


@dataclass
class ServerPins:
    pins: dict[str, Pin] = field(default_factory=dict)
    open_until: float | None = None  # the first-use window; None once closed
    live: dict[str, str] = field(default_factory=dict)  # tool -> digest in the latest tools/list
    live_tools: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    listed: bool = False  # a tools/list arrived since this daemon started (else `live` is unknown)
    seen: dict[str, Seen] = field(default_factory=dict)  # tool -> last unaccepted form listed
    profiles: set[str] = field(default_factory=set)  # client capability profiles listed to
    window_profile: str | None = None  # the profile the open window is for; None: any (first use)

    def apply_window(self, ev: PinWindowEvent) -> None:
        self.open_until = ev["until"]
        profile = ev.get("profile")
        if profile is not None:
            self.profiles.add(profile)
        self.window_profile = ev.get("window_for") if ev["until"] is not None else None

    def apply_pin(self, ev: PinEvent) -> None:
        form = ev.get("form")
        self.pins[ev["tool"]] = Pin(
            ev["digest"], ev.get("description"), ev.get("schema"), form if isinstance(form, Mapping) else None
        )
        seen = self.seen.get(ev["tool"])
        if seen is not None and seen.digest == ev["digest"]:
            del self.seen[ev["tool"]]  # the person accepted the form that was waiting

    def apply_seen(self, ev: PinSeenEvent) -> None:
        if ev["digest"] is None:
            self.seen.pop(ev["tool"], None)
            return
        form = ev.get("form")
        self.seen[ev["tool"]] = Seen(
            ev["digest"],
            ev.get("description"),
            ev.get("schema"),
            ev.get("ts", 0.0),
            ev.get("client"),
            ev.get("session", ""),
            form if isinstance(form, Mapping) else None,
        )

    def forms_to_accept(self) -> dict[str, tuple[str, Mapping[str, Any]]]:
        """tool -> (digest, tool form) a `pins accept` would pin: the live form while the server is
        listed, else the last one seen."""
        forms: dict[str, tuple[str, Mapping[str, Any]]] = {
            name: (s.digest, {"name": name, **s.shown()}) for name, s in self.seen.items()
        }
        for name, tool in self.live_tools.items():
            if self.live[name] == DUPLICATED_TOOL:
                forms.pop(name, None)  # no one form to pin: the server must list the name once
                continue
            forms[name] = (self.live[name], tool)
        return {
            name: form
            for name, form in forms.items()
            if (pin := self.pins.get(name)) is None or pin.digest != form[0]
        }


def pin_event(server_key: str, name: str, digest: str, tool: Mapping[str, Any]) -> PinEvent:
    return PinEvent(
        ev="pin",
        server=server_key,
        tool=name,
        digest=digest,
        description=tool.get("description"),
        schema=tool.get("inputSchema"),
        form=tool_form(tool),
    )


def pin_snapshot(server_key: str, name: str, pin: Pin) -> PinEvent:
    ev = PinEvent(
        ev="pin",
        server=server_key,
        tool=name,
        digest=pin.digest,
        description=pin.description,
        schema=pin.input_schema,
    )
    if pin.form is not None:
        ev["form"] = dict(pin.form)
    return ev


def seen_event(server_key: str, tool: str, seen: Seen) -> PinSeenEvent:
    ev = PinSeenEvent(
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
    if seen.form is not None:
        ev["form"] = dict(seen.form)
    return ev


def capability_profile(capabilities: Any) -> str | None:
    """What a client can do, as one string: the capability names it declares and their sub-keys
    (``elicitation.form,roots.listChanged,sampling``). None when the client did not say."""
    if not isinstance(capabilities, Mapping):
        return None
    names: list[str] = []
    for key, value in capabilities.items():
        if not isinstance(key, str) or value is None or value is False:
            continue
        names.append(key)
        if isinstance(value, Mapping):
            names.extend(f"{key}.{sub}" for sub in value if isinstance(sub, str))
    return ",".join(sorted(names))


def window_snapshot(server_key: str, sp: ServerPins) -> list[PinWindowEvent]:
    """The window events that rebuild `sp`'s profiles and open window (closed ones first)."""
    out = [
        PinWindowEvent(ev="pin_window", server=server_key, until=None, profile=p)
        for p in sorted(sp.profiles)
        if p != sp.window_profile or sp.open_until is None
    ]
    if sp.open_until is not None:
        ev = PinWindowEvent(ev="pin_window", server=server_key, until=sp.open_until)
        if sp.window_profile is not None:
            ev["profile"] = ev["window_for"] = sp.window_profile
        out.append(ev)
    return out


def _window(
    sp: ServerPins | None, server_key: str, now: float, profile: str | None
) -> tuple[ServerPins, list[PinWindowEvent], bool]:
    """The first-use window of one listing: (state as it will be, events to journal, is it open)."""
    if sp is None:
        until = now + FIRST_USE_WINDOW_SECONDS
        ev = PinWindowEvent(ev="pin_window", server=server_key, until=until)
        sp = ServerPins()
        if profile is not None:
            ev["profile"] = ev["window_for"] = profile
        sp.apply_window(ev)
        return sp, [ev], True
    events: list[PinWindowEvent] = []
    if profile is not None and profile not in sp.profiles:
        if sp.profiles:  # a client that can do something the server was never listed to before
            until = now + FIRST_USE_WINDOW_SECONDS
            ev = PinWindowEvent(ev="pin_window", server=server_key, until=until, profile=profile)
            ev["window_for"] = profile
        else:  # profiles never recorded for this server: record, and leave the window as it is
            ev = PinWindowEvent(ev="pin_window", server=server_key, until=sp.open_until, profile=profile)
            if sp.window_profile is not None:
                ev["window_for"] = sp.window_profile
        events.append(ev)
        state = ServerPins(pins=sp.pins, seen=sp.seen, profiles=set(sp.profiles))
        state.apply_window(ev)
        sp = state
    is_open = (
        sp.open_until is not None
        and now < sp.open_until
        and (sp.window_profile is None or sp.window_profile == profile)
    )
    return sp, events, is_open


def listing(
    sp: ServerPins | None,
    server: ServerIdentity,
    tools: Iterable[Mapping[str, Any]],
    now: float,
    client: str | None,
    session: str,
    profile: str | None = None,
) -> tuple[PinReport, list[ListingEvent], dict[str, str], dict[str, Mapping[str, Any]]]:
    """A server's tools/list: the events to journal (applied in order, they pin on first use or on a
    new client profile's first listing, carry a legacy pin whose parts match, and record every form no
    pin covers), the report, and the live list (`ServerPins.live`, `live_tools`) to set once they are
    applied. `profile` is the listing client's `capability_profile`."""
    events: list[ListingEvent] = []
    sp, opened, window_open = _window(sp, server.key, now, profile)
    events.extend(opened)
    pinned_now: list[str] = []
    unpinned: list[str] = []
    changed: list[str] = []
    live: dict[str, str] = {}
    live_tools: dict[str, Mapping[str, Any]] = {}
    duplicated: set[str] = set()
    for tool in tools:
        name = tool.get("name")
        if not isinstance(name, str):
            continue
        digest = tool_digest(tool)
        if name in live:
            if live[name] != digest:
                duplicated.add(name)  # the agent reads every form; no one digest stands for them
            continue
        live[name] = digest
        live_tools[name] = tool
    for name, digest in live.items():
        tool = live_tools[name]
        pin = sp.pins.get(name)
        if name in duplicated:
            live[name] = DUPLICATED_TOOL
            (changed if pin is not None else unpinned).append(name)  # never pinned on first use
            continue
        if pin is not None and is_legacy(pin.digest) and pin.digest == legacy_digest(tool):
            events.append(pin_event(server.key, name, digest, tool))  # carried to the whole tool
            pin = Pin(digest, tool.get("description"), tool.get("inputSchema"), tool_form(tool))
        covered = pin is not None and pin.digest == digest
        # A window pins only what was never listed before (a form waiting for review stays waiting).
        pin_now = pin is None and window_open and name not in sp.seen
        if not covered and not pin_now:
            seen = sp.seen.get(name)
            if seen is None or seen.digest != digest:
                description, schema = tool.get("description"), tool.get("inputSchema")
                seen = Seen(digest, description, schema, now, client, session, tool_form(tool))
                events.append(seen_event(server.key, name, seen))
        elif covered and name in sp.seen:  # listed as pinned again: nothing waits for review
            events.append(PinSeenEvent(ev="pin_seen", server=server.key, tool=name, digest=None))
        if pin is None:
            if pin_now:
                events.append(pin_event(server.key, name, digest, tool))
                pinned_now.append(name)
            else:
                unpinned.append(name)
        elif pin.digest != digest:
            changed.append(name)
    return PinReport(tuple(pinned_now), tuple(unpinned), tuple(changed)), events, live, live_tools


def accept(sp: ServerPins | None, server_key: str, tools: Iterable[str] | None = None) -> list[PinEvent]:
    """A person's `bouncerctl pins accept`: the pin events for the form of these tools (all unpinned
    and changed ones if None) that `pins show` showed: the live one while the server is listed, else
    the last one seen (journaled), so accepting works after the server has gone or the daemon
    restarted."""
    if sp is None:
        return []
    wanted = None if tools is None else set(tools)
    return [
        pin_event(server_key, name, digest, tool)
        for name, (digest, tool) in sp.forms_to_accept().items()
        if wanted is None or name in wanted
    ]


def review(sp: ServerPins) -> list[dict[str, Any]]:
    """One row per tool: name, state (REVIEW_STATES), inputSchema when known, and for a changed or
    new tool the form waiting (``live``: every part but the name; ``seen``: when, client, session,
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
                waiting = tool_form(live_tool)
            elif seen is not None:
                waiting = seen.shown()
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
                row["pinned"] = pin.shown()
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
            f"tool {name!r} changed since it was pinned (its description, schema, annotations or another "
            f"part the agent or client reads); "
            f"review it with: bouncerctl pins show {call.server.name} "
            f"and accept it with: bouncerctl pins accept {call.server.name} {name}",
        )
    return None
