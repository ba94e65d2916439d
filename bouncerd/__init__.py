"""bouncerd: the per-user daemon that decides every MCP tools/call (see docs/how-it-works.md)."""

from bouncerd import native as _native

__version__ = "0.2.0.dev0"

# Before any scanner module is imported: a compiled build is used only while it matches the source.
_native.install()
