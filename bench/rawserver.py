"""A minimal MCP server over stdio, standard library only, for benchmarks that start many of them.

The fixture servers under tests/fixtures import `mcp` (≈0.5 s and ≈50 MB each); a scale run starts a
hundred upstreams and must measure Bouncer, not the SDK. This one answers `initialize`, `tools/list`
and three tools, one JSON-RPC message per line, in the 2025-11-25 dialect:

- `echo(text)`: returns the text (the trivial call);
- `send_message(to, body)`: a sending tool, so each call is gated on its destination;
- `read_inbox(count, seed)`: `count` mail-like messages with fresh addresses and URLs, deterministic in
  `seed`, so recording output grows the daemon's taint index the way a mailbox would.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "you",
    "that",
    "it",
    "was",
    "for",
    "on",
    "are",
    "as",
    "with",
    "they",
    "at",
    "be",
    "this",
    "have",
    "from",
    "or",
    "one",
    "had",
    "by",
    "invoice",
    "meeting",
    "quarterly",
    "report",
    "attached",
    "please",
    "review",
    "budget",
    "project",
    "deadline",
    "thanks",
    "regards",
]

TOOLS = [
    {
        "name": "echo",
        "description": "Return the text unchanged.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {
        "name": "send_message",
        "description": "Send a message to a recipient.",
        "inputSchema": {
            "type": "object",
            "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
            "required": ["to", "body"],
        },
    },
    {
        "name": "read_inbox",
        "description": "Read messages from the inbox.",
        "inputSchema": {
            "type": "object",
            "properties": {"count": {"type": "integer"}, "seed": {"type": "integer"}},
            "required": ["count", "seed"],
        },
        "annotations": {"readOnlyHint": True},
    },
]


def mailbox(count: int, seed: int) -> str:
    r = random.Random(seed)
    out = []
    for i in range(count):
        who = f"{r.choice(WORDS)}.{r.randrange(10**9)}@{r.choice(WORDS)}{r.randrange(10**6)}.example"
        url = f"https://{r.choice(WORDS)}{r.randrange(10**6)}.example/{r.randrange(10**6)}"
        prose = " ".join(r.choice(WORDS) for _ in range(120))
        out.append(f"From: {who}\nSubject: message {seed}-{i}\n\n{prose}\nSee {url} or write to {who}.\n")
    return "\n".join(out)


def answer(msg: dict[str, Any]) -> dict[str, Any] | None:
    method, rid = msg.get("method"), msg.get("id")
    if rid is None:
        return None  # a notification
    if method == "initialize":
        result: dict[str, Any] = {
            "protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "rawserver", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        params = msg.get("params") or {}
        args = params.get("arguments") or {}
        name = params.get("name")
        if name == "echo":
            text = str(args.get("text", ""))
        elif name == "send_message":
            text = f"sent to {args.get('to')}"
        elif name == "read_inbox":
            text = mailbox(int(args.get("count", 1)), int(args.get("seed", 0)))
        else:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": f"no tool {name}"}}
        result = {"content": [{"type": "text", "text": text}]}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def main() -> None:
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line))
        if reply is not None:
            out.write(json.dumps(reply) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
