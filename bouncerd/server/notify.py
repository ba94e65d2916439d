"""Desktop notifications: a pending code raises one where the desktop can show it. Never required.

Theory of operation
-------------------
When the daemon mints a one-time code, a person may be looking at another window. If ``notify-send``
(Linux) or ``osascript`` (macOS) is on the daemon's PATH at start, `Notifier.notify` starts it with
the server, tool, destination and code, and does not wait: the process is started in its own session
with no pipes, and finished ones are reaped on the next notification or on the approvals tick. At most
MAX_NOTIFIERS run at once, so a desktop that hangs them costs a few processes, never the event loop.
``BOUNCER_NO_NOTIFY=1`` (tests set it) turns notifications off. Arguments are passed as argv, never
through a shell; notify-send's body markup is escaped, osascript gets the text as `argv` items.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping

log = logging.getLogger("bouncerd")

NO_NOTIFY_ENV = "BOUNCER_NO_NOTIFY"
# Notifier processes still running; past this a desktop that hangs them gets no more (never required).
MAX_NOTIFIERS = 4


class Notifier:
    """Fire-and-forget desktop notifications through notify-send (Linux) or osascript (macOS)."""

    def __init__(self, program: str | None) -> None:
        self.program = program
        self._running: list[subprocess.Popen[bytes]] = []

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Notifier:
        if environ.get(NO_NOTIFY_ENV) == "1":
            return cls(None)
        name = "osascript" if sys.platform == "darwin" else "notify-send"
        return cls(shutil.which(name, path=environ.get("PATH", os.defpath)))

    def notify(self, title: str, body: str) -> None:
        self.reap()
        if self.program is None or len(self._running) >= MAX_NOTIFIERS:
            return
        if self.program.endswith("osascript"):
            script = "on run argv\ndisplay notification (item 2 of argv) with title (item 1 of argv)\nend run"
            argv = [self.program, "-e", script, title, body]
        else:
            body = body.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")  # body markup
            argv = [self.program, "--app-name=bouncer", title, body]
        try:
            proc = subprocess.Popen(  # noqa: S603 - a program found at start, fixed arguments, no shell
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            log.info("notification not shown (%s): %s", self.program, exc)
            return
        self._running.append(proc)

    def reap(self) -> None:
        self._running = [p for p in self._running if p.poll() is None]
