"""Reading the managed policy: a file the user (or anyone but its owner) could write is refused.

Production expects root (uid 0) as the owner; these tests pass their own uid as the expected owner,
which is what `BOUNCER_TEST_MANAGED_OWNER_UID` does for a daemon under test.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bouncerd.errors import PolicyError
from bouncerd.managedpolicy import (
    LINUX_PATH,
    MACOS_PATH,
    MANAGED_POLICY_ENV,
    ROOT_UID,
    TEST_OWNER_ENV,
    ManagedSource,
    managed_source,
    read_managed,
)

ME = os.getuid()


def _safe_dir(tmp_path: Path) -> Path:
    d = tmp_path / "etc-bouncer"
    d.mkdir(mode=0o755)
    os.chmod(d, 0o755)
    return d


def _managed(tmp_path: Path, text: str = "tools:\n  send_email:\n    exfiltrating: true\n") -> Path:
    f = _safe_dir(tmp_path) / "policy.yaml"
    f.write_text(text)
    os.chmod(f, 0o644)
    return f


def test_absent_managed_policy_is_no_layer(tmp_path: Path) -> None:
    assert read_managed(ManagedSource(tmp_path / "nothing.yaml", ME)) is None


def test_safe_managed_policy_loads_as_the_managed_layer(tmp_path: Path) -> None:
    layer = read_managed(ManagedSource(_managed(tmp_path), ME))
    assert layer is not None and layer.managed and "send_email" in layer.tools


def test_user_writable_managed_file_is_refused_not_skipped(tmp_path: Path) -> None:
    """A world- or group-writable file: anyone (a fooled agent too) could rewrite the company rules."""
    f = _managed(tmp_path)
    os.chmod(f, 0o664)
    with pytest.raises(PolicyError, match="group or others can write it"):
        read_managed(ManagedSource(f, ME))


def test_foreign_owned_managed_file_is_refused(tmp_path: Path) -> None:
    """Owned by someone other than the expected owner (root in production): not the admin's file."""
    f = _managed(tmp_path)
    with pytest.raises(PolicyError, match=f"owned by uid {ME}, not uid {ME + 1}"):
        read_managed(ManagedSource(f, ME + 1))


# An owner that is not root on any machine: the file is given to it when the test runs as root.
NOT_ROOT_UID = 65534  # nobody


def test_production_owner_is_root_and_a_file_anyone_else_owns_is_refused(tmp_path: Path) -> None:
    """The system file must be root's: one a user owns could be rewritten by that user (or a fooled
    agent running as them). Runs on every machine: as root the file is given to `nobody`, as anyone
    else it is already theirs."""
    f = _managed(tmp_path)
    if ME == ROOT_UID:
        os.chown(f, NOT_ROOT_UID, NOT_ROOT_UID)
    owner = f.stat().st_uid
    assert owner != ROOT_UID
    with pytest.raises(PolicyError, match=f"owned by uid {owner}, not root"):
        read_managed(ManagedSource(f))


def test_managed_file_in_a_group_writable_directory_is_refused(tmp_path: Path) -> None:
    """The file may be safe, but whoever can write its directory can replace it."""
    f = _managed(tmp_path)
    os.chmod(f.parent, 0o775)
    with pytest.raises(PolicyError, match="could be replaced by someone else"):
        read_managed(ManagedSource(f, ME))


def test_symlinked_managed_file_pointing_into_a_writable_directory_is_refused(tmp_path: Path) -> None:
    f = _managed(tmp_path)
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    target = open_dir / "real.yaml"
    f.rename(target)
    f.symlink_to(target)
    with pytest.raises(PolicyError, match="could be replaced"):
        read_managed(ManagedSource(f, ME))


def test_managed_file_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    d = _safe_dir(tmp_path) / "policy.yaml"
    d.mkdir(mode=0o755)
    with pytest.raises(PolicyError, match=r"not a regular file|cannot open"):
        read_managed(ManagedSource(d, ME))


def test_bad_managed_policy_names_file_line_and_key(tmp_path: Path) -> None:
    f = _managed(tmp_path, "tools:\n  send_email:\n    max_calls: '1'\n")
    with pytest.raises(PolicyError, match=r"policy.yaml:3: tools.send_email.max_calls"):
        read_managed(ManagedSource(f, ME))


def test_default_places_are_the_system_paths_owned_by_root() -> None:
    assert managed_source({}, "linux") == ManagedSource(LINUX_PATH, ROOT_UID)
    assert managed_source({}, "darwin") == ManagedSource(MACOS_PATH, ROOT_UID)


def test_test_owner_variable_alone_does_not_relax_the_system_file() -> None:
    """Without BOUNCER_MANAGED_POLICY the owner stays root, whatever the test variable says."""
    assert managed_source({TEST_OWNER_ENV: str(ME)}, "linux").owner_uid == ROOT_UID


def test_environment_cannot_replace_an_installed_system_file(tmp_path: Path) -> None:
    system = _managed(tmp_path)
    env = {MANAGED_POLICY_ENV: str(tmp_path / "mine.yaml"), TEST_OWNER_ENV: str(ME)}
    with pytest.raises(PolicyError, match="cannot be replaced from the environment"):
        managed_source(env, "linux", system=system)


def test_override_path_and_owner_for_tests(tmp_path: Path) -> None:
    env = {MANAGED_POLICY_ENV: str(tmp_path / "m.yaml"), TEST_OWNER_ENV: str(ME)}
    assert managed_source(env, "linux", system=tmp_path / "absent") == ManagedSource(tmp_path / "m.yaml", ME)
    with pytest.raises(PolicyError, match="absolute"):
        managed_source({MANAGED_POLICY_ENV: "m.yaml"}, "linux", system=tmp_path / "absent")
    with pytest.raises(PolicyError, match="not a uid"):
        managed_source(
            {MANAGED_POLICY_ENV: "/m.yaml", TEST_OWNER_ENV: "root"}, "linux", system=tmp_path / "x"
        )
