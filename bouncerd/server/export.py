"""Audit export: a copy of each audit line to syslog, the journal or OTLP, never on the verdict's path.

Theory of operation
-------------------
`AuditLog.append` writes the local line first (the source of truth) and then hands the chained record
and its bytes to `Exporter.offer`, which only puts them on each target's bounded queue
(`EXPORT_QUEUE_LIMIT`) with ``put_nowait``: a full queue drops the copy and counts it; nothing on the
verdict's path ever waits for a collector. One sender thread per target takes records off its queue
and sends them; a send that fails (no socket, connection refused, an HTTP error) counts the records
as failed, and so is everything queued behind them (the collector is down); the sender then waits
`RETRY_SECONDS` before the next attempt, so a dead collector costs one attempt per interval, in that
thread only, and copies wait in the queue for a live collector only.

Drops and failures are reported in `status` (`Exporter.public`) and audited: after any new loss,
the next append (or the daemon's periodic check, for a quiet daemon) writes an ``audit.export_dropped``
record with the counts, at most once per `DROP_REPORT_SECONDS`. That record is exported like any
other, so a SIEM that sees it knows how many lines to fetch from the machine's own log, whose hashes
show exactly which.

OTLP uses the official ``opentelemetry-sdk`` and ``opentelemetry-exporter-otlp-proto-http`` (the
``otel`` extra), imported only when an `otlp:` target is configured; without the extra that target
is reported as unavailable in `status` and every record for it counts as failed. What the policy's
`otlp:` leaves out comes from the standard ``OTEL_EXPORTER_OTLP_*`` variables (`otlp_target`); a
target that has no endpoint either way, or a variable that cannot be read, is unavailable the same way.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import queue
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from bouncerd.core import exportformat
from bouncerd.core.auditrecords import Audit, ExportLossRecord
from bouncerd.core.exportconf import (
    DEFAULT_FACILITY,
    FACILITIES,
    ExportConfig,
    JournalTarget,
    OtlpTarget,
    SyslogTarget,
    otlp_target,
)

log = logging.getLogger("bouncerd")

# Copies waiting per target. At a few hundred bytes each, 4096 is about a megabyte: room for a burst
# of calls while a collector is slow, small enough that a dead one cannot grow the daemon.
EXPORT_QUEUE_LIMIT = 4096
# Records one send takes off the queue (one OTLP request, or a run of datagrams between checks).
BATCH_LIMIT = 256
# After a failed send, wait this long before the next attempt: a dead TCP or HTTP collector would
# otherwise be dialled for every record.
RETRY_SECONDS = 1.0
# A sender wakes up at most this often: the copies that arrived meanwhile go out together (one OTLP
# request, one run of datagrams), so a busy daemon's sender thread takes the interpreter lock once
# per interval, not once per verdict. A fifth of a second is nothing to a SIEM.
LINGER_SECONDS = 0.2
# The interpreter's thread switch interval while exporting (default 5 ms): how long the daemon's loop
# can wait for a sender thread to let go of the interpreter lock. Shorter costs a little throughput
# in the senders, which have plenty.
SWITCH_INTERVAL_SECONDS = 0.0005
# A socket send or connect that takes longer than this has failed (the sender thread's bound).
SEND_TIMEOUT_SECONDS = 2.0
# At most one `audit.export_dropped` record per this many seconds while losses go on.
DROP_REPORT_SECONDS = 60.0
DROP_RULE = "audit.export_dropped"

AuditAppend = Audit


class Target(Protocol):
    name: str
    batch_limit: int  # records per `send`: 1 for datagrams (exact counts), BATCH_LIMIT for OTLP

    def send(self, batch: list[tuple[dict[str, Any], bytes]]) -> None: ...  # raises on failure

    def close(self) -> None: ...


class SyslogSender:
    def __init__(self, target: SyslogTarget) -> None:
        self.target = target
        self.batch_limit = 1
        self.name = f"syslog {target.transport}:{target.address}" + (f":{target.port}" if target.port else "")
        self._sock: socket.socket | None = None
        self._hostname = socket.gethostname() or "-"
        self._pid = os.getpid()

    def _connect(self) -> socket.socket:
        t = self.target
        if t.transport == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.settimeout(SEND_TIMEOUT_SECONDS)
            try:
                sock.connect(t.address)
            except OSError:
                sock.close()
                raise
            return sock
        if t.transport == "tcp":
            return socket.create_connection((t.address, t.port), SEND_TIMEOUT_SECONDS)
        return _udp(t.address, t.port)

    def send(self, batch: list[tuple[dict[str, Any], bytes]]) -> None:
        if self._sock is None:
            self._sock = self._connect()
        try:
            for record, line in batch:
                msg = exportformat.rfc5424(
                    record, line, facility=self.target.facility, hostname=self._hostname, pid=self._pid
                )
                if self.target.transport == "tcp":
                    self._sock.sendall(exportformat.octet_counted(msg))
                else:
                    self._sock.send(msg)
        except OSError:
            self.close()  # reconnect on the next attempt (the collector may have restarted)
            raise

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None


def _udp(host: str, port: int) -> socket.socket:
    info = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0]
    sock = socket.socket(info[0], socket.SOCK_DGRAM)
    sock.settimeout(SEND_TIMEOUT_SECONDS)
    sock.connect(info[4])
    return sock


class JournalSender:
    def __init__(self, target: JournalTarget, facility: int) -> None:
        self.target = target
        self.facility = facility
        self.name = f"journal {target.socket}"
        self.batch_limit = 1
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.settimeout(SEND_TIMEOUT_SECONDS)

    def send(self, batch: list[tuple[dict[str, Any], bytes]]) -> None:
        for record, line in batch:
            self._sock.sendto(
                exportformat.journal_entry(record, line, facility=self.facility), self.target.socket
            )

    def close(self) -> None:
        self._sock.close()


class OtlpSender:
    """OTLP/HTTP logs through the official SDK's exporter (the `otel` extra), imported here only."""

    def __init__(self, target: OtlpTarget) -> None:
        """`target` as `otlp_target` completed it: every field set."""
        self.name = f"otlp {target.endpoint}"
        self.batch_limit = BATCH_LIMIT
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        from bouncerd import __version__

        # Any: the extra is optional, and its exporter's shutdown() is untyped.
        self._exporter: Any = OTLPLogExporter(
            endpoint=target.endpoint, headers=dict(target.headers), timeout=target.timeout
        )
        self._resource = Resource.create({"service.name": "bouncerd", "service.version": __version__})
        self._scope = InstrumentationScope("bouncerd.audit", __version__)

    def send(self, batch: list[tuple[dict[str, Any], bytes]]) -> None:
        from opentelemetry._logs import LogRecord, SeverityNumber
        from opentelemetry.sdk._logs import ReadableLogRecord
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        numbers = {4: SeverityNumber.WARN, 5: SeverityNumber.INFO2, 6: SeverityNumber.INFO}
        texts = {4: "WARN", 5: "NOTICE", 6: "INFO"}
        out = []
        for record, line in batch:
            sev = exportformat.severity(record)
            attributes = exportformat.otel_attributes(record)
            log_record = LogRecord(
                timestamp=_ts_ns(record.get("ts")),
                severity_number=numbers.get(sev, SeverityNumber.INFO),
                severity_text=texts.get(sev, "INFO"),
                body=line.decode("utf-8", "replace"),
                attributes=attributes,
            )
            out.append(ReadableLogRecord(log_record, self._resource, self._scope))
        if self._exporter.export(out) != LogRecordExportResult.SUCCESS:
            raise OSError(f"the collector at {self.name} did not accept {len(out)} records")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._exporter.shutdown()


