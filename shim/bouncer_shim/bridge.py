"""``python -m bouncer_shim.bridge``: a remote MCP server (streamable HTTP or HTTP+SSE) as a stdio server.

Theory of operation
-------------------
A remote server goes behind the same gate as a local one by becoming one: ``bouncer-shim --url URL``
starts this module as its upstream child, in place of a server command, and relays to it exactly as
to any stdio server. So every verdict, observation, pin, question and audit record happens in the
relay, unchanged, and nothing here decides anything: this process only carries JSON-RPC lines
between its stdin/stdout and HTTP. The `mcp` SDK's client transports speak HTTP
(`streamable_http_client`: the ``Mcp-Session-Id``, the ``MCP-Protocol-Version`` header, the
standing GET stream for server-sent requests and notifications, resumption with ``Last-Event-ID``;
`sse_client` for the legacy transport). The SDK costs half a second to import, which is why this is
a separate process: a stdio shim never loads it.

What the bridge adds, and why:

- **Failures answer the request.** A server that is down, slow, answers 401/403/5xx, or drops its
  event stream must not leave the client waiting or see a bare transport error. `_Client.send`
  turns each such failure of a message POST into a JSON-RPC error for that request, naming the
  server and what to run (`explain`), and hands the SDK a 202 so its writer carries on. A request
  that has heard nothing from the server for ``--timeout`` seconds (REQUEST_SILENCE_SECONDS by
  default) is answered with an error too, and the server is told it was cancelled. Each request is
  answered once: an answer arriving after the bridge gave up is dropped (`Pending`).
- **OAuth**: when `bouncerctl auth login NAME` stored tokens for this server, requests carry the
  SDK's `OAuthClientProvider` with them (`bouncer_shim.oauth`), which refreshes them before they
  expire. The bridge never opens a browser: a server that wants a new login gets the client an
  error naming ``bouncerctl auth login NAME``.
- **The negotiated protocol version** is stamped on every message after ``initialize`` (the SDK's
  session does that for its own messages; here the client's session is on the other side of the
  relay, so the bridge reads the version from the initialize result).
- **Headers** come from ``--header NAME=VALUE`` and from each environment variable
  ``BOUNCER_HEADER_<NAME>`` (how `bouncerctl init` carries an entry's ``headers``: the environment
  is readable only by the user, a command line by everyone). A value may hold ``${VAR}`` (or
  ``${VAR:-default}``) references, expanded from the environment here, so a secret never has to
  sit in a client's config in clear. A reference to an unset variable fails every request with an
  error naming it.

Exit status: 0 when stdin closes; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import httpx2
import mcp_types as types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import ClientMessageMetadata, SessionMessage

# A request that has heard nothing from the server (no byte of its answer, no progress, no request
# or notification on the server's streams) this long is answered with an error. Two minutes: long
# enough for a slow search or a large export to start answering, short enough that an agent is not
# stuck on a dead server; `--timeout` changes it per server.
REQUEST_SILENCE_SECONDS: Final = 120.0

# Connecting (TCP and TLS) to a server that is up takes well under a second even across the world;
# one that has not accepted in ten is treated as down.
CONNECT_SECONDS: Final = 10.0

# The JSON-RPC error code of every failure the bridge reports: the SDK's own code for a connection
# that can no longer carry an answer (implementation-defined server error range).
REMOTE_FAILED: Final = types.CONNECTION_CLOSED

TRANSPORTS: Final = ("streamable-http", "sse")

# BOUNCER_HEADER_<NAME>=VALUE in the environment is the header NAME: VALUE.
HEADER_ENV_PREFIX: Final = "BOUNCER_HEADER_"

EXIT_USAGE: Final = 2

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class MissingVariable(Exception):
    """A header references an environment variable that is not set."""


def expand(value: str, environ: Mapping[str, str]) -> str:
    """``${VAR}`` and ``${VAR:-default}`` in `value`, from `environ`; MissingVariable if unset."""

    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = environ.get(name)
        if found:
            return found
        if default is not None:
            return default
        raise MissingVariable(name)

    return _REFERENCE.sub(one, value)


@dataclass(frozen=True)
class Options:
    name: str
    url: str
    transport: str
    headers: tuple[tuple[str, str], ...]
    timeout: float


def parse_args(argv: Sequence[str]) -> Options:
    parser = argparse.ArgumentParser(
        prog="python -m bouncer_shim.bridge", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--name", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument("--transport", choices=TRANSPORTS, default="streamable-http")
    parser.add_argument("--header", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--timeout", type=float, default=REQUEST_SILENCE_SECONDS)
    args = parser.parse_args(list(argv))
    headers: list[tuple[str, str]] = []
    for item in args.header:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            parser.error(f"--header {item!r}: expected NAME=VALUE")
        headers.append((key.strip(), value))
    if not args.url.startswith(("http://", "https://")):
        parser.error(f"--url {args.url!r}: only http: and https: URLs")
    if args.timeout <= 0:
        parser.error("--timeout must be positive")
    return Options(args.name, args.url, args.transport, tuple(headers), args.timeout)


# ---- what a failure tells the client ---------------------------------------------------------------


def explain(name: str, url: str, what: str) -> str:
    """The error text for a failure `what` of server `name`: what happened and what to run."""
    if what.startswith("401"):
        hint = f"run `bouncerctl auth login {name}` (or fix the credentials in its headers)"
    elif what.startswith("403"):
        hint = f"the credentials lack access; check its headers, or run `bouncerctl auth login {name}`"
    elif what.startswith("missing "):
        hint = "set the variable in the environment the MCP client starts its servers with"
    elif what.startswith("login "):
        hint = f"run `bouncerctl auth login {name}`"
    else:
        hint = "check that it is up and reachable, then `bouncerctl doctor`"
    return f"bouncer: remote MCP server {name!r} ({url}): {what}; {hint}"


def _status_failure(status: int) -> str | None:
    if status == 401:
        return "401 Unauthorized: the server wants credentials"
    if status == 403:
        return "403 Forbidden"
    if status >= 500:
        return f"the server failed (HTTP {status})"
    return None


def _describe(exc: Exception, timeout: float) -> str:
    if isinstance(exc, httpx2.ConnectTimeout):
        return f"no connection within {CONNECT_SECONDS:g} s"
    if isinstance(exc, httpx2.TimeoutException):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, httpx2.ConnectError):
        return "cannot connect (is it running?)"
    return f"connection failed ({type(exc).__name__}: {exc})"


# ---- which requests wait for an answer -------------------------------------------------------------


def _key(request_id: object) -> tuple[str, object]:
    return (type(request_id).__name__, request_id)  # 1 and "1" are different ids


@dataclass
class Pending:
    """The client's requests sent upstream and not yet answered, each with its silence deadline."""

    timeout: float
    clock: Callable[[], float]
    waiting: dict[tuple[str, object], tuple[object, float]] = field(default_factory=dict)

    def add(self, request_id: object) -> None:
        self.waiting[_key(request_id)] = (request_id, self.clock() + self.timeout)

    def answer(self, request_id: object) -> bool:
        """Whether `request_id` was waiting (and is not any more)."""
        return self.waiting.pop(_key(request_id), None) is not None

    def heard(self) -> None:
        """The server said something: every waiting request's silence starts again."""
        deadline = self.clock() + self.timeout
        self.waiting = {key: (rid, deadline) for key, (rid, _) in self.waiting.items()}

    def overdue(self) -> list[object]:
        now = self.clock()
        late = [rid for rid, deadline in self.waiting.values() if deadline <= now]
        for rid in late:
            self.answer(rid)
        return late

    def next_deadline(self) -> float | None:
        return min((deadline for _, deadline in self.waiting.values()), default=None)


