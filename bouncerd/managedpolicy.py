"""Finding and reading the administrator's managed policy, refusing one the user could have written.

Theory of operation
-------------------
The managed policy is the file a company's administrator (or its MDM) installs on each machine:

- Linux and other Unix: `/etc/bouncer/policy.yaml`;
- macOS: `/Library/Application Support/Bouncer/policy.yaml`.

Absent is fine (no managed layer). Present, it must be safe, or the daemon refuses to run (fail
closed: a managed file that is silently skipped would leave the user's policy unbound):

- the file (after following symlinks) is a regular file owned by the expected owner, and neither
  group- nor world-writable;
- every directory above it, and above the symlink if the path is one, is owned by the expected
  owner or root and not group- or world-writable (unless sticky, like /tmp, where no one can replace a
  file they do not own).

In production the expected owner is root (uid 0): **the file must be root-owned and not writable by
the user**. Tests cannot be root, so `BOUNCER_MANAGED_POLICY` names another path and, only together
with it, `BOUNCER_TEST_MANAGED_OWNER_UID` names the owner uid to expect (tests pass their own).
Neither variable can replace an installed system file: if the system path exists and
`BOUNCER_MANAGED_POLICY` names another one, that is an error. A user who controls the daemon's
environment and no system file is installed can of course point it elsewhere; the managed layer binds
the agent and the user's files, not someone who runs a modified daemon.

The file is opened once (`O_NOFOLLOW` on its resolved path), checked with `fstat` on that descriptor
and read from it, so the bytes parsed are the bytes checked.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bouncerd.core.policy import PolicyFile, load_policy
from bouncerd.errors import PolicyError
from bouncerd.policyfiles import MAX_POLICY_BYTES

MANAGED_POLICY_ENV = "BOUNCER_MANAGED_POLICY"
TEST_OWNER_ENV = "BOUNCER_TEST_MANAGED_OWNER_UID"
LINUX_PATH = Path("/etc/bouncer/policy.yaml")
MACOS_PATH = Path("/Library/Application Support/Bouncer/policy.yaml")
ROOT_UID = 0


@dataclass(frozen=True)
class ManagedSource:
    """Where the managed policy lives and which uid must own it (root, but in tests)."""

    path: Path
    owner_uid: int = ROOT_UID


def system_path(platform: str) -> Path:
    return MACOS_PATH if platform == "darwin" else LINUX_PATH


def managed_source(
    environ: Mapping[str, str], platform: str = sys.platform, system: Path | None = None
) -> ManagedSource:
    """The managed policy's place, from the platform and (for tests) the environment. Raises PolicyError.

    `system` replaces the platform's path (tests of the refusal below; nothing else passes it)."""
    system = system if system is not None else system_path(platform)
    override = environ.get(MANAGED_POLICY_ENV)
    if not override:
        return ManagedSource(system)
    if os.path.lexists(system):
        raise PolicyError(
            f"{MANAGED_POLICY_ENV} names {override}, but the administrator's managed policy {system} is "
            f"installed; it cannot be replaced from the environment"
        )
    path = Path(override)
    if not path.is_absolute():
        raise PolicyError(f"{MANAGED_POLICY_ENV}: {override!r} must be an absolute path")
    owner = ROOT_UID
    raw = environ.get(TEST_OWNER_ENV)
    if raw:
        if not raw.isdigit():
            raise PolicyError(f"{TEST_OWNER_ENV}: {raw!r} is not a uid")
        owner = int(raw)
    return ManagedSource(path, owner)


def _unsafe(st: os.stat_result, owner_uid: int, *, directory: bool) -> str | None:
    owners = {owner_uid, ROOT_UID}
    if st.st_uid not in (owners if directory else {owner_uid}):
        want = "root" if owner_uid == ROOT_UID else f"uid {owner_uid}"
        return f"is owned by uid {st.st_uid}, not {want}"
    writable = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable and not (directory and st.st_mode & stat.S_ISVTX):
        return f"has mode {stat.S_IMODE(st.st_mode):04o}: group or others can write it"
    return None


def _check_dirs(path: Path, owner_uid: int) -> None:
    for parent in path.parents:
        try:
            st = os.stat(parent)
        except OSError as exc:
            raise PolicyError(
                f"{parent}: cannot check the managed policy's directory: {exc.strerror}"
            ) from None
        problem = _unsafe(st, owner_uid, directory=True)
        if problem is not None:
            raise PolicyError(
                f"{parent} {problem}, so the managed policy below it could be replaced by someone else; "
                f"refusing to run on it"
            )


def read_managed(source: ManagedSource) -> PolicyFile | None:
    """The managed policy, or None if none is installed. Raises PolicyError if it is unsafe or bad."""
    path = source.path
    if not os.path.lexists(path):
        return None
    real = Path(os.path.realpath(path))
    _check_dirs(path, source.owner_uid)
    if real != path:
        _check_dirs(real, source.owner_uid)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        raise PolicyError(f"{path}: cannot open the managed policy: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PolicyError(f"{path}: the managed policy is not a regular file")
        problem = _unsafe(st, source.owner_uid, directory=False)
        if problem is not None:
            raise PolicyError(
                f"{path}: the managed policy {problem}; it must be root-owned and not writable by the user "
                f"(fix: chown root:root {path} && chmod 644 {path}). Refusing to run on it"
            )
        if st.st_size > MAX_POLICY_BYTES:
            raise PolicyError(
                f"{path}: {st.st_size} bytes is too large for a policy (limit {MAX_POLICY_BYTES})"
            )
        chunks: list[bytes] = []
        while chunk := os.read(fd, MAX_POLICY_BYTES + 1 - sum(map(len, chunks))):
            chunks.append(chunk)
            if sum(map(len, chunks)) > MAX_POLICY_BYTES:
                raise PolicyError(f"{path}: larger than {MAX_POLICY_BYTES} bytes")
    finally:
        os.close(fd)
    try:
        text = b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return load_policy(text, str(path), managed=True)
