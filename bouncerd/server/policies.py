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

from bouncerd.core.exportconf import ExportConfig
from bouncerd.core.managed import check_layer, managed_keys
from bouncerd.core.policy import Policy, PolicyFile, merge
from bouncerd.errors import PolicyError
from bouncerd.managedpolicy import ManagedSource, read_managed
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
    managed_source: ManagedSource | None = None  # the administrator's layer, below the user's
    managed: PolicyFile | None = None
    _layered: dict[tuple[_Stamp, _Stamp], Policy] = field(default_factory=dict)

    @classmethod
    def load(cls, user_path: Path, now: float, managed: ManagedSource | None = None) -> PolicyState:
        """The daemon's start: a bad user policy, an unsafe managed file or a user policy that loosens
        the managed one raises PolicyError (the daemon refuses to start)."""
        state = cls(user_path, managed_source=managed)
        state._load_user(now)
        return state

    def _load_user(self, now: float) -> None:
        managed = read_managed(self.managed_source) if self.managed_source is not None else None
        if managed is not None:
            check_layer(managed, managed)  # its own trust against its own deny_trust
        user = read_policy(self.user_path) if self.user_path.exists() else None
        if user is not None:
            check_layer(managed, user)
        base = merge([layer for layer in (managed, user) if layer is not None])
        self.managed, self.user, self.base, self.loaded_at = managed, user, base, now
        self._layered.clear()

    @property
    def export_config(self) -> ExportConfig | None:
        """`audit_export` in force: the managed policy's, else the user's (a user's below a managed
        one is refused at load)."""
        for layer in (self.managed, self.user):
            if layer is not None and layer.audit_export is not None:
                return layer.audit_export
        return None

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
            layers = [layer for layer in (self.managed, self.user) if layer is not None]
            shim_layer = read_policy(path)
            if shim_layer.audit_export is not None:
                raise PolicyError(
                    f"{shim_layer.audit_export.source}: audit_export: belongs in the user's policy.yaml "
                    f"({self.user_path}) or the managed policy; a shim's --policy may only hold tools, "
                    f"servers and packs"
                )
            check_layer(self.managed, shim_layer)
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
            "managed_policy": str(self.managed_source.path) if self.managed_source is not None else None,
            "managed_policy_present": self.managed is not None,
            "managed_rules": managed_keys(self.managed) if self.managed is not None else [],
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
