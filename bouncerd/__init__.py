"""bouncerd: the per-user daemon that decides every MCP tools/call (see docs/how-it-works.md)."""

__version__ = "0.2.0.dev0"
