"""The daemon's state and its ops: engine, journal, audit log and sessions behind the wire's requests.

Theory of operation
-------------------
`Daemon.start` commits the policy, has the `Ledger` (bouncerd/server/ledger.py: the journal and the
audit log) replay the journal into a fresh `Engine` and the observation queue, cutting a torn tail
and repairing a torn audit line, and is then ready to serve. `serve` runs the background tasks and
hands the listener to `bouncerd/server/serving.py`, which accepts; each connection is a
`bouncerd.server.connection.Connection`, which frames, orders and dispatches requests through
`Daemon.handlers` (op name -> handler, one entry per row of `wire.OP_TABLE` but hello, checked at
construction by `check_handler_table`) to the op methods here, in `bouncerd/server/approvals.py`
and in `bouncerd/server/hooks.py`. Each gets the collaborators it uses, never the daemon. The op
methods are synchronous: they ask the core for the decision (`bouncerd.core.decision.Decider`,
`Engine`); a decision leaves through the one `bouncerd.server.verdicts.VerdictPath` (its events
journaled in one write, its audit records, the verdict's record, the reply); other ops journal and
audit through the ledger. Every verdict is made in `bouncerd/core`; this module is plumbing.

Sessions end (`sweep`, every `sessions.sweep_interval`): one whose last shim left the grace period
ago is archived (bouncerd/server/sessions.py): the engine drops what lasts a session, its taint stays
for `taint_retention` (enforced here for every scope), the audit log gets a `session.ended` record,
and the journal is compacted once a rewrite would drop more than `ARCHIVE_COMPACT_MIN_BYTES` (and twice
what it keeps, unless no client is left): memory and the journal hold the live state only.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.abc

from bouncerd import __version__, wire
from bouncerd.core import fastpath, pins, restricted
from bouncerd.core.auditrecords import EventRecord, ServerEventRecord, VouchRecord
from bouncerd.core.decision import Decider
from bouncerd.core.decision_types import CallVerdict
from bouncerd.core.engine import Engine
from bouncerd.core.events import EngineEvent
from bouncerd.core.model import ServerIdentity, ToolCall
from bouncerd.core.policy import Policy
from bouncerd.errors import PolicyError, ProtocolError
from bouncerd.managedpolicy import ManagedSource
from bouncerd.paths import Paths
from bouncerd.server import hooks, serving, verdicts
from bouncerd.server.approvals import ApprovalDesk
from bouncerd.server.caller import AsyncHandler, Caller, Handler
from bouncerd.server.connection import check_handler_table
from bouncerd.server.export import Exporter, report_periodically
from bouncerd.server.fastlane import FastLane
from bouncerd.server.ledger import Ledger
from bouncerd.server.policies import PolicyState, Reloader, realpath
from bouncerd.server.questions import Wording
from bouncerd.server.sessions import Registry, grace_seconds, sweep_interval
from bouncerd.server.unread import RESYNC_SECONDS, Peers

log = logging.getLogger("bouncerd")

# After archiving, compact once a rewrite would drop this much (and, while a client is connected, twice
# what it keeps): below it the rewrite's fsync costs more than the bytes are worth; a few client runs
# write more.
ARCHIVE_COMPACT_MIN_BYTES = 64 * 1024


class Daemon:
    def __init__(self, paths: Paths, socket_path: str, *, expected_uid: int, now: float) -> None:
        self.paths = paths
        self.socket_path = socket_path
        self.started = now
        self.policy = PolicyState(paths.policy)
        self.engine = Engine(resolve=realpath)
        self.registry = Registry()
        self.ledger = Ledger(paths, self.engine)  # the journal and the audit log
        self.observations = self.ledger.observations
        self.peers = Peers()  # every connection, for the barrier a verdict waits behind (unread.py)
        self.fastlane = FastLane(self.engine, lambda: self.policy.base)  # calls decided before asked
        self.decider = Decider(self.engine, Wording())  # every verdict the engine alone does not make
        # asking a person: codes, answers, approvals
        # every decision's events, audit records and verdict go out through this one path
        self.verdicts = verdicts.VerdictPath(
            self.ledger.append_events,
            self.ledger.audit_append,
            lambda: self.policy.base.settings.audit_arguments,
        )
        self.approvals = ApprovalDesk(self.decider, self.verdicts, paths.policy, self.reload)
        self.hook_ops = hooks.HookOps(
            self.engine, self.observations.accept, self.verdicts, self.ledger.maybe_compact
        )
        self.handlers: Mapping[str, Handler] = self._handler_table()
        self.async_handlers: Mapping[str, AsyncHandler] = self._async_handler_table()
        check_handler_table(self.handlers, self.async_handlers)
        self.reloader = Reloader(self.policy, self._put_policy_in_force, self.ledger.audit_append)
        self.session_grace = grace_seconds(os.environ)
        self.exporter: Exporter | None = None  # audit export (`audit_export:`), if configured
        self.acceptor = serving.Acceptor(
            self,
            self.observations,
            self.peers,
            self._connection_closed,
            socket_path=socket_path,
            expected_uid=expected_uid,
        )

    def _async_handler_table(self) -> dict[str, AsyncHandler]:
        """Ops answered after awaiting work off the event loop; the connection goes on meanwhile."""
        return {"reload": self.reload_op, "fastpath": self.fastpath_op}

    def _handler_table(self) -> dict[str, Handler]:
        """Every op of `wire.OP_TABLE` but hello (which `Connection` answers first) and those of
        `async_handlers`: one entry per op (`check_handler_table`). Roles are checked before a handler
        is called (`wire.role_refusal`), so no handler checks its caller's role."""
        return {
            "client": self.client,
            "tools": self.tools,
            "verdict": self.verdict,
            "forwarded": self.forwarded,
            "answer": self.approvals.answer,
            "observe": self.observe,
            "vouch": self.vouch,
            "observe_text": self.hook_ops.observe_text,
            "check_builtin": self.hook_ops.check_builtin,
            "status": self.status,
            "ping": lambda caller, rid, msg: wire.reply(rid),
            "pins": self.pins,
            "pins_accept": self.pins_accept,
            "pending": self.approvals.pending,
            "approve_show": self.approvals.approve_show,
            "approve": self.approvals.approve,
            "accept_loss": self.accept_loss,
        }

    # ---- lifecycle ----------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        paths: Paths,
        socket_path: str,
        *,
        expected_uid: int,
        now: float,
        managed: ManagedSource | None = None,
    ) -> Daemon:
        daemon = cls(paths, socket_path, expected_uid=expected_uid, now=now)
        # A bad policy.yaml, an unsafe managed policy or a user policy loosening it stops the start here.
        daemon.policy.managed_source = managed
        daemon.policy.commit(daemon.policy.read(), now)
        daemon.engine.set_policy(daemon.policy.base)
        daemon.ledger.open(now)
        daemon.registry.adopt(daemon.engine.session_keys(), now)
        if daemon.observations.instances:  # shims were here: let them replay first (unread.py)
            daemon.peers.settle_for(RESYNC_SECONDS)
            log.info("sends wait up to %.0f s for reconnecting shims to replay what they saw", RESYNC_SECONDS)
        daemon._configure_export()
        try:
            daemon.approvals.open(paths.state, os.environ, now)
        except BaseException:
            daemon.close()
            raise
        return daemon

    def close(self) -> None:
        """Compact and fsync the journal, fsync and close the audit log. Call once, after `serve`."""
        if self.ledger.journal_open:
            if self.ledger.audit_open:
                self.approvals.close(time.time())
            self.ledger.close_journal()
        if self.exporter is not None:
            if self.ledger.audit_open:
                self.exporter.report_losses(self.ledger.audit_append, time.time())
            self.exporter.close()
            self.exporter = None
        self.ledger.close_audit()

    # ---- policy in force ----------------------------------------------------------------------

    def _put_policy_in_force(self, policy: Policy) -> None:
        """A reload committed: the engine decides by it, and audit export follows its settings."""
        self.engine.set_policy(policy)
        self._configure_export()

    def _configure_export(self) -> None:
        """(Re)start audit export when `audit_export` changed (at start and after a reload)."""
        config = self.policy.export_config
        if self.exporter is None or config != self.exporter.config:
            if self.exporter is not None:
                self.exporter.close(timeout=0)  # the old senders finish on their own
            self.exporter = Exporter(config) if config is not None and not config.empty else None
            self.ledger.audit.tap = (
                self.exporter.tap(self.ledger.audit_append) if self.exporter is not None else None
            )

    # ---- the end of sessions ------------------------------------------------------------------

    def sweep(self, now: float) -> None:
        """Archive sessions idle past the grace period, expire taint past retention, compact if it pays."""
        ended = self.registry.ended(now, self.session_grace)
        events: list[EngineEvent] = []
        for session in ended:
            events.extend(self.engine.end_session(session.key))
        events.extend(self.engine.expire_taint(now, self.policy.base.settings.taint_retention))
        if not events:
            return
        self.ledger.append_events(events)
        for session in ended:
            self.observations.forget(session.instances)
            self.registry.remove(session.key)
            self.ledger.audit_append(session.ended_record(self.session_grace), now)
        reclaimable = self.ledger.reclaimable
        idle = not any(s.connections for s in self.registry.sessions.values())
        if reclaimable > ARCHIVE_COMPACT_MIN_BYTES and (idle or reclaimable > 2 * self.ledger.kept_bytes):
            # when it pays, or when the last client has gone (a rewrite then costs no one)
            self.ledger.compact()

    async def _sweep_sessions(self) -> None:
        while True:
            await anyio.sleep(sweep_interval(self.session_grace))
            try:
                self.sweep(time.time())
            except (OSError, ProtocolError) as exc:  # the disk refused: try again at the next sweep
                log.error("sessions: archiving failed, retrying later: %s", exc)

    # ---- serving ------------------------------------------------------------------------------

    async def serve(self, sock: socket.socket) -> None:
        """Serve until SIGTERM or SIGINT. Takes ownership of `sock` (bouncerd/server/serving.py)."""
        async with anyio.create_task_group() as tg:

            def hangup() -> None:  # SIGHUP: reload the policy
                tg.start_soon(self.fastlane.change, lambda: self.reloader.reload(time.time))

            await tg.start(serving.watch_signals, tg, hangup)
            tg.start_soon(self.observations.run)
            tg.start_soon(self.approvals.run)
            tg.start_soon(self._sweep_sessions)
            tg.start_soon(report_periodically, lambda: self.exporter, self.ledger.audit_append)
            log.info("bouncerd %s (pid %d) serving on %s", __version__, os.getpid(), self.socket_path)
            self.acceptor.start(sock, tg)

    def _connection_closed(self, caller: Caller) -> None:
        self.fastlane.leave(caller)
        self.registry.disconnect(caller.session, caller.server, time.time())

    # ---- ops ----------------------------------------------------------------------------------

    def hello(self, caller: Caller, rid: int, msg: wire.HelloRequest) -> tuple[dict[str, Any], bool]:
        """The reply to `hello` and whether to keep the connection."""
        if msg["version"] != wire.PROTOCOL_VERSION:
            return (
                wire.error_reply(
                    rid,
                    "version",
                    f"protocol version {msg['version']} is not supported; this bouncerd speaks "
                    f"{wire.PROTOCOL_VERSION}",
                ),
                False,
            )
        role = msg["role"]
        session = msg.get("session")
        server = msg.get("server")
        upstream = msg.get("upstream", [])
        if not all(isinstance(part, str) for part in upstream):
            return wire.error_reply(rid, "bad_hello", "upstream must be a list of strings"), False
        if role == "shim" and not (session and server):
            return wire.error_reply(
                rid, "bad_hello", "a shim must send its session key and server name"
            ), False
        if role == "shim":
            try:
                self.policy.for_shim(msg.get("policy_path"))
            except PolicyError as exc:
                return wire.error_reply(rid, "policy", str(exc)), False
            caller.policy_path = msg.get("policy_path")
        if role == "hook":
            session = hooks.session_for_hook(
                self.registry.sessions, self.engine, session, msg.get("candidates")
            )
        caller.role = role
        caller.instance = msg.get("instance")
        if session:
            identity = ServerIdentity(server, tuple(upstream)) if server else None
            caller.session, caller.server = self.registry.connect(
                session,
                identity,
                shim_pid=msg.get("pid"),
                client_pid=msg.get("client_pid"),
                now=time.time(),
                instance=caller.instance,
            )
        reply = wire.reply(
            rid,
            daemon_pid=os.getpid(),
            version=wire.PROTOCOL_VERSION,
            daemon_version=__version__,
            # This daemon reads every other connection up to where it stood before judging a send
            # (unread.py), so a shim may release an output once its observation is written.
            release_on_write=True,
            # This daemon answers `fastpath` and `forwarded` (docs/how-it-works.md).
            fast_path=True,
        )
        return reply, True

    def client(self, caller: Caller, rid: int, msg: wire.ClientRequest) -> dict[str, Any]:
        session = caller.require_session()
        for info in (session.client, *([caller.server.client] if caller.server else [])):
            for key in ("name", "version", "protocol", "capabilities"):
                if key in msg:
                    setattr(info, key, msg[key])
        return wire.reply(rid)

    def tools(self, caller: Caller, rid: int, msg: wire.ToolsRequest) -> dict[str, Any]:
        session, entry = caller.require_server()
        tools = [t for t in msg["tools"] if isinstance(t, dict)]
        try:
            report, events = self.engine.tools_listed(
                entry.identity,
                tools,
                time.time(),
                client=session.client.name,
                session=session.key,
                profile=pins.capability_profile(session.client.capabilities),
            )
        except (TypeError, ValueError) as exc:  # bytes, which JSON cannot carry: found before any change
            return wire.error_reply(rid, "bad_tools", f"a tool in the list cannot be pinned: {exc}")
        self.ledger.append_events(events)
        self.fastlane.changed(entry.identity.key)
        entry.tools = len(tools)
        self.ledger.maybe_compact()
        return wire.reply(
            rid,
            pinned_now=list(report.pinned_now),
            unpinned=list(report.unpinned),
            changed=list(report.changed),
        )

    def verdict(self, caller: Caller, rid: int, msg: wire.VerdictRequest) -> dict[str, Any]:
        session, entry = caller.require_server()
        kind = msg.get("kind") or "tool"
        call = ToolCall(
            session.key,
            entry.identity,
            msg["tool"],
            msg["arguments"],
            msg.get("request_id"),
            kind,
            msg.get("answers") or None,
        )
        now = time.time()
        policy, policy_error = self.policy.for_call(caller.policy_path)
        decision = self.decider.decide_call(
            call,
            now,
            policy,
            secrets.token_bytes,
            policy_error=policy_error,
            invalid=msg.get("invalid"),
            request_state=msg.get("request_state"),
            input_response=msg.get("input_response"),
        )
        decided = self.approvals.carry(decision, now)  # a retry's "always" answer: its AnswerVerdict
        verdict = decided.verdict
        ask = decided.ask if isinstance(decided, CallVerdict) else None
        asked = self.approvals.ask_fields(ask)
        if any(ev["ev"] == "pin_window" for ev in decision.events):  # the first call closed the window
            self.fastlane.changed(entry.identity.key)
        if asked:
            self.approvals.remember_arguments(asked["code"], call.arguments)
        judged = verdicts.Judged.of_call(
            session,
            call,
            verdict,
            kind=kind,
            # An ask's record keeps the reason without the `bouncerctl approve CODE` hint: the client
            # may answer it itself, and the log must not offer a code for an ask already answered
            # (the code is in its own field; `bouncerctl pending` lists the open ones).
            reason=ask.pending.reason if ask is not None else None,
            code=asked["code"] if asked else None,
            request_id_json=msg.get("request_id_json"),  # exact where request_id cannot be (a float, ...)
            extra=asked,  # an ask: code, question, elicitation, timeout, request_state, binding
        )
        reply = self.verdicts.deliver(rid, judged, now)
        self.ledger.maybe_compact()
        return reply

    def forwarded(self, caller: Caller, rid: int, msg: wire.ForwardedRequest) -> dict[str, Any]:
        """The record of a call the shim forwarded on the fast path: judged and audited as a verdict."""
        session, entry = caller.require_server()
        call = ToolCall(session.key, entry.identity, msg["tool"], msg["arguments"], msg.get("request_id"))
        now = time.time()
        policy, policy_error = self.policy.for_call(caller.policy_path)
        verdict = fastpath.judge_forwarded(
            self.engine, call, now, policy, epoch=msg["epoch"], policy_error=policy_error
        )
        judged = verdicts.Judged.of_call(
            session,
            call,
            verdict,
            request_id_json=msg.get("request_id_json"),
            fast_path={"epoch": msg["epoch"], "instance": caller.instance, "seq": msg["seq"]},
        )
        reply = self.verdicts.deliver(rid, judged, now, verdict.events)
        self.ledger.maybe_compact()
        return reply

    def needs_taint(self, caller: Caller, op: str, msg: Mapping[str, Any]) -> bool:
        """Whether a request must wait until every earlier output is indexed. Only a verdict on a
        sink-gated tool or on a program the agent wrote (`Engine.reads_taint`) reads taint; pins,
        budgets and constraints do not, so those are answered
        at once (a 10 MB result being indexed must not hold up an unrelated call)."""
        if op != "verdict" or caller.server is None or msg.get("kind") not in (None, "tool"):
            return True
        try:
            policy = self.policy.for_shim(caller.policy_path)
        except PolicyError:
            return False  # the verdict will be a deny that reads no taint
        return self.engine.reads_taint(caller.server.identity, msg["tool"], msg.get("arguments"), policy)

    # ---- policy, pins, vouching ---------------------------------------------------------------

    def reload(self) -> str | None:
        """Reload policy.yaml here and now (an "always" answer that edited it). None, or why not. It
        only adds trust for a tool that was asked about, never one of a fast-path set."""
        error = self.reloader.reload_now(time.time())
        self.fastlane.changed()
        return error

    async def reload_op(self, caller: Caller, rid: int, msg: wire.ReloadRequest) -> dict[str, Any]:
        error = await self.fastlane.change(lambda: self.reloader.reload(time.time))
        return wire.reply(rid, error=error)

    async def fastpath_op(self, caller: Caller, rid: int, msg: wire.FastpathRequest) -> dict[str, Any]:
        grant = await self.fastlane.request(caller, msg.get("holding"))
        tools = (
            {name: list(names) for name, names in grant.tools.items()} if grant.tools is not None else None
        )
        return wire.reply(rid, epoch=grant.epoch, tools=tools)

    def pins(self, caller: Caller, rid: int, msg: wire.PinsRequest) -> dict[str, Any]:
        servers = []
        for key, sp in self.engine.servers.items():
            name, *upstream = key.split("\x00")
            if msg.get("server") not in (None, name):
                continue
            tools = pins.review(sp)
            servers.append({"name": name, "upstream": upstream, "key": key, "tools": tools})
        return wire.reply(rid, servers=servers)

    def pins_accept(self, caller: Caller, rid: int, msg: wire.PinsAcceptRequest) -> dict[str, Any]:
        wanted = msg.get("tools")
        accepted: list[str] = []
        now = time.time()
        found = False
        for key in list(self.engine.servers):
            if key.split("\x00", 1)[0] != msg["server"]:
                continue
            found = True
            events = self.engine.accept_pins(key, wanted)
            self.ledger.append_events(events)
            self.fastlane.changed(key)
            names = [ev["tool"] for ev in events]
            accepted.extend(names)
            if names:
                record: ServerEventRecord = {
                    "server": msg["server"],
                    "rule": "pins.accepted",
                    "verdict": None,
                    "reason": f"a person accepted {len(names)} tool(s): {', '.join(names)}",
                }
                self.ledger.audit_append(record, now)
        if not found:
            return wire.error_reply(
                rid, "no_server", f"no server named {msg['server']!r} has listed tools yet"
            )
        return wire.reply(rid, accepted=accepted)

    def accept_loss(self, caller: Caller, rid: int, msg: wire.AcceptLossRequest) -> dict[str, Any]:
        """A person accepted the loss of the damaged journal's state: decide as usual again. Only a
        bouncerctl connection may (a shim or hook speaks for an agent, never for the person): its row
        in `wire.OP_TABLE` says so."""
        restriction = self.engine.restriction
        if restriction is None:
            return wire.reply(rid, accepted=False)
        self.ledger.journal.append({"k": "loss_accepted"})
        self.engine.lift_restriction()
        record: EventRecord = {
            "rule": "state.loss_accepted",
            "verdict": None,
            "reason": f"a person accepted the loss found at start ({restriction.reason}); tools stay "
            f"unpinned until accepted with bouncerctl pins accept",
        }
        self.ledger.audit_append(record, time.time())
        return wire.reply(rid, accepted=True)

    def vouch(self, caller: Caller, rid: int, msg: wire.VouchRequest) -> dict[str, Any]:
        session = caller.require_session()
        events = self.engine.vouch(session.key, msg["text"])
        self.ledger.append_events(events)
        keys = events[0]["keys"] if events else []
        if keys:
            record: VouchRecord = {
                "session": session.key,
                "verdict": None,
                "rule": "vouch.user_prompt",
                "reason": (
                    f"{len(keys)} key(s) from the user's prompt vouched for the session"
                    " (destinations, typed phrases, sources it names)"
                ),
                "destination": ", ".join(keys),
            }
            self.ledger.audit_append(record, time.time())
        return wire.reply(rid, vouched=len(keys))

    def observe(self, caller: Caller, rid: int, msg: wire.ObserveRequest) -> dict[str, Any]:
        session = caller.require_session()
        seq = msg["seq"]
        if not self.observations.is_duplicate(caller.instance, seq):
            server = caller.server.identity.name if caller.server is not None else f"({caller.role})"
            self.observations.accept(
                session=session.key, server=server, instance=caller.instance, request=msg, now=time.time()
            )
            self.ledger.maybe_compact()
        return wire.reply(rid, seq=seq)

    def status(self, caller: Caller, rid: int, msg: wire.StatusRequest) -> dict[str, Any]:
        now = time.time()
        daemon = {
            "pid": os.getpid(),
            "version": __version__,
            "started": self.started,
            "uptime": now - self.started,
            "socket": self.socket_path,
            "state_dir": str(self.paths.state),
            "audit": str(self.paths.audit),
            "head": self.ledger.audit.head,  # hash of the last audit record: compare with `audit verify`
            "records": self.ledger.audit.records,  # audit records written since this daemon started
            "audit_gaps": [gap.why for gap in self.ledger.audit.gaps],  # lost live files noticed
            "export": self.exporter.public() if self.exporter is not None else None,
            "restricted": _restriction_public(self.engine.restriction),
        }
        return wire.reply(rid, daemon=daemon, sessions=self.registry.public(), policy=self.policy.public())


def _restriction_public(restriction: restricted.Restriction | None) -> dict[str, Any] | None:
    if restriction is None:
        return None
    return {"reason": restriction.reason, "since": restriction.since, "accept": restricted.ACCEPT_COMMAND}
