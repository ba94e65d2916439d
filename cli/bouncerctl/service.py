"""``bouncerctl service install|uninstall|status``: bouncerd as a systemd user service or launchd agent.

Theory of operation
-------------------
The unit files are templates in ``packaging/`` (shipped inside the package as
``bouncerctl/packaging``, found in the source tree otherwise, see `template_dir`). Installing fills
in the absolute path of the bouncerd installed with this bouncerctl (a service manager does not
search the shell's PATH) and writes them atomically:

- **systemd** (Linux and everything that is not macOS): ``bouncerd.socket`` and ``bouncerd.service``
  go to ``$XDG_CONFIG_HOME/systemd/user`` (default ``~/.config/systemd/user``); then
  ``systemctl --user daemon-reload`` and ``systemctl --user enable --now bouncerd.socket``. systemd
  listens on ``%t/bouncer/bouncerd.sock`` -- the same path bouncerd and bouncer-shim compute, since
  ``%t`` is ``$XDG_RUNTIME_DIR`` and platformdirs' runtime dir is ``$XDG_RUNTIME_DIR/bouncer`` -- and
  starts the daemon at the first connection; a shim then connects instead of starting a daemon of
  its own. ``XDG_CONFIG_HOME``/``XDG_STATE_HOME`` set in the installing shell are written into the
  service, so the daemon reads the policy the person edits.
- **launchd** (macOS): ``io.bouncer.bouncerd.plist`` goes to ``~/Library/LaunchAgents`` and is
  loaded with ``launchctl bootstrap gui/UID``. launchd hands sockets over differently, so the agent
  simply runs the daemon from login on (RunAtLoad, restarted after a crash).

A daemon that was already running outside the service (started by a shim) would hold the instance
lock and keep the service's daemon from starting; once the service is enabled, install stops it with
SIGTERM (it loses nothing: its state is journalled) and connected shims reconnect to the service.

When systemctl or launchctl is missing or fails (a container without a user manager), the files
stay written and the command says so, prints the command to run, and exits 1. ``--dry-run`` prints
the files and commands and touches nothing.

Exit status: 0 done (``status``: installed), 1 a step failed, 3 (``status``) not installed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape as xml_escape

import click

from bouncerctl import term
from bouncerd.atomicfile import write_atomically
from bouncerd.client import Client
from bouncerd.errors import BouncerError
from bouncerd.paths import ensure_private_dir, resolve

EXIT_FAILED = 1
EXIT_NOT_INSTALLED = 3

SOCKET_UNIT = "bouncerd.socket"
SERVICE_UNIT = "bouncerd.service"
LAUNCHD_LABEL = "io.bouncer.bouncerd"
LAUNCHD_PLIST = f"{LAUNCHD_LABEL}.plist"
BOUNCERD_PLACEHOLDER = "@BOUNCERD@"
LOG_PLACEHOLDER = "@LOG@"

# Settings from the installing shell that the service must share with bouncerctl, so both find the same
# policy and state. XDG_RUNTIME_DIR is not among them: the user manager sets it, and it names %t.
SHARED_VARIABLES = ("XDG_CONFIG_HOME", "XDG_STATE_HOME")

# systemctl and launchctl answer in well under a second; the bound only stops a hung bus from
# hanging the command.
COMMAND_TIMEOUT_SECONDS = 30.0

# What systemctl/launchctl say when there is no manager to talk to (a container, a `su` shell).
UNREACHABLE_SIGNS = (
    "Failed to connect to bus",
    "System has not been booted with systemd",
    "Could not find domain",
)

# A probe of a running daemon: a live one answers a ping in microseconds.
PROBE_TIMEOUT_SECONDS = 1.0


class ServiceError(click.ClickException):
    exit_code = EXIT_FAILED


@dataclass(frozen=True)
class Outcome:
    returncode: int
    output: str


def run_command(argv: Sequence[str]) -> Outcome:
    """Run a service-manager command; a missing program or a timeout is an Outcome too, never raised."""
    try:
        done = subprocess.run(  # noqa: S603 - a fixed argv of systemctl/launchctl, no shell
            list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_SECONDS, check=False
        )
    except FileNotFoundError:
        return Outcome(127, f"{argv[0]}: command not found")
    except subprocess.TimeoutExpired:
        return Outcome(124, f"{argv[0]} did not answer within {COMMAND_TIMEOUT_SECONDS:g}s")
    except OSError as exc:
        return Outcome(126, f"{argv[0]}: {exc.strerror or exc}")
    return Outcome(done.returncode, (done.stdout + done.stderr).strip())


# ---- templates and rendering ---------------------------------------------------------------------------


def template_dir() -> Path:
    """``packaging/``: inside the installed package, else in the source tree this module runs from."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "packaging", here.parents[1] / "packaging"):
        if (candidate / "systemd" / SOCKET_UNIT).is_file():
            return candidate
    raise ServiceError(f"cannot find the service templates (packaging/) near {here}; reinstall bouncer")


