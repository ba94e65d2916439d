"""OAuth for remote servers, as the MCP authorization specification has it: stored, refreshed, never
opened by the bridge.

Theory of operation
-------------------
The protocol is the `mcp` SDK's `OAuthClientProvider` (protected-resource and authorization-server
metadata discovery, dynamic client registration or a client-id metadata document, PKCE, the
``resource`` indicator, token refresh); this module gives it three things:

- **Storage** (`FileTokenStorage`): one JSON file per server name under the state directory,
  ``STATE/oauth/<name>.json``, mode 0600 in a 0700 directory, written to a temporary file and renamed
  (a crash leaves the old file or the new one). It records when the access token expires as a time,
  not a duration, so a bridge started tomorrow knows the token it loads is stale.
- **Refresh before expiry** (`_Provider`): the SDK forgets a stored token's expiry when it loads it;
  here it is restored, REFRESH_MARGIN_SECONDS early, so a token is refreshed before the server would
  refuse it and a person is not sent back to the browser while a refresh token still works.
- **The browser only from `bouncerctl auth login`**, and only on a URL it may open (`check_browser_url`:
  ``https:``, or ``http:`` to a loopback host), through `webbrowser`, which never involves a shell. A
  peer bridge that handed a discovered endpoint to a process spawn was a remote-code-execution hole
  (CVE-2025-6514). The bridge itself has no redirect handler: when the provider would need a person,
  the bridge's request fails with `LoginNeeded`, which the client sees as an error naming
  ``bouncerctl auth login NAME``.

The redirect goes to a loopback listener on 127.0.0.1 (`_Callback`, a port chosen free), which takes
one ``GET /callback?code=...&state=...`` and answers with a line a person can read.
"""

from __future__ import annotations

import ipaddress
import json
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Final
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from bouncerd.atomicfile import write_atomically
from bouncerd.paths import resolve

# A token is refreshed this long before it expires: a request in flight must not meet a token that
# expired on the way, and clocks differ by seconds.
REFRESH_MARGIN_SECONDS: Final = 60.0

# How long `bouncerctl auth login` waits for the browser to come back to the loopback callback.
LOGIN_TIMEOUT_SECONDS: Final = 300.0

CLIENT_NAME: Final = "Bouncer (bouncer-shim)"
CALLBACK_PATH: Final = "/callback"

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")


class LoginNeeded(Exception):
    """The server wants a person to log in (no usable tokens, or a refresh the server refused)."""


class UnsafeBrowserURL(Exception):
    """An authorization URL the browser must not be given."""


def token_path(name: str, environ: Mapping[str, str]) -> Path:
    safe = _SAFE_NAME.sub("_", name) or "_"
    return resolve(environ).state / "oauth" / f"{safe}.json"


def check_browser_url(url: str) -> str:
    """`url` if a browser may be sent there: https, or http to a loopback address. Else UnsafeBrowserURL."""
    if any(ord(c) < 0x21 or c == "\x7f" for c in url):
        raise UnsafeBrowserURL("the authorization URL holds spaces or control characters")
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return url
    if parts.scheme == "http" and parts.hostname:
        host = parts.hostname
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if loopback:
            return url
    raise UnsafeBrowserURL(f"refusing to open {parts.scheme or '(no scheme)'}: URL {url!r} (only https:)")


