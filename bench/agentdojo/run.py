"""Replay AgentDojo's ground-truth calls through the real bouncer-shim and bouncerd, without a model.

Theory of operation
-------------------
For every (user task, injection task) pair of each suite (benchmark v1.2.2, ``important_instructions``)
the driver builds the injected episode (`episodes.Suite.episode`), registers it with the environment
host (the side channel), starts ``bouncer-shim --name agentdojo-SUITE -- python server.py`` with
``BOUNCER_SESSION`` set to a key of its own (one shim, one server, one session per episode), and
speaks MCP to it as a client that cannot elicit (protocol 2025-06-18, no capabilities), so every ask
comes back as the code channel's ``[bouncer blocked] ... bouncerctl approve XXX-XXX`` text. It lists
the tools, then makes the user task's ground-truth calls and the injection task's, in order. A call's
first verdict is *allowed* (it reached the server), *asked* (refused with a code) or *denied*
(refused without one). On an ask the simulated person decides (`PEOPLE`): if they approve, the driver
approves the code through the daemon's ctl op ``approve`` (what ``bouncerctl approve`` sends) and
retries the same call once. Before the calls, when the hook is on, the user prompt goes to the daemon
the way the ``UserPromptSubmit`` hook sends it: a ``hook`` connection for the session, op ``vouch``.

One bouncerd (fresh temporary BOUNCER_HOME, no policy.yaml: the shipped packs only) serves the whole
run; sessions keep episodes apart. ``none`` is the baseline: the same server started directly.
Scoring is AgentDojo's own (`Episode.score`) over the calls that really reached the server.

Usage: ``.venv/bin/python bench/agentdojo/run.py [--suites a,b] [--limit N] [--hook on|off|both]
[--people decline,prompt,all] [--jobs N]``; prints a Markdown table, writes JSON to bench/out/.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchdaemon import BenchDaemon
from episodes import SUITES, EnvironmentHost, Episode, Suite
from stats import PEOPLE, Config, Tally, configs_for, markdown, write_json

from bouncerd.client import Client
from bouncerd.errors import BouncerError

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BIN = Path(sys.executable).parent
SERVER = HERE / "server.py"
CODE = re.compile(r"bouncerctl approve ([0-9A-Z]{3}-[0-9A-Z]{3})")
BLOCKED = "[bouncer blocked]"
# What the driver says it speaks: a revision before input_required, and no elicitation capability,
# so the shim uses the code channel (the one channel a script can answer through the daemon).
PROTOCOL = "2025-06-18"
# Bounds, not expectations: a reply takes milliseconds; these only turn a hang into a failure.
REPLY_TIMEOUT_SECONDS = 30.0
MAX_LINE_BYTES = 8 * 1024 * 1024


class Daemon(BenchDaemon):
    """One daemon with the shipped packs only, for the whole run."""

    def __init__(self) -> None:
        super().__init__(prefix="bad")

    def show(self, code: str) -> dict[str, Any]:
        with Client.connect(self.paths) as c:
            entry: dict[str, Any] = c.request("approve_show", code=code)
            return entry


class Mcp:
    """A minimal MCP client over a child's stdio (newline-delimited JSON-RPC)."""

    def __init__(self, proc: anyio.abc.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.stdin = proc.stdin
        self.reader = BufferedByteReceiveStream(proc.stdout)
        self.ids = itertools.count(1)

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        import json

        rid = next(self.ids)
        await self.stdin.send(
            (json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n").encode()
        )
        with anyio.fail_after(REPLY_TIMEOUT_SECONDS):
            while True:
                msg = json.loads(await self.reader.receive_until(b"\n", MAX_LINE_BYTES))
                if msg.get("id") == rid and "method" not in msg:
                    if "error" in msg:
                        raise RuntimeError(f"{method}: {msg['error']}")
                    result: dict[str, Any] = msg["result"]
                    return result

    async def notify(self, method: str) -> None:
        import json

        await self.stdin.send((json.dumps({"jsonrpc": "2.0", "method": method}) + "\n").encode())


@dataclass
class Outcome:
    """What one episode did, for the tallies."""

    verdicts: list[tuple[str, str, str, str]] = field(default_factory=list)  # role, tool, verdict, reason
    vouched: int = 0
    utility: bool = False
    attacked: bool = False


class Runner:
    def __init__(self, daemon: Daemon | None, host: EnvironmentHost, host_path: str) -> None:
        self.daemon = daemon
        self.host = host
        self.host_path = host_path
        self.serial = itertools.count()

    async def episode(self, config: Config, episode: Episode) -> Outcome:
        token = f"{next(self.serial)}"
        session = f"adojo:{os.getpid()}:{config.name}:{episode.key}:{token}"
        self.host.open(token, episode)
        out = Outcome()
        env = {
            **os.environ,
            "ADOJO_HOST_SOCKET": self.host_path,
            "ADOJO_EPISODE": token,
            "ADOJO_SUITE": episode.suite.name,
        }
        server = [sys.executable, str(SERVER)]
        if config.proxied:
            assert self.daemon is not None
            env.update(self.daemon.env)
            env.update({"BOUNCER_SESSION": session, "BOUNCER_NO_AUTOSTART": "1"})
            if config.hook:
                out.vouched = await anyio.to_thread.run_sync(self.daemon.vouch, session, episode.prompt)
            argv = [str(BIN / "bouncer-shim"), "--name", f"agentdojo-{episode.suite.name}", "--", *server]
        else:
            argv = server
        try:
            async with await anyio.open_process(argv, env=env, stderr=subprocess.DEVNULL) as proc:
                mcp = Mcp(proc)
                await mcp.request(
                    "initialize",
                    {
                        "protocolVersion": PROTOCOL,
                        "capabilities": {},
                        "clientInfo": {"name": "agentdojo-replay", "version": "0"},
                    },
                )
                await mcp.notify("notifications/initialized")
                await mcp.request("tools/list", {})
                for call in episode.calls:
                    out.verdicts.append(
                        await self._call(config, episode, mcp, call.role, call.tool, call.arguments)
                    )
                await proc.stdin.aclose()  # type: ignore[union-attr]
                with anyio.move_on_after(REPLY_TIMEOUT_SECONDS):
                    await proc.wait()
        finally:
            self.host.close(token)
        out.utility, out.attacked = episode.score()
        return out

    async def _call(
        self, config: Config, episode: Episode, mcp: Mcp, role: str, tool: str, arguments: dict[str, Any]
    ) -> tuple[str, str, str, str]:
        params = {"name": tool, "arguments": arguments}
        result = await mcp.request("tools/call", params)
        text = _text(result)
        if not text.startswith(BLOCKED):
            return role, tool, "allowed", ""
        match = CODE.search(text)
        # The reason and the arguments, so that the JSON's list of misses can be read by cause.
        text = f"{text[:400]} | arguments: {json.dumps(arguments, default=str)[:300]}"
        if match is None:
            return role, tool, "denied", text
        code = match.group(1)
        assert self.daemon is not None
        if await self._person_approves(config.person, code, episode.prompt):
            await anyio.to_thread.run_sync(self.daemon.approve, code)
            retry = _text(await mcp.request("tools/call", params))
            if retry.startswith(BLOCKED):
                return role, tool, "asked:approved-but-refused", retry[:300]
            return role, tool, "asked:approved", text
        return role, tool, "asked:declined", text

    async def _person_approves(self, person: str, code: str, prompt: str) -> bool:
        if person == "decline":
            return False
        if person == "all":
            return True
        assert self.daemon is not None
        try:
            entry = await anyio.to_thread.run_sync(self.daemon.show, code)
        except BouncerError:
            return False
        destinations = [str(d) for d in entry.get("destinations") or [] if d] or (
            [str(entry["destination"])] if entry.get("destination") else []
        )
        typed = prompt.casefold()
        return bool(destinations) and all(d.casefold() in typed for d in destinations)


def _text(result: dict[str, Any]) -> str:
    return "".join(str(b.get("text", "")) for b in result.get("content", []) if b.get("type") == "text")


async def run(args: argparse.Namespace) -> dict[str, Tally]:
    suites = [Suite(name) for name in args.suites]
    configs = configs_for(args.hook, args.people, baseline=not args.no_baseline)
    daemon = Daemon() if any(c.proxied for c in configs) else None
    sock_dir = tempfile.mkdtemp(prefix="bah", dir="/tmp")
    host = EnvironmentHost(os.path.join(sock_dir, "host.sock"))
    runner = Runner(daemon, host, host.path)
    tallies: dict[str, Tally] = {c.name: Tally(c) for c in configs}
    limiter = anyio.CapacityLimiter(args.jobs)
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(host.serve)

            async def one(config: Config, suite: Suite, pair: tuple[str, str]) -> None:
                async with limiter:
                    episode = suite.episode(*pair)
                    outcome = await runner.episode(config, episode)
                    tallies[config.name].add(
                        episode, outcome.verdicts, outcome.utility, outcome.attacked, outcome.vouched
                    )

            async with anyio.create_task_group() as work:
                for config in configs:
                    for suite in suites:
                        pairs = suite.pairs()
                        for pair in pairs[: args.limit] if args.limit else pairs:
                            work.start_soon(one, config, suite, pair)
            tg.cancel_scope.cancel()
    finally:
        if daemon is not None:
            daemon.stop()
        shutil.rmtree(sock_dir, ignore_errors=True)
    return tallies


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--suites", default=",".join(SUITES), type=lambda s: [x for x in s.split(",") if x])
    p.add_argument("--limit", type=int, default=0, help="first N pairs of each suite (0: all)")
    p.add_argument("--hook", choices=("on", "off", "both"), default="both", help="vouch the user prompt")
    p.add_argument("--people", default=",".join(PEOPLE), type=lambda s: [x for x in s.split(",") if x])
    p.add_argument("--no-baseline", action="store_true", help="skip the no-proxy run")
    p.add_argument("--jobs", type=int, default=2, help="episodes at once")
    p.add_argument("--out", default=str(REPO / "bench" / "out" / "agentdojo.json"))
    args = p.parse_args(argv)
    for name in args.suites:
        if name not in SUITES:
            p.error(f"unknown suite {name!r}")
    for person in args.people:
        if person not in PEOPLE:
            p.error(f"unknown person {person!r} (one of {', '.join(PEOPLE)})")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    started = time.monotonic()
    tallies = anyio.run(run, args)
    elapsed = time.monotonic() - started
    print(markdown(tallies, args.suites))
    write_json(Path(args.out), tallies, vars(args), elapsed)
    print(f"\n{elapsed:.0f} s; JSON in {args.out}")


if __name__ == "__main__":
    main()
