"""Reading a policy file from disk: bounded in size, UTF-8, then parsed strictly into a core value.

Shared by the daemon (the user's policy.yaml and each shim's ``--policy``, see
`bouncerd.server.policies`) and by ``bouncerctl policy check`` and ``bouncerctl report``, which read
the same files the same way without a daemon. One error type: `PolicyError`, naming the file.
"""

from __future__ import annotations

from pathlib import Path

from bouncerd.core.policy import PolicyFile, load_policy
from bouncerd.errors import PolicyError

# A policy is a few kilobytes; anything this large is a mistake (or an attempt to make the daemon
# spend its memory parsing it).
MAX_POLICY_BYTES = 1024 * 1024


def read_policy(path: Path, errors: list[PolicyError] | None = None) -> PolicyFile:
    """The policy file at `path`; PolicyError for the first problem, or, given an `errors` list, every
    problem of the file's parts appended to it (see `load_policy`)."""
    try:
        st = path.stat()
        if st.st_size > MAX_POLICY_BYTES:
            raise PolicyError(
                f"{path}: {st.st_size} bytes is too large for a policy (limit {MAX_POLICY_BYTES})"
            )
        data = path.read_bytes()
    except FileNotFoundError:
        raise PolicyError(f"{path}: no such file") from None
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    return load_policy(text, str(path), errors=errors)
