"""The daemon's process lifecycle in the foreground: directories, lock, socket, serve, clean exit.

Theory of operation
-------------------
`run_foreground` is what ``bouncerd --foreground`` (and a systemd service) runs:

1. umask 077 for the whole process: every file the daemon creates is private from birth.
2. The runtime and state directories are created 0700, or refused (symlink, someone else's, open to
   group or others) with `EXIT_REFUSED` and a message that says why.
3. The instance lock is taken (`EXIT_ALREADY_RUNNING` if another daemon holds it).
4. The listener: the activated socket if systemd passed one, else a stale socket is removed (never a
   live one) and a new one bound 0600.
5. The journal is replayed and the audit log opened; then the daemon serves until SIGTERM/SIGINT.
   Once it has served `autostart.HEALTHY_AFTER_SECONDS` it clears the autostart record, so that a
   later crash is restarted at once (`bouncerd.autostart`: restarts back off only while starts fail).
6. On the way out, in this order: stop accepting and close connections (cancelling the serve task
   group), compact and fsync the journal, fsync the audit log, remove the socket (only one we bound,
   and only if the path still names it) and the lock file. Exit 0.

Exit codes are part of the interface: `bouncerd.autostart` (the shim's and the hooks' start) treats
`EXIT_ALREADY_RUNNING` as someone else's start having won the race, not as a failure.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import MutableMapping

import anyio

from bouncerd import autostart
from bouncerd.errors import AlreadyRunningError, BouncerError, UnsafeDirectoryError
from bouncerd.managedpolicy import managed_source
from bouncerd.paths import Paths, ensure_private_dir, resolve
from bouncerd.server import listener
from bouncerd.server.daemon import Daemon
from bouncerd.server.serving import socket_display_path

log = logging.getLogger("bouncerd")

EXIT_OK = 0
EXIT_REFUSED = 1  # unsafe directory, unusable socket, unreadable journal: the message says which
EXIT_ALREADY_RUNNING = 4  # another bouncerd holds the lock or answers on the socket


def run_foreground(environ: MutableMapping[str, str]) -> int:
    os.umask(0o077)
    paths = resolve(environ)
    try:
        ensure_private_dir(paths.runtime)
        ensure_private_dir(paths.state)
    except UnsafeDirectoryError as exc:
        log.error("refusing to start: %s", exc)
        return EXIT_REFUSED
    except OSError as exc:
        log.error("refusing to start: cannot create %s: %s", exc.filename, exc.strerror)
        return EXIT_REFUSED
    lock = listener.InstanceLock(paths.pidfile)
    try:
        lock.acquire()
    except AlreadyRunningError as exc:
        log.error("%s", exc)
        return EXIT_ALREADY_RUNNING
    try:
        return _run_locked(environ, paths)
    finally:
        lock.release()


def _run_locked(environ: MutableMapping[str, str], paths: Paths) -> int:
    own_socket: tuple[int, int] | None = None
    try:
        sock = listener.take_activated_socket(environ, os.getpid())
        if sock is not None:
            log.info("using the socket passed by the service manager")
        else:
            if listener.remove_stale_socket(paths.socket):
                log.info("removed a stale socket left by a daemon that is gone: %s", paths.socket)
            sock = listener.bind_socket(paths.socket)
            own_socket = listener.socket_identity(paths.socket)
    except AlreadyRunningError as exc:
        log.error("%s", exc)
        return EXIT_ALREADY_RUNNING
    except (BouncerError, OSError) as exc:
        log.error("refusing to start: %s", exc)
        return EXIT_REFUSED
    try:
        try:
            daemon = Daemon.start(
                paths,
                socket_display_path(sock, paths.socket),
                expected_uid=os.getuid(),
                now=time.time(),
                managed=managed_source(environ),
            )
        except (BouncerError, OSError) as exc:
            sock.close()
            log.error("refusing to start: %s", exc)
            return EXIT_REFUSED
        daemon.acceptor.own_socket = own_socket  # bound again by the daemon if the file is deleted
        healthy = threading.Timer(autostart.HEALTHY_AFTER_SECONDS, autostart.mark_healthy, (paths,))
        healthy.daemon = True  # never holds the exit
        healthy.start()
        try:
            anyio.run(daemon.serve, sock)
        finally:
            healthy.cancel()
            own_socket = daemon.acceptor.own_socket  # the file removed at exit is the one it serves now
            daemon.close()
        log.info("stopped")
        return EXIT_OK
    finally:
        listener.remove_own_socket(paths.socket, own_socket)
