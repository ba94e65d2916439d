"""OAuth through the bridge: a login by a (scripted) browser, a refresh without a person, a clear
error when the grant is gone.

The server is tests/fixtures/servers/oauth_mail.py: the mail fixture's tools behind an authorization
server and a resource server on loopback, built with the SDK's server-side auth pieces (metadata
discovery, dynamic registration, PKCE, the resource indicator, rotating refresh tokens).

- Without a login the bridge does not hang or open anything: the client gets an error naming
  ``bouncerctl auth login NAME``.
- ``bouncerctl auth login NAME --no-browser`` prints the authorization URL; the test's "browser"
  follows it (the fixture approves at once and redirects to the loopback callback); the tokens land
  in a 0600 file under the state directory, and a call through the bridge then works, gated as ever.
- An access token past its expiry is refreshed by the bridge with no person involved (the stored
  expiry is moved into the past rather than waited for; the fixture counts the refresh).
- After the administrator revokes the grant, the refresh fails and the client gets the same clear
  error, not a hang and not a call without a verdict.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
import pytest
from harness import BIN, FIXTURE_SERVERS, audit_records, connect
from mcp.shared.exceptions import MCPError
from remotes import bridge_params, free_port, remote_server

if TYPE_CHECKING:
    from daemons import RunningDaemon

pytestmark = pytest.mark.e2e

TEST_TIMEOUT = 90
LOGIN_TIMEOUT = 60


def mcp_error(exc: BaseException) -> MCPError:
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    assert isinstance(exc, MCPError), repr(exc)
    return exc


async def handshake_error(params: Any) -> str:
    try:
        async with connect(params, "legacy", kind="shim"):
            pass
    except BaseException as exc:
        return str(mcp_error(exc))
    raise AssertionError("connected without a usable login")


def scripted_login(home: Path, url: str) -> subprocess.CompletedProcess[str]:
    """`bouncerctl auth login mail --no-browser`, with a 'browser' that follows the printed URL."""
    env = {**os.environ, "BOUNCER_HOME": str(home), "BOUNCER_NO_AUTOSTART": "1"}
    proc = subprocess.Popen(
        [str(BIN / "bouncerctl"), "auth", "login", "mail", "--url", url, "--no-browser"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    deadline = time.monotonic() + LOGIN_TIMEOUT
    printed = []
    for line in proc.stdout:
        printed.append(line)
        if line.startswith("open this URL to log in: "):
            authorization_url = line.split(": ", 1)[1].strip()
            assert authorization_url.startswith("http://127.0.0.1:")  # loopback http: allowed
            # The browser: follow the authorization endpoint's redirect to the loopback callback.
            answer = httpx2.get(authorization_url, follow_redirects=True, timeout=30)
            assert answer.status_code == 200 and "logged in" in answer.text, answer.text
            break
        assert time.monotonic() < deadline
    out, err = proc.communicate(timeout=LOGIN_TIMEOUT)
    return subprocess.CompletedProcess(proc.args, proc.returncode, "".join(printed) + out, err)


def stats(url: str) -> dict[str, int]:
    base = url.rsplit("/mcp", 1)[0]
    found: dict[str, int] = httpx2.get(f"{base}/fixture/stats", timeout=10).json()
    return found


def expire(token_file: Path) -> str:
    """Move the stored access token's expiry into the past; return the access token it held."""
    data = json.loads(token_file.read_text())
    data["expires_at"] = time.time() - 3600
    token_file.write_text(json.dumps(data))
    token: str = data["tokens"]["access_token"]
    return token


@pytest.mark.asyncio
async def test_login_refresh_and_revocation_through_the_bridge(daemon: RunningDaemon) -> None:
    port = free_port()
    argv = [sys.executable, str(FIXTURE_SERVERS / "oauth_mail.py"), "--port", str(port)]
    token_file = daemon.paths.state / "oauth" / "mail.json"
    with anyio.fail_after(TEST_TIMEOUT), remote_server(argv, port, "/mcp") as url:
        params = bridge_params("mail", url, daemon.home)

        # No login yet: a clear error naming the command, at once.
        text = await handshake_error(params)
        assert "'mail'" in text and "bouncerctl auth login mail" in text, text
        assert not token_file.exists()

        done = await anyio.to_thread.run_sync(scripted_login, daemon.home, url)
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert "logged in to mail" in done.stdout
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600

        async with connect(params, "legacy", kind="shim") as probe:
            inbox = await probe.client.call_tool("read_inbox", {})
        assert inbox.is_error is not True and "attacker@evil.example" in inbox.content[0].text  # type: ignore[union-attr]
        assert [r["verdict"] for r in audit_records(daemon.home) if r.get("tool") == "read_inbox"] == [
            "allow"
        ]
        assert stats(url)["refreshes"] == 0

        # Expired: refreshed by the bridge, without a person.
        old = expire(token_file)
        async with connect(params, "legacy", kind="shim") as probe:
            again = await probe.client.call_tool("read_inbox", {})
        assert again.is_error is not True
        assert stats(url)["refreshes"] == 1 and stats(url)["codes"] == 1  # no second login
        assert json.loads(token_file.read_text())["tokens"]["access_token"] != old

        # Revoked: the refresh fails; the client is told what to run, and nothing hangs.
        httpx2.post(url.rsplit("/mcp", 1)[0] + "/fixture/revoke-all", timeout=10)
        expire(token_file)
        text = await handshake_error(params)
        assert "'mail'" in text and "bouncerctl auth login mail" in text, text


def test_browser_is_never_sent_to_a_url_that_is_not_https_or_loopback() -> None:
    # CVE-2025-6514: a bridge handed a discovered authorization endpoint to a process spawn. Here the
    # URL must be https (or http to loopback) and is opened with no shell in between.
    from bouncer_shim.oauth import UnsafeBrowserURL, check_browser_url

    assert check_browser_url("https://auth.example/authorize?x=1")
    assert check_browser_url("http://127.0.0.1:8080/authorize")
    assert check_browser_url("http://[::1]:8080/authorize")
    for bad in (
        "file:///etc/passwd",
        "http://auth.example/authorize",
        "javascript:alert(1)",
        "https://auth.example/a b",
        "https://auth.example/$(touch /tmp/pwned)\n",
        "c:\\windows\\system32\\calc.exe",
        "",
    ):
        with pytest.raises(UnsafeBrowserURL):
            check_browser_url(bad)
