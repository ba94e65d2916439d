"""bouncerd.paths: every process of a user finds the same directories, whatever its client passed on.

The machine is injected (uid, the /run/user root, the fallback root, the platform), so these run the
same on any machine; the directories are real ones in a temporary tree.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from bouncerd.errors import UnsafeDirectoryError
from bouncerd.paths import Paths, ensure_private_dir, entry_env, resolve

UID = os.getuid()


@dataclass
class Machine:
    """A fake machine: /run/user and /tmp under a temporary directory."""

    run_user_root: Path
    fallback_root: Path
    uid: int = UID
    platform: str = "linux"

    def resolve(self, environ: Mapping[str, str]) -> Paths:
        return resolve(environ, **self._where())

    def entry_env(self, environ: Mapping[str, str]) -> dict[str, str]:
        return entry_env(environ, **self._where())

    def _where(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "run_user_root": self.run_user_root,
            "fallback_root": self.fallback_root,
            "platform": self.platform,
        }

    @property
    def fallback(self) -> Path:
        return self.fallback_root / f"bouncer-{self.uid}"

    def logind_dir(self, mode: int = 0o700) -> Path:
        run_user = self.run_user_root / str(self.uid)
        run_user.mkdir(mode=mode)
        run_user.chmod(mode)
        return run_user


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    (tmp_path / "run-user").mkdir()
    (tmp_path / "tmp").mkdir()
    return Machine(run_user_root=tmp_path / "run-user", fallback_root=tmp_path / "tmp")


HOME = {"HOME": "/home/ann", "PATH": "/usr/bin"}


def test_bouncer_home_puts_everything_under_it(machine: Machine) -> None:
    paths = machine.resolve({**HOME, "BOUNCER_HOME": "/srv/b", "XDG_RUNTIME_DIR": "/x"})
    assert (paths.runtime, paths.state, paths.config) == (
        Path("/srv/b/run"),
        Path("/srv/b/state"),
        Path("/srv/b/config"),
    )


def test_xdg_runtime_dir_wins_over_the_fallbacks(machine: Machine) -> None:
    machine.logind_dir()
    paths = machine.resolve({**HOME, "XDG_RUNTIME_DIR": "/run/user/4242"})
    assert paths.runtime == Path("/run/user/4242/bouncer")


def test_stripped_environment_finds_the_logind_runtime_dir(machine: Machine) -> None:
    run_user = machine.logind_dir()
    shell = machine.resolve({**HOME, "XDG_RUNTIME_DIR": str(run_user)})
    codex = machine.resolve(HOME)
    assert codex == shell
    assert codex.runtime == run_user / "bouncer"


def test_group_open_logind_dir_is_not_used_by_the_fallback(machine: Machine) -> None:
    machine.logind_dir(mode=0o755)
    assert machine.resolve(HOME).runtime == machine.fallback


def test_another_users_logind_dir_is_not_used_by_the_fallback(machine: Machine) -> None:
    machine.logind_dir()
    other = replace(machine, uid=UID + 1)
    # /run/user/<uid+1> does not exist for this uid; make one owned by us under that name
    (machine.run_user_root / str(UID + 1)).mkdir(mode=0o700)
    assert other.resolve(HOME).runtime == other.fallback


def test_symlinked_logind_dir_is_not_used_by_the_fallback(machine: Machine, tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    real.mkdir(mode=0o700)
    (machine.run_user_root / str(UID)).symlink_to(real)
    assert machine.resolve(HOME).runtime == machine.fallback


def test_no_logind_dir_gives_one_fixed_per_uid_dir_for_every_process(machine: Machine) -> None:
    a = machine.resolve(HOME)
    b = machine.resolve({"HOME": "/home/ann", "TMPDIR": "/var/tmp/other"})
    assert a.runtime == b.runtime == machine.fallback


def test_fallback_dir_planted_as_a_symlink_by_another_user_is_refused(
    machine: Machine, tmp_path: Path
) -> None:
    planted = tmp_path / "attacker"
    planted.mkdir(mode=0o700)
    runtime = machine.resolve(HOME).runtime
    runtime.symlink_to(planted)
    with pytest.raises(UnsafeDirectoryError, match="symlink"):
        ensure_private_dir(runtime)


def test_fallback_dir_left_open_to_others_is_refused(machine: Machine) -> None:
    runtime = machine.resolve(HOME).runtime
    runtime.mkdir(mode=0o777)
    runtime.chmod(0o777)
    with pytest.raises(UnsafeDirectoryError, match="chmod 700"):
        ensure_private_dir(runtime)


def test_fallback_dir_is_created_private(machine: Machine) -> None:
    runtime = machine.resolve(HOME).runtime
    ensure_private_dir(runtime)
    assert runtime.stat().st_mode & 0o777 == 0o700


def test_state_and_config_follow_xdg_else_home(machine: Machine) -> None:
    default = machine.resolve(HOME)
    assert default.state == Path("/home/ann/.local/state/bouncer")
    assert default.config == Path("/home/ann/.config/bouncer")
    moved = machine.resolve({**HOME, "XDG_STATE_HOME": "/s", "XDG_CONFIG_HOME": "/c"})
    assert (moved.state, moved.config) == (Path("/s/bouncer"), Path("/c/bouncer"))


def test_relative_xdg_values_are_ignored_as_the_spec_says(machine: Machine) -> None:
    env = {**HOME, "XDG_STATE_HOME": "rel", "XDG_CONFIG_HOME": "", "XDG_RUNTIME_DIR": "run"}
    assert machine.resolve(env) == machine.resolve(HOME)


def test_macos_defaults_depend_on_home_only(machine: Machine) -> None:
    mac = replace(machine, platform="darwin")
    paths = mac.resolve(HOME)
    assert paths.runtime == Path("/home/ann/Library/Caches/TemporaryItems/bouncer")
    assert paths.state == paths.config == Path("/home/ann/Library/Application Support/bouncer")


def test_environment_is_read_from_the_mapping_not_os_environ(
    machine: Machine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", "/from/os/environ")
    monkeypatch.setenv("HOME", "/from/os/home")
    assert machine.resolve(HOME).state == Path("/home/ann/.local/state/bouncer")


# ---- entry_env: what a stripped client entry must carry ------------------------------------------------


def test_entry_env_is_empty_when_the_defaults_are_in_force(machine: Machine) -> None:
    run_user = machine.logind_dir()
    env = {
        **HOME,
        "XDG_RUNTIME_DIR": str(run_user),
        "XDG_STATE_HOME": "/home/ann/.local/state",
        "XDG_CONFIG_HOME": "/home/ann/.config",
    }
    assert machine.entry_env(env) == {}


def test_entry_env_carries_bouncer_home_alone(machine: Machine) -> None:
    env = {**HOME, "BOUNCER_HOME": "/srv/b", "XDG_RUNTIME_DIR": "/elsewhere"}
    assert machine.entry_env(env) == {"BOUNCER_HOME": "/srv/b"}


def test_entry_env_carries_a_runtime_dir_the_stripped_fallback_would_miss(machine: Machine) -> None:
    # no /run/user/UID: a stripped shim would use /tmp/bouncer-UID, not the shell's XDG_RUNTIME_DIR
    env = {**HOME, "XDG_RUNTIME_DIR": "/run/user/1000"}
    assert machine.entry_env(env) == {"XDG_RUNTIME_DIR": "/run/user/1000"}


def test_entry_env_carries_moved_state_and_config(machine: Machine) -> None:
    env = {**HOME, "XDG_STATE_HOME": "/data/state", "XDG_CONFIG_HOME": "/data/config"}
    got = machine.entry_env(env)
    assert got == {"XDG_STATE_HOME": "/data/state", "XDG_CONFIG_HOME": "/data/config"}


def test_entry_env_makes_a_stripped_shim_reach_the_same_paths(machine: Machine) -> None:
    cases = [
        {**HOME},
        {**HOME, "BOUNCER_HOME": "/srv/b"},
        {**HOME, "XDG_RUNTIME_DIR": "/r"},
        {**HOME, "XDG_STATE_HOME": "/s", "XDG_CONFIG_HOME": "/home/ann/.config"},
        {**HOME, "XDG_RUNTIME_DIR": "rel", "XDG_CONFIG_HOME": "/c"},
    ]
    for env in cases:
        stripped = {k: env[k] for k in ("HOME", "PATH")}
        carried = {**stripped, **machine.entry_env(env)}
        assert machine.resolve(carried) == machine.resolve(env), env
