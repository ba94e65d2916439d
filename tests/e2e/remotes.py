"""Helpers for tests of remote MCP servers: servers over HTTP on loopback, reached directly or through
``bouncer-shim --url`` (the bridge).

Theory of operation
-------------------
`remote_server(argv, ...)` starts a server process that listens on 127.0.0.1 at a port chosen free
when the test runs (`free_port`), waits until the port accepts connections, yields its URL and stops
the process afterwards. Our fixture servers go through tests/fixtures/servers/remote.py; the npm
`server-everything` is started with tests/fixtures/servers/loopback.cjs preloaded, which binds its
listener to loopback (it would otherwise listen on every interface).

`bridge_params(name, url, home)` is the same server as a client configures it behind Bouncer: a
stdio entry running ``bouncer-shim --name NAME --url URL``. `direct_transport(url, transport)` is the
client talking HTTP to it itself, for comparisons. Waits are bounded only so that a broken server
fails the test instead of hanging it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import FIXTURE_SERVERS, NPM_BIN, SHIM, bouncer_env
from mcp import StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

LOOPBACK = "127.0.0.1"
REMOTE_FIXTURE = FIXTURE_SERVERS / "remote.py"
LOOPBACK_PRELOAD = FIXTURE_SERVERS / "loopback.cjs"
EVERYTHING = NPM_BIN / "mcp-server-everything"
# A bound, not an expectation: a fixture server or node listens within a second or two.
LISTEN_TIMEOUT = 20.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((LOOPBACK, port)) == 0


@contextlib.contextmanager
def remote_server(
    argv: Sequence[str],
    port: int,
    path: str,
    *,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
) -> Iterator[str]:
    """Run `argv` (a server listening on `port`), yield its URL (``http://127.0.0.1:PORT{path}``)."""
    out = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115 - closed below
    proc = subprocess.Popen(list(argv), env={**os.environ, **(env or {})}, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + LISTEN_TIMEOUT
        while not _accepts(port):
            if proc.poll() is not None:
                raise RuntimeError(f"{argv[0]} exited with {proc.returncode} before listening")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{argv[0]} did not listen on {port} within {LISTEN_TIMEOUT} s")
            time.sleep(0.05)
        yield f"http://{LOOPBACK}:{port}{path}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if log is not None:
            out.close()  # type: ignore[union-attr]


def fixture_remote(
    module: str,
    *,
    transport: str = "streamable-http",
    env: Mapping[str, str] | None = None,
    fail: int | None = None,
) -> contextlib.AbstractContextManager[str]:
    """One of our fixture servers (``mail``, ``chat``, ``full``) over HTTP."""
    port = free_port()
    argv = [sys.executable, str(REMOTE_FIXTURE), module, "--port", str(port), "--transport", transport]
    if fail is not None:
        argv += ["--fail", str(fail)]
    return remote_server(argv, port, "/sse" if transport == "sse" else "/mcp", env=env)


def everything_remote(transport: str) -> contextlib.AbstractContextManager[str]:
    """The reference server-everything in its streamableHttp or sse mode."""
    port = free_port()
    mode = "sse" if transport == "sse" else "streamableHttp"
    preload = f"--require {LOOPBACK_PRELOAD}"
    env = {"PORT": str(port), "NODE_OPTIONS": f"{os.environ.get('NODE_OPTIONS', '')} {preload}".strip()}
    return remote_server([str(EVERYTHING), mode], port, "/sse" if transport == "sse" else "/mcp", env=env)


def bridge_params(
    name: str,
    url: str,
    home: Path,
    *,
    transport: str = "streamable-http",
    extra: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    session: str | None = None,
) -> StdioServerParameters:
    """The remote server behind Bouncer: ``bouncer-shim --name NAME --url URL --transport T``."""
    args = ["--name", name, "--url", url, "--transport", transport, *extra]
    return StdioServerParameters(
        command=str(SHIM), args=args, env={**os.environ, **(env or {}), **bouncer_env(home, session=session)}
    )


def direct_transport(url: str, transport: str) -> Any:
    """The client's own HTTP transport to `url` (what it uses without Bouncer)."""
    return sse_client(url) if transport == "sse" else streamable_http_client(url)
