"""The shim's I/O: one loop over its descriptors that feeds the relay and carries out its actions.

Theory of operation
-------------------
`Pump.run` owns every descriptor: the client's stdin and stdout, the upstream's pipes, the daemon
socket (through `DaemonLink`) and a self-pipe that signals wake it up. Each turn of the loop:

1. lets the link connect or reconnect if due, checks whether the upstream has exited, and lets the
   relay time out questions to a person nobody answered and its own tools/list (`Relay.tick`);
2. advances the bounded shutdown, if one is under way, and returns the exit status once done;
3. waits for readiness (or the next deadline), reads what is ready, splits it into lines, hands the
   lines to the relay and carries out the relay's actions: lines to the client or upstream, frames to
   the daemon, diagnostics to stderr. Writers are flushed once per turn, so a burst of messages
   leaves in one system call.

Order. A line for the client never leaves before every daemon frame queued ahead of it is in the
kernel: while the daemon socket has unwritten bytes, client lines wait (`_gated`) for the position
they were queued at. That is what lets the outbox release an output as soon as its observation is
sent (outbox.py): once the client can see it, bouncerd can read it. Without a connection nothing is
in the way and waiting lines go out (the relay has kept their observations for replay).

Back-pressure: a side is not read while too much of what it sent is still waiting downstream
(HIGH_WATER_BYTES): the upstream while the client is slow to read or the daemon slow to acknowledge,
the client while the upstream is slow to read or calls wait for verdicts. Memory stays bounded by
that plus one line.

Ending. The shim exits with the upstream's status (128 + N for signal N), after the upstream has
exited, its last output has been read (or DRAIN_SECONDS passed) and released (or FLUSH_SECONDS
passed: output the daemon has not acknowledged by then is dropped, never released unobserved).
Client EOF (or a client that stopped reading: EPIPE on stdout), a signal to the shim, or a refused
hello start the upstream's bounded shutdown: close its stdin, wait, SIGTERM, wait, SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import stat
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Final

from bouncer_shim import jsonrpc
from bouncer_shim.actions import Diagnose, SendClient, SendDaemon, SendUpstream, Stop
from bouncer_shim.fastset import BEHIND_SECONDS
from bouncer_shim.fdio import PeerGoneError, Reader, Watcher, Writer, make_nonblocking, watchable
from bouncer_shim.lines import LineSplitter, OversizedLine
from bouncer_shim.link import Connected, DaemonLink, LinkEvent, Lost
from bouncer_shim.proc import UPSTREAM_EXIT_GRACE_SECONDS, UPSTREAM_TERM_GRACE_SECONDS, Upstream, enlarge_pipe
from bouncer_shim.relay import Relay
from bouncer_shim.spin import SpinBudget, poll_then_wait, spin_seconds
from bouncer_shim.sync import VERDICT_WAIT_SECONDS

# A side stops being read while this much of what it sent waits to be written or acknowledged. Large
# enough that bursts of messages never stall, small enough that a stalled peer cannot grow the shim
# (the bound is checked before a read, so the worst case is this plus one maximal line).
HIGH_WATER_BYTES: Final = 16 * 1024 * 1024

# After the upstream exits, its stdout is read until EOF or this long: a grandchild that inherited the
# pipe may hold it open forever, but a server's last words are already in the pipe when it exits.
DRAIN_SECONDS: Final = 0.5

# After the upstream's last output is read, the shim waits this long for the daemon's acks and the
# client's reads. Acks take a millisecond; output not acknowledged by then is dropped, not released.
FLUSH_SECONDS: Final = 2.0

# The daemon acknowledges observations, tool lists and hello within milliseconds. One that leaves them
# all unanswered this long is wedged: the shim drops the connection and treats it as gone (calls
# refused, output released and kept for replay) and reconnects. Verdicts have their own bound
# (sync.VERDICT_WAIT_SECONDS), counted for each verdict from when it was sent.
DAEMON_ACK_TIMEOUT_SECONDS: Final = 10.0

# While bouncerd owes only acknowledgements nothing waits on (sync.LinkSync.wake_for_replies), its socket
# is not watched: replies are read before anything else the pump wakes for, and after this long at most.
QUIET_READ_SECONDS: Final = 0.005

# Signals that end the shim: each starts the upstream's shutdown at SIGTERM.
ENDING_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

PREFIX: Final = "bouncer-shim: "

# sysexits.h EX_SOFTWARE: the shim itself failed (never the server's status, which it passes on).
EXIT_INTERNAL_ERROR: Final = 70


def diagnose(message: str) -> None:
    """One line on stderr (never stdout: stdout is the wire)."""
    with contextlib.suppress(OSError):
        os.write(2, (PREFIX + message + "\n").encode("utf-8", "replace"))


class Pump:
    def __init__(
        self,
        relay: Relay,
        upstream: Upstream,
        link: DaemonLink,
        *,
        stdin_fd: int = 0,
        stdout_fd: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.relay = relay
        self.upstream = upstream
        self.link = link
        self.clock = clock
        self.sel = Watcher()
        self.spin_seconds, spin_note = spin_seconds(os.environ)
        if spin_note is not None:
            diagnose(spin_note)
        self._spin = SpinBudget()
        self._interest: dict[str, tuple[int, int]] = {}
        self._wanted: tuple[object, ...] = ()  # what _update_interest last registered
        self._daemon_quiet = False  # the daemon socket is connected but not watched for replies
        self.stdin_fd: int | None = stdin_fd
        self.stdin_watchable = watchable(stdin_fd)
        if _is_pipe_or_socket(stdout_fd):  # never a shared tty: its flags are the terminal's
            make_nonblocking(stdout_fd)
            enlarge_pipe(stdout_fd)  # a large result leaves in a few writes (a no-op on a socket)
        self.stdout = Writer(stdout_fd)
        self.stdout_watchable = watchable(stdout_fd)
        assert upstream.stdin_fd is not None
        self.to_upstream = Writer(upstream.stdin_fd)
        self._reader = Reader()
        # Client lines waiting for the daemon frames queued before them: (link position, line).
        self._gated: deque[tuple[int, bytes]] = deque()
        self._gated_bytes = 0
        self.client_lines = LineSplitter()
        self.upstream_lines = LineSplitter()
        self.upstream_status: int | None = None
        self.upstream_eof = False
        self.stop_status: int | None = None
        self._acks_since: float | None = None  # when the daemon last made progress on our acks
        self._behind = False  # told to the relay: no progress for fastset.BEHIND_SECONDS
        self._refusal = jsonrpc.UNREACHABLE_REASON  # why calls waiting on a lost link are refused
        self._drain_until: float | None = None
        self._flush_until: float | None = None
        self._stage = "running"  # -> closing-stdin -> stdin-closed -> terminated -> killed
        self._stage_deadline: float | None = None
        self._signals: list[int] = []
        self._child_changed = True  # a SIGCHLD came (or may have, before the handler was in place)
        self._wake_r, self._wake_w = os.pipe()
        make_nonblocking(self._wake_r)
        make_nonblocking(self._wake_w)

    # ---- the loop --------------------------------------------------------------------------------

    def run(self) -> int:
        old_wakeup = signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        old_handlers = {sig: signal.signal(sig, self._on_signal) for sig in (*ENDING_SIGNALS, signal.SIGCHLD)}
        self.sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        try:
            return self._loop()
        except Exception as exc:  # a bug in the shim must not leave the server running unrelayed
            import traceback  # only now: the shim's start-up does not pay for it

            for line in traceback.format_exc().splitlines():
                diagnose(line)
            diagnose(f"internal error, stopping the server: {type(exc).__name__}: {exc}")
            self.upstream.close_stdin()
            self.upstream.kill()
            return EXIT_INTERNAL_ERROR
        finally:
            signal.set_wakeup_fd(old_wakeup)
            for sig, handler in old_handlers.items():
                signal.signal(sig, handler)
            with contextlib.suppress(Exception):  # a record still held (link.LAZY_FRAME_SECONDS) goes
                self.link.flush(self.clock())
            self.link.close()
            self.sel.close()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _loop(self) -> int:
        # Each turn costs Python time on every message's path, so the bookkeeping below runs only when
        # its inputs can have changed (the link is down, a child changed state, an ending is under way).
        while True:
            now = self.clock()
            if self.link.sock is None:
                self._on_link(self.link.poll(now))
                self.relay.daemon_down_note = self.link.why_down
            if self.link.diagnostics:
                self._say(self.link.diagnostics)
            self._check_daemon_answers(now)
            if self.relay.ticking:
                self.relay.tick(now)
                self._apply()
            if self._child_changed:
                self._check_upstream(now)
            if self._stage != "running" or self.upstream_status is not None:
                self._advance_shutdown(now)
                status = self._finished(now)
                if status is not None:
                    return status
            self._update_interest()
            events = self._select(self._timeout(now))
            if self._daemon_quiet:  # the replies that came meanwhile, before what they may concern
                self._on_link(self.link.on_readable(self.clock()))
            elif len(events) > 1:  # the daemon's replies (or its hang-up) first, for the same reason
                events.sort(key=_daemon_first_key)
            for name, mask in events:
                self._dispatch(name, mask)
            if self.stdin_fd is not None and not self.stdin_watchable and self._wants_client():
                self._read_client()
            self._flush_all()

    def _select(self, timeout: float | None) -> list[tuple[str, int]]:
        """The ready streams: while a verdict is awaited, polled for first while polling pays
        (spin.py), then waited for."""
        if (
            self.spin_seconds <= 0
            or (timeout is not None and timeout <= 0)
            or not self.relay.awaiting_verdict
            or not self._spin.should_poll()
        ):
            return self.sel.select(timeout)
        return poll_then_wait(self.sel, timeout, self.spin_seconds, self._spin)

    def _dispatch(self, name: str, mask: int) -> None:
        if name == "wake":
            with contextlib.suppress(OSError):
                while os.read(self._wake_r, 512):
                    pass
            self._handle_signals()
        elif name == "stdin" and self.stdin_fd is not None:
            self._read_client()
        elif name == "upstream-out" and self.upstream.stdout_fd is not None:
            self._read_upstream()
        elif name == "daemon":
            if mask & selectors.EVENT_READ:
                self._on_link(self.link.on_readable(self.clock(), ready=True))
            if mask & selectors.EVENT_WRITE:
                self._on_link(self.link.flush(self.clock()))
        # "stdout" and "upstream-in" only need the flush that ends every turn

    def _timeout(self, now: float) -> float | None:
        if self.stdin_fd is not None and not self.stdin_watchable and self._wants_client():
            return 0.0
        relay = self.relay
        # The earliest of the deadlines that are set (most are None on a quiet turn).
        due = self._acks_since + DAEMON_ACK_TIMEOUT_SECONDS if self._acks_since is not None else None
        for deadline in (
            self._stage_deadline,
            self._drain_until,
            self._flush_until,
            self.link.deadline(),
            relay.deadline() if relay.ticking else None,  # only what ticks has a deadline
            relay.verdict_deadline(),
            now + QUIET_READ_SECONDS if self._daemon_quiet else None,
        ):
            if deadline is not None and (due is None or deadline < due):
                due = deadline
        return None if due is None else max(0.0, due - now)

    def _update_interest(self) -> None:
        sock = self.link.sock
        wanted = (
            self.stdin_fd if self.stdin_watchable and self._wants_client() else None,
            self.upstream.stdout_fd if self._wants_upstream() else None,
            self.stdout.fd if self.stdout_watchable and self.stdout.pending else None,
            self.upstream.stdin_fd if self.to_upstream.pending else None,
            sock.fileno() if sock is not None else None,
            self.link.wants_write,
            self.relay.wake_for_daemon,
        )
        self._daemon_quiet = sock is not None and not wanted[-1]
        old = self._wanted
        if wanted == old:  # the common case: nothing to tell the selector
            return
        self._wanted = wanted
        # Only the descriptors whose interest changed are told (usually the daemon's socket alone).
        fresh = not old
        for i, name in enumerate(_WATCHED):
            if fresh or wanted[i] != old[i]:
                self._want(name, wanted[i], True)
        if fresh or wanted[4:] != old[4:]:
            daemon, writes, reads = wanted[4:]
            mask = (selectors.EVENT_READ if reads else 0) | (selectors.EVENT_WRITE if writes else 0)
            self._want("daemon", daemon, bool(mask), mask)

    def _want(self, name: str, fd: int | None, wanted: bool, mask: int = 0) -> None:
        if not mask:
            mask = selectors.EVENT_WRITE if name in ("stdout", "upstream-in") else selectors.EVENT_READ
        current = self._interest.get(name)
        target = (fd, mask) if fd is not None and wanted else None
        if current == target:
            return
        if current is not None:
            self.sel.unregister(current[0])
            del self._interest[name]
        if target is not None:
            self.sel.register(target[0], target[1], name)
            self._interest[name] = (target[0], target[1])

    def _forget(self, name: str) -> None:
        """Stop watching a descriptor that is about to close (or has), and recompute the rest."""
        self._want(name, None, False)
        self._wanted = ()

    def _wants_client(self) -> bool:
        return (
            self.stdin_fd is not None
            and self.stop_status is None
            and self.to_upstream.pending + self.relay.held_bytes < HIGH_WATER_BYTES
        )

    def _wants_upstream(self) -> bool:
        backlog = self.stdout.pending + self._gated_bytes + self.relay.unreleased_bytes + self.link.pending
        return not self.upstream_eof and backlog < HIGH_WATER_BYTES

    # ---- reading ---------------------------------------------------------------------------------

    def _read_client(self) -> None:
        assert self.stdin_fd is not None
        try:
            data = self._reader.read(self.stdin_fd)
        except OSError as exc:
            diagnose(f"reading stdin failed: {exc}")
            data = b""
        if data is None:
            return
        if not data:
            self._feed_client([last] if (last := self.client_lines.close()) is not None else [])
            self.relay.client_closed()  # nobody is left to answer a question
            self._apply()
            self._client_gone()
            return
        self._feed_client(self.client_lines.feed(data))

    def _feed_client(self, lines: Iterable[bytes | OversizedLine]) -> None:
        relay = self.relay
        for line in lines:
            if isinstance(line, OversizedLine):
                relay.client_oversized(line)
            else:
                relay.client_line(line)
        self._apply()

    def _read_upstream(self) -> None:
        fd = self.upstream.stdout_fd
        assert fd is not None
        try:
            data = self._reader.read(fd)
        except OSError as exc:
            diagnose(f"reading the server's stdout failed: {exc}")
            data = b""
        if data is None:
            return
        if not data:
            last = self.upstream_lines.close()
            self._feed_upstream([last] if last is not None else [])
            self._upstream_closed_stdout()
            return
        self._feed_upstream(self.upstream_lines.feed(data))

    def _feed_upstream(self, lines: Iterable[bytes | OversizedLine]) -> None:
        relay = self.relay
        for line in lines:
            if isinstance(line, OversizedLine):
                relay.upstream_oversized(line)
            else:
                relay.upstream_line(line)
        self._apply()

    # ---- acting ----------------------------------------------------------------------------------

    def _apply(self) -> None:
        relay = self.relay
        while actions := relay.take_actions():
            for action in actions:
                if isinstance(action, SendDaemon):  # the commonest first: two or three a call
                    self.link.send(action.parts, lazy=action.lazy, now=self.clock() if action.lazy else 0.0)
                elif isinstance(action, SendClient):
                    self._to_client(action.line)
                elif isinstance(action, SendUpstream):
                    self.to_upstream.write_line(action.line)
                elif isinstance(action, Diagnose):
                    diagnose(action.message)
                elif isinstance(action, Stop):
                    self._stop(action)

    def _to_client(self, line: bytes) -> None:
        """Write `line` to the client, after every daemon frame queued before it (see Order above)."""
        if self._gated or self.link.pending:
            self.link.hurry()
            self._gated.append((self.link.queued, line))
            self._gated_bytes += len(line)
        else:
            self.stdout.write_line(line)

    def _release_gated(self) -> None:
        gated, written = self._gated, self.link.written
        while gated and (written is None or gated[0][0] <= written):
            line = gated.popleft()[1]
            self._gated_bytes -= len(line)
            self.stdout.write_line(line)

    def _check_daemon_answers(self, now: float) -> None:
        if not self.relay.awaiting_acks:
            self._acks_since = None
        elif self._acks_since is None:
            self._acks_since = now
        behind = self._acks_since is not None and now - self._acks_since >= BEHIND_SECONDS
        if behind != self._behind:
            self._behind = behind
            self.relay.daemon_behind(behind)
        if self._acks_since is not None and now - self._acks_since >= DAEMON_ACK_TIMEOUT_SECONDS:
            self._acks_since = None
            reason = f"bouncerd left requests unanswered for {DAEMON_ACK_TIMEOUT_SECONDS:.0f} s; reconnecting"
            self._give_up_on_daemon(reason, now)
        if self.link.sock is not None and self.relay.verdicts_overdue(now):
            reason = (
                f"bouncerd gave no verdict within {VERDICT_WAIT_SECONDS:.0f} s; the calls waiting on it are "
                f"refused and will not be sent; reconnecting"
            )
            self._give_up_on_daemon(reason, now)

    def _give_up_on_daemon(self, reason: str, now: float) -> None:
        """A daemon that is connected but not answering: drop the connection (so no late verdict can
        release a call) and refuse what waited on it, saying the daemon did not answer."""
        self._refusal = jsonrpc.NOT_ANSWERING_REASON
        try:
            self._on_link(self.link.drop(reason, now))
        finally:
            self._refusal = jsonrpc.UNREACHABLE_REASON

    def _on_link(self, events: list[LinkEvent]) -> None:
        for event in events:
            if isinstance(event, dict):
                self._acks_since = None  # progress: the clock starts again if more is awaited
                self.relay.daemon_message(event)
            elif isinstance(event, Connected):
                self.relay.daemon_connected()
            elif isinstance(event, Lost):
                self._forget("daemon")  # the link closed the socket; forget its fd
                diagnose(event.reason)
                self._release_gated()  # nothing left to wait for: the relay keeps them for replay
                self.relay.daemon_lost(self._refusal)
        if events:
            self._apply()

    def _flush_all(self) -> None:
        # The upstream first: a call forwarded before asking reaches the server before the daemon is
        # woken for its record (nothing orders the two; a line for the client waits for the daemon).
        if self.to_upstream.pending:
            try:  # noqa: SIM105 (contextlib.suppress would build an object on every turn)
                self.to_upstream.flush()
            except PeerGoneError:  # the upstream's exit is noticed by its status
                pass
        link = self.link
        if link.wants_write or (link.pending and link.due(self.clock())):
            self._on_link(link.flush(self.clock()))
        if self._gated:
            self._release_gated()
        if self.stdout.pending:
            try:
                self.stdout.flush()
            except PeerGoneError:
                self._client_gone()

    def _say(self, messages: list[str]) -> None:
        for message in messages:
            diagnose(message)
        messages.clear()

    # ---- ending ----------------------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: object) -> None:
        if signum == signal.SIGCHLD:
            self._child_changed = True
        else:
            self._signals.append(signum)

    def _handle_signals(self) -> None:
        while self._signals:
            signum = self._signals.pop()
            diagnose(f"received signal {signum}; stopping the server")
            self._client_gone()
            self._begin_shutdown(terminate=True)

    def _stop(self, action: Stop) -> None:
        if self.stop_status is None:
            diagnose(action.message)
            self.stop_status = action.status
            self._forget("daemon")
            self.link.close()  # nothing more to ask or tell it
            self.stdout.discard()  # nor to release: the daemon refused to observe this server
            self._gated.clear()
            self._gated_bytes = 0
            self._client_gone()
            self._begin_shutdown(terminate=True)

    def _client_gone(self) -> None:
        if self.stdin_fd is not None:
            self._forget("stdin")
            self.stdin_fd = None
            self._begin_shutdown(terminate=False)

    def _upstream_closed_stdout(self) -> None:
        self._forget("upstream-out")
        self.upstream.close_stdout()
        self.upstream_eof = True
        self.relay.upstream_gone("the server exited (or closed its output) before answering this request")
        self._apply()
        if self.upstream_status is None:
            self._begin_shutdown(terminate=False)

    def _close_upstream_stdin(self) -> None:
        self._forget("upstream-in")  # before the close, so the fd number is free again
        self.to_upstream.discard()
        self.upstream.close_stdin()

    def _check_upstream(self, now: float) -> None:
        if self.upstream_status is None and self._child_changed:
            self._child_changed = False  # cleared first: a SIGCHLD from here on sets it again
            self.upstream_status = self.upstream.poll()
            if self.upstream_status is not None:
                self._drain_until = now + DRAIN_SECONDS
                self._stage_deadline = None

    def _begin_shutdown(self, *, terminate: bool) -> None:
        now = self.clock()
        if terminate and self._stage in ("running", "closing-stdin", "stdin-closed"):
            # The signal first: a server that would exit on EOF dies of it instead, as it was told to
            # (closing stdin first raced it, and the shim passed on 0 for a SIGTERM it had received).
            self.upstream.terminate()
            self._close_upstream_stdin()
            self._stage, self._stage_deadline = "terminated", now + UPSTREAM_TERM_GRACE_SECONDS
        elif self._stage == "running":
            self._stage, self._stage_deadline = "closing-stdin", now + UPSTREAM_EXIT_GRACE_SECONDS

    def _advance_shutdown(self, now: float) -> None:
        if self.upstream_status is not None:
            return
        stage, due = self._stage, self._stage_deadline is not None and now >= self._stage_deadline
        settled = self.to_upstream.pending == 0 and self.relay.held_bytes == 0  # held calls decided
        if stage == "closing-stdin" and (settled or due):
            self._close_upstream_stdin()
            if not due:  # the grace period starts when stdin is closed
                self._stage_deadline = now + UPSTREAM_EXIT_GRACE_SECONDS
            self._stage = "stdin-closed"
        elif stage == "stdin-closed" and due:
            diagnose("the server did not exit after its stdin closed; sending SIGTERM")
            self.upstream.terminate()
            self._stage, self._stage_deadline = "terminated", now + UPSTREAM_TERM_GRACE_SECONDS
        elif stage == "terminated" and due:
            diagnose("the server did not exit after SIGTERM; sending SIGKILL")
            self.upstream.kill()
            self._stage, self._stage_deadline = "killed", None

    def _finished(self, now: float) -> int | None:
        status = self.upstream_status
        if status is None:
            return None
        final = self.stop_status if self.stop_status is not None else status
        if self.stop_status is not None:
            return final
        if not self.upstream_eof and self._drain_until is not None and now < self._drain_until:
            return None
        if not self.upstream_eof:
            self._upstream_closed_stdout()
        if self._flush_until is None:
            self._flush_until = now + FLUSH_SECONDS
        flushed = (
            self.relay.is_flushed and not self._gated and (self.stdout.pending == 0 or self.stdout.closed)
        )
        if flushed or now >= self._flush_until:
            if not self.relay.is_released or self._gated:
                diagnose("exiting with server output bouncerd had not been sent (not released)")
            elif not self.relay.is_flushed:
                diagnose("exiting before bouncerd acknowledged the last observations (they were sent)")
            return final
        return None


# The streams `_update_interest` watches in the order of its tuple (the daemon's socket comes after).
_WATCHED: Final = ("stdin", "upstream-out", "stdout", "upstream-in")


def _daemon_first_key(event: tuple[str, int]) -> bool:
    """Sorts the daemon's socket before every other ready stream."""
    return event[0] != "daemon"


def _is_pipe_or_socket(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
