"""Tool calls held for a verdict, sans I/O: hold, request the verdict, cancel, release.

Theory of operation
-------------------
A client's ``tools/call`` never reaches the server before bouncerd has judged it: the relay makes a
`Held` of it and gives it to `HeldCalls.hold`. With the link up its verdict is requested at once;
otherwise it waits (`take_waiting`, when the link comes up or is lost) and nothing about it is sent;
a call on a server whose tool list the shim does not know waits for the list first (`unlisted`).
A verdict request that msgpack cannot carry releases the call again and `hold` says so: the relay
refuses it. Calls are kept by JSON-RPC id key, several per key (a client may reuse an id), so a
``notifications/cancelled`` naming that id drops them all (`cancel`): a dropped call is never
forwarded and never answered, whatever its verdict says later. The relay releases a call when its
verdict is final (`release`).

`held_bytes` counts the lines of every held call, so the pump can stop reading the client while too
much waits for verdicts. Requests go to the daemon through a `Requester` (the link's
`LinkSync.request`); this module never sees a frame, a reply or another machine's state.
"""

from __future__ import annotations

from typing import Any

from bouncer_shim.jsonrpc import IdKey, id_json, wire_id
from bouncer_shim.sync import Requester


class Retry:
    """What a tools/call carries from an input_required round, and what to forward if it is allowed."""

    __slots__ = ("fields", "forward", "ours", "upstream")

    def __init__(
        self,
        fields: dict[str, Any],
        forward: bytes | None,
        ours: bool,
        upstream: tuple[Any, Any] | None,
    ) -> None:
        self.fields = fields  # extra fields of the verdict op (request_state, input_response)
        self.forward = forward  # the line to forward if allowed (None: the original)
        self.ours = ours  # answers Bouncer's round
        self.upstream = upstream  # (requestState, inputResponses) of the upstream's round


class Held:
    """A tools/call waiting for its verdict, and perhaps for a person."""

    __slots__ = (
        "arguments",
        "dropped",
        "invalid",
        "key",
        "kind",
        "line",
        "person_asked",
        "request_id",
        "retry",
        "tool",
    )

    def __init__(
        self,
        key: IdKey,
        request_id: Any,
        line: bytes,
        tool: str,
        arguments: dict[str, Any],
        retry: Retry | None = None,
        invalid: str | None = None,
        kind: str = "tool",
    ) -> None:
        self.kind = kind  # "tool", or the wire.VERDICT_KINDS kind of another request (`tool` is its method)
        self.invalid = invalid  # why the call cannot be checked: judged only to be refused and audited
        self.key = key
        self.request_id = request_id
        self.line = line
        self.tool = tool
        self.arguments = arguments
        self.retry = retry
        self.dropped = False  # cancelled: never forward, never answer
        self.person_asked = False  # a question was put: another "ask" verdict is a refusal, not a new one

    @property
    def upstream_line(self) -> bytes:
        """What goes upstream if the call is allowed."""
        retry = self.retry
        return retry.forward if retry is not None and retry.forward is not None else self.line


class HeldCalls:
    __slots__ = ("_by_key", "_request", "_waiting", "held_bytes", "unlisted")

    def __init__(self, request: Requester) -> None:
        self._request = request
        self._by_key: dict[IdKey, list[Held]] = {}
        self._waiting: list[Held] = []  # held while the link is not up: no verdict requested yet
        self.unlisted: list[Held] = []  # held until the server's tool list is known (selflist.py)
        self.held_bytes = 0  # the lines of every held call

    def hold(self, held: Held, *, link_up: bool, listed: bool = True) -> bool:
        """Hold a call and request its verdict now (`link_up`) or once the relay says so; a call that
        needs the tool list first (not `listed`) waits for it. False: the request cannot be encoded and
        the call is released again (refuse it)."""
        self._by_key.setdefault(held.key, []).append(held)
        self.held_bytes += len(held.line)
        if not listed:
            self.unlisted.append(held)
        elif link_up:
            return self.request_verdict(held)
        else:
            self._waiting.append(held)
        return True

    def wait(self, held: Held) -> None:
        """A held call waits for the link (its tool list is known now, the link is not up)."""
        self._waiting.append(held)

    def take_unlisted(self) -> list[Held]:
        """The calls that waited for the tool list, in arrival order (no longer waiting for it)."""
        unlisted, self.unlisted = self.unlisted, []
        return unlisted

    def request_verdict(self, held: Held) -> bool:
        """Ask bouncerd to judge `held`; False (and released) if msgpack cannot carry the request."""
        fields = {
            "request_id": wire_id(held.request_id),
            "request_id_json": id_json(held.request_id, held.line),
            "tool": held.tool,
            "arguments": held.arguments,
        }
        if held.invalid is not None:
            fields["invalid"] = held.invalid
        if held.kind != "tool":
            fields["kind"] = held.kind
        if held.retry is not None:
            fields.update(held.retry.fields)
        if self._request("verdict", held, fields):
            return True
        self.release(held)
        return False

    def take_waiting(self) -> list[Held]:
        """The calls held without a verdict request, in arrival order (no longer waiting)."""
        waiting, self._waiting = self._waiting, []
        return waiting

    def release(self, held: Held) -> None:
        """Stop holding `held` (its verdict is final); a call no longer held is ignored."""
        calls = self._by_key.get(held.key)
        if calls and held in calls:
            calls.remove(held)
            self.held_bytes -= len(held.line)
            if not calls:
                del self._by_key[held.key]

    def cancel(self, key: IdKey) -> list[Held] | None:
        """Drop every call held under `key` (the client cancelled it); None if there is none."""
        calls = self._by_key.pop(key, None)
        if not calls:
            return None
        for held in calls:
            held.dropped = True
            self.held_bytes -= len(held.line)
        self._waiting = [h for h in self._waiting if not h.dropped]
        self.unlisted = [h for h in self.unlisted if not h.dropped]
        return calls
