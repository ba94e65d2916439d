"""Calls decided before they are asked, sans I/O: which tools need no verdict, and when that stops.

Theory of operation
-------------------
Most calls are reads whose verdict cannot depend on anything the daemon learns at run time: the
tool is pinned as the server lists it now, and no gate of the decision concerns it (no budget, no
argument constraint, no sink, no program argument, a name that only reads). For such a tool the
engine's `decide` is a plain allow whatever the taint, the budgets spent or the grants open, so the
shim need not wait for it: it forwards the call at once and sends the verdict record after it.

`fast_tools` computes that set for one server of one session, by asking the engine's own steps:
the pin rule (`pins.check`) and every row of `gates.GATES` through its `concerns`, the predicate
`decide` itself runs before a gate's check. No rule is restated here, so a gate added to the
table keeps the tools it concerns off the fast path (tests/unit/test_fastpath.py holds this). For
each tool the set also names the arguments a fast call may carry: those the tool's input schema
lists, when no gate concerns a call with all of them (`concerns` only grows with the names). A
call with another argument, or none of this applying, takes the round trip.

`Grants` is the daemon's side of handing the set out and taking it back (docs/how-it-works.md,
"Decided before it is asked"). A shim asks with the epoch it holds (None: nothing); the daemon
answers with a grant (the set and its epoch), or parks the request until something changes, then
answers it with a withdrawal. A change that could shrink a set (a policy reload) is bracketed by
`begin_change` and `end_change`: `begin_change` withdraws every set, and the change is applied
only once each holder has acknowledged (asked again, holding nothing: every record it sent before
is on its connection ahead of that request) or left (`settled`). Requests made meanwhile are
parked and granted by `end_change`, from the state after the change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from bouncerd.core import gates, pins
from bouncerd.core.engine import Engine
from bouncerd.core.model import ServerIdentity, ToolCall, Verdict
from bouncerd.core.policy import Policy

# Tools in one grant. A server listing more is granted none past this: the round trip still judges
# them, and a grant stays one small frame per change.
MAX_FAST_TOOLS: Final = 1000

# Argument names per fast tool: an input schema with more is not a read this path is for.
MAX_FAST_ARGUMENTS: Final = 64

FastTools = dict[str, tuple[str, ...]]  # tool -> the argument names a fast call may carry


def schema_arguments(tool: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The top-level argument names a listed tool's input schema declares, or None if unreadable."""
    schema = tool.get("inputSchema", {})
    if not isinstance(schema, Mapping):
        return None
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping) or len(properties) > MAX_FAST_ARGUMENTS:
        return None
    names = tuple(name for name in properties if isinstance(name, str))
    return names if len(names) == len(properties) else None


def is_fast(
    engine: Engine, server: ServerIdentity, tool: str, names: tuple[str, ...], policy: Policy
) -> bool:
    """Whether `decide` is a plain allow for every call of `tool` whose arguments are among `names`,
    whatever the history: the pin covers the tool as listed now and no gate concerns it."""
    sp = engine.servers.get(server.key)
    if sp is None or sp.open_until is not None:  # the first call closes the first-use window
        return False
    probe = ToolCall("", server, tool, {})
    if pins.check(sp, probe) is not None:
        return False
    rule = engine.rule_for(server, tool, policy)
    return not any(gate.concerns(rule, tool, names) for gate in gates.GATES)


def fast_tools(engine: Engine, server: ServerIdentity, policy: Policy) -> FastTools:
    """Every tool of `server`'s current list whose verdict is a plain allow independent of history,
    with the argument names such a call may carry."""
    sp = engine.servers.get(server.key)
    out: FastTools = {}
    if sp is None:
        return out
    for name, listed in sp.live_tools.items():
        if len(out) >= MAX_FAST_TOOLS:
            break
        names = schema_arguments(listed)
        if names is not None and is_fast(engine, server, name, names, policy):
            out[name] = names
    return out


