"""A small Chrome DevTools Protocol client over ``--remote-debugging-pipe`` (no websocket, no package).

Chromium started with ``--remote-debugging-pipe`` reads protocol messages from fd 3 and writes them
to fd 4, each a JSON object followed by a NUL byte. `Browser` starts it headless, opens one page
target attached in flat mode, and offers the handful of commands the report test needs: set the
viewport (`Emulation.setDeviceMetricsOverride`), load a page and wait for its load event, evaluate
an expression, and capture a screenshot.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import subprocess
import time
from pathlib import Path
from typing import Any

# Bounds for a browser that answers in milliseconds and loads a local page in well under a second;
# they only turn a hung browser into a failure.
REPLY_TIMEOUT_SECONDS = 60.0
READ_CHUNK_BYTES = 1 << 16


class BrowserError(Exception):
    pass


class Browser:
    def __init__(self, chromium: str, profile: Path) -> None:
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire_fds() -> None:  # in the child, before exec: the pipe ends at fds 3 and 4
            # Copied out of the way first: a pipe end may itself be fd 3 or 4 (dup2 onto itself would
            # keep its close-on-exec flag) or be overwritten by the other dup2.
            read_end, write_end = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self.proc = subprocess.Popen(
            [
                chromium,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire_fds,
            # Python's own descriptors are not inheritable (PEP 446): only the two dup2'd ones pass.
            close_fds=False,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._next = 0
        self._events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)

    def close(self) -> None:
        with contextlib.suppress(BrowserError):
            self.call("Browser.close")
        try:
            self.proc.wait(REPLY_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- protocol -----------------------------------------------------------------------------

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            if "method" in reply:
                self._events.append(reply)

    def wait_event(self, method: str) -> dict[str, Any]:
        while True:
            for i, ev in enumerate(self._events):
                if ev["method"] == method:
                    return self._events.pop(i)
            self._events.append(self._read())

    def _read(self) -> dict[str, Any]:
        deadline = time.monotonic() + REPLY_TIMEOUT_SECONDS
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._from_child], [], [], max(0.0, left))
            if not ready:
                raise BrowserError("chromium did not answer in time")
            chunk = os.read(self._from_child, READ_CHUNK_BYTES)
            if not chunk:
                raise BrowserError("chromium closed its debugging pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    # ---- what the tests use -------------------------------------------------------------------

    def open(self, url: str, width: int, height: int) -> None:
        """Load `url` in a viewport of `width` x `height` CSS pixels and wait for its load event."""
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        self._events.clear()
        self.call("Page.navigate", session=True, url=url)
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        reply = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in reply:
            raise BrowserError(f"the expression failed: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", session=True, format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(data["data"]))
