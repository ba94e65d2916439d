"""Upstream outputs: durable on arrival, indexed for taint in arrival order, off the hot path.

Theory of operation
-------------------
The shim holds every upstream output until the daemon acknowledges its ``observe``, so the ack must be
fast (a 10 MB result relays at hundreds of MB/s) and nothing acknowledged may be lost, even to
``kill -9``. Parsing JSON and extracting destinations from 10 MB is neither fast nor necessary before
the ack. So an observation goes through two steps:

1. `accept` (on the event loop, in the connection's read order): one journal entry
   ``{"k": "obs", "n", session, server, tool, request_id, kind, method, ts, instance, seq, payload}``
   written with one ``write(2)``; then it is queued and the caller acks. ``n`` numbers observations
   across all connections, in acceptance order. A replay from a reconnecting shim is recognised by
   (instance, seq) (seqs increase per shim instance) and acked without a second entry.
2. `run` (one background task): takes queued observations in ``n`` order, parses and extracts taint,
   applies the records to the engine on the event loop, and journals
   ``{"k": "indexed", "n", "events": [...]}``: one frame, so the taint events and the "done" mark are
   on disk together or not at all. Small payloads are extracted inline (cheaper than any hand-off),
   and a small one accepted while nothing is queued is indexed by `accept` itself, before it
   returns: the queue is empty, so ``n`` order holds, and the task is not woken for it (an event
   set, a task step and an event made again cost the daemon about as much per output as the
   journal write). Large ones go to a worker *process* (`anyio.to_process`), not a thread: JSON
   parsing and regular expressions run in C holding the GIL, so a thread scanning 10 MB would stall
   the event loop, and with it every ack, for as long as the scan takes. The worker runs niced (see
   extraction.py): the scan is background work and must not take the CPU from the client reading
   the same output.

A verdict must see the taint of every output acknowledged before it arrived, on any connection: the
daemon notes `accepted_upto` when the verdict arrives and awaits `wait_indexed` for it. On start,
`replay` rebuilds the queue: an ``obs`` entry without a later ``indexed`` entry is queued again and
re-extracted (extraction is deterministic, and adding a token twice is a no-op). Compaction keeps
what replay needs from this module: the dedup table, the next ``n`` and the still-queued raw entries
(`snapshot_entries`).

If extraction fails (a worker process killed, a bug in the extractor), the payload is scanned again
on the event loop; if that fails too, or reading the seam before it does (`taint.Seams`), the error
is logged and the taint scope is marked *blind*
(`Engine.record_blind`): a destination that might have been in that output is no longer "clean", so
fetches that would have been allowed are asked (sends to unproven destinations are asked anyway).

Memory is bounded by `MAX_QUEUED_BYTES`: past it, connections stop reading observations until the
indexer catches up (the shim's outputs wait; nothing is dropped).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from bouncerd.core import taint
from bouncerd.core.engine import Engine
from bouncerd.errors import ProtocolError
from bouncerd.server.extraction import extract, extract_in_worker

log = logging.getLogger("bouncerd")

Entry = dict[str, Any]

# Up to this size a payload is parsed and scanned on the event loop: ~0.5 ms, about what a round trip
# to the worker process costs, and most outputs (small tool results) are far smaller.
INLINE_EXTRACT_BYTES = 16 * 1024
# A worker scans a 10 MB output in about half a second of CPU, niced; a minute covers a loaded machine
# many times over. Past it the worker is taken as hung (every verdict that needs this output's taint is
# waiting), killed, and the output indexed on the event loop.
WORKER_EXTRACT_TIMEOUT_SECONDS = 60.0

# Worker processes for extraction. Indexing is sequential (arrival order), so one is all it can use.
EXTRACT_WORKERS = 1

# Raw observations accepted but not yet indexed are held in memory. 256 MiB is a few of the largest
# outputs the shim accepts (64 MiB lines); beyond it, reading from shims pauses until indexing catches up.
MAX_QUEUED_BYTES = 256 * 1024 * 1024

# Shim instances whose last seq we remember for deduplication. A shim instance lives as long as one
# MCP server process; 4096 is far more than a person runs between two daemon restarts, and forgetting
# an old instance only means a replay from it would be indexed twice (harmless: adds are idempotent).
MAX_REMEMBERED_INSTANCES = 4096


class ObservationIndex:
    def __init__(self, engine: Engine, append: Callable[[Entry], None]) -> None:
        self._engine = engine
        self._append = append  # journal writer; raises OSError when the disk refuses
        self._queue: dict[int, Entry] = {}  # n -> raw entry, in n order
        self._queued_bytes = 0
        self._seen: OrderedDict[str, int] = OrderedDict()  # instance -> highest seq accepted
        self.next_n = 0
        self.accepted_upto = -1  # n of the last accepted observation
        self.indexed_upto = -1  # every n <= this is indexed
        self._work: anyio.Event | None = None
        self._workers: anyio.CapacityLimiter | None = None
        self._progress: anyio.Event | None = None
        self.on_indexed: Callable[[], None] = lambda: None  # the daemon's compaction check
        # The tail of each session and server's last output: an address cut between two consecutive
        # outputs is read across the cut (taint.Seams, bounded; lost on restart, like the cut itself).
        self._seams = taint.Seams()

    # ---- start-up -----------------------------------------------------------------------------

    def replay(self, entry: Mapping[str, Any]) -> bool:
        """Apply one journal entry of this module's kinds; False if the entry is not one of them."""
        kind = entry.get("k")
        if kind == "obs":
            n = entry["n"]
            self._queue[n] = dict(entry)
            self._queued_bytes += len(entry["payload"])
            self._remember(entry.get("instance"), entry["seq"])
            self.next_n = max(self.next_n, n + 1)
            self.accepted_upto = max(self.accepted_upto, n)
        elif kind == "indexed":
            for ev in entry["events"]:
                self._engine.apply(ev)
            raw = self._queue.pop(entry["n"], None)
            if raw is not None:
                self._queued_bytes -= len(raw["payload"])
        elif kind == "seen":
            for instance, seq in entry["instances"].items():
                self._remember(instance, seq)
            self.next_n = max(self.next_n, entry["next_n"])
            self.accepted_upto = max(self.accepted_upto, entry["next_n"] - 1)
        else:
            return False
        return True

    def replay_done(self) -> None:
        self.indexed_upto = min(self._queue) - 1 if self._queue else self.accepted_upto

    @property
    def instances(self) -> int:
        """Shim instances that have observed and might replay (those of archived sessions are forgotten)."""
        return len(self._seen)

    @property
    def queued(self) -> int:
        return len(self._queue)

    @property
    def queued_bytes(self) -> int:
        """Payload bytes accepted and not yet indexed (a compaction would have to copy them)."""
        return self._queued_bytes

    def snapshot_entries(self) -> list[Entry]:
        seen: Entry = {"k": "seen", "instances": dict(self._seen), "next_n": self.next_n}
        return [seen, *self._queue.values()]

    # ---- accepting ----------------------------------------------------------------------------

    def is_duplicate(self, instance: str | None, seq: int) -> bool:
        if instance is None:
            return False
        last = self._seen.get(instance)
        return last is not None and seq <= last

    def accept(
        self, *, session: str, server: str, instance: str | None, request: Mapping[str, Any], now: float
    ) -> int:
        """Journal one observation and queue it for indexing; return its n. OSError if not journalled."""
        n = self.next_n
        payload: bytes = request["payload"]
        entry: Entry = {
            "k": "obs",
            "n": n,
            "session": session,
            "server": server,
            "tool": request.get("tool"),
            "request_id": request.get("request_id"),
            "kind": request["kind"],
            "method": request.get("method"),
            "ts": now,
            "instance": instance,
            "seq": request["seq"],
            "payload": payload,
        }
        self._append(entry)
        self.next_n = n + 1
        self.accepted_upto = n
        self._remember(instance, request["seq"])
        idle = not self._queue  # nothing accepted before it waits, so `run` holds no entry
        self._queue[n] = entry
        self._queued_bytes += len(payload)
        if idle and len(payload) <= INLINE_EXTRACT_BYTES:
            self._index_here(n, entry)
        elif self._work is not None:
            self._work.set()
        return n

    @property
    def has_room(self) -> bool:
        """Whether another observation may be accepted now (see MAX_QUEUED_BYTES)."""
        return self._queued_bytes <= MAX_QUEUED_BYTES

    async def wait_for_room(self) -> None:
        while self._queued_bytes > MAX_QUEUED_BYTES:
            await self._progress_event().wait()

    async def wait_indexed(self, n: int) -> None:
        while self.indexed_upto < n:
            await self._progress_event().wait()

    # ---- indexing -----------------------------------------------------------------------------

    async def run(self) -> None:
        while True:
            if not self._queue:
                self._work = anyio.Event()
                await self._work.wait()
                self._work = None
                continue
            n, entry = next(iter(self._queue.items()))
            if len(entry["payload"]) <= INLINE_EXTRACT_BYTES:
                self._index_here(n, entry)
                continue
            source = _source(entry)
            records = await self._extract(n, entry["payload"], source)
            self._index(n, entry, self._with_seams(entry, source, records))

    def _index_here(self, n: int, entry: Entry) -> None:
        """Extract and index one small payload on the event loop, now."""
        source = _source(entry)
        records = self._extract_here(n, entry["payload"], source)
        self._index(n, entry, self._with_seams(entry, source, records))

    def _with_seams(
        self, entry: Entry, source: taint.Source, records: list[taint.TokenRecord] | None
    ) -> list[taint.TokenRecord] | None:
        if records is None:
            return None
        try:
            return records + self._seams.records(
                (entry["session"], entry["server"]), entry["payload"], source
            )
        except Exception:  # as a failed extraction: the scope goes blind, the daemon keeps serving
            log.exception("reading the seam before observation %d failed", entry["n"])
            return None

    async def _extract(self, n: int, payload: bytes, source: taint.Source) -> list[taint.TokenRecord] | None:
        """Taint records of one payload. A broken worker falls back to scanning here, never to skipping."""
        if len(payload) > INLINE_EXTRACT_BYTES:
            import anyio.to_process  # here, not at start-up: most sessions never need a worker (~50 ms)

            if self._workers is None:
                self._workers = anyio.CapacityLimiter(EXTRACT_WORKERS)
            try:
                # cancellable: at shutdown the worker is killed and the entry stays queued (compacted raw);
                # a worker that does not answer in time is killed and the output is indexed here instead.
                with anyio.fail_after(WORKER_EXTRACT_TIMEOUT_SECONDS):
                    encoded = await anyio.to_process.run_sync(
                        extract_in_worker,
                        payload,
                        source.server,
                        source.tool,
                        source.request_id,
                        source.ts,
                        cancellable=True,
                        limiter=self._workers,
                    )
                return taint.decode_records(encoded)
            except Exception as exc:  # a dead or hung worker (OOM kill, TimeoutError) or an extraction bug
                log.error("indexing observation %d in a worker failed (%s); indexing it here", n, exc)
        return self._extract_here(n, payload, source)

    def _extract_here(self, n: int, payload: bytes, source: taint.Source) -> list[taint.TokenRecord] | None:
        try:
            return extract(payload, source)
        except Exception:
            # Nothing left to try. Say so loudly: this output adds no taint (see the module docstring).
            log.exception("indexing observation %d failed; the session's fetches now need a person", n)
            return None

    def _index(self, n: int, entry: Entry, records: list[taint.TokenRecord] | None) -> None:
        try:
            if records is None:
                events = self._engine.record_blind(entry["session"], entry["server"])
            else:
                events = self._engine.record_taint(entry["session"], records, payload=entry["payload"])
                self._engine.read_made(
                    entry["session"],
                    entry["server"],
                    entry["request_id"],
                    entry["payload"],
                    entry["tool"],
                    entry["ts"],
                )
        except Exception:
            log.exception(
                "recording the taint of observation %d failed; the session's fetches need a person", n
            )
            events = self._engine.record_blind(entry["session"], entry["server"])
        try:
            self._append({"k": "indexed", "n": n, "events": events})
        except (OSError, ProtocolError) as exc:
            # The taint is applied in memory; on disk the raw entry stays unmarked and is re-extracted
            # on the next start. Nothing is lost, so the daemon keeps serving.
            log.error("journal: cannot record indexed observation %d: %s", n, exc)
        del self._queue[n]
        self._queued_bytes -= len(entry["payload"])
        self.indexed_upto = n
        if self._progress is not None:
            self._progress.set()
            self._progress = None
        self.on_indexed()

    def _progress_event(self) -> anyio.Event:
        if self._progress is None:
            self._progress = anyio.Event()
        return self._progress

    def forget(self, instances: set[str]) -> None:
        """Shim instances of an archived session: none will replay, so their seqs need not be kept."""
        for instance in instances:
            self._seen.pop(instance, None)

    def _remember(self, instance: str | None, seq: int) -> None:
        if instance is None:
            return
        last = self._seen.get(instance)
        self._seen[instance] = seq if last is None else max(last, seq)
        self._seen.move_to_end(instance)
        while len(self._seen) > MAX_REMEMBERED_INSTANCES:
            self._seen.popitem(last=False)


def _source(entry: Entry) -> taint.Source:
    return taint.Source(
        server=entry["server"], tool=entry["tool"], request_id=entry["request_id"], ts=entry["ts"]
    )
