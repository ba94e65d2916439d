"""Where Bouncer keeps its socket, state and policy, found the same way by every process of a user.

Theory of operation
-------------------
`BOUNCER_HOME=DIR` puts everything under DIR/run, DIR/state and DIR/config (tests always set it).
Without it the directories follow the XDG base directory variables, read from the environment passed
in (never os.environ), and fall back to places that depend only on the user, so that a shim started
by a client that strips the environment (Codex passes only HOME and PATH) finds the same daemon as
the `bouncerctl` in the user's shell:

- runtime: ``$XDG_RUNTIME_DIR/bouncer``; else ``/run/user/UID/bouncer`` when ``/run/user/UID`` is a
  directory of the user's, mode 0700, not a symlink (what logind makes, and what XDG_RUNTIME_DIR
  names in a login session); else the fixed ``/tmp/bouncer-UID``, which `ensure_private_dir` creates
  0700 or refuses (a symlink, someone else's, open to others): never a different directory per process.
  On macOS the runtime default is ``~/Library/Caches/TemporaryItems/bouncer`` (platformdirs' choice;
  macOS cleans /tmp of files unused for days, which would take the socket).
- state: ``$XDG_STATE_HOME/bouncer``, else ``~/.local/state/bouncer``
  (macOS ``~/Library/Application Support/bouncer``).
- config: ``$XDG_CONFIG_HOME/bouncer``, else ``~/.config/bouncer`` (macOS as state).

Relative XDG values are ignored, as the XDG specification says. ``~`` is ``$HOME``, else the
password database's home of the user. These are platformdirs' defaults, computed here from the
environment given so that `entry_env` can say which variables a stripped shim would miss.

Shared by the daemon, the shim and the CLI, so it imports nothing heavy.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

from bouncerd.errors import UnsafeDirectoryError

SOCKET_NAME = "bouncerd.sock"
POLICY_NAME = "policy.yaml"
AUDIT_NAME = "audit.jsonl"
APP_NAME = "bouncer"

# Where logind makes each user's runtime directory (/run/user/UID) on Linux.
RUN_USER_ROOT = Path("/run/user")
# The fixed fallback's parent. Not tempfile.gettempdir(): TMPDIR is one of the variables a client may
# strip or set differently, and every process of the user must reach the same directory.
FALLBACK_RUNTIME_ROOT = Path("/tmp")  # noqa: S108 -- the directory is created 0700 and checked
# The variables that decide the directories; a stripped environment keeps only these.
STRIPPED_KEEPS = ("HOME", "PATH")


class Paths:
    """The three directories. A plain class, not a dataclass: the shim imports this on every start,
    and `dataclasses` (which pulls in `inspect`) costs it 10-25 ms."""

    __slots__ = ("config", "runtime", "state")

    def __init__(self, runtime: Path, state: Path, config: Path) -> None:
        self.runtime = runtime
        self.state = state
        self.config = config

    def __repr__(self) -> str:
        return f"Paths(runtime={self.runtime!r}, state={self.state!r}, config={self.config!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Paths):
            return NotImplemented
        return (self.runtime, self.state, self.config) == (other.runtime, other.state, other.config)

    def __hash__(self) -> int:
        return hash((self.runtime, self.state, self.config))

    @property
    def socket(self) -> Path:
        return self.runtime / SOCKET_NAME

    @property
    def policy(self) -> Path:
        return self.config / POLICY_NAME

    @property
    def audit(self) -> Path:
        return self.state / AUDIT_NAME

    @property
    def pidfile(self) -> Path:
        return self.runtime / "bouncerd.pid"

    @property
    def daemon_log(self) -> Path:
        return self.state / "bouncerd.log"


def resolve(
    environ: Mapping[str, str],
    *,
    uid: int | None = None,
    run_user_root: Path = RUN_USER_ROOT,
    fallback_root: Path = FALLBACK_RUNTIME_ROOT,
    platform: str = sys.platform,
) -> Paths:
    """The directories for `environ`. `uid`, `run_user_root`, `fallback_root` and `platform` are the
    machine's unless given (tests give them)."""
    home = environ.get("BOUNCER_HOME")
    if home:
        base = Path(home).expanduser().absolute()
        return Paths(runtime=base / "run", state=base / "state", config=base / "config")
    uid = os.getuid() if uid is None else uid
    runtime = runtime_dir(
        environ, uid=uid, run_user_root=run_user_root, fallback_root=fallback_root, platform=platform
    )
    return Paths(
        runtime=runtime,
        state=_xdg(environ, "XDG_STATE_HOME") or _default_base(environ, uid, platform, ".local/state"),
        config=_xdg(environ, "XDG_CONFIG_HOME") or _default_base(environ, uid, platform, ".config"),
    )


