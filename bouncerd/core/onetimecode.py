"""A code the agent can read is not a person's confirmation.

Theory of operation
-------------------
Services guard what matters with a one-time code: a purchase, a password change, a new device, a
login waits until the code mailed or texted to the user is typed into a `verify`/`confirm` call. The
code proves that whoever types it reads the user's inbox. An agent that reads the inbox proves that
too, so the code confirms nothing a person did: an injection that has the agent buy, reset or log in
can have it read the code and confirm as well. Bouncer therefore never counts on the code:

- the consequential call that waits for a code (the purchase, the password change) is judged when it
  is made, as every consequential call is (`consequence.judge`), whether or not a code will follow;
- the confirming call is judged *with* it (`judge`): a code the user did not type confirms the act
  the gate let through on this server in this session and not confirmed yet (`Pending`), and only
  that. A code with no such act behind it (an act the gate refused, or one made outside this
  session: the attacker's password reset of the user's account) is asked
  (``consequence.readable_code``), with where the code was read when the index knows it.

A code the user typed in their prompt is the person's confirmation and passes. Where a confirming call
is judged with its act, its code arguments are not judged again as values (`code_parameters`): the
code was read from output by design.

A confirming call is one whose name says it confirms (`CONFIRM_WORDS`: verify, confirm, validate,
otp, 2fa, ...) and does not read (`get_verification_status` reads), with an argument named as a code
(`CODE_PARAM_WORDS`) whose value is shaped like one (`CODE_SHAPE`: 4 to 12 letters and digits with a
digit). What acts are pending is not journalled: after a restart a confirming call is asked, which
only makes the gate stricter.
"""

from __future__ import annotations

import re
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Final

from bouncerd.core import fallback, fallback_words, said, sinkgate
from bouncerd.core.model import Provenance, Verdict
from bouncerd.core.taint import Hit

MAX_PENDING_PER_SERVER: Final = 16  # acts awaiting a code: a person starts a handful at a time
MAX_SESSIONS: Final = 1024  # sessions remembered; the oldest is forgotten first (stricter, never looser)


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


CONFIRM_WORDS = _set(
    "verify verification confirm confirmation validate validation otp totp 2fa mfa twofactor passcode"
)
CODE_PARAM_WORDS = _set("code otp totp pin passcode token verification confirmation")
# A one-time code: short letters and digits, with a digit (`482913`, `A7-K2QX`).
CODE_SHAPE = re.compile(r"(?=[A-Za-z0-9-]*[0-9])[A-Za-z0-9][A-Za-z0-9-]{2,10}[A-Za-z0-9]")


@dataclass(frozen=True)
class Act:
    """A call the gate let through that a code may confirm."""

    tool: str
    kind: str  # its consequence class


def _names(tool: str) -> set[str]:
    parts = fallback.words(tool)
    return set(parts) | {a + b for a, b in pairwise(parts)}


def confirms(tool: str) -> bool:
    """Whether a tool's name says it confirms with a code (`confirm_purchase`, `verify_2fa`); a
    reading verb first (`get_verification_status`) never does."""
    kind, _verb = fallback_words.verb_of(fallback.words(tool))
    return kind != "read" and bool(CONFIRM_WORDS & _names(tool))


def code_parameters(arguments: Mapping[str, Any]) -> list[sinkgate.Destination]:
    """The arguments that hold a one-time code: named as one, shaped as one."""
    out = []
    for d in sinkgate.leaves(arguments):
        name = set(fallback.words(d.parameter.rsplit(".", 1)[-1].split("[", 1)[0]))
        if CODE_PARAM_WORDS & name and CODE_SHAPE.fullmatch(d.value.strip()):
            out.append(d)
    return out


class Pending:
    """Per session and server, the consequential acts let through and not yet confirmed."""

    def __init__(self) -> None:
        self._acts: OrderedDict[str, dict[str, deque[Act]]] = OrderedDict()

    def made(self, session: str, server: str, act: Act) -> None:
        by_server = self._acts.setdefault(session, {})
        self._acts.move_to_end(session)
        by_server.setdefault(server, deque(maxlen=MAX_PENDING_PER_SERVER)).append(act)
        while len(self._acts) > MAX_SESSIONS:
            self._acts.popitem(last=False)

    def latest(self, session: str, server: str) -> Act | None:
        acts = self._acts.get(session, {}).get(server)
        return acts[-1] if acts else None

    def confirmed(self, session: str, server: str) -> None:
        """The latest act was confirmed: a second code does not confirm it again."""
        acts = self._acts.get(session, {}).get(server)
        if acts:
            acts.pop()

    def forget(self, session: str) -> None:
        self._acts.pop(session, None)


def _where(prov: Provenance | None) -> str:
    if prov is None:
        return ""
    tool = f"/{prov.tool}" if prov.tool else ""
    return f" (it appeared in the output of {prov.server}{tool}, request {prov.request_id!r})"


def judge(
    tool: str,
    arguments: Mapping[str, Any],
    *,
    pending: Act | None,
    typed_by_user: Callable[[sinkgate.Destination], bool],
    key_hit: Callable[[str], Hit | None],
    lookup: Callable[[str], Hit | None],
) -> tuple[Verdict | None, frozenset[str]]:
    """(an ask, or None; the code parameters to leave out of judging the call's values). See the
    module docstring."""
    if not confirms(tool):
        return None, frozenset()
    codes = [d for d in code_parameters(arguments) if not typed_by_user(d)]
    if not codes:
        return None, frozenset()
    names = frozenset(d.parameter.split(".", 1)[0].split("[", 1)[0] for d in codes)
    if pending is not None:
        return None, names
    d = codes[0]
    value = d.value.strip()
    key = said.said_key(value)
    hit = (key_hit(key) if key is not None else None) or lookup(value)
    prov = hit.provenance if hit is not None else None
    return (
        Verdict(
            "ask",
            "consequence.readable_code",
            f"{tool} confirms with the code in its argument {d.parameter!r}, which you did not type"
            f"{_where(prov)}: a code the agent can read confirms nothing you did, and no call this "
            f"session that waits for it was judged",
            parameter=d.parameter,
            provenance=prov,
        ),
        names,
    )


def confirmed(tool: str, act: Act | None) -> Verdict:
    """The allow for a confirming call whose code confirms the act let through before it."""
    what = f"{act.tool} ({act.kind})" if act is not None else "the act before it"
    return Verdict(
        "allow",
        "consequence.confirmed_code",
        f"{tool} confirms {what}, judged and let through earlier in this session on this server",
    )
