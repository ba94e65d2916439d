"""Policy files on disk: the user's policy.yaml and each shim's --policy, loaded into core values.

Theory of operation
-------------------
The daemon's base policy is the built-in packs plus `paths.policy` (absent = packs and defaults only).
A bad policy.yaml at start stops the daemon (`Daemon.start` raises the PolicyError, which names file,
line, key and reason). A reload (SIGHUP or `bouncerctl reload`) that fails keeps the policy in force
and records the failure, which `status` shows and the audit log keeps.

A shim's `--policy FILE` is one more layer on top, loaded when the shim says hello; a bad file makes
the hello fail, and the shim exits with the message. Layered policies are cached by the files' paths,
sizes and modification times, so forty shims with the same file share one `Policy` value (and the
engine's rule cache).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from bouncerd.core.policy import Policy, PolicyFile, merge
from bouncerd.errors import PolicyError
from bouncerd.policyfiles import MAX_POLICY_BYTES as MAX_POLICY_BYTES  # allowlist.py reads it here
from bouncerd.policyfiles import read_policy

_Stamp = tuple[str, int, int]  # path, size, mtime_ns


def _stamp(path: Path) -> _Stamp:
    try:
        st = path.stat()
    except OSError:
        return (str(path), -1, -1)
    return (str(path), st.st_size, st.st_mtime_ns)


@dataclass
class PolicyState:
    """What `status` says about policy: the sources in force and the last reload's outcome."""

    user_path: Path
    user: PolicyFile | None = None
    base: Policy = field(default_factory=lambda: merge([]))
    loaded_at: float = 0.0
    reload_error: str | None = None
    _layered: dict[tuple[_Stamp, _Stamp], Policy] = field(default_factory=dict)

    @classmethod
    def load(cls, user_path: Path, now: float) -> PolicyState:
        """The daemon's start: a bad user policy raises PolicyError (the daemon refuses to start)."""
        state = cls(user_path)
        state._load_user(now)
        return state

    def _load_user(self, now: float) -> None:
        user = read_policy(self.user_path) if self.user_path.exists() else None
        base = merge([user] if user is not None else [])
        self.user, self.base, self.loaded_at = user, base, now
        self._layered.clear()

    def reload(self, now: float) -> str | None:
        """Reload policy.yaml; on failure keep the old policy and return the error (also kept for status)."""
        try:
            self._load_user(now)
        except PolicyError as exc:
            self.reload_error = str(exc)
            return self.reload_error
        self.reload_error = None
        return None

    def for_shim(self, policy_path: str | None) -> Policy:
        """The policy for one shim: base, plus its --policy file on top. Raises PolicyError."""
        if not policy_path:
            return self.base
        path = Path(policy_path)
        if not path.is_absolute():
            raise PolicyError(f"{policy_path}: the shim's --policy must be an absolute path")
        key = (_stamp(self.user_path), _stamp(path))
        cached = self._layered.get(key)
        if cached is None:
            layers = [self.user] if self.user is not None else []
            shim_layer = read_policy(path)
            for setting in shim_layer.settings:
                # Taint scope, identity handling and audit format are one daemon-wide choice: a
                # per-server file that looked like it changed them, and did not, would mislead.
                line = shim_layer.setting_lines.get(setting, 1)
                raise PolicyError(
                    f"{path}:{line}: {setting}: settings belong in the user's policy.yaml "
                    f"({self.user_path}); a shim's --policy may only hold tools, servers and packs"
                )
            cached = merge([*layers, shim_layer])
            if len(self._layered) > 64:  # a handful of distinct files in practice; never unbounded
                self._layered.clear()
            self._layered[key] = cached
        return cached

    def public(self) -> dict[str, object]:
        return {
            "user_policy": str(self.user_path),
            "user_policy_present": self.user is not None,
            "state": "reload failed" if self.reload_error else "loaded",
            "loaded_at": self.loaded_at,
            "reload_error": self.reload_error,
            "settings": {
                "taint_scope": self.base.settings.taint_scope,
                "approval_timeout": self.base.settings.approval_timeout,
                "audit_arguments": self.base.settings.audit_arguments,
                "on_tainted_identity": self.base.settings.on_tainted_identity,
            },
        }


def realpath(path: str) -> str:
    """The resolver the engine's path confinement uses: symlinks of existing components resolved."""
    return os.path.realpath(path)