class FileTokenStorage:
    """The SDK's TokenStorage as one 0600 JSON file: tokens, when the access token expires, the client."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        write_atomically(self.path, json.dumps(data).encode("utf-8"))

    def expires_at(self) -> float | None:
        value = self._read().get("expires_at")
        return float(value) if isinstance(value, int | float) else None

    async def get_tokens(self) -> OAuthToken | None:
        data = self._read().get("tokens")
        return OAuthToken.model_validate(data) if isinstance(data, dict) else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        data = self._read()
        data["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        data["expires_at"] = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        self._write(data)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        data = self._read().get("client")
        return OAuthClientInformationFull.model_validate(data) if isinstance(data, dict) else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        data = self._read()
        data["client"] = client_info.model_dump(mode="json", exclude_none=True)
        self._write(data)


class _Provider(OAuthClientProvider):
    """The SDK's provider, with a stored token's expiry restored (REFRESH_MARGIN_SECONDS early)."""

    def __init__(self, storage: FileTokenStorage, **kwargs: Any) -> None:
        super().__init__(storage=storage, **kwargs)
        self._file = storage

    async def _initialize(self) -> None:
        await super()._initialize()
        expires_at = self._file.expires_at()
        if self.context.current_tokens is not None and expires_at is not None:
            self.context.token_expiry_time = expires_at - REFRESH_MARGIN_SECONDS


def _metadata(redirect_uri: str) -> OAuthClientMetadata:
    return OAuthClientMetadata.model_validate(
        {
            "client_name": CLIENT_NAME,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
    )


def bridge_auth(name: str, url: str, environ: Mapping[str, str]) -> _Provider | None:
    """The provider a bridge uses for `name`, or None when nobody has logged in to it."""
    path = token_path(name, environ)
    if not path.exists():
        return None
    storage = FileTokenStorage(path)

    async def no_browser(authorization_url: str) -> None:
        raise LoginNeeded("the server wants a new login")

    async def no_callback() -> AuthorizationCodeResult:
        raise LoginNeeded("the server wants a new login")

    # The redirect URI is the one registered at login; it is only used again by a new login.
    registered = "http://127.0.0.1/callback"
    return _Provider(
        storage, server_url=url, client_metadata=_metadata(registered),
        redirect_handler=no_browser, callback_handler=no_callback,
    )  # fmt: skip


class _Callback:
    """A loopback HTTP listener that takes one authorization redirect."""

    def __init__(self) -> None:
        self.result: AuthorizationCodeResult | None = None
        self.error: str | None = None
        self.done = anyio.Event()
        self.port = 0

    async def serve(self, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
        self.port = listener.extra(anyio.abc.SocketAttribute.local_port)  # noqa: S610 - anyio, not Django
        task_status.started()
        async with listener:
            await listener.serve(self._one)

    async def _one(self, stream: Any) -> None:
        async with stream:
            head = b""
            with anyio.move_on_after(10):
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    head += await stream.receive()
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            method, _, rest = line.partition(" ")
            target = rest.rpartition(" ")[0]
            parts = urlsplit(target)
            query = parse_qs(parts.query)
            if method != "GET" or parts.path != CALLBACK_PATH:
                await stream.send(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            if "code" in query:
                self.result = AuthorizationCodeResult(
                    code=query["code"][0],
                    state=query.get("state", [None])[0],
                    iss=query.get("iss", [None])[0],
                )
                text = "Bouncer: logged in. You can close this window."
            else:
                self.error = query.get("error_description", query.get("error", ["no code in the redirect"]))[
                    0
                ]
                text = f"Bouncer: the login failed: {self.error}"
            body = text.encode("utf-8")
            await stream.send(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
                + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            self.done.set()


async def login(
    name: str,
    url: str,
    environ: Mapping[str, str],
    *,
    open_url: Callable[[str], Awaitable[None]],
    wait_seconds: float = LOGIN_TIMEOUT_SECONDS,
) -> OAuthToken:
    """Log in to the server at `url` (a person in a browser) and store the tokens for `name`."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    storage = FileTokenStorage(token_path(name, environ))
    callback = _Callback()

    async def redirect(authorization_url: str) -> None:
        await open_url(check_browser_url(authorization_url))

    async def wait_for_code() -> AuthorizationCodeResult:
        with anyio.fail_after(wait_seconds):
            await callback.done.wait()
        if callback.result is None:
            raise LoginNeeded(f"the authorization server said: {callback.error}")
        return callback.result

    async with anyio.create_task_group() as tg:
        await tg.start(callback.serve)
        redirect_uri = f"http://127.0.0.1:{callback.port}{CALLBACK_PATH}"
        provider = _Provider(
            storage, server_url=url, client_metadata=_metadata(redirect_uri),
            redirect_handler=redirect, callback_handler=wait_for_code,
        )  # fmt: skip
        async with (
            httpx2.AsyncClient(auth=provider, timeout=httpx2.Timeout(30.0)) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
        ):
            await client.list_tools()  # any request: the first 401 starts the flow
        tg.cancel_scope.cancel()
    tokens = await storage.get_tokens()
    if tokens is None:
        raise LoginNeeded("the server accepted the connection without a login; nothing was stored")
    return tokens
