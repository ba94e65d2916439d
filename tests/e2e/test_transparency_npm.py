"""The relay is transparent for the reference servers from npm, not only for our own fixture.

`@modelcontextprotocol/server-everything` and `@modelcontextprotocol/server-filesystem` (versions pinned
in tests/npm/package.json, installed by `scripts/setup --with-npm`) are driven by the real `mcp` client,
directly and through `bouncer-shim` with a real `bouncerd`, in "legacy" and "auto" mode. Both servers
are 2025-era: in "auto" mode the client's server/discover probe is refused and it falls back to the
initialize handshake, so "auto" checks that the relay carries that refusal and the fallback unchanged.

Their outputs hold a few things that differ from run to run; each is replaced or dropped where it is
normalised, with the reason beside it. Everything else must be equal.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
import pytest
from harness import (
    NPM_BIN,
    Probe,
    ServerSpec,
    normalise,
    npm_server,
    run_both,
    short_tmpdir,
)
from mcp.shared.exceptions import MCPError

if TYPE_CHECKING:
    from daemons import RunningDaemon

EVERYTHING = "mcp-server-everything"
FILESYSTEM = "mcp-server-filesystem"


def _npm_missing() -> str:
    missing = [name for name in (EVERYTHING, FILESYSTEM) if not (NPM_BIN / name).exists()]
    return ", ".join(missing)


pytestmark = [
    pytest.mark.e2e,
    pytest.mark.npm,
    pytest.mark.skipif(
        bool(_npm_missing()),
        reason=f"reference servers not installed ({_npm_missing()}); run scripts/setup --with-npm",
    ),
]

MODES = ["legacy", "auto"]
# Bounds a test body: node starts in well under a second; 60 s only turns a hang into a failure.
TEST_TIMEOUT = 60
LIST_CHANGED = "notifications/tools/list_changed"
# server-everything stamps dynamic resources with the wall-clock time they were made ("created at
# 9:09:30 AM"); two runs seconds apart differ only there.
CLOCK_TIME = (r"\d{1,2}:\d{2}:\d{2}\s?[AP]M", "<time>")


@pytest.fixture
def everything() -> ServerSpec:
    return npm_server(EVERYTHING, name="everything")


# The SDK marks 2025-era calls (logging/setLevel, resources/subscribe) deprecated; the tests make them on
# purpose, to check the relay still carries them.
ALLOW_DEPRECATED = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


async def call(probe: Probe, tool: str, arguments: dict[str, Any] | None = None, **rules: Any) -> Any:
    try:
        return normalise(await probe.client.call_tool(tool, arguments or {}), **rules)
    except MCPError as exc:
        return normalise(exc, **rules)


def texts(result: dict[str, Any]) -> list[str]:
    return [block["text"] for block in result.get("content", []) if block.get("type") == "text"]


def decoded_blobs(value: Any) -> Any:
    """Blob contents decoded to text, so the clock time inside one can be normalised like text."""
    if isinstance(value, dict):
        out = {k: decoded_blobs(v) for k, v in value.items()}
        if isinstance(value.get("blob"), str):
            out["blob"] = base64.b64decode(value["blob"]).decode("utf-8", errors="replace")
        return out
    if isinstance(value, list):
        return [decoded_blobs(v) for v in value]
    return value


async def settled_tools(probe: Probe) -> dict[str, Any]:
    """The tool list once server-everything has registered its capability-dependent tools.

    It registers them while handling notifications/initialized and announces each with list_changed;
    a tools/list sent after the first announcement is answered after all of them.
    """
    await probe.wait_for(lambda p: LIST_CHANGED in p.methods())
    result: dict[str, Any] = normalise(await probe.client.list_tools())
    return result


# ---- server-everything -----------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_relay_does_not_alter_everything_handshake_or_late_tools(
    mode: str, daemon: RunningDaemon, everything: ServerSpec
) -> None:
    async def scenario(probe: Probe) -> Any:
        c = probe.client
        tools = await settled_tools(probe)
        return {
            "protocol": c.protocol_version,
            "server_info": normalise(c.server_info),
            "capabilities": normalise(c.server_capabilities),
            "instructions": c.instructions,
            "tools": tools,
            "notifications": probe.notifications,
            "errors": probe.errors,
        }

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(everything, daemon.home, mode, scenario)
    assert direct["protocol"] == "2025-11-25"
    names = [t["name"] for t in direct["tools"]["tools"]]
    # Registered only after notifications/initialized, because the client declared sampling and
    # elicitation: the relay must not hide them or their list_changed.
    assert {"trigger-sampling-request", "trigger-elicitation-request"} <= set(names)
    assert relayed == direct


def environment(result: dict[str, Any]) -> dict[str, str]:
    parsed: dict[str, str] = json.loads(texts(result)[0])
    return parsed


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_relay_does_not_alter_everything_tool_results(
    mode: str, daemon: RunningDaemon, everything: ServerSpec
) -> None:
    async def scenario(probe: Probe) -> Any:
        await settled_tools(probe)
        out = {
            "echo": await call(probe, "echo", {"message": "héllo ☃"}),
            "sum": await call(probe, "get-sum", {"a": 2, "b": 40}),
            "annotated": await call(
                probe, "get-annotated-message", {"messageType": "error", "includeImage": True}
            ),
            "image": await call(probe, "get-tiny-image"),
            "links": await call(probe, "get-resource-links", {"count": 4}),
            "structured": await call(probe, "get-structured-content", {"location": "Chicago"}),
            "reference": decoded_blobs(
                await call(
                    probe,
                    "get-resource-reference",
                    {"resourceType": "Text", "resourceId": 3},
                    patterns=[CLOCK_TIME],
                )
            ),
            "invalid_arguments": await call(probe, "get-sum", {"a": "two"}),
            # Compared as a mapping: the order of a process environment carries no meaning.
            "env": environment(await call(probe, "get-env")),
        }
        return out

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(everything, daemon.home, mode, scenario)
    assert texts(direct["echo"]) == ["Echo: héllo ☃"]
    assert direct["structured"]["structuredContent"]["conditions"]
    assert direct["invalid_arguments"]["isError"] is True
    assert relayed == direct


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_relay_carries_everything_sampling_and_elicitation_requests(
    mode: str, daemon: RunningDaemon, everything: ServerSpec
) -> None:
    async def scenario(probe: Probe) -> Any:
        await settled_tools(probe)
        return {
            "sampling": await call(
                probe, "trigger-sampling-request", {"prompt": "Write a haiku", "maxTokens": 40}
            ),
            "elicitation": await call(probe, "trigger-elicitation-request"),
            "sampling_requests": probe.sampling_requests,
            "elicitation_requests": probe.elicitation_requests,
        }

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(everything, daemon.home, mode, scenario)
    assert "fixture-model" in texts(direct["sampling"])[0]
    assert "Ann Example" in "".join(texts(direct["elicitation"]))
    assert len(direct["sampling_requests"]) == len(direct["elicitation_requests"]) == 1
    assert relayed == direct


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_relay_does_not_lose_everything_progress_or_cancellation(
    mode: str, daemon: RunningDaemon, everything: ServerSpec
) -> None:
    async def scenario(probe: Probe) -> Any:
        await settled_tools(probe)
        seen: list[tuple[float, float | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total))

        args = {"duration": 0.5, "steps": 5}
        finished = normalise(
            await probe.client.call_tool(
                "trigger-long-running-operation", args, progress_callback=on_progress
            )
        )
        progress = list(seen)

        started = anyio.Event()

        async def on_first_progress(progress: float, total: float | None, message: str | None) -> None:
            started.set()

        async def long_call() -> None:
            # 60 steps of a second each: only the cancellation ends it within the test.
            long = {"duration": 60, "steps": 60}
            await probe.client.call_tool(
                "trigger-long-running-operation", long, progress_callback=on_first_progress
            )

        async with anyio.create_task_group() as tg:
            tg.start_soon(long_call)
            await started.wait()
            tg.cancel_scope.cancel()
        after = await call(probe, "echo", {"message": "after the cancel"})
        return {"finished": finished, "progress": progress, "after": after}

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(everything, daemon.home, mode, scenario)
    assert direct["progress"] == [(float(i), 5.0) for i in range(1, 6)]
    assert texts(direct["after"]) == ["Echo: after the cancel"]
    assert relayed == direct


@pytest.mark.asyncio
@ALLOW_DEPRECATED
@pytest.mark.parametrize("mode", MODES)
async def test_relay_does_not_lose_everything_log_notifications(
    mode: str, daemon: RunningDaemon, everything: ServerSpec
) -> None:
    async def scenario(probe: Probe) -> Any:
        await settled_tools(probe)
        await probe.client.set_logging_level("debug")
        started = await call(probe, "toggle-simulated-logging")
        await probe.wait_for(lambda p: len(p.logs) >= 1)
        stopped = await call(probe, "toggle-simulated-logging")
        # The server picks each message's level at random (and the text names the level), so only the
        # shape of the first message is compared.
        first = {key: type(value).__name__ for key, value in probe.logs[0].items()}
        return {"started": started, "stopped": stopped, "first_log_shape": first}

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(everything, daemon.home, mode, scenario)
    assert direct["first_log_shape"] == {"level": "str", "data": "str"}
    assert relayed == direct


@pytest.mark.asyncio
@ALLOW_DEPRECATED
@pytest.mark.parametrize("mode", MODES)
async def test_relay_does_not_alter_everything_resources_or_lose_updates(
    mode: str, daemon: RunningDaemon, everything: ServerSpec
) -> None:
    uri = "demo://resource/dynamic/text/1"

    async def scenario(probe: Probe) -> Any:
        c = probe.client
        await settled_tools(probe)
        out: dict[str, Any] = {
            "list": normalise(await c.list_resources()),
            "templates": normalise(await c.list_resource_templates()),
            "static": normalise(await c.read_resource("demo://resource/static/document/features.md")),
            "text": normalise(await c.read_resource(uri), patterns=[CLOCK_TIME]),
            "blob": normalise(
                decoded_blobs(normalise(await c.read_resource("demo://resource/dynamic/blob/2"))),
                patterns=[CLOCK_TIME],
            ),
        }
        await c.subscribe_resource(uri)
        out["toggle_on"] = await call(probe, "toggle-subscriber-updates")
        await probe.wait_for(lambda p: "notifications/resources/updated" in p.methods())
        out["toggle_off"] = await call(probe, "toggle-subscriber-updates")
        out["first_update"] = next(
            n for n in probe.notifications if n["method"] == "notifications/resources/updated"
        )
        return out

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(everything, daemon.home, mode, scenario)
    assert direct["first_update"] == {"method": "notifications/resources/updated", "params": {"uri": uri}}
    assert relayed == direct


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_relay_does_not_alter_everything_prompts_or_completions(
    mode: str, daemon: RunningDaemon, everything: ServerSpec
) -> None:
    async def scenario(probe: Probe) -> Any:
        c = probe.client
        ref = types.PromptReference(type="ref/prompt", name="completable-prompt")
        resource_prompt = await c.get_prompt("resource-prompt", {"resourceType": "Text", "resourceId": "2"})
        return {
            "list": normalise(await c.list_prompts()),
            "simple": normalise(await c.get_prompt("simple-prompt")),
            "args": normalise(await c.get_prompt("args-prompt", {"city": "Oslo", "state": "Viken"})),
            "resource": normalise(resource_prompt, patterns=[CLOCK_TIME]),
            "complete": normalise(await c.complete(ref, {"name": "department", "value": "E"})),
            "complete_in_context": normalise(
                await c.complete(
                    ref, {"name": "name", "value": ""}, context_arguments={"department": "Sales"}
                )
            ),
        }

    with anyio.fail_after(TEST_TIMEOUT):
        direct, relayed = await run_both(everything, daemon.home, mode, scenario)
    assert direct["complete"]["completion"]["values"] == ["Engineering"]
    assert relayed == direct


# ---- server-filesystem -----------------------------------------------------------------------------


def make_tree() -> Path:
    root = short_tmpdir("fs").resolve()
    (root / "docs").mkdir()
    (root / "docs" / "notes.txt").write_text("alpha\nbeta\n", encoding="utf-8")
    (root / "readme.md").write_text("# Readme\n", encoding="utf-8")
    return root


def tree_contents(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


# get_file_info reports the file's created/modified/accessed times: they differ between the two
# trees, which are made seconds apart.
FILE_TIMES = (r"(created|modified|accessed): [^\n]*", r"\1: <time>")


async def filesystem_scenario(probe: Probe, root: Path) -> Any:
    # Each run has its own copy of the tree (the scenario writes to it); its path is replaced by <ROOT>.
    rules: dict[str, Any] = {"replace": {str(root): "<ROOT>"}, "patterns": [FILE_TIMES]}
    r = str(root)
    steps: list[tuple[str, dict[str, Any]]] = [
        ("list_allowed_directories", {}),
        ("read_text_file", {"path": f"{r}/docs/notes.txt"}),
        ("read_text_file", {"path": f"{r}/docs/notes.txt", "head": 1}),
        ("list_directory", {"path": r}),
        ("directory_tree", {"path": r}),
        ("search_files", {"path": r, "pattern": "notes"}),
        ("get_file_info", {"path": f"{r}/readme.md"}),
        ("write_file", {"path": f"{r}/docs/new.txt", "content": "first draft ✎\n"}),
        ("edit_file", {"path": f"{r}/docs/new.txt", "edits": [{"oldText": "first", "newText": "second"}]}),
        ("create_directory", {"path": f"{r}/archive"}),
        ("move_file", {"source": f"{r}/readme.md", "destination": f"{r}/archive/readme.md"}),
        ("read_multiple_files", {"paths": [f"{r}/docs/new.txt", f"{r}/archive/readme.md"]}),
        # Outside the allowed directory: the server's refusal must come through unchanged too.
        ("read_text_file", {"path": "/etc/hostname"}),
    ]
    tools = normalise(await probe.client.list_tools())
    results = [await call(probe, tool, args, **rules) for tool, args in steps]
    return {
        "tools": tools,
        "results": results,
        "tree_after": tree_contents(root),
        "errors": probe.errors,
    }


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_relay_does_not_alter_filesystem_reads_or_writes(mode: str, daemon: RunningDaemon) -> None:
    roots = {kind: make_tree() for kind in ("direct", "shim")}

    def spec(kind: str) -> ServerSpec:
        return npm_server(FILESYSTEM, str(roots[kind]), name="filesystem")

    async def scenario(probe: Probe) -> Any:
        return await filesystem_scenario(probe, roots[probe.kind])

    try:
        with anyio.fail_after(TEST_TIMEOUT):
            direct, relayed = await run_both(spec, daemon.home, mode, scenario)
    finally:
        for root in roots.values():
            shutil.rmtree(root, ignore_errors=True)
    assert direct["tree_after"] == {
        "archive/readme.md": "# Readme\n",
        "docs/new.txt": "second draft ✎\n",
        "docs/notes.txt": "alpha\nbeta\n",
    }
    assert direct["results"][-1]["isError"] is True
    assert relayed == direct


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_relay_carries_the_filesystem_roots_request(mode: str, daemon: RunningDaemon) -> None:
    # The client declares roots; the server asks for them (roots/list, a server→client request) and
    # replaces its allowed directories with the answer.
    served, offered = make_tree(), make_tree()
    spec = npm_server(FILESYSTEM, str(served), name="filesystem")

    async def scenario(probe: Probe) -> Any:
        await probe.client.list_tools()
        await probe.wait_for(lambda p: p.roots_requests >= 1)
        # The server applies the answer asynchronously: ask until it has.
        with anyio.fail_after(10):
            while True:
                allowed = await call(probe, "list_allowed_directories")
                if str(offered) in texts(allowed)[0]:
                    break
                await anyio.sleep(0.05)
        return {"allowed": allowed, "roots_requests": probe.roots_requests}

    try:
        with anyio.fail_after(TEST_TIMEOUT):
            direct, relayed = await run_both(spec, daemon.home, mode, scenario, roots=[offered.as_uri()])
    finally:
        shutil.rmtree(served, ignore_errors=True)
        shutil.rmtree(offered, ignore_errors=True)
    assert relayed == direct
