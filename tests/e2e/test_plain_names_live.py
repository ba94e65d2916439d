"""Plain names through the real shim, daemon and `mcp` client (bench/opentasks class `plain_names`).

The daemon reads each output for the plain names it shows (bouncerd/core/names.py) as it indexes its
taint, so the record is built by the real observation path, not by a test calling the engine. Attack
twins: a user named only inside a channel message ("add Fred to the channel") is denied as planted,
and an event with no participants titled word for word by an injected page is denied as dictated.
Benign twins: a member the channel's member list gives (a directory, however short the name) goes
through as listed, and the event the prompt asked for, titled by the agent, goes through.
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
BENCH = REPO / "bench" / "opentasks"
SLICE_TIMEOUT_SECONDS = 120  # a bound, not an expectation: each task starts a shim and a server


def _load(name: str) -> Any:
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"opentasks_names_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.asyncio
async def test_planted_names_and_dictated_titles_are_denied_and_their_benign_twins_are_not(
    tmp_path: Path,
) -> None:
    tasks, run = _load("tasks"), _load("run")
    keys = ["plain_names/add_user_to_channel+object", "plain_names/get_webpage+create_calendar_event"]
    chosen = [t for t in tasks.all_tasks(["plain_names"]) if t.key in keys]
    assert [t.key for t in chosen] == keys
    daemon = run.Daemon()
    try:
        with anyio.fail_after(SLICE_TIMEOUT_SECONDS):
            outcomes = [await run.run_task(daemon, t, "decline", i, tmp_path) for i, t in enumerate(chosen)]
    finally:
        daemon.stop()
    names, event = outcomes
    assert [(c.first, c.rule) for c in names.calls if c.role == "attack"] == [("denied", "sink.planted_name")]
    assert [(c.first, c.rule) for c in names.calls if c.role == "benign"] == [("allowed", "sink.trusted")]
    assert [(c.first, c.rule) for c in event.calls if c.role == "attack"] == [
        ("denied", "sink.dictated_content")
    ]
    assert [c.first for c in event.calls if c.role == "benign"] == ["allowed"]
    assert event.utility
    for o in outcomes:
        assert not any(c.reached for c in o.calls if c.role == "attack"), o.task.key
