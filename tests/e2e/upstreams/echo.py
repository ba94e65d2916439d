"""A raw JSON-RPC stdio server for the shim's tests (no SDK: the tests must not depend on one).

Every line received is appended to $UPSTREAM_LOG (if set) before it is handled, so a test can prove
what reached the server. Tools (all answered by name, whatever the server listed):

- ``echo``: the arguments back, as JSON text;
- ``big``: a text of ``arguments.size`` bytes of "x";
- ``notify``: a notifications/message first, then the result;
- ``garbage``: a line that is not JSON first, then the result;
- ``sample``: a sampling/createMessage request to the client first; the result quotes its answer;
- ``oversize``: a response of ``arguments.size`` bytes (for the line limit), in TypeScript key order;
- ``exit``: exit at once with ``arguments.code`` (no answer); ``arguments.signal`` kills itself instead.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

LOG = os.environ.get("UPSTREAM_LOG")
out = sys.stdout.buffer


def send(message: dict[str, Any]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def result(rid: Any, text: str) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})


def call(rid: Any, name: str, args: dict[str, Any]) -> None:
    if name == "big":
        result(rid, "x" * int(args["size"]))
    elif name == "burst":  # big notifications, then the result
        for _ in range(int(args["count"])):
            send(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/message",
                    "params": {"data": "n" * int(args["size"])},
                }
            )
        result(rid, "burst done")
    elif name == "notify":
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}})
        result(rid, "notified")
    elif name == "garbage":
        out.write(b"this is not json\n")
        out.flush()
        result(rid, "after garbage")
    elif name == "sample":
        send(
            {"jsonrpc": "2.0", "id": "srv-1", "method": "sampling/createMessage", "params": {"maxTokens": 5}}
        )
        answer = sys.stdin.buffer.readline()
        log(answer)
        result(rid, "client said " + json.dumps(json.loads(answer).get("result")))
    elif name == "oversize":
        body = b'{"result":{"content":[{"type":"text","text":"' + b"y" * int(args["size"]) + b'"}]},'
        out.write(body + b'"jsonrpc":"2.0","id":' + json.dumps(rid).encode() + b"}\n")
        out.flush()
    elif name == "exit":
        if args.get("signal"):
            os.kill(os.getpid(), int(args["signal"]))
        sys.exit(int(args.get("code", 0)))
    else:
        result(rid, json.dumps(args, sort_keys=True))


def log(line: bytes) -> None:
    if LOG:
        with open(LOG, "ab") as f:
            f.write(line if line.endswith(b"\n") else line + b"\n")


def main() -> None:
    for line in sys.stdin.buffer:
        log(line)
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method, rid = message.get("method"), message.get("id")
        if rid is None or method is None:
            continue
        params = message.get("params") or {}
        if method == "initialize":
            info = {"name": "echo", "version": "1.0"}
            res = {
                "protocolVersion": params.get("protocolVersion"),
                "capabilities": {"tools": {}},
                "serverInfo": info,
            }
            send({"jsonrpc": "2.0", "id": rid, "result": res})
        elif method == "tools/list":
            tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ("echo", "big", "send_email")]
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
        elif method == "tools/call":
            call(rid, params.get("name"), params.get("arguments") or {})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    main()
