"""The daemon's files: the journal replayed at start, compacted as it grows, and the audit log.

Theory of operation
-------------------
`Ledger.open` replays the journal into the engine (and the observation index, whose entries share the
journal), cuts a torn tail, restricts the engine if the journal was damaged, and opens the audit log
(repairing a torn line). Ops write through `append_events` (the engine events of one op, one write)
and `audit_append`; `maybe_compact` after an op rewrites the journal when it pays.

Journal entries written here: ``{"k": "events", "events": [...]}`` (engine events of one op, or a slice
of a snapshot), ``{"k": "restricted", "reason": str, "since": float}`` (the journal was found damaged:
the engine is restricted, `bouncerd/core/restricted.py`; first in every snapshot while it lasts) and
``{"k": "loss_accepted"}`` (a person accepted the loss) and ``{"k": "audit_head", "head": str}`` (the
last audit hash written, in every snapshot and after every audit rotation: the audit log must still
hold it at the next start, `bouncerd/server/audit.py`). Observation entries belong to
`bouncerd/server/observations.py`.

Compaction: once the journal holds more than `COMPACT_AFTER_BYTES` that a rewrite would drop (its
size less the raw observations still waiting to be indexed, which a rewrite must copy), and more
than it would copy, and at least twice the last snapshot (so a large state is not rewritten after
every append), it is replaced by the engine's snapshot plus what the observation index still needs.
The cost of compaction is thus always proportional to what it reclaims. Compaction runs on the event
loop and fsyncs; it also runs at a clean shutdown (`close_journal`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence

from bouncerd.core import restricted
from bouncerd.core.auditrecords import AnyRecord, EventRecord
from bouncerd.core.engine import Engine
from bouncerd.core.events import EngineEvent
from bouncerd.errors import BouncerError, ProtocolError
from bouncerd.paths import Paths
from bouncerd.server.audit import AuditLog
from bouncerd.server.journal import JOURNAL_NAME, Entry, Journal
from bouncerd.server.observations import ObservationIndex

log = logging.getLogger("bouncerd")

# Compact once the journal passes this size. Raw observations make it grow by the size of upstream
# outputs; 64 MiB bounds the replay after a crash to well under a second while compacting rarely.
COMPACT_AFTER_BYTES = 64 * 1024 * 1024

# Engine events per journal frame when writing a snapshot, so a large state never needs a frame near
# the wire's MAX_FRAME_BYTES.
SNAPSHOT_EVENTS_PER_FRAME = 256


class Ledger:
    def __init__(self, paths: Paths, engine: Engine) -> None:
        self.paths = paths
        self.engine = engine
        self.observations = ObservationIndex(engine, self.append)
        self.observations.on_indexed = self.maybe_compact
        self._journal: Journal | None = None
        self._audit: AuditLog | None = None
        self._audit_head: str | None = None  # the last audit hash the journal knows of
        self._compact_floor = COMPACT_AFTER_BYTES
        self.kept_bytes = 0  # what the last compaction kept

    # ---- start and end ------------------------------------------------------------------------

    def open(self, now: float) -> None:
        """Replay the journal and open the audit log; on failure nothing is left open."""
        journal, recovery = Journal.open(self.paths.state / JOURNAL_NAME, self._replay)
        self._journal = journal
        self.observations.replay_done()
        (log.error if recovery.damaged else log.warning if recovery.torn_bytes else log.info)(
            "%s", recovery.describe()
        )
        try:
            if recovery.damaged:
                self._enter_restricted(recovery.problem or "the journal is damaged", now)
            if self.observations.queued:
                log.info("journal: %d observations to index again", self.observations.queued)
            self._audit, repair = AuditLog.open(self.paths.audit, now, self._audit_head)
        except BaseException:
            journal.close()
            self._journal = None
            raise
        if repair is not None:
            log.warning("audit: moved a torn last line (%d bytes) to %s", repair.moved_bytes, repair.aside)
        self._audit.on_rotated = self._journal_audit_head
        if recovery.damaged:
            lost: EventRecord = {
                "rule": "state.lost",
                "verdict": None,
                "reason": f"{recovery.describe()}; run {restricted.ACCEPT_COMMAND} once reviewed",
            }
            self._audit.append(lost, now)

    def _enter_restricted(self, reason: str, now: float) -> None:
        """The journal was damaged: restrict the engine, journal that, and compact, so the journal
        holds the restriction first and whatever was read before the damage after it."""
        entry: Entry = {"k": "restricted", "reason": reason, "since": now}
        self._replay(entry)
        self.journal.append(entry)
        self.journal.rewrite(self._snapshot_entries())
        log.error(
            "restricted: every tool unpinned, every budget spent, every send asked until: %s",
            restricted.ACCEPT_COMMAND,
        )

    def _replay(self, entry: Entry) -> None:
        try:
            if entry.get("k") == "events":
                for ev in entry["events"]:
                    self.engine.apply(ev)
            elif entry.get("k") == "restricted":
                self.engine.restrict(restricted.Restriction(str(entry["reason"]), float(entry["since"])))
            elif entry.get("k") == "loss_accepted":
                self.engine.lift_restriction()
            elif entry.get("k") == "audit_head":
                self._audit_head = str(entry["head"])
            elif not self.observations.replay(entry):
                raise ValueError(f"unknown entry kind {entry.get('k')!r}")
        except Exception as exc:  # any failure to apply means the state cannot be rebuilt faithfully
            raise BouncerError(
                f"the journal {self.paths.state / JOURNAL_NAME} holds an entry this bouncerd does not "
                f"understand ({type(exc).__name__}: {exc}); it is left as it is"
            ) from None

    @property
    def journal_open(self) -> bool:
        return self._journal is not None

    @property
    def audit_open(self) -> bool:
        return self._audit is not None

    def close_journal(self) -> None:
        """Compact, fsync and close the journal."""
        if self._journal is not None:
            self.compact()
            self._journal.sync()
            self._journal.close()
            self._journal = None

    def close_audit(self) -> None:
        """Fsync and close the audit log (after the journal: its last rotation is then not journaled)."""
        if self._audit is not None:
            self._audit.close()
            self._audit = None

    # ---- writes -------------------------------------------------------------------------------

    @property
    def journal(self) -> Journal:
        assert self._journal is not None, "journal used before open() or after close_journal()"
        return self._journal

    @property
    def audit(self) -> AuditLog:
        assert self._audit is not None, "audit log used before open() or after close_audit()"
        return self._audit

    def append(self, entry: Entry) -> None:
        self.journal.append(entry)

    def append_events(self, events: Sequence[EngineEvent]) -> None:
        if events:
            self.journal.append({"k": "events", "events": list(events)})

    def audit_append(self, fields: AnyRecord, now: float) -> None:
        self.audit.append(fields, now)

    def _journal_audit_head(self, head: str) -> None:
        if self._journal is None:  # closing: the journal was compacted and closed before the audit log
            return
        try:
            self.journal.append({"k": "audit_head", "head": head})
        except (OSError, ProtocolError) as exc:  # the next compaction records it; the record is written
            log.error("journal: cannot record the audit head after a rotation: %s", exc)

    # ---- compaction ---------------------------------------------------------------------------

    @property
    def reclaimable(self) -> int:
        """What a rewrite would drop: the journal less the raw observations it must copy."""
        return self.journal.size - self.observations.queued_bytes

    def maybe_compact(self) -> None:
        if self.reclaimable > max(self._compact_floor, self.observations.queued_bytes):
            self.compact()

    def compact(self) -> None:
        try:
            self.journal.rewrite(self._snapshot_entries())
        except (OSError, ProtocolError) as exc:
            log.error("journal: compaction failed, keeping the journal as it is: %s", exc)
            return
        self.kept_bytes = self.journal.size - self.observations.queued_bytes
        self._compact_floor = max(COMPACT_AFTER_BYTES, 2 * self.kept_bytes)
        log.info("journal: compacted to %d bytes", self.journal.size)

    def _snapshot_entries(self) -> Iterator[Entry]:
        restriction = self.engine.restriction
        if restriction is not None:  # first: replaying it drops pins, and those accepted since follow
            yield {"k": "restricted", "reason": restriction.reason, "since": restriction.since}
        events = self.engine.snapshot(time.time())
        for i in range(0, len(events), SNAPSHOT_EVENTS_PER_FRAME):
            yield {"k": "events", "events": events[i : i + SNAPSHOT_EVENTS_PER_FRAME]}
        yield from self.observations.snapshot_entries()
        head = self._audit.head if self._audit is not None else self._audit_head
        if head is not None:
            yield {"k": "audit_head", "head": head}
