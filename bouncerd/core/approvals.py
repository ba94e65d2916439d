"""Approvals: how an `ask` becomes a person's yes or no, and how that yes is bound to one call.

Theory of operation
-------------------
An ask reaches a person on one of three channels (docs/how-it-works.md, "Asking a person"):

- *elicitation* (2025-era clients that declared it): the shim asks the client; the answer comes back
  to the daemon as `answer(...)`.
- *input_required* (2026-07-28 clients): the shim answers the tools/call with an `input_required`
  result whose `requestState` is minted here: an HMAC (daemon secret) over the session, server, tool,
  argument digest, a nonce and an expiry. A retry is honoured only if its state authenticates, binds
  the same call, has not expired, and its nonce was never used before (replay).
- *one-time code* (clients that cannot ask): the call is denied with a code like `K7Q-F2M` (Crockford
  base32, 30 bits), bound to session, server, tool, parameter, destination and the argument digest,
  valid CODE_TTL_SECONDS, single use. `bouncerctl approve CODE` in the person's own terminal grants one
  retry of *that* call (same arguments); wrong codes are rate limited.

Grants have a scope: `once` (the next identical call, once, within ONCE_GRANT_TTL_SECONDS), `session`
(the destination is trusted for the rest of the session, for this server and tool) or `always` (the
daemon adds it to the user policy's allowlist; here it also acts as a session grant). Every change is
an event, like the rest of the engine, so pending codes and grants survive a daemon restart.

A once grant answers one question: it remembers when the person was asked and the rule of the ask
(`OnceGrant`). It turns a later ask into an allow only if that ask is for the same reason and its
destination did not become tainted since the question (`OnceGrant.covers`): a yes to a send that was
clean when asked is not a yes to a send to an address that has since turned up in a mail body.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from bouncerd.core.events import (
    ApprovalClosedEvent,
    ApprovalEvent,
    ApprovalPendingEvent,
    BindingFields,
    GrantEvent,
    NonceUsedEvent,
    WrongCodeEvent,
)

# A code must be typed by a person, so it is short; 30 bits with at most MAX_WRONG_CODES guesses per
# window gives an attacker who can run bouncerctl (and so has a shell anyway) no useful odds.
CODE_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # Crockford base32: no I, L, O, U
CODE_CHARS = 6
CODE_TTL_SECONDS = 300.0  # long enough to switch to a terminal, short enough to not linger
# Open codes per daemon. When full, a new question gets no code (its call stays refused) and every
# earlier one is kept: a flood of questions must not push out the one a person is answering.
MAX_PENDING = 256
MAX_WRONG_CODES = 5  # per WRONG_CODE_WINDOW_SECONDS, then every approve attempt is refused
WRONG_CODE_WINDOW_SECONDS = 60.0
STATE_TTL_SECONDS = 600.0  # an input_required question left unanswered this long is void
# A once grant (`bouncerctl approve`) is for the agent's retry of the call, which follows within a
# minute or two; left unused for ten minutes it lapses, so it cannot match an identical call made in
# another context hours later.
ONCE_GRANT_TTL_SECONDS = 600.0


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    canon = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canon.encode()).hexdigest()


def make_code(random_bytes: bytes) -> str:
    """A 6-character Crockford base32 code shown as XXX-XXX, from at least 4 random bytes."""
    n = int.from_bytes(random_bytes[:4], "big") & ((1 << (5 * CODE_CHARS)) - 1)
    chars = []
    for _ in range(CODE_CHARS):
        chars.append(CODE_ALPHABET[n & 31])
        n >>= 5
    s = "".join(reversed(chars))
    return f"{s[:3]}-{s[3:]}"


def normalise_code(text: str) -> str | None:
    """What a person typed → the canonical code, forgiving case, spaces, dashes and O/I/L look-alikes."""
    raw = text.strip().upper().replace("-", "").replace(" ", "")
    raw = raw.replace("O", "0").replace("I", "1").replace("L", "1")
    if len(raw) != CODE_CHARS or any(c not in CODE_ALPHABET for c in raw):
        return None
    return f"{raw[:3]}-{raw[3:]}"


@dataclass(frozen=True)
class Binding:
    """What an approval is for. `digest` is of the whole arguments, so a code approves one message."""

    session: str
    server: str
    tool: str
    parameter: str | None
    destination: str | None
    digest: str

    def as_dict(self) -> BindingFields:
        return BindingFields(
            session=self.session,
            server=self.server,
            tool=self.tool,
            parameter=self.parameter,
            destination=self.destination,
            digest=self.digest,
        )


@dataclass(frozen=True)
class Pending:
    code: str
    binding: Binding
    created: float
    expires: float
    reason: str
    summary: str  # short summary of the other arguments, for the person
    question: str = ""  # the whole text a person decides on (bouncerctl approve shows it)
    destinations: tuple[str, ...] = ()  # what a session or "always" answer trusts
    rule: str = ""  # the ask's rule ("" in a code opened before it was recorded)


@dataclass(frozen=True)
class OnceGrant:
    asked: float  # when the person was asked
    rule: str  # the rule of the ask they said yes to
    expires: float

    def covers(self, rule: str, provenance_ts: float | None, now: float) -> bool:
        """Whether this yes answers an ask with `rule` whose destination was seen at `provenance_ts`
        (None: not seen in output): same question, not lapsed, no taint that arrived after it."""
        if now >= self.expires or rule != self.rule:
            return False
        return provenance_ts is None or provenance_ts < self.asked


@dataclass
class Approvals:
    pending: dict[str, Pending] = field(default_factory=dict)
    once: dict[tuple[str, str, str, str], list[OnceGrant]] = field(
        default_factory=dict
    )  # (session, server, tool, digest) -> grants, oldest first
    session_trust: dict[tuple[str, str, str], set[str]] = field(default_factory=dict)  # -> destinations
    used_nonces: dict[str, float] = field(default_factory=dict)  # nonce -> expiry
    wrong: list[float] = field(default_factory=list)

    # ---- events ----------------------------------------------------------------------------------

    def apply(self, ev: ApprovalEvent) -> None:
        if ev["ev"] == "approval_pending":
            if len(self.pending) >= MAX_PENDING and ev["code"] not in self.pending:
                return  # full: see MAX_PENDING
            b = Binding(**ev["binding"])
            self.pending[ev["code"]] = Pending(
                ev["code"],
                b,
                ev["created"],
                ev["expires"],
                ev["reason"],
                ev.get("summary", ""),
                ev.get("question", ""),
                tuple(ev.get("destinations", ())),
                ev.get("rule", ""),
            )
        elif ev["ev"] == "approval_closed":
            self.pending.pop(ev["code"], None)
        elif ev["ev"] == "grant":
            b = Binding(**ev["binding"])
            if ev["scope"] == "once":
                key = (b.session, b.server, b.tool, b.digest)
                grant = OnceGrant(ev.get("asked", 0.0), ev.get("rule", ""), ev.get("expires", 0.0))
                self.once.setdefault(key, []).append(grant)
            elif b.destination is not None:
                self.session_trust.setdefault((b.session, b.server, b.tool), set()).add(b.destination)
        elif ev["ev"] == "grant_used":
            key = (ev["session"], ev["server"], ev["tool"], ev["digest"])
            grants = self.once.get(key, [])
            asked = ev.get("asked")
            used = next((i for i, g in enumerate(grants) if asked is None or g.asked == asked), None)
            if used is not None:
                del grants[used]
            if not grants:
                self.once.pop(key, None)
        elif ev["ev"] == "nonce_used":
            self.used_nonces[ev["nonce"]] = ev["expires"]
        elif ev["ev"] == "wrong_code":
            self.wrong.append(ev["ts"])
        else:
            raise ValueError(f"unknown approvals event {ev['ev']!r}")

    def snapshot(self, now: float) -> list[ApprovalEvent]:
        out: list[ApprovalEvent] = []
        for p in self.pending.values():
            if p.expires > now:
                out.append(pending_event(p))
        for (session, server, tool, digest), grants in self.once.items():
            b = Binding(session, server, tool, None, None, digest)
            out.extend(once_grant_event(b, g.asked, g.rule, g.expires) for g in grants if g.expires > now)
        for (session, server, tool), dests in self.session_trust.items():
            for d in sorted(dests):
                b = Binding(session, server, tool, None, d, "")
                out.append(grant_event("session", b))
        for nonce, exp in self.used_nonces.items():
            if exp > now:
                out.append(NonceUsedEvent(ev="nonce_used", nonce=nonce, expires=exp))
        return out

    # ---- queries -----------------------------------------------------------------------------------

    def trusted_for(self, session: str, server: str, tool: str) -> frozenset[str]:
        return frozenset(self.session_trust.get((session, server, tool), ()))

    def once_grant(
        self,
        session: str,
        server: str,
        tool: str,
        digest: str,
        rule: str,
        provenance_ts: float | None,
        now: float,
    ) -> OnceGrant | None:
        """The oldest once grant of this exact call covering an ask with `rule` (`OnceGrant.covers`)."""
        for grant in self.once.get((session, server, tool, digest), ()):
            if grant.covers(rule, provenance_ts, now):
                return grant
        return None

    def session_keys(self) -> set[str]:
        keys = {p.binding.session for p in self.pending.values()}
        keys.update(k[0] for k in self.once)
        keys.update(k[0] for k in self.session_trust)
        return keys

    def end_session(self, session: str) -> None:
        """Drop the session's open codes and grants: nobody of it is left to retry a call."""
        for code in [c for c, p in self.pending.items() if p.binding.session == session]:
            del self.pending[code]
        for key in [k for k in self.once if k[0] == session]:
            del self.once[key]
        for trust_key in [k for k in self.session_trust if k[0] == session]:
            del self.session_trust[trust_key]

    def prune(self, now: float) -> None:
        """Forget what has lapsed (once grants, used nonces, old wrong codes): memory stays bounded by
        what is live. Derived from `now` alone, so a replay that prunes later ends in the same state."""
        for key in [k for k, grants in self.once.items() if all(g.expires <= now for g in grants)]:
            del self.once[key]
        for nonce in [n for n, exp in self.used_nonces.items() if exp <= now]:
            del self.used_nonces[nonce]
        self.wrong = [t for t in self.wrong if now - t < WRONG_CODE_WINDOW_SECONDS]

    def open_codes(self, now: float) -> list[Pending]:
        return [p for p in self.pending.values() if p.expires > now]

    def rate_limited(self, now: float) -> bool:
        recent = [t for t in self.wrong if now - t < WRONG_CODE_WINDOW_SECONDS]
        return len(recent) >= MAX_WRONG_CODES


