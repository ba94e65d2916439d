"""Asking a person, daemon side: codes, questions, answers, requestState and approvals from bouncerctl.

Theory of operation
-------------------
`bouncerd.core.decision.Decider` decides every ask, answer, retry and grant; this desk carries its
decisions: it hands their events and audit records to the one verdict path
(`bouncerd.server.verdicts.VerdictPath`, which journals them, so open codes and grants survive a
crash, and audits them), notifies a person, edits policy.yaml for an "always" answer, and shapes the
replies. It also holds the daemon secret and the settings read at start. The wire protocol is written down in
docs/dev/approvals-protocol.md; in short:

- **ask** (`Decider.decide_call`, for the ``verdict`` op): every ask mints a one-time code (or reuses the one
  still open for the identical call: same session, server, tool and argument digest), journals it as
  ``approval_pending`` and raises a desktop notification. The reply carries the code, the question, a
  ready elicitation form, the timeout and a ``request_state`` (HMAC over session, server, tool,
  argument digest and a nonce that names the code) for 2026-07-28 clients.
- **answer** (op ``answer``, a shim after an elicitation) and **input_response** (a 2026-07-28 retry
  of the call carrying ``request_state`` and the client's ElicitResult) end in the same settlement:
  accept + once allows this very call; session also trusts the call's untrusted destinations for the
  session; always also adds them to the user's policy.yaml (bouncerd/server/allowlist.py) and reloads
  it; decline closes the code; cancel and timeout deny but leave the code open for bouncerctl.
- **bouncerctl** (ops ``pending``, ``approve_show``, ``approve``; role ctl only, by their rows in
  `wire.OP_TABLE`): approving a code
  grants one retry of exactly the bound call (the engine consumes it: rule ``approval.once``).
  Unknown, expired and used codes are wrong codes; MAX_WRONG_CODES of them in a window refuse every
  approve op until the window passes.

Expiry: a code past its lifetime is closed with an ``approval.expired`` audit record, checked at the
start of every approval op and every EXPIRY_TICK_SECONDS. A code lives CODE_TTL_SECONDS, or the
policy's approval_timeout if that is longer (an elicitation answered at its last second still finds
its code). ``BOUNCER_CODE_TTL_SECONDS``, read once at start, replaces CODE_TTL_SECONDS: it exists for
tests.

Every approval, decline, timeout, expiry, wrong code and refused state is an audit record of its own
(channel, what was approved, for how long); a verdict that follows it has its own line after it.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

import anyio

from bouncerd import wire
from bouncerd.core import approvals as ap
from bouncerd.core.decision import Decider
from bouncerd.core.decision_types import (
    CHANNEL_ELICITATION,
    AnswerVerdict,
    Ask,
    PolicyEditDue,
    Refusal,
    Trail,
)
from bouncerd.errors import PolicyError
from bouncerd.server import allowlist, verdicts
from bouncerd.server.caller import Caller
from bouncerd.server.notify import Notifier
from bouncerd.server.questions import elicitation_form, name_shown, shown

log = logging.getLogger("bouncerd")

SECRET_NAME = "secret.key"  # noqa: S105 - a file name, not a secret
SECRET_BYTES = 32  # an HMAC-SHA256 key as long as the hash: guessing it is no easier than forging a MAC
CODE_TTL_ENV = "BOUNCER_CODE_TTL_SECONDS"
# An expired code is audited within this long even when no one asks about codes; the ops check expiry
# themselves, so this only bounds how late the audit line can be.
EXPIRY_TICK_SECONDS = 5.0
# Arguments held for `approve --show-arguments`: a person has a handful of codes open at once (each
# lives for approval_timeout); this bounds the memory an agent asking in a loop can make us hold.
MAX_REMEMBERED_ARGUMENTS = 256

Reload = Callable[[], str | None]  # reload policy.yaml: None, or why it failed
Decided = TypeVar("Decided", bound=Trail)  # a decision's result type, as `carry` hands it back


# ---- the daemon secret ---------------------------------------------------------------------------


def load_secret(path: Path) -> bytes:
    """The requestState key: SECRET_BYTES random bytes in `path` (0600), created once."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return _new_secret(path)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
        data = os.read(fd, SECRET_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) != SECRET_BYTES:
        log.warning(
            "%s holds %d bytes, not %d: replaced (open questions become void)", path, len(data), SECRET_BYTES
        )
        return _new_secret(path)
    return data


