"""The demo's chat MCP server: channels and direct messages, delivered to $CHAT_DIR/sent.jsonl."""

from __future__ import annotations

import json
import os
from pathlib import Path

from mcp.server import MCPServer

app = MCPServer("chat")

CHANNELS = {"support": ["Morning all, the export bug is back (T-1042)."], "random": ["lunch?"]}


def _log(entry: dict[str, str]) -> None:
    with (Path(os.environ["CHAT_DIR"]) / "sent.jsonl").open("a") as f:
        f.write(json.dumps(entry) + "\n")


@app.tool()
def read_channel(channel: str) -> list[str]:
    """Read the latest messages of a channel."""
    return CHANNELS.get(channel, [])


@app.tool()
def post_message(channel: str, text: str) -> str:
    """Post a message to a channel."""
    _log({"channel": channel, "text": text})
    return "posted"


@app.tool()
def send_dm(user: str, text: str) -> str:
    """Send a direct message to a user (a handle or an e-mail address)."""
    _log({"user": user, "text": text})
    return "sent"


def main() -> None:
    Path(os.environ["CHAT_DIR"]).mkdir(parents=True, exist_ok=True)
    app.run()


if __name__ == "__main__":
    main()
