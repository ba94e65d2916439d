"""Values that cross the core's boundary: calls in, verdicts and events out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from bouncerd.core.events import EngineEvent
from bouncerd.core.ruleids import RULES

VerdictKind = Literal["allow", "deny", "ask"]
JsonRpcId = str | int | None


@dataclass(frozen=True)
class ServerIdentity:
    """A server as the user configured it: its --name and the upstream command it runs.

    Pins are keyed by both, so a config edit that points the same name at another program
    does not inherit the old program's pins.
    """

    name: str
    upstream: tuple[str, ...]

    @property
    def key(self) -> str:
        return self.name + "\x00" + "\x00".join(self.upstream)


@dataclass(frozen=True)
class ToolCall:
    session: str
    server: ServerIdentity
    tool: str
    arguments: Mapping[str, Any]
    request_id: JsonRpcId = None
    # "tool" for tools/call; otherwise the request carries data another way and `tool` is its method:
    # "resource" (resources/read, resources/subscribe), "prompt", "completion", "message" (any other),
    # "answer" (the client's answer to the server's request `tool`: sampling, elicitation)
    kind: str = "tool"
    # A 2026-07-28 tools/call retry carries the client's answers to the server's own input requests
    # (`inputResponses`): they go upstream with the call and are judged with it, as kind "answer".
    answers: Mapping[str, Any] | None = None


# What a person or a reason calls each kind (bouncerd.wire.VERDICT_KINDS lists them).
MESSAGE_LABELS = {
    "tool": "tool call",
    "resource": "resource read",
    "prompt": "prompt",
    "completion": "completion",
    "message": "request",
    "answer": "answer to the server's",
}


@dataclass(frozen=True)
class Provenance:
    """Where a destination was seen: shown in deny reasons and written to the audit log."""

    server: str
    tool: str | None
    request_id: JsonRpcId
    ts: float
    field: str | None = None  # JSON path of the field in structured output, None for plain text
    identity: bool = False  # seen only in an identity field (sender, from, …), or in a named source
    # The source the user's prompt named that this output came from (a URL, a file): what it says is
    # asked about, never denied outright. None for every other output.
    named: str | None = None
    # The marker (`orders.MARKERS`, our own words) of text that gives the agent orders, when the key was
    # seen in a sentence of it that tells the agent to send there. None for every other sighting.
    orders: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "server": self.server,
            "tool": self.tool,
            "request_id": self.request_id,
            "ts": self.ts,
            "field": self.field,
            "identity": self.identity,
        }
        if self.named is not None:
            out["named"] = self.named
        if self.orders is not None:
            out["orders"] = self.orders
        return out


@dataclass(frozen=True)
class Verdict:
    verdict: VerdictKind
    rule: str  # dotted name of the rule that fired, e.g. "pin.unknown_tool": a key of ruleids.RULES
    reason: str  # safe to send back to the agent: never repeats untrusted output
    destination: str | None = None
    parameter: str | None = None
    provenance: Provenance | None = None
    events: tuple[EngineEvent, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        # A rule id the table does not list would reach the log, the report and the docs unexplained.
        info = RULES.get(self.rule)
        if info is None:
            raise ValueError(f"rule id {self.rule!r} is not in bouncerd/core/ruleids.py; add a row for it")
        if self.verdict not in info.verdicts:
            raise ValueError(
                f"rule {self.rule!r} gives {self.verdict!r}, but bouncerd/core/ruleids.py lists only "
                f"{', '.join(info.verdicts)}"
            )