def runtime_dir(
    environ: Mapping[str, str],
    *,
    uid: int,
    run_user_root: Path = RUN_USER_ROOT,
    fallback_root: Path = FALLBACK_RUNTIME_ROOT,
    platform: str = sys.platform,
) -> Path:
    """The runtime directory without BOUNCER_HOME (see the module's theory of operation)."""
    xdg = _xdg(environ, "XDG_RUNTIME_DIR")
    if xdg is not None:
        return xdg
    if platform == "darwin":
        return _home(environ, uid) / "Library" / "Caches" / "TemporaryItems" / APP_NAME
    run_user = run_user_root / str(uid)
    try:
        check_private_dir(run_user, uid=uid)
    except (UnsafeDirectoryError, OSError):
        return fallback_root / f"{APP_NAME}-{uid}"
    return run_user / APP_NAME


def _xdg(environ: Mapping[str, str], name: str) -> Path | None:
    value = environ.get(name, "")
    return Path(value) / APP_NAME if value and os.path.isabs(value) else None


def _default_base(environ: Mapping[str, str], uid: int, platform: str, linux_default: str) -> Path:
    if platform == "darwin":
        return _home(environ, uid) / "Library" / "Application Support" / APP_NAME
    return _home(environ, uid) / linux_default / APP_NAME


def _home(environ: Mapping[str, str], uid: int) -> Path:
    home = environ.get("HOME", "")
    if home and os.path.isabs(home):
        return Path(home)
    import pwd  # only without HOME: what os.path.expanduser does then

    try:
        return Path(pwd.getpwuid(uid).pw_dir)
    except KeyError:
        raise UnsafeDirectoryError(f"HOME is not set and uid {uid} has no home directory") from None


def entry_env(
    environ: Mapping[str, str],
    *,
    uid: int | None = None,
    run_user_root: Path = RUN_USER_ROOT,
    fallback_root: Path = FALLBACK_RUNTIME_ROOT,
    platform: str = sys.platform,
) -> dict[str, str]:
    """The variables a client's server entry must carry so that a shim the client starts with a
    stripped environment (Codex passes only HOME and PATH) finds the same directories as this process.
    Empty when the defaults are in force. `bouncerctl init` writes these into the entry's `env`."""
    home = environ.get("BOUNCER_HOME")
    if home:
        return {"BOUNCER_HOME": str(Path(home).expanduser().absolute())}

    def paths_for(env: Mapping[str, str]) -> Paths:
        return resolve(
            env, uid=uid, run_user_root=run_user_root, fallback_root=fallback_root, platform=platform
        )

    ours, stripped = paths_for(environ), paths_for({k: environ[k] for k in STRIPPED_KEEPS if k in environ})
    needed: dict[str, str] = {}
    for name, mine, theirs in (
        ("XDG_RUNTIME_DIR", ours.runtime, stripped.runtime),
        ("XDG_STATE_HOME", ours.state, stripped.state),
        ("XDG_CONFIG_HOME", ours.config, stripped.config),
    ):
        if mine != theirs and environ.get(name):
            needed[name] = environ[name]
    return needed


def ensure_private_dir(path: Path) -> None:
    """Create `path` 0700 if missing; refuse it if it is a symlink, someone else's, or group/world-open.

    The socket lives here: a directory another user can write to would let them swap the socket
    for their own and receive every verdict request (and answer them).
    """
    if not path.exists() and not path.is_symlink():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        old = os.umask(0o077)
        try:
            path.mkdir(mode=0o700, exist_ok=True)
        finally:
            os.umask(old)
    check_private_dir(path)


def check_private_dir(path: Path, *, uid: int | None = None) -> None:
    """Refuse `path` (UnsafeDirectoryError) unless it is a directory, not a symlink, owned by `uid`
    (ours unless given) and closed to group and others. OSError if it cannot be examined."""
    uid = os.getuid() if uid is None else uid
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeDirectoryError(f"{path} is a symlink; refusing to use it for Bouncer's private files")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDirectoryError(f"{path} is not a directory")
    if st.st_uid != uid:
        raise UnsafeDirectoryError(f"{path} is owned by uid {st.st_uid}, not by you (uid {uid})")
    if st.st_mode & 0o077:
        raise UnsafeDirectoryError(
            f"{path} has mode {stat.S_IMODE(st.st_mode):04o}; it must not be accessible by group or others "
            f"(fix: chmod 700 {path})"
        )
