"""requirements.lock: the exact versions CI installs, for everything scripts/setup installs.

A dependency pyproject.toml names (the project's own, and the test and otel extras scripts/setup
installs) that the lock does not pin would be resolved afresh in CI, which then tests something no
reviewer saw; a pin that does not satisfy pyproject's range cannot be installed at all. The lock is
read as pip reads a constraints file: ``name==version`` lines and comments.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
EXTRAS = ("test", "otel")  # what scripts/setup installs
PIN = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)")


def _pins() -> dict[str, Version]:
    pins: dict[str, Version] = {}
    for number, line in enumerate((ROOT / "requirements.lock").read_text().splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        match = PIN.fullmatch(text)
        assert match, f"requirements.lock:{number}: {line!r} is not name==version"
        pins[canonicalize_name(match[1])] = Version(match[2])
    return pins


def _required() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = list(project["dependencies"])
    for extra in EXTRAS:
        names += project["optional-dependencies"][extra]
    return [Requirement(name) for name in names]


def test_every_dependency_setup_installs_is_pinned_within_its_range() -> None:
    pins = _pins()
    unpinned = [str(r) for r in _required() if canonicalize_name(r.name) not in pins]
    assert unpinned == [], "not in requirements.lock (run scripts/lock)"
    outside = [
        f"{r} (locked {pins[canonicalize_name(r.name)]})"
        for r in _required()
        if not r.specifier.contains(pins[canonicalize_name(r.name)], prereleases=True)
    ]
    assert outside == []


def test_the_lock_names_versions_only() -> None:
    """No editable checkout, no URL or index: the lock says what, the installer's own configuration
    says where from."""
    text = (ROOT / "requirements.lock").read_text()
    assert "://" not in text and "-e " not in text and "--" not in text
    assert "bouncer" not in _pins()  # the project itself is installed from the checkout
