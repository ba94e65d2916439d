"""Built-in policy packs: one YAML file per MCP server family, shipped as package data.

Each file names the tools of one server family that send, fetch, write or delete, with the
parameters that carry destinations and paths, and records what it was checked against
(`checked_against`: package, version, method, and the tool and parameter names seen). The format is
read by `bouncerd.core.policy.load_pack`; this module only finds the files, so reading package data
stays the one thing it does (importlib.resources works from a wheel, a zip or a source tree alike).
"""

from __future__ import annotations

from importlib import resources

PACK_SUFFIX = ".yaml"


def pack_sources() -> dict[str, str]:
    """Pack file name -> its text, for every pack shipped in this package, sorted by name."""
    root = resources.files(__name__)
    out: dict[str, str] = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(PACK_SUFFIX) and entry.is_file():
            out[entry.name] = entry.read_text(encoding="utf-8")
    return out
