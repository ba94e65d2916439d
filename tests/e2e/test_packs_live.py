"""The packs against the real servers: start each server from npm, ask tools/list, compare.

A pack whose server renamed a tool or a parameter would silently stop gating it (the entry matches
nothing, and the fallback may not recognise the new name). This test starts the reference servers
installed under tests/npm (by scripts/setup --with-npm) and checks, through the real MCP client:
- every tool the pack names exists, with every parameter the pack names;
- every tool the fallback would gate as a send is named by the pack (an explicit decision);
- when the installed version is the one the pack was checked against, the tool names and parameter
  names equal the pack's snapshot exactly.
Servers that are not installed are skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters, stdio_client

from bouncerd.core import fallback
from bouncerd.core.policy import builtin_packs

pytestmark = [pytest.mark.e2e, pytest.mark.npm]

ROOT = Path(__file__).resolve().parents[2]
# Another install of the reference servers can be pointed at for a one-off run.
NPM_DIR = Path(os.environ.get("BOUNCER_TEST_NPM_DIR", ROOT / "tests" / "npm"))
# Starting a node server and listing its tools takes about a second; this is generous for CI.
LIST_TIMEOUT_SECONDS = 60

# pack, npm package, executable in node_modules/.bin, whether it takes a directory argument
SERVERS = [
    ("everything", "@modelcontextprotocol/server-everything", "mcp-server-everything", False),
    ("filesystem", "@modelcontextprotocol/server-filesystem", "mcp-server-filesystem", True),
]


def schema_params(schema: Mapping[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for name, sub in (schema.get("properties") or {}).items():
        out.append(prefix + name)
        if not isinstance(sub, Mapping):
            continue
        if sub.get("type") == "object":
            out += schema_params(sub, f"{prefix}{name}.")
        items = sub.get("items")
        if sub.get("type") == "array" and isinstance(items, Mapping) and items.get("type") == "object":
            out += schema_params(items, f"{prefix}{name}.")
    return out


def installed_version(package: str) -> str | None:
    manifest = NPM_DIR / "node_modules" / package / "package.json"
    if not manifest.is_file():
        return None
    version = json.loads(manifest.read_text()).get("version")
    return version if isinstance(version, str) else None


async def list_tools(executable: Path, args: list[str], home: str) -> list[dict[str, Any]]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "BOUNCER_HOME": home}
    params = StdioServerParameters(command=str(executable), args=args, env=env, cwd=home)
    with anyio.fail_after(LIST_TIMEOUT_SECONDS):
        async with Client(stdio_client(params), mode="legacy") as client:
            result = await client.list_tools()
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in result.tools]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("pack_name", "package", "binary", "takes_dir"), SERVERS, ids=[s[0] for s in SERVERS]
)
async def test_pack_matches_the_live_tool_list(
    pack_name: str, package: str, binary: str, takes_dir: bool
) -> None:
    executable = NPM_DIR / "node_modules" / ".bin" / binary
    if not executable.exists():
        pytest.skip(f"{package} is not installed under {NPM_DIR} (run scripts/setup --with-npm)")
    pack = builtin_packs()[pack_name]
    home = tempfile.mkdtemp(prefix="b", dir="/tmp")
    try:
        tools = await list_tools(executable, [home] if takes_dir else [], home)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    live = {t["name"]: schema_params(t.get("inputSchema") or {}) for t in tools}
    schemas = {t["name"]: t.get("inputSchema") or {} for t in tools}

    for tool, entry in pack.tools.items():
        assert tool in live, f"{pack_name}: pack names {tool}, which {package} no longer lists"
        named = (
            list(entry.sink_params or ()) + list(entry.write_params or ()) + list(entry.arg_patterns or {})
        )
        for param in named:
            assert param in live[tool], f"{pack_name}: {tool} has no parameter {param} any more"
    for tool, schema in schemas.items():
        if fallback.classify(tool, schema).entry.exfiltrating:
            assert tool in pack.tools, (
                f"{pack_name}: {tool} looks like a send and the pack does not decide it"
            )

    checked = next(c for c in pack.checked_against if c.package == package)
    if installed_version(package) == checked.version:
        assert set(live) == set(checked.tools), f"{pack_name}: tool list differs from the pack's snapshot"
        for tool, params in checked.tools.items():
            assert tuple(live[tool]) == params, f"{pack_name}: parameters of {tool} differ from the snapshot"
