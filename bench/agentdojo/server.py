"""An MCP stdio server that exposes one AgentDojo suite's tools; the environment lives in the driver.

Theory of operation
-------------------
`bench/agentdojo/run.py` starts one of these per episode, behind `bouncer-shim`, exactly as an MCP
client starts a server. It speaks newline-delimited JSON-RPC on stdin/stdout (initialize, ping,
tools/list, tools/call) and nothing else.

The suite's environment is not in this process. Episode control (reset to an injected environment,
dump the final one for scoring) is the driver's business and never crosses MCP: this process only
forwards each tools/call it receives to the driver's *environment host* over a Unix socket (the side
channel, named by ``ADOJO_HOST_SOCKET``), tagged with its episode (``ADOJO_EPISODE``), and returns the
host's text. So a call counts as having reached the server exactly when the host saw it.

Why not ``mcp.server.MCPServer``: importing the `mcp` SDK costs about 1 s of CPU and agentdojo another
3 s, and a full run starts one server per episode (949 episodes per configuration, seven
configurations). This module imports only the standard library and starts in tens of milliseconds;
what it says on the wire is plain MCP (the shim relays it like any other server).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from typing import Any

# The revision we answer when the client asks for one we do not know: the newest one whose
# tools/list and tools/call shapes this file implements.
DEFAULT_PROTOCOL = "2025-06-18"
KNOWN_PROTOCOLS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
# A host reply is a tool output (a workspace inbox is the largest, well under a megabyte).
RECV_BYTES = 1 << 16


class Host:
    """One line-JSON connection to the driver's environment host."""

    def __init__(self, path: str, episode: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.episode = episode
        self.buf = b""

    def ask(self, **fields: Any) -> dict[str, Any]:
        line = json.dumps({"episode": self.episode, **fields}) + "\n"
        self.sock.sendall(line.encode())
        while b"\n" not in self.buf:
            chunk = self.sock.recv(RECV_BYTES)
            if not chunk:
                raise ConnectionError("the environment host closed the side channel")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\n", 1)
        reply: dict[str, Any] = json.loads(raw)
        return reply


def handle(host: Host, msg: dict[str, Any]) -> dict[str, Any] | None:
    """The response to one JSON-RPC message (None for a notification)."""
    method = msg.get("method")
    if "id" not in msg or method is None:
        return None
    rid = msg["id"]
    params = msg.get("params") or {}
    if method == "initialize":
        asked = params.get("protocolVersion")
        version = asked if asked in KNOWN_PROTOCOLS else DEFAULT_PROTOCOL
        result: dict[str, Any] = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": f"agentdojo-{os.environ.get('ADOJO_SUITE', 'suite')}", "version": "1.2.2"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": host.ask(op="tools")["tools"]}
    elif method == "tools/call":
        reply = host.ask(op="call", tool=params.get("name"), arguments=params.get("arguments") or {})
        result = {"content": [{"type": "text", "text": reply["text"]}], "isError": bool(reply["error"])}
    else:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def main() -> None:
    host = Host(os.environ["ADOJO_HOST_SOCKET"], os.environ["ADOJO_EPISODE"])
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        response = handle(host, json.loads(line))
        if response is not None:
            sys.stdout.write(json.dumps(response) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
