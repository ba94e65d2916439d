"""The shim's connection to bouncerd: connect, autostart, reconnect with backoff, move frames.

Theory of operation
-------------------
`DaemonLink` owns one non-blocking Unix socket and knows nothing of JSON-RPC: the relay writes every
frame (hello included) and reads every reply, and ids are the relay's, so requests are pipelined and
replies may come in any order. The pump drives the link from its loop and the link reports three
events: `CONNECTED`, `LOST` and a decoded reply (a dict).

Connecting. Before each attempt the runtime directory is checked to be private (ours, 0700, not a
symlink): a socket in a directory someone else can write could be theirs, answering every verdict.
An attempt that finds no daemon asks `bouncerd.autostart.start_daemon` (unless
``BOUNCER_NO_AUTOSTART=1``), the code path the hooks use too: under a start lock shared by every
shim and hook of the user it starts ``python -m bouncerd --foreground`` if none runs or is starting,
and the backoff between starts allows (quick after a healthy daemon died, slower while starts fail,
once a minute for a daemon that keeps dying at start). While a daemon is being started, by this shim
or another, the link retries every AUTOSTART_POLL_SECONDS for up to AUTOSTART_WAIT_SECONDS; on the
first connection it reports nothing meanwhile (the relay holds calls), after that it reports LOST and
retries with exponential backoff, never later than the next start the backoff allows. A connection
that drops is reported LOST at once and retried the same way. A daemon that accepts but stops
answering is dropped by the pump (see DAEMON_ACK_TIMEOUT_SECONDS there).
"""

from __future__ import annotations

import contextlib
import errno
import select
import socket
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from bouncer_shim.fdio import PeerGoneError, Writer
from bouncerd import autostart, wire
from bouncerd import paths as bouncer_paths
from bouncerd.autostart import AUTOSTART_POLL_SECONDS, AUTOSTART_VARIABLE, AUTOSTART_WAIT_SECONDS
from bouncerd.errors import BouncerError, ProtocolError

if TYPE_CHECKING:
    import subprocess

# A daemon this shim started that exits with EXIT_ALREADY_RUNNING lost the start-up race to one
# started elsewhere (a service, a person), which is then about to listen: wait this much longer.
AUTOSTART_LOSER_GRACE_SECONDS: Final = 1.0

# Reconnect backoff: quick for a daemon restart (a service manager brings it back in well under a
# second), doubling to a ceiling so a daemon that stays away costs one connect() every 2 s.
RECONNECT_FIRST_DELAY_SECONDS: Final = 0.1
RECONNECT_MAX_DELAY_SECONDS: Final = 2.0

# Reads from the socket: replies are small (acks, verdicts); one read drains many.
SOCKET_READ_BYTES: Final = 256 * 1024

# The socket's send buffer is asked for this much (the kernel caps it at net.core.wmem_max, 208 KiB
# by default, 4 MiB on many distributions): a 10 MB observation then leaves in a few writes instead of
# fifty round trips through a 208 KiB buffer, each a wake-up of the shim and of the daemon.
SOCKET_SEND_BYTES: Final = 4 * 1024 * 1024

# A frame nothing waits on (the record of a call forwarded before asking, fastset.py) may wait in the
# queue this long for a frame that must go now: the call's output usually comes well within it, and
# the two then wake the daemon once. Any other frame, and any client line queued behind it, takes it
# along at once.
LAZY_FRAME_SECONDS: Final = 0.05

# Reads of the daemon's socket a wake-up makes at most (each up to SOCKET_READ_BYTES): enough for any
# burst of replies, and then the hang-up behind them.
MAX_READS_A_WAKE: Final = 64


class Connected:
    __slots__ = ()


class Lost:
    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


CONNECTED: Final = Connected()
LinkEvent = Connected | Lost | dict[str, Any]


