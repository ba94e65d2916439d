"""``bouncerctl auth login|status|logout NAME``: OAuth tokens for a remote server behind the bridge.

Theory of operation
-------------------
A remote server that wants OAuth is logged in to once, here, by a person: ``auth login NAME`` finds
the server's URL (``--url``, else the ``--url`` of the wrapped entry named NAME in a client config
`bouncerctl init` knows), runs the MCP authorization flow with the SDK's provider
(`bouncer_shim.oauth.login`: metadata discovery, registration, PKCE, the resource indicator, a
loopback redirect on 127.0.0.1) and stores the tokens in ``STATE/oauth/NAME.json`` (0600). The
bridge then uses and refreshes them; it never opens a browser itself. The browser is opened only on
an ``https:`` URL (or ``http:`` to loopback), through `webbrowser`, never a shell; with
``--no-browser`` the URL is printed instead, for a person to open (or a test to follow).

``auth status [NAME]`` says which servers have tokens and when the access token expires (the
refresh token renews it without a person); ``auth logout NAME`` deletes the file.

Exit status: 0 done; 1 the login failed or there is nothing to log out of; 2 usage.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import click

from bouncerctl import term


class AuthFailed(click.ClickException):
    exit_code = 1


def _url_for(name: str) -> str | None:
    """The --url of the wrapped entry called `name` in any client config init knows."""
    from bouncerctl import init_cmd, init_plan
    from bouncerctl import mcpconfig as mc
    from bouncerctl.init_files import InitError

    for location in init_cmd.locations(os.environ, Path.cwd()):
        if not location.path.exists():
            continue
        try:
            plan = init_plan.read_config(location, os.environ)
        except (InitError, mc.McpConfigError, ValueError):
            continue
        for entry in plan.entries:
            value = plan.entry_value(entry)
            args = value.get("args") if isinstance(value, dict) else None
            if entry.name == name and isinstance(args, list) and "--url" in args[:-1]:
                url = args[args.index("--url") + 1]
                return url if isinstance(url, str) else None
    return None


@click.group()
def auth() -> None:
    """Log in to remote MCP servers that want OAuth; show or delete the stored tokens."""


@auth.command()
@click.argument("name")
@click.option("--url", help="The server's URL (default: from the wrapped client config entry NAME).")
@click.option("--no-browser", is_flag=True, help="Print the authorization URL instead of opening a browser.")
def login(name: str, url: str | None, no_browser: bool) -> None:
    """Log in to the remote server NAME and store its tokens for the bridge."""
    import anyio
    from bouncer_shim import oauth

    url = url or _url_for(name)
    if not url:
        raise AuthFailed(f"no URL for {name!r}: pass --url, or run `bouncerctl init` to wrap its entry first")

    async def open_url(authorization_url: str) -> None:
        if no_browser:
            click.echo(f"open this URL to log in: {authorization_url}")
            sys.stdout.flush()
            return
        import webbrowser  # runs the browser as a program with the URL as one argument, never a shell

        click.echo(f"opening the browser to log in (if it does not open: {authorization_url})")
        if not webbrowser.open(authorization_url):
            click.echo("could not start a browser: open the URL above yourself")

    try:
        tokens = anyio.run(lambda: oauth.login(name, url, os.environ, open_url=open_url))
    except oauth.UnsafeBrowserURL as exc:
        raise AuthFailed(str(exc)) from None
    except Exception as exc:
        raise AuthFailed(f"the login to {name} ({url}) failed: {exc}") from None
    path = oauth.token_path(name, os.environ)
    scope = f" (scope {tokens.scope})" if tokens.scope else ""
    click.echo(f"logged in to {name}{scope}; tokens in {path}")


@auth.command()
@click.argument("name", required=False)
def status(name: str | None) -> None:
    """Which remote servers have stored tokens, and when each access token expires."""
    from bouncer_shim import oauth

    folder = oauth.token_path("x", os.environ).parent
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if name is not None:
        files = [f for f in files if f == oauth.token_path(name, os.environ)]
    if not files:
        click.echo(f"no stored tokens{' for ' + name if name else ''}")
        return
    rows = []
    for path in files:
        storage = oauth.FileTokenStorage(path)
        expires = storage.expires_at()
        data = storage._read()
        tokens = data.get("tokens") or {}
        if expires is None:
            when = "no expiry given"
        elif expires > time.time():
            when = f"access token valid for {int(expires - time.time())} s"
        else:
            when = "access token expired"
        renew = "renewed without a login" if tokens.get("refresh_token") else "a new login when it expires"
        rows.append([path.stem, f"{when}; {renew}"])
    for line in term.table(rows, term.columns()):
        click.echo(line)


@auth.command()
@click.argument("name")
def logout(name: str) -> None:
    """Delete the stored tokens of NAME (the bridge then asks for `auth login` again)."""
    from bouncer_shim import oauth

    path = oauth.token_path(name, os.environ)
    try:
        path.unlink()
    except FileNotFoundError:
        raise AuthFailed(f"no stored tokens for {name}") from None
    click.echo(f"deleted {path}")