def judge_forwarded(
    engine: Engine, call: ToolCall, now: float, policy: Policy, *, epoch: int, policy_error: str | None
) -> Verdict:
    """The verdict record of a call the shim has already forwarded under the set of `epoch`: the
    engine's decision, as for any call (its events, attempts and notes with it). It is an allow
    whenever the set was right (docs/how-it-works.md, "Decided before it is asked"); if a change
    the daemon could not wait for came first (or the policy no longer loads), the record still says
    the call went through, as ``fastpath.late`` with what the daemon would have said."""
    if policy_error is not None:
        late = Verdict("deny", "policy.unreadable", f"this server's policy cannot be loaded: {policy_error}")
    else:
        late = engine.decide(call, now, policy)
        if late.verdict == "allow":
            return late
    reason = (
        f"forwarded under the fast-path set of epoch {epoch} before its withdrawal reached the shim; "
        f"judged now it would be {late.verdict} ({late.rule}: {late.reason})"
    )
    return Verdict(
        "allow", "fastpath.late", reason, late.destination, late.parameter, late.provenance, late.events
    )


@dataclass(frozen=True)
class Grant:
    """A reply to a holder: the set and its epoch, or (tools None) a withdrawal."""

    epoch: int
    tools: FastTools | None


class Holder:
    """One shim connection as `Grants` sees it."""

    __slots__ = ("held", "key", "parked", "withdrawn")

    def __init__(self, key: str) -> None:
        self.key = key  # the server key (a change to one server's pins concerns its holders only)
        self.held: int | None = None  # the epoch of the set it may be using (granted, not acknowledged)
        self.withdrawn = False  # its set is withdrawn and it has not acknowledged yet
        self.parked = False  # a request waits for its answer


Compute = Callable[[Holder], FastTools]


class Grants:
    def __init__(self) -> None:
        self.epoch = 0
        self._changing = 0  # changes begun and not ended
        self.holders: list[Holder] = []

    def join(self, key: str) -> Holder:
        holder = Holder(key)
        self.holders.append(holder)
        return holder

    def leave(self, holder: Holder) -> None:
        """The connection is gone: whatever it held can no longer be used."""
        if holder in self.holders:
            self.holders.remove(holder)

    def request(self, holder: Holder, holding: int | None, compute: Compute) -> Grant | None:
        """A holder asks, holding `holding` (a new request supersedes a parked one). The answer now,
        or None: parked until a change answers it."""
        holder.parked = False
        if holding is None or holding != holder.held:
            holder.held, holder.withdrawn = None, False  # it uses nothing: a withdrawal acknowledged
        if holder.withdrawn:
            return Grant(self.epoch, None)  # withdrawn while it was not asking: it must drop it
        if holder.held is not None or self._changing:
            holder.parked = True
            return None
        return self._grant(holder, compute)

    def _grant(self, holder: Holder, compute: Compute) -> Grant:
        holder.parked = False
        holder.held = self.epoch
        return Grant(self.epoch, compute(holder))

    def begin_change(self, key: str | None = None) -> list[tuple[Holder, Grant]]:
        """A change that could shrink the sets of `key`'s holders (None: every holder) is coming:
        withdraw them. The parked holders' answers are returned; the others get theirs on asking."""
        self.epoch += 1
        self._changing += 1
        out: list[tuple[Holder, Grant]] = []
        for holder in self.holders:
            if (key is not None and holder.key != key) or holder.held is None:
                continue
            holder.withdrawn = True
            if holder.parked:
                holder.parked = False
                out.append((holder, Grant(self.epoch, None)))
        return out

    @property
    def settled(self) -> bool:
        """Every withdrawn set has been acknowledged (or its holder left): the change may be applied."""
        return not any(h.withdrawn for h in self.holders)

    def end_change(self, compute: Compute) -> list[tuple[Holder, Grant]]:
        """The change is applied: grant the parked requests that hold nothing, from the state after it."""
        self._changing -= 1
        if self._changing:
            return []
        return [(h, self._grant(h, compute)) for h in self.holders if h.parked and h.held is None]
