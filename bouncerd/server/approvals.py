"""Asking a person, daemon side: codes, questions, answers, requestState and approvals from bouncerctl.

Theory of operation
-------------------
The engine decides; this desk turns an ``ask`` into something a person can answer, and an answer into
a grant. It is the daemon's only writer of approval events (`bouncerd.core.approvals`), which it
applies to the engine and journals like every other event, so open codes and grants survive a crash.
The wire protocol is written down in docs/dev/approvals-protocol.md; in short:

- **ask** (`settle`, called by the ``verdict`` op): every ask mints a one-time code (or reuses the one
  still open for the identical call: same session, server, tool and argument digest), journals it as
  ``approval_pending`` and raises a desktop notification. The reply carries the code, the question, a
  ready elicitation form, the timeout and a ``request_state`` (HMAC over session, server, tool,
  argument digest and a nonce that names the code) for 2026-07-28 clients.
- **answer** (op ``answer``, a shim after an elicitation) and **input_response** (a 2026-07-28 retry
  of the call carrying ``request_state`` and the client's ElicitResult) end in `_settle_answer`:
  accept + once allows this very call; session also trusts the call's untrusted destinations for the
  session; always also adds them to the user's policy.yaml (bouncerd/server/allowlist.py) and reloads
  it; decline closes the code; cancel and timeout deny but leave the code open for bouncerctl.
- **bouncerctl** (ops ``pending``, ``approve_show``, ``approve``; role ctl only): approving a code
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

import dataclasses
import logging
import os
import secrets
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from bouncerd import wire
from bouncerd.core import approvals as ap
from bouncerd.core import canon
from bouncerd.core.model import ToolCall, Verdict
from bouncerd.core.policy import Policy
from bouncerd.errors import PolicyError
from bouncerd.server import allowlist
from bouncerd.server.notify import Notifier
from bouncerd.server.questions import code_hint, elicitation_form, name_shown, question_for, shown

if TYPE_CHECKING:
    from bouncerd.server.connection import Connection
    from bouncerd.server.daemon import Daemon

log = logging.getLogger("bouncerd")

SECRET_NAME = "secret.key"  # noqa: S105 - a file name, not a secret
SECRET_BYTES = 32  # an HMAC-SHA256 key as long as the hash: guessing it is no easier than forging a MAC
CODE_TTL_ENV = "BOUNCER_CODE_TTL_SECONDS"
# An expired code is audited within this long even when no one asks about codes; the ops check expiry
# themselves, so this only bounds how late the audit line can be.
EXPIRY_TICK_SECONDS = 5.0

CHANNEL_ELICITATION = "elicitation"
CHANNEL_INPUT_REQUIRED = "input_required"
CHANNEL_CODE = "code"
ACTIONS = ("accept", "decline", "cancel", "timeout")
CHOICES = ("once", "session", "always", "deny")
_LASTS = {"once": "this call", "session": "this session", "always": "always (added to policy.yaml)"}


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
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.secret = b""
        self.code_ttl = ap.CODE_TTL_SECONDS
        self.notifier = Notifier(None)
        self._closed: OrderedDict[str, str] = OrderedDict()  # code -> why it is no longer open
        self._ready = False

    def open(self, state_dir: Path, environ: Mapping[str, str], now: float) -> None:
        """At daemon start, after the journal and audit log: secret, settings, overdue expiries."""
        self.secret = load_secret(state_dir / SECRET_NAME)
        ttl = environ.get(CODE_TTL_ENV)
        if ttl:
            try:
                self.code_ttl = max(0.0, float(ttl))
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
        return self.daemon.engine.approvals

    # ---- plumbing ------------------------------------------------------------------------------

    def _commit(self, events: list[dict[str, Any]]) -> None:
        for ev in events:
            self.daemon.engine.apply(ev)
        self.daemon._journal_events(events)

    def _close(self, code: str, why: str) -> None:
        if code in self.approvals.pending:
            self._commit([{"ev": "approval_closed", "code": code, "why": why}])
        self._closed[code] = why
        self._closed.move_to_end(code)
        while len(self._closed) > ap.MAX_PENDING:
            self._closed.popitem(last=False)

    def _record(self, rule: str, binding: ap.Binding | None, reason: str, now: float, **extra: Any) -> None:
        fields: dict[str, Any] = {"verdict": None, "rule": rule, "reason": reason}
        if binding is not None:
            fields.update(
                session=binding.session,
                server=binding.server,
                tool=binding.tool,
                destination=binding.destination,
                arguments_sha256=binding.digest,
            )
        fields.update(extra)
        self.daemon.audit.append(fields, now)

    def _policy(self, conn: Connection) -> Policy:
        try:
            return self.daemon.policy.for_shim(conn.policy_path)
        except PolicyError:
            return self.daemon.policy.base

    def expire(self, now: float) -> None:
        if not self._ready:
            return
        for p in [p for p in self.approvals.pending.values() if p.expires <= now]:
            self._close(p.code, "expired")
            self._record(
                "approval.expired",
                p.binding,
                f"code {p.code} expired unanswered; its call stays denied",
                now,
                channel=CHANNEL_CODE,
                code=p.code,
            )

    # ---- verdict: ask, and 2026-07-28 retries ----------------------------------------------------

    def settle(
        self, conn: Connection, call: ToolCall, verdict: Verdict, msg: Mapping[str, Any], now: float
    ) -> tuple[Verdict, dict[str, Any]]:
        """The final verdict of a `verdict` op and the fields an ask adds to its reply."""
        self.expire(now)
        state, response = msg.get("request_state"), msg.get("input_response")
        if state is not None or response is not None:
            return self._retry(conn, call, verdict, state, response, now), {}
        if verdict.verdict != "ask":
            return verdict, {}
        timeout = self._policy(conn).settings.approval_timeout
        digest = ap.arguments_digest(call.arguments)
        binding = ap.Binding(
            call.session, call.server.name, call.tool, verdict.parameter, verdict.destination, digest
        )
        pending = self._open_code(conn, call, verdict, binding, timeout, now)
        nonce = f"{pending.code}:{secrets.token_hex(8)}"
        extra: dict[str, Any] = {
            "code": pending.code,
            "expires": pending.expires,
            "timeout": timeout,
            "question": pending.question,
            "elicitation": elicitation_form(pending.question, bool(pending.destinations)),
            "request_state": ap.mint_state(self.secret, binding, nonce, now),
            "binding": binding.as_dict(),
        }
        reason = f"{verdict.reason.rstrip('.')}. {code_hint(pending.code, pending.expires)}"
        return dataclasses.replace(verdict, reason=reason), extra

    def _open_code(
        self,
        conn: Connection,
        call: ToolCall,
        verdict: Verdict,
        binding: ap.Binding,
        timeout: int,
        now: float,
    ) -> ap.Pending:
        same = (binding.session, binding.server, binding.tool, binding.digest)
        for p in self.approvals.pending.values():
            b = p.binding
            if (b.session, b.server, b.tool, b.digest) == same and p.expires > now:
                return p  # the agent retried an unanswered call: one code, one notification
        classified = self.daemon.engine.classify_destinations(call, self._policy(conn))
        question, summary, trustable = question_for(call, verdict, classified)
        code = ap.make_code(secrets.token_bytes(4))
        while code in self.approvals.pending or code in self._closed:
            code = ap.make_code(secrets.token_bytes(4))
        lifetime = max(self.code_ttl, float(timeout))
        pending = ap.Pending(code, binding, now, now + lifetime, verdict.reason, summary, question, trustable)
        self._commit([ap.pending_event(pending)])
        where = shown(binding.destination) if binding.destination else "(no destination)"
        self.notifier.notify(
            "Bouncer: approval needed",
            f"{name_shown(binding.server)}/{name_shown(binding.tool)} → {where}\nbouncerctl approve {code}",
        )
        return pending

    def _retry(
        self,
        conn: Connection,
        call: ToolCall,
        verdict: Verdict,
        state: str | None,
        response: Mapping[str, Any] | None,
        now: float,
    ) -> Verdict:
        digest = ap.arguments_digest(call.arguments)
        expected = ap.Binding(
            call.session, call.server.name, call.tool, verdict.parameter, verdict.destination, digest
        )
        if state is None:
            check = ap.StateCheck(False, "an answer came without its requestState")
        else:
            check = ap.check_state(self.secret, state, expected, self.approvals.used_nonces, now)
        if not check.ok or check.nonce is None or check.binding is None:
            self._record(
                "approval.bad_state",
                expected,
                f"a retry's requestState was refused: {check.reason}",
                now,
                channel=CHANNEL_INPUT_REQUIRED,
                request_id=call.request_id,
            )
            return Verdict(
                "deny",
                "approval.bad_state",
                f"the approval carried by this retry was refused ({check.reason}); nothing was approved",
                verdict.destination,
                verdict.parameter,
            )
        self._commit([{"ev": "nonce_used", "nonce": check.nonce, "expires": check.expires}])
        code = check.nonce.split(":", 1)[0]
        if verdict.verdict != "ask":
            self._close(code, "settled")
            return verdict  # a deny stands whatever a person said; an allow needs no approval
        pending = self.approvals.pending.get(code)
        if pending is not None:
            trustable = pending.destinations
        else:
            classified = self.daemon.engine.classify_destinations(call, self._policy(conn))
            trustable = question_for(call, verdict, classified)[2]
        action, choice = _from_elicit_result(response)
        return self._settle_answer(
            check.binding, trustable, action, choice, CHANNEL_INPUT_REQUIRED, code, call.request_id, now
        )

    # ---- answers -------------------------------------------------------------------------------

    def _settle_answer(
        self,
        binding: ap.Binding,
        trustable: Sequence[str],
        action: str,
        choice: str | None,
        channel: str,
        code: str,
        request_id: Any,
        now: float,
    ) -> Verdict:
        pending = self.approvals.pending.get(code)
        context = {"channel": channel, "code": code, "request_id": request_id, "action": action}
        if action == "accept" and choice in _LASTS:
            assert choice is not None
            scope = choice if trustable else "once"
            if scope == "always":
                error = self._always(binding, trustable, now)
                if error is not None:
                    self._record("approval.always_failed", binding, error, now, **context)
                    hint = f" {code_hint(code, pending.expires)}" if pending is not None else ""
                    return Verdict(
                        "deny",
                        "approval.always_failed",
                        f"a person chose to always allow this, but the policy could not be updated "
                        f"({error}); nothing was approved.{hint}",
                        binding.destination,
                        binding.parameter,
                    )
            self._close(code, "approved")
            if scope != "once":
                self._commit(
                    [
                        {
                            "ev": "grant",
                            "scope": scope,
                            "binding": dataclasses.replace(binding, destination=d).as_dict(),
                        }
                        for d in trustable
                    ]
                )
            lasts = (
                _LASTS[scope]
                if scope == choice
                else "this call (it names nothing that can be trusted longer)"
            )
            self._record(
                "approval.granted",
                binding,
                f"a person allowed this call; lasts: {lasts}",
                now,
                scope=scope,
                lasts=lasts,
                destinations=list(trustable) if scope != "once" else None,
                **context,
            )
            return Verdict(
                "allow",
                "approval.elicited",
                f"a person allowed this call ({lasts})",
                binding.destination,
                binding.parameter,
            )
        if action in ("cancel", "timeout"):
            rule = "approval.timeout" if action == "timeout" else "approval.declined"
            said = "nobody answered in time" if action == "timeout" else "the question was dismissed"
            still = f"; code {code} stays open" if pending is not None else ""
            hint = f" {code_hint(code, pending.expires)}" if pending is not None else ""
            self._record(rule, binding, said + still, now, **context)
            return Verdict(
                "deny", rule, f"{said}, so this call is denied.{hint}", binding.destination, binding.parameter
            )
        self._close(code, "declined")
        self._record(
            "approval.declined",
            binding,
            f"a person did not allow this call ({action}, {choice})",
            now,
            **context,
        )
        return Verdict(
            "deny", "approval.declined", "a person declined this call; do not retry it", binding.destination
        )

    def _always(self, binding: ap.Binding, destinations: Sequence[str], now: float) -> str | None:
        """Add the destinations to policy.yaml and reload it: None, or why that did not happen."""
        path = self.daemon.paths.policy
        try:
            old, new_text, _ = allowlist.edited_policy(path, binding.server, binding.tool, destinations, now)
            if old is not None and new_text.encode() == old:
                return None
            allowlist.write_policy(path, new_text.encode())
        except PolicyError as exc:
            return str(exc)
        except OSError as exc:
            return f"cannot write {path}: {exc.strerror or exc}"
        error = self.daemon.reload()
        if error is None:
            return None
        try:  # the edit loaded here but not in the daemon (a racing edit?): put the old bytes back
            if old is None:
                Path(os.path.realpath(path)).unlink(missing_ok=True)
            else:
                allowlist.write_policy(path, old)
            self.daemon.reload()
        except OSError as exc:
            log.error("approvals: could not restore %s: %s", path, exc)
        return error

    def answer(self, conn: Connection, rid: int, msg: Mapping[str, Any]) -> dict[str, Any]:
        """Op ``answer``: a shim reports what a person said to an elicitation."""
        session, entry = conn.require_server()
        now = time.time()
        self.expire(now)
        action, choice = msg.get("action"), msg.get("choice")
        if action not in ACTIONS or (choice is not None and choice not in CHOICES):
            return wire.error_reply(
                rid, "bad_answer", f"action must be one of {ACTIONS} and choice one of {CHOICES} or nil"
            )
        code = ap.normalise_code(str(msg.get("code") or "")) or ""
        pending = self.approvals.pending.get(code)
        if pending is not None and (pending.binding.session, pending.binding.server) != (
            session.key,
            entry.identity.name,
        ):
            self._record(
                "approval.refused",
                pending.binding,
                f"a shim of session {session.key!r}, server {entry.identity.name!r} answered for this code",
                now,
                channel=CHANNEL_ELICITATION,
                code=code,
            )
            return wire.error_reply(rid, "not_yours", "this code belongs to another session or server")
        request_id = msg.get("request_id")
        if pending is None:
            binding = None
            why = self._closed.get(code, "unknown")
            verdict = Verdict(
                "deny",
                "approval.closed",
                f"this question is no longer open ({why}); nothing was approved. "
                f"Retry the call to be asked again",
            )
        else:
            binding = pending.binding
            verdict = self._settle_answer(
                binding, pending.destinations, action, choice, CHANNEL_ELICITATION, code, request_id, now
            )
        record: dict[str, Any] = {
            "session": session.key,
            "client": session.client.name,
            "server": entry.identity.name,
            "request_id": request_id,
            "tool": binding.tool if binding else None,
            "verdict": verdict.verdict,
            "rule": verdict.rule,
            "reason": verdict.reason,
            "destination": verdict.destination,
            "arguments_sha256": binding.digest if binding else None,
            "channel": CHANNEL_ELICITATION,
            "code": code or None,
        }
        self.daemon.audit.append(record, now)
        reply = wire.verdict_reply(
            rid,
            verdict=verdict.verdict,
            rule=verdict.rule,
            reason=verdict.reason,
            destination=verdict.destination,
        )
        still = self.approvals.pending.get(code)
        if still is not None:
            reply.update(code=code, expires=still.expires)
        return reply

    # ---- bouncerctl ----------------------------------------------------------------------------

    def pending(self, conn: Connection, rid: int) -> dict[str, Any]:
        if conn.role != "ctl":
            return _not_ctl(rid)
        now = time.time()
        self.expire(now)
        return wire.reply(rid, pending=[_public(p, now) for p in self.approvals.open_codes(now)])

    def approve_show(self, conn: Connection, rid: int, msg: Mapping[str, Any]) -> dict[str, Any]:
        now = time.time()
        found = self._find(conn, rid, msg, now)
        if isinstance(found, dict):
            return found
        return wire.reply(rid, **_public(found, now))

    def approve(self, conn: Connection, rid: int, msg: Mapping[str, Any]) -> dict[str, Any]:
        now = time.time()
        found = self._find(conn, rid, msg, now)
        if isinstance(found, dict):
            return found
        self._commit([{"ev": "grant", "scope": "once", "binding": found.binding.as_dict()}])
        self._close(found.code, "approved")
        self._record(
            "approval.granted",
            found.binding,
            f"a person approved code {found.code} in a terminal; lasts: one retry of this exact call",
            now,
            channel=CHANNEL_CODE,
            code=found.code,
            scope="once",
            lasts="one retry of this exact call",
        )
        return wire.reply(rid, approved=True, **_public(found, now))

    def _find(
        self, conn: Connection, rid: int, msg: Mapping[str, Any], now: float
    ) -> ap.Pending | dict[str, Any]:
        """The open code a ctl op names, or the error reply (wrong codes counted and audited)."""
        if conn.role != "ctl":
            return _not_ctl(rid)
        self.expire(now)
        typed = str(msg.get("code") or "")
        if self.approvals.rate_limited(now):
            self._record(
                "approval.refused",
                None,
                f"too many wrong codes in {ap.WRONG_CODE_WINDOW_SECONDS:g}s; refused an approve op",
                now,
                channel=CHANNEL_CODE,
            )
            return wire.error_reply(
                rid,
                "rate_limited",
                f"too many wrong codes in the last {ap.WRONG_CODE_WINDOW_SECONDS:g} seconds; "
                f"nothing is approved until that passes",
            )
        code = ap.normalise_code(typed)
        pending = self.approvals.pending.get(code) if code else None
        if pending is not None:
            return pending
        why = self._closed.get(code or "", "unknown")
        self._commit([{"ev": "wrong_code", "ts": now}])
        shown = code or canon.visible(typed[:20])
        self._record(
            "approval.wrong_code", None, f"code {shown!r} is not open ({why})", now, channel=CHANNEL_CODE
        )
        message = {
            "expired": f"code {shown} has expired; retry the call to get a new one",
            "approved": f"code {shown} was already used",
            "declined": f"code {shown} was declined",
            "settled": f"code {shown} was already settled",
        }.get(why, f"no open code {shown}")
        return wire.error_reply(rid, "unknown_code" if why == "unknown" else why, message)


def _from_elicit_result(response: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """(action, choice) from a client's ElicitResult; anything unreadable is a cancel."""
    if not isinstance(response, Mapping) or response.get("action") not in ("accept", "decline", "cancel"):
        return "cancel", None
    content = response.get("content")
    choice = content.get("choice") if isinstance(content, Mapping) else None
    return str(response["action"]), choice if isinstance(choice, str) else None


def _not_ctl(rid: int) -> dict[str, Any]:
    return wire.error_reply(rid, "not_ctl", "approvals are listed and given by bouncerctl (role ctl) only")


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