# ---- HTTP ------------------------------------------------------------------------------------------

FailureSink = Callable[[object, str], None]


def _request_id(body: bytes) -> object | None:
    """The id of the JSON-RPC request in a POST body, or None (a notification or a response)."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if isinstance(message, dict) and "method" in message and "id" in message:
        request_id: object = message["id"]
        return request_id
    return None


class _Client(httpx2.AsyncClient):
    """An HTTP client whose failed message POSTs become JSON-RPC errors for the request they carried.

    The SDK's writers stop at the first exception a POST raises (and the SSE transport's at any
    status >= 400), so a failure must never reach them: the request is answered through
    `on_failure` and the SDK sees 202 Accepted. A standing GET stream keeps no read timeout (it may
    rightly be quiet for hours); its failures are the SDK's to retry.
    """

    def __init__(self, *, on_failure: FailureSink, silence: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._on_failure = on_failure
        self._silence = silence

    async def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        if request.method == "GET":
            request.extensions["timeout"] = httpx2.Timeout(CONNECT_SECONDS, read=None).as_dict()
            return await super().send(request, **kwargs)
        if request.method != "POST":
            return await super().send(request, **kwargs)
        try:
            response = await super().send(request, **kwargs)
        except httpx2.HTTPError as exc:
            return self._failed(request, _describe(exc, self._silence))
        except Exception as exc:
            from bouncer_shim.oauth import LoginNeeded

            if not isinstance(exc, LoginNeeded) and not type(exc).__name__.startswith("OAuth"):
                raise
            return self._failed(request, f"login needed ({exc})")
        failure = _status_failure(response.status_code)
        if failure is None:
            return response
        if response.status_code < 500 or not _is_jsonrpc(response):
            await response.aclose()
            return self._failed(request, failure)
        return response  # a 5xx carrying the server's own JSON-RPC error: the SDK passes it on

    def _failed(self, request: httpx2.Request, what: str) -> httpx2.Response:
        request_id = _request_id(request.content)
        if request_id is not None:
            self._on_failure(request_id, what)
        return httpx2.Response(202, request=request)


def _is_jsonrpc(response: httpx2.Response) -> bool:
    return response.headers.get("content-type", "").lower().startswith("application/json")


# ---- the bridge ------------------------------------------------------------------------------------


class Bridge:
    def __init__(self, options: Options, environ: Mapping[str, str], out: Callable[[bytes], None]) -> None:
        self.options = options
        self.environ = environ
        self._out = out
        self.pending = Pending(options.timeout, anyio.current_time)
        self.headers: dict[str, str] = {}
        self.broken: str | None = None  # why every request fails, once nothing can reach the server
        self._initialize_id: tuple[str, object] | None = None
        self._version: str | None = None
        self._write: Any = None
        self._wake = anyio.Event()
        from_env = [
            (k[len(HEADER_ENV_PREFIX) :], v) for k, v in environ.items() if k.startswith(HEADER_ENV_PREFIX)
        ]
        try:
            self.headers = {
                key: expand(value, environ) for key, value in [*from_env, *options.headers] if key
            }
        except MissingVariable as exc:
            self.broken = f"missing ${{{exc.args[0]}}} for its headers"

    # -- to the client --

    def emit(self, message: Mapping[str, Any]) -> None:
        self._out(json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8") + b"\n")

    def fail(self, request_id: object, what: str) -> None:
        """Answer a waiting request with an error about the server (once; later answers are dropped)."""
        if self.pending.answer(request_id):
            error = {"code": REMOTE_FAILED, "message": explain(self.options.name, self.options.url, what)}
            self.emit({"jsonrpc": "2.0", "id": request_id, "error": error})

    def from_server(self, message: types.JSONRPCMessage) -> None:
        self.pending.heard()
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            if not self.pending.answer(message.id):
                return  # answered already (timed out or failed): the client must not see two answers
            if isinstance(message, types.JSONRPCResponse) and _key(message.id) == self._initialize_id:
                version = message.result.get("protocolVersion") if isinstance(message.result, dict) else None
                self._version = version if isinstance(version, str) else None
            if isinstance(message, types.JSONRPCError) and message.error.code == REMOTE_FAILED:
                text = explain(self.options.name, self.options.url, message.error.message)
                message = types.JSONRPCError(
                    jsonrpc="2.0", id=message.id, error=types.ErrorData(code=REMOTE_FAILED, message=text)
                )
        self._out(message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n")

    # -- from the client --

    async def from_client(self, line: bytes) -> None:
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            request_id = _request_id(line)
            if request_id is not None:
                self.emit(
                    {
                        "jsonrpc": "2.0",
                        "id": request_id,
                        "error": {"code": types.INVALID_REQUEST, "message": "not a valid JSON-RPC message"},
                    }
                )
            return
        if isinstance(message, types.JSONRPCRequest):
            self.pending.add(message.id)
            self._wake.set()
            if message.method == "initialize":
                self._initialize_id = _key(message.id)
                self._version = None
        if self.broken is not None or self._write is None:
            if isinstance(message, types.JSONRPCRequest):
                self.fail(message.id, self.broken or "not connected")
            return
        headers = {"mcp-protocol-version": self._version} if self._version else None
        try:
            await self._write.send(SessionMessage(message, metadata=ClientMessageMetadata(headers=headers)))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self.broken = "the connection to it was lost"
            if isinstance(message, types.JSONRPCRequest):
                self.fail(message.id, self.broken)

    def attach(self, write: Any) -> None:
        self._write = write

    def give_up(self, why: str) -> None:
        """Nothing can reach the server any more: answer what waits, and every later request, with `why`."""
        self._write = None
        self.broken = why
        for request_id, _ in list(self.pending.waiting.values()):
            self.fail(request_id, why)

    # -- the loops --

    async def watchdog(self) -> None:
        while True:
            deadline = self.pending.next_deadline()
            self._wake = anyio.Event()
            if deadline is None:
                await self._wake.wait()
                continue
            with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
                await self._wake.wait()
            for request_id in self.pending.overdue():
                self.pending.waiting[_key(request_id)] = (request_id, 0.0)  # so fail() answers it once
                self.fail(request_id, f"no answer within {self.options.timeout:g} s")
                if self._write is not None and self.broken is None:
                    cancel = types.JSONRPCNotification(
                        jsonrpc="2.0",
                        method="notifications/cancelled",
                        params={"requestId": request_id, "reason": "timed out in the bridge"},
                    )
                    with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                        await self._write.send(SessionMessage(cancel))

    async def reader(self, read: Any) -> None:
        async for item in read:
            if isinstance(item, Exception):
                continue  # the SDK's report of a message it could not parse: nothing to answer
            self.from_server(item.message)

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[tuple[Any, Any]]:
        from bouncer_shim.oauth import bridge_auth

        auth: httpx2.Auth | None = bridge_auth(self.options.name, self.options.url, self.environ)

        def client(
            headers: dict[str, str] | None = None,
            timeout: httpx2.Timeout | None = None,
            auth: httpx2.Auth | None = auth,
        ) -> httpx2.AsyncClient:
            return _Client(
                on_failure=self.fail,
                silence=self.options.timeout,
                headers={**self.headers, **(headers or {})},
                timeout=httpx2.Timeout(CONNECT_SECONDS, read=self.options.timeout),
                auth=auth,
            )

        if self.options.transport == "sse":
            async with sse_client(
                self.options.url,
                timeout=CONNECT_SECONDS,
                sse_read_timeout=self.options.timeout,
                httpx_client_factory=client,
            ) as (read, write):
                yield read, write
        else:
            async with (
                client() as http,
                streamable_http_client(self.options.url, http_client=http) as (read, write),
            ):
                yield read, write


async def _pump_stdin(send: Any) -> None:
    """Stdin's lines onto `send`, in a task of its own: a connection that fails mid-session must not
    take the client's side down with it (the bridge goes on answering every request with why)."""
    stdin = sys.stdin.buffer
    async with send:
        while True:
            line = await anyio.to_thread.run_sync(stdin.readline, abandon_on_cancel=True)
            if not line:
                return
            if line.strip():
                await send.send(line)