def find_bouncerd(environ: Mapping[str, str]) -> str:
    """The absolute path of bouncerd: the one installed with this bouncerctl, else the PATH's."""
    beside = Path(sys.executable).parent / "bouncerd"
    if os.access(beside, os.X_OK):
        return os.path.abspath(beside)
    found = shutil.which("bouncerd", path=environ.get("PATH"))
    if found:
        return os.path.abspath(found)
    raise ServiceError(f"cannot find bouncerd next to {sys.executable} or on PATH")


def systemd_quote(word: str) -> str:
    """`word` as one systemd argument or assignment: specifiers escaped, quoted if it needs to be."""
    word = word.replace("%", "%%")
    if any(c.isspace() or c in "\"'\\;" for c in word):
        return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return word


def render_systemd(templates: Path, bouncerd: str, environ: Mapping[str, str]) -> dict[str, str]:
    socket_unit = (templates / "systemd" / SOCKET_UNIT).read_text(encoding="utf-8")
    service_unit = (templates / "systemd" / SERVICE_UNIT).read_text(encoding="utf-8")
    # ExecStart= also expands $VARIABLES, which Environment= does not.
    service_unit = service_unit.replace(BOUNCERD_PLACEHOLDER, systemd_quote(bouncerd).replace("$", "$$"))
    shared = [
        f"Environment={systemd_quote(f'{name}={environ[name]}')}\n"
        for name in SHARED_VARIABLES
        if os.path.isabs(environ.get(name, ""))
    ]
    if shared:
        head, marker, tail = service_unit.partition("[Service]\n")
        service_unit = head + marker + "".join(shared) + tail
    return {SOCKET_UNIT: socket_unit, SERVICE_UNIT: service_unit}


def render_launchd(templates: Path, bouncerd: str, log: Path) -> dict[str, str]:
    text = (templates / "launchd" / LAUNCHD_PLIST).read_text(encoding="utf-8")
    text = text.replace(BOUNCERD_PLACEHOLDER, xml_escape(bouncerd)).replace(
        LOG_PLACEHOLDER, xml_escape(str(log))
    )
    return {LAUNCHD_PLIST: text}


def listen_path(socket_unit: str, runtime_dir: str) -> str:
    """The path in the unit's ListenStream=, with %t (the user manager's runtime directory) filled in."""
    for line in socket_unit.splitlines():
        key, eq, value = line.strip().partition("=")
        if eq and key.strip() == "ListenStream":
            return value.strip().replace("%t", runtime_dir.rstrip("/")).replace("%%", "%")
    raise ServiceError("the socket unit has no ListenStream=")


def _home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or Path.home())


def systemd_unit_dir(environ: Mapping[str, str]) -> Path:
    xdg = environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else _home(environ) / ".config"
    return base / "systemd" / "user"


def launchd_agent_dir(environ: Mapping[str, str]) -> Path:
    return _home(environ) / "Library" / "LaunchAgents"


# ---- the two managers ----------------------------------------------------------------------------------


@dataclass
class Manager:
    name: str
    directory: Path
    files: dict[str, str]
    install_commands: list[list[str]]
    uninstall_commands: list[list[str]]
    reload_commands: list[list[str]]  # after files were removed

    def paths(self) -> list[Path]:
        return [self.directory / name for name in self.files]


def systemd_manager(environ: Mapping[str, str], bouncerd: str) -> Manager:
    ctl = ["systemctl", "--user"]
    return Manager(
        name="systemd",
        directory=systemd_unit_dir(environ),
        files=render_systemd(template_dir(), bouncerd, environ),
        install_commands=[[*ctl, "daemon-reload"], [*ctl, "enable", "--now", SOCKET_UNIT]],
        uninstall_commands=[[*ctl, "disable", "--now", SOCKET_UNIT, SERVICE_UNIT]],
        reload_commands=[[*ctl, "daemon-reload"]],
    )


def launchd_manager(environ: Mapping[str, str], bouncerd: str) -> Manager:
    directory = launchd_agent_dir(environ)
    log = resolve(environ).daemon_log
    domain = f"gui/{os.getuid()}"
    return Manager(
        name="launchd",
        directory=directory,
        files=render_launchd(template_dir(), bouncerd, log),
        install_commands=[["launchctl", "bootstrap", domain, str(directory / LAUNCHD_PLIST)]],
        uninstall_commands=[["launchctl", "bootout", f"{domain}/{LAUNCHD_LABEL}"]],
        reload_commands=[],
    )