def _unavailable(problem: str) -> Target:
    raise ValueError(problem)


def _ts_ns(ts: Any) -> int | None:
    if not isinstance(ts, str):
        return None
    import datetime as dt

    try:
        moment = dt.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return None
    return int(moment.timestamp() * 1000) * 1_000_000


class Channel:
    """One target: its queue, its sender thread and its counts."""

    def __init__(self, name: str, make: Callable[[], Target]) -> None:
        self.name = name
        self._make = make
        self._queue: queue.Queue[tuple[dict[str, Any], bytes] | None] = queue.Queue(EXPORT_QUEUE_LIMIT)
        self.sent = 0  # written by the sender thread only
        self.failed = 0  # written by the sender thread only
        self.dropped = 0  # queue full: written by the daemon's thread only
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"bouncerd-export {name}", daemon=True)
        self._thread.start()

    def offer(self, record: dict[str, Any], line: bytes) -> None:
        try:
            self._queue.put_nowait((record, line))
        except queue.Full:
            self.dropped += 1

    @property
    def lost(self) -> int:
        return self.dropped + self.failed

    def _run(self) -> None:
        try:
            target: Target | None = self._make()
        except Exception as exc:  # the extra is missing, the socket cannot be made: say so, count losses
            target, self.error = None, f"{type(exc).__name__}: {exc}"
            log.error("audit export: %s is unavailable: %s", self.name, self.error)
        limit = target.batch_limit if target is not None else BATCH_LIMIT
        stop = False
        while not stop:
            item = self._queue.get()
            if item is None:
                break
            self._stop.wait(LINGER_SECONDS)  # one wake-up per interval, not one per record
            pending = [item]
            while len(pending) < EXPORT_QUEUE_LIMIT:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                pending.append(more)
            if target is None:
                self.failed += len(pending)
                continue
            for i in range(0, len(pending), limit):
                if not self._deliver(target, pending[i : i + limit]):
                    self.failed += max(0, len(pending) - i - limit)
                    stop = self._drain_lost() or stop
                    self._stop.wait(RETRY_SECONDS)
                    break
        if target is not None:
            target.close()

    def _deliver(self, target: Target, batch: list[tuple[dict[str, Any], bytes]]) -> bool:
        try:
            target.send(batch)
        except Exception as exc:  # any failure of a collector is a loss to count, never a crash
            self.failed += len(batch)
            if self.error is None:
                log.warning("audit export: %s failed: %s", self.name, exc)
            self.error = f"{type(exc).__name__}: {exc}"
            return False
        self.sent += len(batch)
        if self.error is not None:
            log.info("audit export: %s is sending again", self.name)
        self.error = None
        return True

    def _drain_lost(self) -> bool:
        """After a failed send: what is queued is counted lost at once (the collector is down; the
        next attempt is the next record after RETRY_SECONDS). True if the stop mark was among them."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return False
            if item is None:
                return True
            self.failed += 1

    def close(self, timeout: float) -> None:
        """Stop the sender once it has sent what is queued, waiting at most `timeout` (0: not at all;
        the thread ends on its own)."""
        self._stop.set()
        while True:
            try:
                self._queue.put_nowait(None)
                break
            except queue.Full:  # make room for the stop mark: the oldest copy is dropped
                with contextlib.suppress(queue.Empty):
                    self._queue.get_nowait()
                    self.dropped += 1
        if timeout > 0:
            self._thread.join(timeout)

    def public(self) -> dict[str, Any]:
        return {
            "target": self.name,
            "sent": self.sent,
            "dropped": self.dropped,
            "failed": self.failed,
            "queued": self._queue.qsize(),
            "error": self.error,
        }


# A clean stop waits this long for the senders to flush what is queued (then gives up on the rest).
CLOSE_TIMEOUT_SECONDS = 2.0


class Exporter:
    """Every configured target. `offer` is the only call on the verdict's path."""

    def __init__(self, config: ExportConfig, environ: Mapping[str, str] | None = None) -> None:
        """`environ`: where the OTLP target's standard variables are read (default: this process's)."""
        self.config = config
        self.channels: list[Channel] = []
        # A sender encoding a batch holds the interpreter lock; the loop thread, back from its socket
        # with a verdict to make, would wait up to the default 5 ms switch interval for it.
        sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_SECONDS))
        facility = config.syslog.facility if config.syslog is not None else FACILITIES[DEFAULT_FACILITY]
        if config.syslog is not None:
            syslog = config.syslog
            self.channels.append(Channel(SyslogSender(syslog).name, lambda: SyslogSender(syslog)))
        if config.journal is not None:
            journal = config.journal
            self.channels.append(
                Channel(f"journal {journal.socket}", lambda: JournalSender(journal, facility))
            )
        if config.otlp is not None:
            try:  # what the policy left out, from the standard OTEL_EXPORTER_OTLP_* variables
                otlp = otlp_target(config.otlp, os.environ if environ is None else environ)
            except ValueError as exc:  # unavailable, said in status; every copy for it counts as failed
                problem = str(exc)
                self.channels.append(Channel("otlp", lambda: _unavailable(problem)))
            else:
                self.channels.append(Channel(f"otlp {otlp.endpoint}", lambda: OtlpSender(otlp)))
        self._reported = 0  # losses already in an audit record
        self._last_report = -math.inf
        self._reporting = False

    def offer(self, record: dict[str, Any], line: bytes) -> None:
        for channel in self.channels:
            channel.offer(record, line)

    @property
    def lost(self) -> int:
        return sum(c.lost for c in self.channels)

    def report_losses(self, append: AuditAppend, now: float) -> None:
        """Audit new losses, at most once per DROP_REPORT_SECONDS (after each append, and periodically)."""
        lost = self.lost
        if lost == self._reported or self._reporting or now - self._last_report < DROP_REPORT_SECONDS:
            return
        self._reporting = True  # the record below is appended (and offered) too: no recursion
        try:
            counts = {c.name: {"dropped": c.dropped, "failed": c.failed} for c in self.channels}
            record: ExportLossRecord = {
                "verdict": None,
                "rule": DROP_RULE,
                "reason": (
                    f"{lost - self._reported} exported copies of audit records were lost since the last "
                    f"report ({lost} in all); the local log keeps every line: {json.dumps(counts)}"
                ),
                "export": counts,
            }
            append(record, now)
        finally:
            self._reporting = False
        self._reported, self._last_report = lost, now

    def tap(self, append: AuditAppend) -> Callable[[dict[str, Any], bytes], None]:
        """What `AuditLog.tap` calls after each write: queue the copy, audit new losses."""

        def tap(record: dict[str, Any], line: bytes) -> None:
            self.offer(record, line)
            try:
                self.report_losses(append, time.time())
            except OSError as exc:  # the record just written stands; the report waits for the next
                log.error("audit export: could not audit the lost copies: %s", exc)

        log.info("audit export: %s (from %s)", ", ".join(c.name for c in self.channels), self.config.source)
        return tap

    def public(self) -> dict[str, Any]:
        return {
            "source": self.config.source,
            "queue_limit": EXPORT_QUEUE_LIMIT,
            "lost": self.lost,
            "targets": [c.public() for c in self.channels],
        }

    def close(self, timeout: float = CLOSE_TIMEOUT_SECONDS) -> None:
        """Stop every sender; at a clean stop wait up to `timeout` each for the queues to flush. A reload
        passes 0, so the daemon's loop never waits for a collector."""
        for channel in self.channels:
            channel.close(timeout)


async def report_periodically(current: Callable[[], Exporter | None], append: AuditAppend) -> None:
    """Audit losses while no calls come (the daemon's task group runs this; `current` is the
    exporter in force, which a reload may replace)."""
    import anyio

    while True:
        await anyio.sleep(DROP_REPORT_SECONDS)
        exporter = current()
        if exporter is not None:
            exporter.report_losses(append, time.time())
