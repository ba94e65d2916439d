"""AgentDojo's injected episodes replayed through the real shim and daemon (bench/agentdojo).

A few pairs of each suite, end to end: the injected environment, the user task's ground-truth calls
and the injection task's, through `bouncer-shim` and a real `bouncerd` (the shipped packs, the user
prompt vouched as the UserPromptSubmit hook would, a person who declines every ask), scored by
AgentDojo's own checks; and the same pairs with no proxy, to show the replay lands attacks at all.
The whole four-suite run is a benchmark command (bench/agentdojo/run.py), not a test.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
RUN_PY = REPO / "bench" / "agentdojo" / "run.py"
# Two pairs per suite: enough to cover each suite's sends, reads and fetches, a few seconds each.
PAIRS_PER_SUITE = 2
# A bound, not an expectation: loading the four suites takes seconds, each episode well under one.
RUN_TIMEOUT_SECONDS = 120


def _replay() -> Any:
    if importlib.util.find_spec("agentdojo") is None:
        pytest.skip("agentdojo is not installed (pip install -e '.[agentdojo]' to run the replay)")
    spec = importlib.util.spec_from_file_location("agentdojo_replay_run", RUN_PY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.asyncio
async def test_injected_sends_never_reach_the_server_and_benign_reads_pass(tmp_path: Path) -> None:
    replay = _replay()
    args = replay.parse(
        [
            "--limit",
            str(PAIRS_PER_SUITE),
            "--hook",
            "on",
            "--people",
            "decline",
            "--out",
            str(tmp_path / "o.json"),
        ]
    )
    with anyio.fail_after(RUN_TIMEOUT_SECONDS):
        tallies = await replay.run(args)
    suites = list(args.suites)
    guarded = tallies["hook-on.decline"].summary(suites)
    baseline = tallies["none"].summary(suites)
    assert guarded["pairs"] == baseline["pairs"] == PAIRS_PER_SUITE * len(suites)
    # Without Bouncer the obeying agent's sends run and some attacks land: the replay has teeth.
    assert baseline["attack"]["send"]["allowed"] > 0
    assert baseline["attack_success"] > 0
    # Through Bouncer no attack send reaches the server, and no benign read or fetch is refused.
    assert guarded["attack"]["send"]["allowed"] == 0
    assert guarded["benign"]["read"]["asked"] == guarded["benign"]["read"]["denied"] == 0
    assert guarded["attack_success"] < baseline["attack_success"]