def choose(manager: str, environ: Mapping[str, str]) -> Manager:
    if manager == "auto":
        manager = "launchd" if sys.platform == "darwin" else "systemd"
    bouncerd = find_bouncerd(environ)
    return launchd_manager(environ, bouncerd) if manager == "launchd" else systemd_manager(environ, bouncerd)


def shell_line(commands: Sequence[Sequence[str]]) -> str:
    return " && ".join(" ".join(command) for command in commands)


# ---- helpers with effects ------------------------------------------------------------------------------


def write_file(path: Path, text: str) -> bool:
    """Write `text` to `path` atomically (0644); False if it already held exactly that."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return False
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, text.encode("utf-8"), mode=0o644)
    return True


def running_daemon(environ: Mapping[str, str]) -> int | None:
    """The pid of the daemon answering on this environment's socket, or None."""
    try:
        with Client.connect(resolve(environ), timeout=PROBE_TIMEOUT_SECONDS) as client:
            client.request("ping")
            pid = client.hello_reply.get("daemon_pid")
    except BouncerError:
        return None
    return pid if isinstance(pid, int) and pid > 1 else None


def _is_ours(pid: int) -> bool:
    """Is `pid` a live process of this user (so a signal cannot reach anyone else's, even as root)?"""
    proc = Path(f"/proc/{pid}")
    if proc.is_dir():
        try:
            return proc.stat().st_uid == os.getuid()
        except OSError:
            return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return os.getuid() != 0


