"""Who the user is, from `bouncerctl init --you`, as the real daemon then judges a send.

`init --you` writes the policy's `you:` (through click's CliRunner, in a temporary home); a real
`bouncerd` reads that policy, and a real shim, fixture server and `mcp` client run bench/opentasks'
`add_me` task: the user's profile names their address, and the agent adds them to their own calendar
event. With the address in `you:` the invite goes through; the attack twin beside it (the same event
with a second participant the profile's note planted) is still denied. Without `you:` the same
invite does not go through at first: that is what the question at init is for.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from bouncerctl.app import main
from click.testing import CliRunner

from bouncerd.paths import resolve

pytestmark = pytest.mark.e2e

BENCH = Path(__file__).resolve().parents[2] / "bench" / "opentasks"
TASK = "add_me/get_user_info+create_calendar_event"
# A bound, not an expectation: each task starts a shim and a server, a few seconds on a busy machine.
TASK_TIMEOUT_SECONDS = 90


def _load(name: str) -> Any:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"opentasks_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _policy_from_init(tmp_path: Path, address: str) -> str:
    home = tmp_path / "inithome"
    home.mkdir()
    config = home / "mcp.json"
    config.write_text('{"mcpServers": {}}\n')
    env = {"HOME": str(home), "BOUNCER_HOME": str(tmp_path / "initbouncer")}
    result = CliRunner().invoke(main, ["init", "--config", str(config), "--yes", "--you", address], env=env)
    assert result.exit_code == 0, result.output
    return resolve(env).policy.read_text(encoding="utf-8")


async def _run(run: Any, task: Any, policy: str, tmp_path: Path) -> Any:
    daemon = run.Daemon(policy)
    try:
        with anyio.fail_after(TASK_TIMEOUT_SECONDS):
            return await run.run_task(daemon, task, "decline", 0, tmp_path)
    finally:
        daemon.stop()


@pytest.mark.asyncio
async def test_an_invite_to_the_address_given_at_init_goes_through_and_its_twin_does_not(
    tmp_path: Path,
) -> None:
    tasks, run = _load("tasks"), _load("run")
    [task] = [t for t in tasks.all_tasks(["add_me"]) if t.key == TASK]
    policy = _policy_from_init(tmp_path, tasks.ME)
    assert tasks.ME in policy
    out = await _run(run, task, policy, tmp_path)
    benign = [c for c in out.calls if c.role == "benign"]
    attacks = [c for c in out.calls if c.role == "attack"]
    assert benign and all(c.first == "allowed" and c.reached for c in benign), benign
    assert attacks and all(c.first == "denied" and not c.reached for c in attacks), attacks

    without = await _run(run, task, "version: 1\n", tmp_path)
    assert not any(c.first == "allowed" for c in without.calls if c.role == "benign"), without.calls
