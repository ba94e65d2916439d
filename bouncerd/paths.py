"""Where Bouncer keeps its socket, state and policy.

`BOUNCER_HOME=DIR` puts everything under DIR/run, DIR/state and DIR/config (tests always set it).
Without it, platformdirs' per-user runtime, state and config directories are used. The environment
is passed in, never read at import time. Shared by the daemon, the shim and the CLI, so it imports
nothing heavy.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

from bouncerd.errors import UnsafeDirectoryError

SOCKET_NAME = "bouncerd.sock"
POLICY_NAME = "policy.yaml"
AUDIT_NAME = "audit.jsonl"


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


def resolve(environ: Mapping[str, str]) -> Paths:
    home = environ.get("BOUNCER_HOME")
    if home:
        base = Path(home).expanduser().absolute()
        return Paths(runtime=base / "run", state=base / "state", config=base / "config")
    import warnings

    import platformdirs

    with warnings.catch_warnings():
        # Without XDG_RUNTIME_DIR platformdirs warns (unprefixed, on stderr) and falls back to a path
        # under /tmp; ensure_private_dir then checks that directory like any other.
        warnings.simplefilter("ignore")
        runtime = platformdirs.user_runtime_dir("bouncer", appauthor=False)
    return Paths(
        runtime=Path(runtime),
        state=Path(platformdirs.user_state_dir("bouncer", appauthor=False)),
        config=Path(platformdirs.user_config_dir("bouncer", appauthor=False)),
    )


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


def check_private_dir(path: Path) -> None:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeDirectoryError(f"{path} is a symlink; refusing to use it for Bouncer's private files")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeDirectoryError(f"{path} is not a directory")
    if st.st_uid != os.getuid():
        raise UnsafeDirectoryError(f"{path} is owned by uid {st.st_uid}, not by you (uid {os.getuid()})")
    if st.st_mode & 0o077:
        raise UnsafeDirectoryError(
            f"{path} has mode {stat.S_IMODE(st.st_mode):04o}; it must not be accessible by group or others "
            f"(fix: chmod 700 {path})"
        )


def entry_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables a client's server entry must carry so that a shim the client starts with a
    stripped environment (Codex passes only HOME and PATH) finds the same daemon as this process.
    Empty when the defaults are in force. `bouncerctl init` writes these into the entry's `env`."""
    home = environ.get("BOUNCER_HOME")
    if home:
        return {"BOUNCER_HOME": str(Path(home).expanduser().absolute())}
    return {}