def pending_event(p: Pending) -> ApprovalPendingEvent:
    return ApprovalPendingEvent(
        ev="approval_pending",
        code=p.code,
        binding=p.binding.as_dict(),
        created=p.created,
        expires=p.expires,
        reason=p.reason,
        summary=p.summary,
        question=p.question,
        destinations=list(p.destinations),
        rule=p.rule,
    )


def grant_event(scope: Literal["session", "always"], binding: Binding) -> GrantEvent:
    return GrantEvent(ev="grant", scope=scope, binding=binding.as_dict())


def once_grant_event(binding: Binding, asked: float, rule: str, expires: float) -> GrantEvent:
    """A yes to the question asked at `asked` about an ask with `rule`, good until `expires`."""
    return GrantEvent(
        ev="grant", scope="once", binding=binding.as_dict(), asked=asked, rule=rule, expires=expires
    )


def closed_event(code: str, why: str) -> ApprovalClosedEvent:
    return ApprovalClosedEvent(ev="approval_closed", code=code, why=why)


def nonce_used_event(nonce: str, expires: float) -> NonceUsedEvent:
    return NonceUsedEvent(ev="nonce_used", nonce=nonce, expires=expires)


def wrong_code_event(ts: float) -> WrongCodeEvent:
    return WrongCodeEvent(ev="wrong_code", ts=ts)


