"""A stand-in bouncerd for the shim's process tests: speaks the wire, decides by tool name, logs all.

Run as a script: ``python fake_daemon.py HOME LOG [--hello-error MESSAGE]``. It listens on
HOME/run/bouncerd.sock (creating HOME/run 0700), answers every request on every connection, and
appends one JSON object per request to LOG (op, id and the fields a test checks; payloads as their
length and sha256), flushed at once, so a test can read the order in which requests arrived even
after the process was killed.

Verdicts: a tool whose name starts with ``deny`` is denied, ``ask`` asked, anything else allowed.
Requests are answered in arrival order on a connection, one thread per connection, except that the
verdict for a tool whose name starts with ``hold`` (allow) is sent only when the next request on the
connection arrives, just before that request's reply: a test can then order "the client cancels" before
"the verdict arrives" without sleeping. With ``--stall-at-observe`` the first connection stops reading
(and answering) at its first ``observe`` of a megabyte or more, as a wedged daemon would, and logs
``{"op": "stalled"}``; once the file HOME/unstall exists it logs ``{"op": "unstalled"}`` and goes on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from bouncerd import wire
from bouncerd.errors import ProtocolError

_log_lock = threading.Lock()
_stalled_once = threading.Event()


def _summary(message: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in message.items():
        if isinstance(value, bytes):
            out[key + "_len"] = len(value)
            out[key + "_sha256"] = hashlib.sha256(value).hexdigest()
        else:
            out[key] = value
    return out


def _answer(message: dict[str, Any], hello_error: str | None) -> dict[str, Any]:
    op, rid = message.get("op"), message.get("id", -1)
    if op == "hello":
        if hello_error:
            return wire.error_reply(rid, "bad-policy", hello_error)
        return wire.reply(rid, daemon_pid=os.getpid(), release_on_write=True)  # as bouncerd says
    if op == "verdict":
        tool = str(message.get("tool"))
        if tool.startswith("deny"):
            return wire.verdict_reply(rid, verdict="deny", rule="fake", reason=f"fake daemon denies {tool}")
        if tool.startswith("ask"):
            return wire.verdict_reply(
                rid, verdict="ask", rule="fake", reason=f"fake daemon asks about {tool}"
            )
        return wire.verdict_reply(rid, verdict="allow", rule="fake", reason="allowed")
    if op == "observe":
        return wire.reply(rid, seq=message.get("seq"))
    if op == "tools":
        return wire.reply(rid, pinned_now=[], unpinned=[], changed=[])
    return wire.reply(rid)


def _serve(conn: socket.socket, log: Path, hello_error: str | None, stall: bool = False) -> None:
    decoder = wire.FrameDecoder()
    deferred: list[bytes] = []
    with conn:
        while True:
            try:
                data = conn.recv(1 << 20)
            except OSError:
                return
            if not data:
                return
            try:
                decoder.receive_data(data)
                while (message := decoder.next_message()) is not None:
                    big = message.get("op") == "observe" and len(message.get("payload", b"")) >= 1 << 20
                    if stall and big and not _stalled_once.is_set():
                        _stalled_once.set()
                        with _log_lock, log.open("a", encoding="utf-8") as f:
                            f.write(json.dumps({"op": "stalled"}) + "\n")
                        unstall = log.parent / "unstall"
                        for _ in range(6000):  # a bound (60 s), never an expectation
                            if unstall.exists():
                                break
                            time.sleep(0.01)
                        with _log_lock, log.open("a", encoding="utf-8") as f:
                            f.write(json.dumps({"op": "unstalled"}) + "\n")
                    with _log_lock, log.open("a", encoding="utf-8") as f:
                        f.write(json.dumps(_summary(message)) + "\n")
                    reply = wire.encode(_answer(message, hello_error))
                    if message.get("op") == "verdict" and str(message.get("tool")).startswith("hold"):
                        deferred.append(reply)
                        continue
                    while deferred:
                        conn.sendall(deferred.pop(0))
                    conn.sendall(reply)
            except (ProtocolError, OSError):
                return


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("home")
    parser.add_argument("log")
    parser.add_argument("--hello-error")
    parser.add_argument("--stall-at-observe", action="store_true")
    args = parser.parse_args()
    run = Path(args.home) / "run"
    run.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = run / "bouncerd.sock"
    if path.exists():
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(16)
    while True:
        conn, _ = listener.accept()
        serve_args = (conn, Path(args.log), args.hello_error, args.stall_at_observe)
        threading.Thread(target=_serve, args=serve_args, daemon=True).start()


if __name__ == "__main__":
    main()
