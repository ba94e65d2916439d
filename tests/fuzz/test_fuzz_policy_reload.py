"""A live daemon reloading generated policy files: the new policy whole, or the old one whole and a note.

The daemon starts with a policy that forbids the tool ``forbidden`` (``max_calls: 0``). Each example
writes a generated policy.yaml (test_fuzz_policy.py's texts) and sends ``reload``. Invariants:

- the daemon's verdict on the file is the loader's (``bouncerctl policy check`` and the daemon agree);
- a refused file leaves the old policy in force, whole (the fault: a half-loaded state, or a status
  that says ``loaded`` after a failed reload): ``status`` says ``reload failed``
  with an error naming the file, and ``forbidden`` is still denied;
- the daemon stays up, and its log holds no traceback.

After each example the good policy is restored and reloaded, so every example starts from it.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _counts import ran
from fuzzd import FuzzDaemon, short_home, start_daemon, stop_daemon
from hypothesis import HealthCheck, given, settings
from test_fuzz_policy import texts

from bouncerd.client import Client
from bouncerd.core.policy import builtin_packs, merge
from bouncerd.errors import PolicyError
from bouncerd.policyfiles import read_policy

pytestmark = pytest.mark.e2e

GOOD = "version: 1\ntools:\n  forbidden:\n    max_calls: 0\n"
EXAMPLES = 40


@pytest.fixture(scope="module")
def reloading() -> Iterator[FuzzDaemon]:
    home = short_home()
    daemon = start_daemon(home, GOOD)
    try:
        yield daemon
    finally:
        stop_daemon(daemon)
        shutil.rmtree(home, ignore_errors=True)


def policy_file(daemon: FuzzDaemon) -> Path:
    return daemon.home / "config" / "policy.yaml"


def loads(path: Path) -> bool:
    try:
        merge([read_policy(path)], builtin_packs())
    except PolicyError:
        return False
    return True


def forbidden_verdict(daemon: FuzzDaemon) -> Any:
    hello = {"session": "reload", "server": "srv", "upstream": ["srv"], "client_pid": 1, "instance": "r"}
    with Client.connect(daemon.socket, role="shim", timeout=10.0, **hello) as shim:
        return shim.request("verdict", request_id=1, tool="forbidden", arguments={})["verdict"]


def reload(daemon: FuzzDaemon) -> tuple[Any, dict[str, Any]]:
    with Client.connect(daemon.socket, timeout=30.0) as ctl:
        error = ctl.request("reload").get("error")
        return error, ctl.request("status")["policy"]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=texts)
def test_reload_of_any_policy_text_swaps_in_the_whole_new_policy_or_keeps_the_old_whole(
    reloading: FuzzDaemon, text: str
) -> None:
    ran("policy reload (live daemon)")
    path = policy_file(reloading)
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    expected_ok = loads(path)
    error, status = reload(reloading)
    try:
        if error is None:
            assert expected_ok, f"the daemon loaded what the loader refuses: {text[:200]!r}"
            assert status["state"] == "loaded" and status["reload_error"] is None
        else:
            assert isinstance(error, str) and error.startswith(str(path)), error
            assert status["state"] == "reload failed" and status["reload_error"] == error
            assert forbidden_verdict(reloading) == "deny", "a failed reload changed the policy in force"
        assert "Traceback" not in reloading.stderr(), reloading.stderr()[-3000:]
    finally:
        path.write_text(GOOD, encoding="utf-8")
        assert reload(reloading)[0] is None
    assert forbidden_verdict(reloading) == "deny"
