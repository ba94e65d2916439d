"""A raw JSON-RPC stdio server for the shim fuzz test: logs every line it receives, survives any input.

Every line read is appended to $UPSTREAM_LOG before anything else, so the test can prove what reached
the server. Requests (objects with a method and an id) are answered: ``initialize``, ``tools/list``,
and ``tools/call``: ``emit`` first writes the bytes of ``arguments.hex`` (the hostile server output
the test generated) and a newline, then answers; any other tool is answered with ``ok``. Anything
else (not JSON, arrays, responses, notifications) is logged and ignored: this server must not be the
process that crashes.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

out = sys.stdout.buffer


def send(message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def handle(message: Any) -> None:
    if not isinstance(message, dict) or not isinstance(message.get("method"), str) or "id" not in message:
        return
    rid, method, params = message["id"], message["method"], message.get("params")
    params = params if isinstance(params, dict) else {}
    if rid != rid or rid in (float("inf"), float("-inf")):
        rid = None  # NaN/Infinity: json.dumps would write what no client reads
    if method == "initialize":
        info = {"name": "fuzz", "version": "1.0"}
        version = params.get("protocolVersion")
        result = {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info}
        send({"jsonrpc": "2.0", "id": rid, "result": result})
    elif method == "tools/list":
        tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ("safe", "emit", "forbidden")]
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
    elif method == "tools/call":
        args = params.get("arguments")
        if params.get("name") == "emit" and isinstance(args, dict) and isinstance(args.get("hex"), str):
            out.write(bytes.fromhex(args["hex"]) + b"\n")
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "ok"}]}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "result": {}})


def main() -> None:
    log = os.environ["UPSTREAM_LOG"]
    for line in sys.stdin.buffer:
        with open(log, "ab") as f:
            f.write(line if line.endswith(b"\n") else line + b"\n")
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            continue
        try:
            handle(message)
        except (TypeError, ValueError, OverflowError):
            continue  # an id json cannot write back, say: not this test's subject


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()