# ---- requestState (2026-07-28 input_required) -----------------------------------------------------

STATE_PREFIX = "bouncer1."


def mint_state(secret: bytes, binding: Binding, nonce: str, now: float) -> str:
    body = json.dumps(
        {"b": binding.as_dict(), "n": nonce, "e": now + STATE_TTL_SECONDS},
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    mac = hmac.new(secret, body, hashlib.sha256).digest()
    enc = base64.urlsafe_b64encode(body).decode().rstrip("=")
    return STATE_PREFIX + enc + "." + base64.urlsafe_b64encode(mac).decode().rstrip("=")


@dataclass(frozen=True)
class StateRefused:
    """A requestState that approves nothing, and why."""

    reason: str
    ok: ClassVar[bool] = False


@dataclass(frozen=True)
class StateAccepted:
    """An authentic, unexpired, unused requestState for this very call: the binding and nonce it names."""

    binding: Binding
    nonce: str
    expires: float
    ok: ClassVar[bool] = True
    reason: ClassVar[str] = "ok"


StateCheck = StateAccepted | StateRefused


def check_state(
    secret: bytes, state: str, expected: Binding, used: Mapping[str, float], now: float
) -> StateCheck:
    """Authenticate a retried requestState and check it binds this very call. Never raises."""
    if not state.startswith(STATE_PREFIX):
        return StateRefused("not a Bouncer requestState")
    try:
        enc, mac_text = state[len(STATE_PREFIX) :].split(".", 1)
        body = base64.urlsafe_b64decode(enc + "=" * (-len(enc) % 4))
        mac = base64.urlsafe_b64decode(mac_text + "=" * (-len(mac_text) % 4))
    except (ValueError, TypeError):
        return StateRefused("requestState is malformed")
    if not hmac.compare_digest(mac, hmac.new(secret, body, hashlib.sha256).digest()):
        return StateRefused("requestState does not authenticate (tampered, or minted by another daemon)")
    try:
        data = json.loads(body)
        binding = Binding(**data["b"])
        nonce = str(data["n"])
        expires = float(data["e"])
    except (ValueError, KeyError, TypeError):
        return StateRefused("requestState is malformed")
    if expires <= now:
        return StateRefused("the question has expired")
    if nonce in used:
        return StateRefused("requestState was already used (replay)")
    if (binding.session, binding.server, binding.tool, binding.digest) != (
        expected.session,
        expected.server,
        expected.tool,
        expected.digest,
    ):
        return StateRefused("requestState was issued for a different call")
    return StateAccepted(binding, nonce, expires)
