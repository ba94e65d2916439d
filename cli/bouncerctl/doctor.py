"""``bouncerctl doctor``: is everything Bouncer needs in place? One line per check, read-only.

Theory of operation
-------------------
Each check prints ``ok``, ``warn`` or ``FAIL``, what it looked at and what to do. Nothing is changed:
no directory is created, no daemon started, no file written. Checks, in order:

1. runtime directory: where this environment's socket lives, and that it is private (a symlinked,
   foreign or open one is refused by every Bouncer process; ``doctor`` says why);
2. daemon: answers a ping on the socket; its pid, version and uptime, against this bouncerctl's;
3. shims: the servers connected now, per client session, and the version of bouncer-shim installed
   beside this bouncerctl;
4. policy: the file in force and whether the last reload failed (from the daemon);
5. audit log: its hash chain, walked as ``bouncerctl audit verify`` does;
6. service: whether a systemd user unit or launchd agent is installed (and, for systemd, enabled and
   active), or that autostart by shims and hooks is what starts the daemon;
7. clients: each known client config file that exists, with how many of its servers are wrapped
   by bouncer-shim and how many are not; then each server that runs without Bouncer (a stdio or
   remote entry init has not wrapped, a remote one the bridge cannot reach), named NOT PROTECTED
   with the command that would protect it (`bouncerctl.unprotected`).

Exit 0 when no check failed (warnings allowed), 1 otherwise.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import click

from bouncerctl import term
from bouncerd import __version__, autostart
from bouncerd.client import Client
from bouncerd.errors import BouncerError, UnsafeDirectoryError
from bouncerd.paths import Paths, check_private_dir, resolve

OK, WARN, FAIL = "ok", "warn", "FAIL"
# A live daemon answers in microseconds; a status reply with many sessions in milliseconds.
PROBE_TIMEOUT_SECONDS = 2.0

Check = tuple[str, str, str]  # (level, what, detail)


def check_runtime(paths: Paths) -> Check:
    try:
        check_private_dir(paths.runtime)
    except FileNotFoundError:
        return WARN, "runtime dir", f"{paths.runtime} does not exist yet (no daemon has run here)"
    except UnsafeDirectoryError as exc:
        return FAIL, "runtime dir", str(exc)
    except OSError as exc:
        return FAIL, "runtime dir", f"cannot examine {paths.runtime}: {exc.strerror or exc}"
    return OK, "runtime dir", f"{paths.runtime} (private)"


def daemon_status(paths: Paths) -> tuple[dict[str, Any], dict[str, Any]] | str:
    """(hello reply, status reply) from the daemon, or why there is none."""
    try:
        with Client.connect(paths, timeout=PROBE_TIMEOUT_SECONDS) as client:
            return client.hello_reply, client.request("status")
    except BouncerError as exc:
        return str(exc)


def check_daemon(paths: Paths, got: tuple[dict[str, Any], dict[str, Any]] | str) -> Check:
    if isinstance(got, str):
        starts, _, _ = autostart.read_record(paths)
        hint = "shims and hooks start it when they need it; `bouncerctl restart` starts it now"
        if starts >= autostart.GIVE_UP_AFTER_STARTS:
            return FAIL, "daemon", f"{got}; it failed {starts} starts in a row, see `bouncerctl logs`"
        return WARN, "daemon", f"{got} ({hint})"
    hello, status = got
    info = status.get("daemon", {})
    version = str(info.get("version") or hello.get("daemon_version") or "?")
    uptime = info.get("uptime")
    up = f", up {float(uptime):.0f} s" if isinstance(uptime, (int, float)) else ""
    text = f"pid {info.get('pid', hello.get('daemon_pid'))}, version {version}{up}, on {paths.socket}"
    if version != __version__:
        return WARN, "daemon", f"{text}; this bouncerctl is {__version__} (`bouncerctl restart` to match)"
    return OK, "daemon", text


def check_shims(got: tuple[dict[str, Any], dict[str, Any]] | str) -> Check:
    shim_version = _shim_version()
    if isinstance(got, str):
        return WARN, "shims", f"unknown without a daemon; bouncer-shim installed: {shim_version}"
    sessions = got[1].get("sessions", [])
    connected = [
        f"{server.get('name')} ({(session.get('client') or {}).get('name') or session.get('key')})"
        for session in sessions
        for server in session.get("servers", [])
        if server.get("connected")
    ]
    listed = ", ".join(connected) if connected else "none connected now"
    level = OK if shim_version in (__version__, "?") else WARN
    return level, "shims", f"{listed}; bouncer-shim installed: {shim_version} (bouncerctl {__version__})"


def _shim_version() -> str:
    """The installed version of the distribution that ships bouncer-shim (shims do not report theirs)."""
    from importlib import metadata

    try:
        return metadata.version("bouncer")
    except metadata.PackageNotFoundError:
        return "?"


def check_policy(paths: Paths, got: tuple[dict[str, Any], dict[str, Any]] | str) -> Check:
    if isinstance(got, str):
        exists = paths.policy.exists()
        return WARN, "policy", f"{paths.policy} {'exists' if exists else 'absent (defaults)'}; not loaded now"
    policy = got[1].get("policy") or {}
    failed = policy.get("reload_error")
    where = policy.get("user_policy") or str(paths.policy)
    if failed:
        return FAIL, "policy", f"{where}: the last reload failed ({failed}); the previous policy is in force"
    if not policy.get("user_policy_present"):
        return OK, "policy", f"{where} absent: the built-in defaults are in force"
    return OK, "policy", f"{where} loaded"


def check_audit(paths: Paths) -> Check:
    from bouncerctl.audit_cmd import walk_files
    from bouncerd.auditfiles import chain_files

    if not paths.audit.exists():
        return WARN, "audit log", f"{paths.audit} does not exist yet"
    try:
        result = walk_files(chain_files(paths.audit))
    except OSError as exc:
        return FAIL, "audit log", f"cannot read {paths.audit}: {exc.strerror or exc}"
    return (OK if result.ok else FAIL), "audit log", result.describe()


def check_scanner() -> Check:
    """Which taint scanner this installation runs (bouncerd/native.py); both are correct, the
    compiled one indexes server output ~1.4x as fast. The pure one where a compiler could have built
    the other is a warning: the build failed unseen (pip hides a build's output)."""
    from bouncerd import native

    which = native.implementation()
    if "source changed" in which or "another interpreter" in which or "cannot be read" in which:
        return WARN, "scanner", which
    compiler = None if which.startswith("compiled") else native.toolchain(os.environ)
    if compiler is not None and native.PURE_VARIABLE not in which:
        return (
            WARN,
            "scanner",
            (
                f"{which}, though a C compiler is here ({compiler}): rebuild (scripts/setup in a checkout, "
                "else `pip install --force-reinstall --no-deps -v .`) and read why it did not build"
            ),
        )
    return OK, "scanner", which


def check_service(environ: Mapping[str, str]) -> Check:
    from bouncerctl import service as svc

    try:
        chosen = svc.choose("auto", environ)
    except (click.ClickException, BouncerError, OSError) as exc:
        return WARN, "service", f"cannot tell: {exc}"
    installed = [path for path in chosen.paths() if path.exists()]
    if not installed:
        return OK, "service", f"no {chosen.name} service installed; shims and hooks start bouncerd themselves"
    state = " ".join(line.strip() for line in svc._manager_state(chosen))
    return OK, "service", f"{chosen.name}: {state}"


def check_clients(environ: Mapping[str, str], cwd: Path) -> list[Check]:
    from bouncerctl import init_cmd, init_plan
    from bouncerctl import mcpconfig as mc

    found: list[Check] = []
    for location in init_cmd.locations(environ, cwd):
        if not location.path.exists():
            continue
        try:
            plan = init_plan.read_config(location, environ)
        except (click.ClickException, BouncerError, ValueError) as exc:
            found.append((WARN, f"client {location.client}", f"{location.path}: {exc}"))
            continue
        kinds = [entry.kind for entry in plan.entries]
        wrapped = sum(kind in (mc.WRAPPED, mc.SHIMMED) for kind in kinds)
        bare = kinds.count(mc.STDIO) + kinds.count(mc.REMOTE)
        text = f"{location.path}: {wrapped} wrapped, {bare} not"
        found.append(((WARN if bare else OK), f"client {location.client}", text))
    from bouncerctl import unprotected

    for item in unprotected.find(environ, cwd):
        if item.name:  # an unreadable file was reported above
            found.append((WARN, f"client {item.client}", item.line()))
    if not found:
        found.append((WARN, "clients", "no known client config found (`bouncerctl init --config FILE`)"))
    return found


def run_checks(environ: Mapping[str, str], cwd: Path) -> list[Check]:
    paths = resolve(environ)
    got = daemon_status(paths)
    checks: list[Callable[[], Check | list[Check]]] = [
        lambda: check_runtime(paths),
        lambda: check_daemon(paths, got),
        lambda: check_shims(got),
        lambda: check_policy(paths, got),
        lambda: check_audit(paths),
        check_scanner,
        lambda: check_service(environ),
        lambda: check_clients(environ, cwd),
    ]
    results: list[Check] = []
    for check in checks:
        try:
            out = check()
        except Exception as exc:  # a check that breaks is a finding, not a traceback
            out = (FAIL, getattr(check, "__name__", "check"), f"the check itself failed: {exc!r}")
        results.extend(out if isinstance(out, list) else [out])
    return results


@click.command()
def doctor() -> None:
    """Check the socket, daemon, shims, policy, audit chain, service and wrapped clients (read-only)."""
    started = time.monotonic()
    results = run_checks(os.environ, Path.cwd())
    rows = [
        (click.style(level, fg={OK: "green", WARN: "yellow", FAIL: "red"}[level]), what, detail)
        for level, what, detail in results
    ]
    for line in term.table(rows, term.columns()):  # a long detail wraps under itself, at spaces
        term.echo(line)
    failed = sum(level == FAIL for level, _, _ in results)
    click.echo(f"{failed} failed, {sum(level == WARN for level, _, _ in results)} warnings "
               f"({time.monotonic() - started:.1f} s)")  # fmt: skip
    if failed:
        raise SystemExit(1)
