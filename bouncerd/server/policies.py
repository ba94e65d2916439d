"""Policy files on disk: the user's policy.yaml and each shim's --policy, loaded into core values.

Theory of operation
-------------------
The daemon's base policy is the built-in packs plus `paths.policy` (absent = packs and defaults only).
A bad policy.yaml at start stops the daemon (`Daemon.start` raises the PolicyError, which names file,
line, key and reason). A reload (SIGHUP or `bouncerctl reload`) that fails keeps the policy in force
and records the failure (file, line, reason, when), which `status` shows until a reload succeeds and
the audit log keeps. Any failure counts, not only a `PolicyError`: a loader bug must leave the last good
policy serving and say so, never a half-loaded state or a status that still reads "loaded".

A reload is two steps so the slow one can run off the event loop: `read` parses and merges the file
into a new `Policy` and touches nothing (the daemon runs it in a worker thread), `commit` swaps it in
whole. Until `commit`, every verdict uses the old value; after it, every verdict the new one.

A shim's `--policy FILE` is one more layer on top, loaded when the shim says hello; a bad file makes
the hello fail, and the shim exits with the message. Layered policies are cached by the files' paths,
sizes and modification times, so forty shims with the same file share one `Policy` value (and the
engine's rule cache).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from bouncerd.core.auditrecords import Audit, EventRecord
from bouncerd.core.exportconf import ExportConfig
from bouncerd.core.managed import check_layer, managed_keys
from bouncerd.core.policy import Policy, PolicyFile, merge
from bouncerd.errors import PolicyError
from bouncerd.managedpolicy import ManagedSource, read_managed
from bouncerd.policyfiles import MAX_POLICY_BYTES as MAX_POLICY_BYTES  # allowlist.py reads it here
from bouncerd.policyfiles import read_policy

log = logging.getLogger("bouncerd")

_Stamp = tuple[str, int, int]  # path, size, mtime_ns

# Reads of policy.yaml one reload makes in a worker thread before it reads on the event loop instead:
# a read is redone only when an "always" answer rewrote the file meanwhile, which a person does rarely.
MAX_RELOAD_READS = 3


@dataclass(frozen=True)
class Loaded:
    """A policy read from disk, not yet in force."""

    managed: PolicyFile | None
    user: PolicyFile | None
    base: Policy


@dataclass(frozen=True)
class ReloadFailure:
    """Why the last reload did not take: what `status` shows until a reload succeeds."""

    file: str
    line: int | None
    reason: str
    at: float

    @classmethod
    def of(cls, user_path: Path, exc: BaseException, now: float) -> ReloadFailure:
        if not isinstance(exc, PolicyError):  # a loader bug: the policy is unread, not wrong
            return cls(str(user_path), None, f"could not be read ({type(exc).__name__}: {exc})", now)
        text = str(exc)
        m = _WHERE.match(text)
        if m is None:
            return cls(str(user_path), None, text, now)
        return cls(m["file"], int(m["line"]) if m["line"] else None, m["reason"], now)

    def message(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.reason}"

    def public(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "reason": self.reason, "at": self.at}


# "FILE:LINE: KEY: REASON" or "FILE: REASON", as PolicyError messages read (file names hold no ": ").
_WHERE = re.compile(r"(?P<file>[^\n]+?):(?:(?P<line>\d+):)? (?P<reason>.*)", re.DOTALL)


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
    failure: ReloadFailure | None = None
    generation: int = 0  # how many times a policy was committed; a read that saw an older one is stale
    managed_source: ManagedSource | None = None  # the administrator's layer, below the user's
    managed: PolicyFile | None = None
    _layered: dict[tuple[_Stamp, _Stamp], Policy] = field(default_factory=dict)

    @classmethod
    def load(cls, user_path: Path, now: float, managed: ManagedSource | None = None) -> PolicyState:
        """The daemon's start: a bad user policy, an unsafe managed file or a user policy that loosens
        the managed one raises PolicyError (the daemon refuses to start)."""
        state = cls(user_path, managed_source=managed)
        state.commit(state.read(), now)
        return state

    @property
    def reload_error(self) -> str | None:
        return self.failure.message() if self.failure is not None else None

    @property
    def export_config(self) -> ExportConfig | None:
        """`audit_export` in force: the managed policy's, else the user's (a user's below a managed
        one is refused at load)."""
        for layer in (self.managed, self.user):
            if layer is not None and layer.audit_export is not None:
                return layer.audit_export
        return None

    def read(self) -> Loaded:
        """Read the managed policy and policy.yaml, check the one against the other and merge them
        into a value; changes nothing here. Raises PolicyError (or, on a loader bug, anything: `fail`
        records it alike). Safe to run in a worker thread."""
        managed = read_managed(self.managed_source) if self.managed_source is not None else None
        if managed is not None:
            check_layer(managed, managed)  # its own trust against its own deny_trust
        user = read_policy(self.user_path) if self.user_path.exists() else None
        if user is not None:
            check_layer(managed, user)
        return Loaded(managed, user, merge([layer for layer in (managed, user) if layer is not None]))

    def commit(self, loaded: Loaded, now: float) -> None:
        """Put `loaded` in force, whole; the last failure is forgotten."""
        self.managed, self.user, self.base, self.loaded_at = loaded.managed, loaded.user, loaded.base, now
        self.failure = None
        self.generation += 1
        self._layered.clear()

    def fail(self, exc: BaseException, now: float) -> str:
        """Record a reload that did not take (the policy in force stays); return its message."""
        self.failure = ReloadFailure.of(self.user_path, exc, now)
        return self.failure.message()

    def for_call(self, policy_path: str | None) -> tuple[Policy, str | None]:
        """The policy a shim's call is judged by, and None; or, when the shim's --policy does not load,
        the base policy and why (the core then denies the call as ``policy.unreadable``)."""
        try:
            return self.for_shim(policy_path), None
        except PolicyError as exc:
            return self.base, str(exc)

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
            "state": "reload failed" if self.failure is not None else "loaded",
            "loaded_at": self.loaded_at,  # when the policy in force was loaded
            "reload_error": self.reload_error,
            # file, line, reason and when of the last failed reload; the policy of loaded_at serves
            "reload_failure": self.failure.public() if self.failure is not None else None,
            "settings": {
                "taint_scope": self.base.settings.taint_scope,
                "approval_timeout": self.base.settings.approval_timeout,
                "audit_arguments": self.base.settings.audit_arguments,
                "on_tainted_identity": self.base.settings.on_tainted_identity,
            },
        }


class Reloader:
    """Reloads of the user's policy.yaml: read, then put in force whole (`PolicyState.commit`, then
    `put_in_force` for the engine), or recorded as failed; audited either way. `reload` reads in a
    worker thread (SIGHUP, `bouncerctl reload`): verdicts go on with the policy in force meanwhile.
    Reloads run one at a time; a read that a synchronous `reload_now` overtook is read again."""

    def __init__(
        self,
        state: PolicyState,
        put_in_force: Callable[[Policy], None],
        audit: Audit,
    ) -> None:
        self.state = state
        self._put_in_force = put_in_force
        self._audit = audit
        self._lock: anyio.Lock | None = None  # made on the event loop, at the first reload

    def reload_now(self, now: float) -> str | None:
        """Read and commit on the calling thread (an "always" answer that just edited the file)."""
        try:
            loaded = self.state.read()
        except Exception as exc:  # any failure keeps the last good policy, and says so
            return self._failed(exc, now)
        self._commit(loaded, now)
        return None

    async def reload(self, clock: Callable[[], float]) -> str | None:
        """Read in a worker thread, then commit on the event loop. None, or why the reload failed."""
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            for _ in range(MAX_RELOAD_READS):
                generation = self.state.generation
                try:
                    loaded = await anyio.to_thread.run_sync(self.state.read)
                except Exception as exc:  # as in `reload_now`
                    return self._failed(exc, clock())
                if self.state.generation == generation:
                    self._commit(loaded, clock())
                    return None
            return self.reload_now(clock())  # overtaken every time: read on the loop, the newest wins

    def _commit(self, loaded: Loaded, now: float) -> None:
        self.state.commit(loaded, now)
        self._put_in_force(self.state.base)
        log.info("reload: policy loaded from %s", self.state.user_path)
        reloaded: EventRecord = {
            "verdict": None,
            "rule": "policy.reloaded",
            "reason": f"policy loaded from {self.state.user_path}",
        }
        self._audit(reloaded, now)

    def _failed(self, exc: BaseException, now: float) -> str:
        error = self.state.fail(exc, now)
        log.error("reload failed, the policy loaded before stays in force: %s", error)
        reason = f"{error}; the policy loaded before stays in force"
        failed: EventRecord = {"verdict": None, "rule": "policy.reload_failed", "reason": reason}
        self._audit(failed, now)
        return error


def realpath(path: str) -> str:
    """The resolver the engine's path confinement uses: symlinks of existing components resolved."""
    return os.path.realpath(path)
