"""The restricted state: how the engine decides once the state it kept on disk was lost or damaged.

Theory of operation
-------------------
The engine's state (pins, budget counts, taint, approvals, vouched and listed destinations) is rebuilt
from the journal at start. When the journal is damaged (a checksum that fails, an empty file, bytes
that are no journal: `bouncerd/server/journal.py`), part of that state is gone and nothing says which
part. Some of what may be gone only ever made the engine stricter (taint, budget counts, a pin's new
form waiting for review), some only ever made it looser (a pin, a grant, a vouched destination). So
the engine does not start from what it could read as if it were whole: it starts *restricted*, in a
state stricter than any it could have lost, until a person accepts the loss (``bouncerctl state
accept-loss``):

- Every tool is unpinned until a person reviews it (`drop_loosening` drops every pin and closes every
  first-use window, so a tool is ``pin.unknown_tool`` until ``bouncerctl pins accept``). Stops: a tool
  whose description changed in the lost part being allowed as if first seen.
- Every budget counts as spent (``state.budget_spent``): the lost attempts cannot be counted. Stops: a
  call over its ``max_calls`` allowed because the attempts before it were lost.
- Nothing is allowed for want of taint (``state.unproven_send``): a send or fetch the gate would allow
  because a destination was *not* seen in untrusted output is asked, since the output that planted it
  may be in the lost part. A destination trusted on its own terms (allowlisted, typed by the user since,
  approved since) is still allowed, and a deny stays a deny. Stops: a planted address being allowed
  after the output that planted it was lost (it is asked, with the loss named in the question).
- Grants, vouched and listed destinations read before the damage are dropped: a one-time grant used
  in the lost part must not be used again.
What only made the engine stricter (taint, blind scopes, attempts, forms waiting for review) is kept.

The restriction is itself journalled (by the daemon, as the first entry of every snapshot), so a
restart does not lift it; only the person's acceptance does, and that is journalled and audited too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Protocol

from bouncerd.core.model import Verdict
from bouncerd.core.pins import ServerPins

# The command a person runs to accept the loss, named in every refusal the restriction makes.
ACCEPT_COMMAND: Final = "bouncerctl state accept-loss"

# Allow rules that rest on a destination *not* having been seen in untrusted output: with the taint
# lost they prove nothing. (`sink.trusted`, `sink.no_new_destination`, `approval.*` and the rules of
# tools that name no destination rest on something else.)
ALLOWED_FOR_WANT_OF_TAINT: Final = frozenset(
    {"fetch.allowed", "message.no_tainted_destination", "builtin.no_tainted_destination"}
)


@dataclass(frozen=True)
class Restriction:
    reason: str  # what was lost, as the daemon found it
    since: float  # when the daemon found it


class SessionTrust(Protocol):
    """What of a session's state only ever loosens a verdict (store.SessionState)."""

    vouched: set[str]
    listed: dict[str, str]


def drop_loosening(servers: Iterable[ServerPins], sessions: Iterable[SessionTrust]) -> None:
    """Drop what read from before the damage could only loosen a verdict: every pin (each tool waits
    for a person's review) and first-use window, and the destinations vouched or listed. (The engine
    drops its grants too.) Taint, blind scopes, attempts and forms waiting for review stay."""
    for sp in servers:
        sp.pins.clear()
        sp.open_until = None
    for state in sessions:
        state.vouched.clear()
        state.listed.clear()


def budget(restriction: Restriction | None, tool: str, max_calls: int | None) -> Verdict | None:
    """The budget rule while restricted: every budget counts as spent."""
    if restriction is None or max_calls is None:
        return None
    return Verdict(
        "deny",
        "state.budget_spent",
        f"tool {tool!r} has a budget of {max_calls} call(s) per session, and the record of the calls "
        f"made was lost ({restriction.reason}); every budget counts as spent until a person runs: "
        f"{ACCEPT_COMMAND}",
    )


def judge(restriction: Restriction | None, verdict: Verdict, *, sends: bool) -> Verdict:
    """The verdict while restricted: an allow that rests on the absence of taint, or any allow of a
    call that `sends` (names a destination or runs a program) without a rule that trusts it, is asked."""
    if restriction is None or verdict.verdict == "deny":
        return verdict
    if verdict.verdict == "ask":  # the person asked must know a planted destination may look new
        return Verdict(
            "ask",
            verdict.rule,
            f"{verdict.reason} (bouncerd runs restricted: part of its record of untrusted output was "
            f"lost, {restriction.reason}, so a destination planted there may look new)",
            verdict.destination,
            verdict.parameter,
            verdict.provenance,
            verdict.events,
        )
    if verdict.rule in ALLOWED_FOR_WANT_OF_TAINT or (sends and verdict.rule == "default.allow"):
        return Verdict(
            "ask",
            "state.unproven_send",
            f"bouncerd lost part of its record of what untrusted output said ({restriction.reason}), "
            f"so it cannot tell whether a destination of this call was planted there; "
            f"{verdict.reason}",
            verdict.destination,
            verdict.parameter,
            verdict.provenance,
            verdict.events,
        )
    return verdict