class DaemonLink:
    def __init__(self, environ: Mapping[str, str], *, now: float) -> None:
        self._environ = dict(environ)
        self._paths = bouncer_paths.resolve(environ)
        self._autostart = autostart.autostart_enabled(environ)
        self.sock: socket.socket | None = None
        self._poller: select.poll | None = None  # the socket alone: whether a read would find anything
        self._writer: Writer | None = None
        self._hold_until: float | None = None  # only lazy frames are queued; written by then at the latest
        self._decoder = wire.FrameDecoder()
        self._buf = bytearray(SOCKET_READ_BYTES)  # allocated once: a reply is read without a new buffer
        self._view = memoryview(self._buf)
        self._retry_at: float | None = now
        self._delay = RECONNECT_FIRST_DELAY_SECONDS
        self._starting_until: float | None = None  # end of the window a daemon being started has
        self._first = True
        self._why_down: str | None = None  # the starter's reason it is not starting one, for a person
        self._daemon: subprocess.Popen[bytes] | None = None  # one we started, until reaped
        self._said: set[str] = set()  # diagnostics already given (each once)
        self.diagnostics: list[str] = []

    # ---- state for the pump ----------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self.sock is not None

    @property
    def pending(self) -> int:
        return self._writer.pending if self._writer is not None else 0

    @property
    def queued(self) -> int:
        """Where the connection's byte stream ends once everything queued so far is written."""
        return self._writer.queued if self._writer is not None else 0

    @property
    def written(self) -> int | None:
        """How much of the connection's byte stream is in the kernel (the daemon can read it); None
        without a connection."""
        return self._writer.queued - self._writer.pending if self._writer is not None else None

    @property
    def wants_write(self) -> bool:
        """Whether queued frames must be written now (not while only lazy frames wait)."""
        return self._writer is not None and self._writer.pending > 0 and self._hold_until is None

    def due(self, now: float) -> bool:
        """Whether queued frames must be written now: `wants_write`, or lazy frames whose time is up."""
        if self._hold_until is not None and now >= self._hold_until:
            self._hold_until = None
        return self.wants_write

    def hurry(self) -> None:
        """Lazy frames are to go with the next flush (a client line is queued behind them)."""
        self._hold_until = None

    def deadline(self) -> float | None:
        hold, retry = self._hold_until, self._retry_at
        if hold is None:
            return retry
        return hold if retry is None else min(hold, retry)

    # ---- connecting ------------------------------------------------------------------------------

    def poll(self, now: float) -> list[LinkEvent]:
        """Attempt a connection if one is due; start a daemon if none runs; reap one we started."""
        if self._daemon is not None and self._daemon.poll() is not None:
            lost_race = self._daemon.returncode == autostart.EXIT_ALREADY_RUNNING
            self._daemon = None  # reaped: it failed (its log says why) or another daemon won the lock
            if self.sock is None and self._starting_until is not None:
                self._starting_until = now + AUTOSTART_LOSER_GRACE_SECONDS if lost_race else None
        if self.sock is not None or self._retry_at is None or now < self._retry_at:
            return []
        if self._connect():
            self._first = False
            self._starting_until = None
            self._why_down = None
            self._retry_at = None  # the backoff is reset by the first reply, not by the connect
            return [CONNECTED]
        if self._starting_until is not None and now < self._starting_until:
            self._retry_at = now + AUTOSTART_POLL_SECONDS
            return []
        waited = self._starting_until is not None  # a start window just ended without a daemon
        self._starting_until = None
        outcome = self._start()
        starting = outcome.kind in (autostart.STARTED, autostart.STARTING, autostart.RUNNING)
        if starting:
            self._starting_until = now + AUTOSTART_WAIT_SECONDS
            self._retry_at = now + AUTOSTART_POLL_SECONDS
        else:
            self._schedule(now)
            if outcome.kind == autostart.WAITING and self._retry_at is not None:
                self._retry_at = min(self._retry_at, now + max(outcome.retry_after, AUTOSTART_POLL_SECONDS))
            self._why_down = outcome.message
            if outcome.kind != autostart.WAITING or outcome.broken:  # the countdown is not news
                self._say(outcome.message)
        if self._first and (waited or not starting):
            self._first = False  # calls held for the first connection are refused from now on
            return [Lost(self._unreachable())]
        return []

    def _start(self) -> autostart.StartOutcome:
        # wall-clock time, not the pump's clock: the start record is shared with other processes
        outcome = autostart.start_daemon(self._paths, self._environ, now=time.time())
        if outcome.kind == autostart.STARTED:
            self._daemon = outcome.process
            self._say(outcome.message)
        return outcome

    @property
    def why_down(self) -> str | None:
        """Why no daemon is coming yet (autostart off, failing starts and their log), or None."""
        return self._why_down

    def _schedule(self, now: float) -> None:
        self._retry_at = now + self._delay
        self._delay = min(self._delay * 2, RECONNECT_MAX_DELAY_SECONDS)

    def _connect(self) -> bool:
        try:
            bouncer_paths.check_private_dir(self._paths.runtime)
        except FileNotFoundError:
            return False
        except (BouncerError, OSError) as exc:
            self._say(f"not connecting to bouncerd: {exc}")
            return False
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_SEND_BYTES)
        try:
            sock.setblocking(False)
            sock.connect(str(self._paths.socket))
        except OSError as exc:
            sock.close()
            if exc.errno not in (errno.ENOENT, errno.ECONNREFUSED, errno.EAGAIN):
                self._say(f"cannot connect to {self._paths.socket}: {exc.strerror or exc}")
            return False
        self.sock = sock
        self._poller = select.poll()
        self._poller.register(sock.fileno(), select.POLLIN)
        self._writer = Writer(sock.fileno())
        self._decoder = wire.FrameDecoder()
        return True

    def _unreachable(self) -> str:
        if not self._autostart:
            return (
                f"bouncerd is not running at {self._paths.socket} (not starting one: {AUTOSTART_VARIABLE}=1)"
            )
        if self._why_down:
            return f"bouncerd did not answer at {self._paths.socket}: {self._why_down}"
        return f"bouncerd did not answer at {self._paths.socket} (see {self._paths.daemon_log})"

    # ---- moving frames ---------------------------------------------------------------------------

    def send(self, parts: list[bytes], *, lazy: bool = False, now: float = 0.0) -> None:
        """Queue a frame (in parts); the pump's `flush` writes it, a lazy one within LAZY_FRAME_SECONDS
        of `now` (frames sent while down are the relay's bug)."""
        writer = self._writer
        if writer is None:
            return
        if not lazy:
            self._hold_until = None
        elif not writer.pending:  # behind frames that must go now, a lazy frame goes with them
            self._hold_until = now + LAZY_FRAME_SECONDS
        for part in parts:
            writer.write(part)

    def flush(self, now: float) -> list[LinkEvent]:
        if self._writer is None:
            return []
        self._hold_until = None
        try:
            self._writer.flush()
        except (PeerGoneError, OSError) as exc:
            return self._drop(f"bouncerd connection lost: {exc}", now)
        return []

    def on_readable(self, now: float, *, ready: bool = False) -> list[LinkEvent]:
        """Everything the daemon has sent, up to its hang-up if it has hung up: replies read without
        reading on to the end could hide a dead daemon behind them until the next wake-up, and a
        call handled meanwhile would be forwarded on a set nobody holds. Each read is preceded by a
        poll of the socket (a reply or the hang-up makes it readable), except the first when the
        caller's selector has just said it is (`ready`): finding nothing costs no exception."""
        events: list[LinkEvent] = []
        for i in range(MAX_READS_A_WAKE):  # bounded: a daemon that never stops talking cannot starve the rest
            if (sock := self.sock) is None or self._poller is None:
                break
            if (i or not ready) and not self._poller.poll(0):
                break
            try:
                got = sock.recv_into(self._buf)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                events.extend(self._drop(f"bouncerd connection lost: {exc}", now))
                break
            if not got:
                events.extend(self._drop("bouncerd closed the connection", now))
                break
            try:
                self._decoder.receive_data(self._view[:got])  # the decoder copies what it buffers
                while (message := self._decoder.next_message()) is not None:
                    events.append(message)
                    self._delay = RECONNECT_FIRST_DELAY_SECONDS  # a daemon that answers is a healthy one
            except ProtocolError as exc:
                events.extend(self._drop(f"bouncerd sent an invalid frame: {exc}", now))
                break
        return events

    def drop(self, reason: str, now: float) -> list[LinkEvent]:
        """Give up on the connection (a daemon that stopped answering) and reconnect."""
        return self._drop(reason, now)

    def _drop(self, reason: str, now: float) -> list[LinkEvent]:
        if self.sock is None:
            return []
        with contextlib.suppress(OSError):
            self.sock.close()
        self.sock = None
        self._poller = None
        self._writer = None
        self._hold_until = None
        self._schedule(now)  # a daemon that accepts and hangs up at once is not hammered
        return [Lost(reason)]

    def close(self) -> None:
        if self.sock is not None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.sock = None
            self._poller = None
            self._writer = None
        self._hold_until = None
        self._retry_at = None

    def _say(self, message: str) -> None:
        if message not in self._said:
            self._said.add(message)
            self.diagnostics.append(message)
