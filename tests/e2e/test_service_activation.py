"""The service as systemd would run it: the units pass `systemd-analyze verify`, and a socket-activated
bouncerd serves the shim of a config that `bouncerctl init` wrapped, without the shim starting one.

Theory of operation
-------------------
No user manager runs in a container, so activation is done by ``systemd-socket-activate``, which
listens on the path the installed socket unit would (its ListenStream= with %t = XDG_RUNTIME_DIR)
and starts ``bouncerd --foreground`` at the first connection with the socket on fd 3, as systemd
does. BOUNCER_HOME is unset and the XDG runtime, state and config directories are temp directories,
so everything resolves through platformdirs exactly as it would for a person. A shim that had
started a daemon of its own would have written that daemon's output to ``paths.daemon_log``; the
activated daemon logs to stderr, so no such file must appear.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bouncerctl import mcpconfig as mc
from bouncerctl import service
from bouncerctl.app import main
from click.testing import CliRunner

from bouncerd.client import Client
from bouncerd.errors import DaemonUnavailableError
from bouncerd.paths import resolve

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent
SOCKET_ACTIVATE = shutil.which("systemd-socket-activate")
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
WAIT_SECONDS = 15.0  # a bound for things that take milliseconds; never an expectation
UPSTREAM = [sys.executable, "-c", "import sys; sys.stdin.read()"]  # a server that waits for its client


@pytest.fixture
def xdg(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Short temp XDG directories (AF_UNIX paths must stay under 108 bytes), in os.environ too."""
    base = Path(tempfile.mkdtemp(prefix="b", dir="/tmp"))
    env = {
        "HOME": str(base / "h"),
        "XDG_RUNTIME_DIR": str(base / "r"),
        "XDG_STATE_HOME": str(base / "s"),
        "XDG_CONFIG_HOME": str(base / "c"),
    }
    for value in env.values():
        os.mkdir(value, 0o700)
    for name, value in env.items():
        monkeypatch.setenv(name, value)  # platformdirs reads os.environ
    for name in ("BOUNCER_HOME", "BOUNCER_SESSION", "BOUNCER_NO_AUTOSTART", "LISTEN_PID", "LISTEN_FDS"):
        monkeypatch.delenv(name, raising=False)
    try:
        yield env
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _rendered_units(directory: Path, environ: dict[str, str]) -> list[Path]:
    files = service.render_systemd(service.template_dir(), str(BIN / "bouncerd"), environ)
    paths = []
    for name, text in files.items():
        (directory / name).write_text(text)
        paths.append(directory / name)
    return paths


@pytest.mark.skipif(
    SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (apt-get install systemd)"
)
def test_rendered_units_pass_systemd_analyze_verify(xdg: dict[str, str]) -> None:
    unit_dir = Path(xdg["HOME"]) / "units"
    unit_dir.mkdir()
    paths = _rendered_units(unit_dir, xdg)
    env = {**os.environ, **xdg}
    done = subprocess.run(
        [str(SYSTEMD_ANALYZE), "verify", "--user", "--man=no", *map(str, paths)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # Unknown keys and bad values are only warnings on stderr: a clean verify says nothing at all.
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


@pytest.mark.skipif(
    SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed (apt-get install systemd)"
)
def test_verify_would_catch_a_broken_unit(xdg: dict[str, str]) -> None:
    unit_dir = Path(xdg["HOME"]) / "units"
    unit_dir.mkdir()
    socket_unit, service_unit = _rendered_units(unit_dir, xdg)
    service_unit.write_text(service_unit.read_text().replace("UMask=0077", "UMask=0077\nProtectSystm=yes"))
    done = subprocess.run(
        [str(SYSTEMD_ANALYZE), "verify", "--user", "--man=no", str(socket_unit), str(service_unit)],
        env={**os.environ, **xdg},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Unknown key 'ProtectSystm'" in done.stderr


def _wait_for_shim(paths: Any, server: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        with Client.connect(paths, role="ctl") as client:
            reply = client.request("status")
        for session in reply.get("sessions", []):
            for entry in session.get("servers", []):
                if entry.get("name") == server and entry.get("connected"):
                    return reply
        assert time.monotonic() < deadline, f"the shim never reached the daemon: {reply}"
        time.sleep(0.05)


@pytest.mark.skipif(SOCKET_ACTIVATE is None, reason="systemd-socket-activate is not installed")
def test_shim_of_an_init_wrapped_config_uses_the_socket_activated_daemon(xdg: dict[str, str]) -> None:
    paths = resolve(os.environ)
    unit = service.render_systemd(service.template_dir(), str(BIN / "bouncerd"), xdg)[service.SOCKET_UNIT]
    listen = service.listen_path(unit, xdg["XDG_RUNTIME_DIR"])
    assert listen == str(paths.socket)
    os.mkdir(paths.runtime, 0o700)  # what DirectoryMode=0700 makes systemd do

    # A client config wrapped by `bouncerctl init`, started the way the client would start it.
    config = Path(xdg["HOME"]) / "mcp.json"
    config.write_text(
        json.dumps({"mcpServers": {"notes": {"command": UPSTREAM[0], "args": UPSTREAM[1:]}}}) + "\n"
    )
    result = CliRunner().invoke(
        main, ["init", "--yes", "--config", str(config), "--shim", str(BIN / "bouncer-shim")]
    )
    assert result.exit_code == 0, result.output
    entry = mc.parse(config.read_text()).value["mcpServers"]["notes"]
    argv = [entry["command"], *entry["args"]]
    assert argv == [str(BIN / "bouncer-shim"), "--name", "notes", "--", *UPSTREAM]

    # systemd-socket-activate passes only the variables named with -E, like a unit's environment.
    passed = [f"-E{name}={value}" for name, value in xdg.items()] + [f"-EPATH={os.environ.get('PATH', '')}"]
    with (Path(xdg["HOME"]) / "daemon.stderr").open("wb") as stderr:
        activator = subprocess.Popen(
            [str(SOCKET_ACTIVATE), "-l", listen, *passed, str(BIN / "bouncerd"), "--foreground"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    shim = None
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while not paths.socket.exists():
            assert activator.poll() is None, "systemd-socket-activate exited"
            assert time.monotonic() < deadline, "systemd-socket-activate never listened"
            time.sleep(0.02)
        with Client.connect(paths) as client:  # the ctl connection is the first: it starts the daemon
            client.request("ping")
            daemon_pid = client.hello_reply["daemon_pid"]
        assert daemon_pid == activator.pid  # systemd-socket-activate execs the daemon in its own process

        shim = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            env={**os.environ, "BOUNCER_SESSION": "svc-test"},
        )
        reply = _wait_for_shim(paths, "notes")
        assert reply["daemon"]["pid"] == daemon_pid
        assert reply["daemon"]["socket"] == listen
        assert not paths.daemon_log.exists(), "the shim started a daemon of its own"
        log = (Path(xdg["HOME"]) / "daemon.stderr").read_text()
        assert "using the socket passed by the service manager" in log
    finally:
        if shim is not None:
            assert shim.stdin is not None
            shim.stdin.close()
            try:
                shim.wait(WAIT_SECONDS)
            except subprocess.TimeoutExpired:
                shim.kill()
                shim.wait()
        activator.terminate()
        try:
            activator.wait(WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            activator.kill()
            activator.wait()
    with pytest.raises(DaemonUnavailableError):
        Client.connect(paths, timeout=1.0)
