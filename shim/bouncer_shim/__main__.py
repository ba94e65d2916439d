"""``bouncer-shim [--name NAME] [--policy FILE] -- COMMAND [ARG...]`` or ``--url URL``: arguments, wiring.

Theory of operation
-------------------
Start-up time is part of the product: an MCP client starts every configured server at once and waits
for each. So the shim starts the upstream *first*, before it imports anything beyond the standard
library's process support, and the upstream boots while the shim loads msgpack and connects to
bouncerd. Arguments are parsed by hand (argparse would cost more than the rest of start-up) and
nothing here imports the `mcp` SDK or pydantic. After that the work is `Pump.run`.

A remote server (``--url URL``) is relayed the same way: its upstream child is the bridge
(``python -m bouncer_shim.bridge``), which speaks stdio to the relay and HTTP to the server, so every
verdict, observation and pin applies unchanged and only bridge mode pays for importing the SDK. The
server's identity in hello (its pins, its policy packs) is the URL without its query or fragment,
which may carry a key; the headers are never part of it.

Exit status: the upstream's (128 + N if signal N ended it); 2 for a usage error or a hello that
bouncerd refused (a bad ``--policy``, say); 126/127 if COMMAND cannot be started. Diagnostics go to
stderr with a ``bouncer-shim:`` prefix; stdout carries the relay and nothing else.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs milliseconds at import; the upstream's spawn must not wait for it
    from collections.abc import Sequence
    from typing import NoReturn

USAGE = """\
usage: bouncer-shim [--name NAME] [--policy FILE] -- COMMAND [ARG...]
       bouncer-shim --name NAME --url URL [--transport streamable-http|sse] [--header NAME=VALUE]...

Runs COMMAND (an MCP server speaking JSON-RPC on stdio), or bridges to the remote MCP server at URL,
and relays between it and the MCP client on this process's stdin/stdout, asking bouncerd for a
verdict on every tools/call.

options:
  --name NAME          the server's name in policy and audit (default: the basename of COMMAND)
  --policy FILE        a policy file for bouncerd to validate and use for this server
  --url URL            a remote server (http: or https:) instead of COMMAND; needs --name
  --transport T        streamable-http (the default) or sse (the legacy HTTP+SSE transport)
  --header NAME=VALUE  an HTTP header for the remote server; ${VAR} in VALUE is read from the
                       environment, so a secret need not be written into the client's config
  --timeout SECONDS    answer a remote request with an error after this long without a word
  -h, --help           show this help and exit

environment:
  BOUNCER_HOME          put bouncerd's socket, state and config under this directory
  BOUNCER_SESSION       the session key (default: the client's pid and start time)
  BOUNCER_NO_AUTOSTART  set to 1 to never start bouncerd from the shim
"""

EXIT_USAGE = 2


class _Args:
    def __init__(self, name: str, policy: str | None, command: list[str], identity: list[str]) -> None:
        self.name = name
        self.policy = policy
        self.command = command
        self.identity = identity  # the upstream as hello names it


# Options that only a remote server takes, each passed on to the bridge.
_BRIDGE_OPTIONS = ("--transport", "--header", "--timeout")


def _usage_error(message: str) -> NoReturn:
    sys.stderr.write(f"bouncer-shim: {message}\n{USAGE.splitlines()[0]}\n")
    raise SystemExit(EXIT_USAGE)


def parse_args(argv: Sequence[str]) -> _Args:
    name: str | None = None
    policy: str | None = None
    url: str | None = None
    bridge: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg in ("-h", "--help"):
            sys.stdout.write(USAGE)  # asked for explicitly; no relay is running
            raise SystemExit(0)
        option, eq, value = arg.partition("=")
        if option in ("--name", "--policy", "--url", *_BRIDGE_OPTIONS):
            if not eq:
                if i + 1 >= len(argv):
                    _usage_error(f"{option} needs a value")
                value = argv[i + 1]
                i += 1
            if not value:
                _usage_error(f"{option} must not be empty")
            if option == "--name":
                name = value
            elif option == "--policy":
                policy = os.path.abspath(os.path.expanduser(value))
            elif option == "--url":
                url = value
            else:
                bridge += [option, value]
            i += 1
            continue
        if arg.startswith("-"):
            _usage_error(f"unknown option {arg!r} (put the server command after --)")
        break
    command = list(argv[i:])
    if url is not None:
        if command:
            _usage_error("give either --url or a server command, not both")
        if name is None:
            _usage_error("--url needs --name (the server's name in policy and audit)")
        if not url.startswith(("http://", "https://")):
            _usage_error(f"--url {url!r}: only http: and https: URLs")
        assert name is not None
        bridged = [sys.executable, "-m", "bouncer_shim.bridge", "--name", name, "--url", url, *bridge]
        return _Args(name, policy, bridged, [url.partition("#")[0].partition("?")[0]])
    if bridge:
        _usage_error(f"{bridge[0]} needs --url")
    if not command:
        _usage_error("no server command given")
    return _Args(name or os.path.basename(command[0]) or command[0], policy, command, command)


def run(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    from bouncer_shim.proc import SpawnError, Upstream

    try:
        upstream = Upstream(args.command)  # first: it boots while we finish loading
    except SpawnError as exc:
        sys.stderr.write(f"bouncer-shim: {exc}\n")
        return exc.status

    import time

    from bouncer_shim.link import DaemonLink
    from bouncer_shim.pump import Pump
    from bouncer_shim.relay import Relay
    from bouncer_shim.session import hello_fields

    environ = os.environ
    hello = hello_fields(environ=environ, server=args.name, upstream=args.identity, policy_path=args.policy)
    link = DaemonLink(environ, now=time.monotonic())
    return Pump(Relay(hello), upstream, link).run()


def main() -> NoReturn:
    raise SystemExit(run(sys.argv[1:]))


if __name__ == "__main__":
    main()