def _new_secret(path: Path) -> bytes:
    data = secrets.token_bytes(SECRET_BYTES)
    allowlist.write_atomically(path, data)
    return data


# ---- the desk -----------------------------------------------------------------------------------------


class ApprovalDesk:
    def __init__(
        self,
        decider: Decider,
        path: verdicts.VerdictPath,
        policy_path: Path,
        reload: Reload,
    ) -> None:
        self.decider = decider
        self.path = path  # journals and audits every decision carried here
        self.policy_path = policy_path
        self.reload = reload
        self.notifier = Notifier(None)
        self._ready = False
        # code -> the asked call's arguments, in memory only (never journaled, whatever
        # audit_arguments says), so `bouncerctl approve --show-arguments` can show what would leave.
        self._arguments: OrderedDict[str, Mapping[str, Any]] = OrderedDict()

    def remember_arguments(self, code: str, arguments: Mapping[str, Any]) -> None:
        self._arguments[code] = arguments
        self._arguments.move_to_end(code)
        while len(self._arguments) > MAX_REMEMBERED_ARGUMENTS:
            self._arguments.popitem(last=False)

    def open(self, state_dir: Path, environ: Mapping[str, str], now: float) -> None:
        """At daemon start, after the journal and audit log: secret, settings, overdue expiries."""
        self.decider.secret = load_secret(state_dir / SECRET_NAME)
        ttl = environ.get(CODE_TTL_ENV)
        if ttl:
            try:
                self.decider.code_ttl = max(0.0, float(ttl))
            except ValueError:
                log.warning("%s=%r is not a number of seconds: ignored", CODE_TTL_ENV, ttl)
            else:
                log.warning("%s=%s: codes expire after %ss (meant for tests)", CODE_TTL_ENV, ttl, ttl)
        self.notifier = Notifier.from_environ(environ)
        self._ready = True
        self.expire(now)

    def close(self, now: float) -> None:
        self.expire(now)
        self._ready = False

    async def run(self) -> None:
        while True:
            await anyio.sleep(EXPIRY_TICK_SECONDS)
            try:
                self.expire(time.time())
            except OSError as exc:
                log.error("approvals: could not record expiries: %s", exc)
            self.notifier.reap()

    @property
    def approvals(self) -> ap.Approvals:
        return self.decider.approvals

    # ---- carrying a decision -------------------------------------------------------------------

    @overload
    def carry(self, decision: PolicyEditDue, now: float) -> AnswerVerdict: ...
    @overload
    def carry(self, decision: Decided, now: float) -> Decided: ...
    def carry(self, decision: Trail, now: float) -> Trail:
        """Settle a decision on the verdict path (its events journaled, its records audited) and notify
        for a new code; an "always" answer is finished here, once its policy edit was made (its
        `AnswerVerdict` is returned in its place)."""
        self._carry(decision, now)
        if not isinstance(decision, PolicyEditDue):
            return decision
        edit = decision.policy_edit
        error = self._always(edit.binding, edit.destinations, now)
        final = self.decider.after_policy_edit(edit, error, now)
        self._carry(final, now)
        return final

    def _carry(self, decision: Trail, now: float) -> None:
        self.path.settle(decision.events, decision.records, now)
        opened = decision.opened
        if opened is not None:
            b = opened.binding
            where = shown(b.destination) if b.destination else "(no destination)"
            self.notifier.notify(
                "Bouncer: approval needed",
                f"{name_shown(b.server)}/{name_shown(b.tool)} → {where}\nbouncerctl approve {opened.code}",
            )

    def expire(self, now: float) -> None:
        if self._ready:
            self.carry(self.decider.expire(now), now)

    @staticmethod
    def ask_fields(ask: Ask | None) -> dict[str, Any]:
        """What an ask adds to a verdict reply: code, question, elicitation form, timeout, requestState."""
        if ask is None:
            return {}
        pending = ask.pending
        return {
            "code": pending.code,
            "expires": pending.expires,
            "timeout": ask.timeout,
            "question": pending.question,
            "elicitation": elicitation_form(pending.question, bool(pending.destinations)),
            "request_state": ask.request_state,
            "binding": ask.binding.as_dict(),
        }

    def _always(self, binding: ap.Binding, destinations: Sequence[str], now: float) -> str | None:
        """Add the destinations to policy.yaml and reload it: None, or why that did not happen."""
        path = self.policy_path
        try:
            old, new_text, _ = allowlist.edited_policy(path, binding.server, binding.tool, destinations, now)
            if old is not None and new_text.encode() == old:
                return None
            allowlist.write_policy(path, new_text.encode())
        except PolicyError as exc:
            return str(exc)
        except OSError as exc:
            return f"cannot write {path}: {exc.strerror or exc}"
        error = self.reload()
        if error is None:
            return None
        try:  # the edit loaded here but not in the daemon (a racing edit?): put the old bytes back
            if old is None:
                Path(os.path.realpath(path)).unlink(missing_ok=True)
            else:
                allowlist.write_policy(path, old)
            self.reload()
        except OSError as exc:
            log.error("approvals: could not restore %s: %s", path, exc)
        return error

    # ---- op answer -----------------------------------------------------------------------------

    def answer(self, caller: Caller, rid: int, msg: wire.AnswerRequest) -> dict[str, Any]:
        """Op ``answer``: a shim reports what a person said to an elicitation."""
        session, entry = caller.require_server()
        now = time.time()
        request_id = msg.get("request_id")
        decision = self.carry(
            self.decider.decide_answer(
                session.key,
                entry.identity.name,
                str(msg.get("code") or ""),
                msg.get("action"),
                msg.get("choice"),
                request_id,
                now,
            ),
            now,
        )
        if isinstance(decision, Refusal):
            return wire.error_reply(rid, *decision.refusal)
        verdict, binding, code = decision.verdict, decision.binding, decision.code
        still = self.approvals.pending.get(code)
        judged = verdicts.Judged(
            session,
            entry.identity.name,
            request_id,
            binding.tool if binding else None,
            verdict,
            self._arguments.get(code) if binding else None,
            digest=binding.digest if binding else None,
            code=code or None,
            channel=CHANNEL_ELICITATION,
            extra={"code": code, "expires": still.expires} if still is not None else {},
        )
        return self.path.deliver(rid, judged, now)

    # ---- bouncerctl ----------------------------------------------------------------------------

    def pending(self, caller: Caller, rid: int, msg: wire.PendingRequest) -> dict[str, Any]:
        now = time.time()
        self.expire(now)
        return wire.reply(rid, pending=[_public(p, now) for p in self.approvals.open_codes(now)])

    def approve_show(self, caller: Caller, rid: int, msg: wire.ApproveShowRequest) -> dict[str, Any]:
        now = time.time()
        found = self._find(rid, msg["code"], now)
        if isinstance(found, dict):
            return found
        extra: dict[str, Any] = {}
        if msg.get("arguments"):
            held = self._arguments.get(found.code)
            if held is not None:
                extra["arguments"] = held
            else:
                extra["arguments_missing"] = (
                    "this daemon no longer holds the arguments (it restarted since the call was asked, "
                    "or many calls were asked since); their SHA-256 is the digest shown"
                )
        return wire.reply(rid, **_public(found, now), **extra)

    def approve(self, caller: Caller, rid: int, msg: wire.ApproveRequest) -> dict[str, Any]:
        now = time.time()
        found = self._find(rid, msg["code"], now)
        if isinstance(found, dict):
            return found
        self.carry(self.decider.approve(found, now), now)
        return wire.reply(rid, approved=True, **_public(found, now))

    def _find(self, rid: int, code: str, now: float) -> ap.Pending | dict[str, Any]:
        """The open code a ctl op names, or the error reply (wrong codes counted and audited). The op's
        row in `wire.OP_TABLE` lets only role ctl here."""
        decision = self.carry(self.decider.find_code(code, now), now)
        if isinstance(decision, Refusal):
            return wire.error_reply(rid, *decision.refusal)
        return decision.found


def _public(p: ap.Pending, now: float) -> dict[str, Any]:
    """An open code as bouncerctl shows it: the binding and the question, never the arguments."""
    return {
        "code": p.code,
        "session": p.binding.session,
        "server": p.binding.server,
        "tool": p.binding.tool,
        "parameter": p.binding.parameter,
        "destination": p.binding.destination,
        "destinations": list(p.destinations),
        "digest": p.binding.digest,
        "created": p.created,
        "expires": p.expires,
        "expires_in": max(0.0, p.expires - now),
        "reason": p.reason,
        "summary": p.summary,
        "question": p.question,
    }