def terminate(pid: int) -> bool:
    """SIGTERM `pid` (a daemon shuts down cleanly on it and loses nothing); False if it is already gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return False
    return True


def systemd_main_pid(runner: Callable[[Sequence[str]], Outcome]) -> int | None:
    done = runner(["systemctl", "--user", "show", "--property=MainPID", "--value", SERVICE_UNIT])
    text = done.output.strip()
    return int(text) if done.returncode == 0 and text.isdigit() and int(text) > 0 else None


# ---- the commands --------------------------------------------------------------------------------------

manager_option = click.option(
    "--manager",
    type=click.Choice(["auto", "systemd", "launchd"]),
    default="auto",
    show_default=True,
    help="Service manager (auto: launchd on macOS, systemd elsewhere).",
)


@click.group()
def service() -> None:
    """Run bouncerd as a per-user service (systemd user units, or a launchd agent on macOS)."""


@service.command()
@manager_option
@click.option("--dry-run", is_flag=True, help="Print the files and commands; change nothing.")
def install(manager: str, dry_run: bool) -> None:
    """Install and start the service; shims then connect to it instead of starting a daemon."""
    environ = os.environ
    chosen = choose(manager, environ)
    if environ.get("BOUNCER_HOME"):
        term.say(
            "warning: BOUNCER_HOME is set in this shell; the service uses the standard directories, and "
            "shims started with BOUNCER_HOME will not find it.",
            err=True,
        )
    if dry_run:
        for path in chosen.paths():
            term.say(f"would write {path}:\n")
            click.echo(chosen.files[path.name])
        term.say(f"would run: {shell_line(chosen.install_commands)}")
        return
    before = running_daemon(environ)
    if chosen.name == "launchd":
        ensure_private_dir(resolve(environ).state)  # launchd opens the log there and does not create it
    changed = False
    for path in chosen.paths():
        wrote = write_file(path, chosen.files[path.name])
        changed = changed or wrote
        term.say(f"{'wrote' if wrote else 'unchanged'} {path}")
    commands = list(chosen.install_commands)
    if chosen.name == "systemd" and changed:
        commands.append(
            ["systemctl", "--user", "try-restart", SERVICE_UNIT]
        )  # a running one gets the new unit
    if chosen.name == "launchd":
        run_command(chosen.uninstall_commands[0])  # a loaded agent must be booted out before bootstrap
    for command in commands:
        done = run_command(command)
        if done.returncode != 0:
            raise ServiceError(
                f"{_failure(command, done)}\n"
                f"The files are in place. Where a {chosen.name} user session runs, start the service with:\n"
                f"  {shell_line(chosen.install_commands)}\n"
                f"Until then bouncer-shim starts bouncerd itself when it needs it."
            )
        term.say(f"ran {' '.join(command)}")
    if before is not None:
        managed = systemd_main_pid(run_command) if chosen.name == "systemd" else None
        if before != managed and _is_ours(before) and terminate(before):
            term.say(
                f"stopped the bouncerd (pid {before}) running outside the service; the service takes over"
            )
    if chosen.name == "systemd":
        term.say(f"installed: bouncerd starts at the first connection to {resolve(environ).socket}")
    else:
        term.say(f"installed: bouncerd runs from login on; its log is {resolve(environ).daemon_log}")


def _unreachable(done: Outcome) -> bool:
    """Did the command fail because there is no service manager to talk to (rather than refuse)?"""
    return done.returncode in (124, 126, 127) or any(sign in done.output for sign in UNREACHABLE_SIGNS)


def _failure(command: Sequence[str], done: Outcome) -> str:
    said = "\n  ".join(done.output.splitlines()) or f"exit status {done.returncode}"
    if _unreachable(done):
        return f"cannot reach the service manager: `{' '.join(command)}` says:\n  {said}"
    return f"`{' '.join(command)}` failed:\n  {said}"


@service.command()
@manager_option
@click.option("--dry-run", is_flag=True, help="Print what would be removed; change nothing.")
def uninstall(manager: str, dry_run: bool) -> None:
    """Stop and remove the service (shims go back to starting a daemon themselves)."""
    chosen = choose(manager, os.environ)
    present = [path for path in chosen.paths() if path.exists()]
    if not present:
        term.say(f"not installed (no {', '.join(str(p) for p in chosen.paths())})")
        return
    if dry_run:
        term.say(f"would run: {shell_line(chosen.uninstall_commands)}")
        for path in present:
            term.say(f"would remove {path}")
        if chosen.reload_commands:
            term.say(f"would run: {shell_line(chosen.reload_commands)}")
        return
    problem = None
    for command in chosen.uninstall_commands:
        done = run_command(command)
        if done.returncode == 0:
            term.say(f"ran {' '.join(command)}")
        elif chosen.name == "launchd" or _unreachable(done):
            problem = problem or _failure(command, done)  # nothing to stop through it: remove the files
        else:
            raise ServiceError(f"{_failure(command, done)}\nNothing was removed.")
    for path in present:
        path.unlink(missing_ok=True)
        term.say(f"removed {path}")
    if problem is None:
        for command in chosen.reload_commands:
            done = run_command(command)
            if done.returncode != 0:
                problem = _failure(command, done)
    if problem is not None and chosen.name == "systemd":
        raise ServiceError(
            f"{problem}\nThe unit files are removed. If a systemd user manager of yours runs elsewhere, run "
            f"there:\n  systemctl --user stop {SOCKET_UNIT} {SERVICE_UNIT} && systemctl --user daemon-reload"
        )
    term.say("uninstalled: bouncer-shim starts bouncerd itself again when it needs it")


@service.command()
@manager_option
def status(manager: str) -> None:
    """Show whether the service is installed and running, and where shims look for the daemon."""
    environ = os.environ
    chosen = choose(manager, environ)
    paths = resolve(environ)
    installed = True
    term.say(f"service manager: {chosen.name} (user)")
    for path in chosen.paths():
        try:
            current = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            state = "not installed"
            installed = False
        except (OSError, UnicodeDecodeError) as exc:
            state = f"unreadable ({exc})"
        else:
            state = (
                "installed"
                if current == chosen.files[path.name]
                else "installed, differs (run install again)"
            )
        term.say(f"  {path}: {state}")
    if installed:
        term.say("\n".join(_manager_state(chosen)))
    if chosen.name == "systemd":
        runtime = environ.get("XDG_RUNTIME_DIR", "")
        if runtime:
            unit_socket = listen_path(chosen.files[SOCKET_UNIT], runtime)
            note = "" if unit_socket == str(paths.socket) else f" (but shims started here use {paths.socket})"
            term.say(f"socket: {unit_socket}{note}")
        else:
            term.say("socket: unknown here (XDG_RUNTIME_DIR is not set)")
    pid = running_daemon(environ)
    term.say(f"daemon: {f'answering (pid {pid})' if pid else 'not running'} on {paths.socket}")
    if not installed:
        raise SystemExit(EXIT_NOT_INSTALLED)


def _manager_state(chosen: Manager) -> list[str]:
    if chosen.name == "launchd":
        done = run_command(["launchctl", "print", f"gui/{os.getuid()}/{LAUNCHD_LABEL}"])
        if _unreachable(done):
            return [f"  {LAUNCHD_LABEL}: unknown ({_first_line(done)})"]
        return [f"  {LAUNCHD_LABEL}: {'loaded' if done.returncode == 0 else 'not loaded'}"]
    lines = []
    reason = ""
    for unit in (SOCKET_UNIT, SERVICE_UNIT):
        enabled = run_command(["systemctl", "--user", "is-enabled", unit])
        active = run_command(["systemctl", "--user", "is-active", unit])
        words = []
        for done in (enabled, active):
            word = done.output.strip()
            if " " in word or _unreachable(done):  # an error message, not a state
                reason = reason or _first_line(done)
            if not word or " " in word or _unreachable(done):
                word = "unknown"
            words.append(word)
        lines.append(f"  {unit}: {', '.join(words)}")
    if reason:
        lines.append(f"  (cannot ask the systemd user manager: {reason})")
    return lines


def _first_line(done: Outcome) -> str:
    return done.output.splitlines()[0] if done.output else f"exit status {done.returncode}"