def _stdout_writer() -> Callable[[bytes], None]:
    stdout = sys.stdout.buffer

    def write(data: bytes) -> None:
        with contextlib.suppress(BrokenPipeError):
            stdout.write(data)
            stdout.flush()

    return write


async def serve(options: Options, environ: Mapping[str, str]) -> int:
    bridge = Bridge(options, environ, _stdout_writer())
    send, lines = anyio.create_memory_object_stream[bytes](0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_pump_stdin, send)
        tg.start_soon(bridge.watchdog)
        if bridge.broken is None:
            try:
                async with bridge.connect() as (read, write):
                    bridge.attach(write)
                    tg.start_soon(bridge.reader, read)
                    async for line in lines:
                        await bridge.from_client(line)
                # stdin closed: leaving the transport above ended the session (DELETE) first
                tg.cancel_scope.cancel()
                return 0
            except Exception as exc:
                bridge.give_up(_why(exc, options.timeout))
        async for line in lines:  # nothing reaches the server: every request is answered with why
            await bridge.from_client(line)
        tg.cancel_scope.cancel()
    return 0


def _why(exc: BaseException, timeout: float) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, httpx2.HTTPStatusError):
        return _status_failure(exc.response.status_code) or f"HTTP {exc.response.status_code}"
    if isinstance(exc, Exception):
        if type(exc).__name__ == "LoginNeeded":
            return f"login needed ({exc})"
        return _describe(exc, timeout)
    return "the connection to it failed"


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return anyio.run(serve, options, dict(os.environ))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
