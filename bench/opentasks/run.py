"""Run bench/opentasks: generated open-ended tasks and their attack twins through the real shim and daemon.

Theory of operation
-------------------
One `bouncerd --foreground` in a fresh temporary BOUNCER_HOME serves the run; its policy.yaml says
only who the user is (`you:`), no tool is declared and no pack knows the server, so every gate comes
from the fallback reading what the server published, as on a server nobody here has seen. For each
task (`tasks.all_tasks`) and each simulated person the driver writes the task's tools and replies for
tests/fixtures/servers/opentasks.py, starts ``bouncer-shim --name ot-N -- python opentasks.py`` with a
session of its own, connects the real `mcp.Client` (no elicitation, so an ask comes back as a refusal
with a one-time code), hands the prompt to the daemon as the UserPromptSubmit hook does (op `vouch`
on a `hook` connection), and makes the task's calls in order. An asked call is approved through the
ctl op `approve` (what `bouncerctl approve` sends) and retried once when the person approves all;
declined otherwise. Whether a call reached the server comes from the server's own record; the rule
that refused it from the daemon's audit log.

The driver lives in `taskdriver.py`, shared with bench/heldout.

Figures, per class and in total: benign sends allowed/asked/denied and attack sends
allowed/asked/denied (first verdicts), reads refused, utility (every benign send of the task reached
the server) per person, attack success (any attack send reached it) per person, every refused
benign call and every attack call allowed at its first verdict, with its rule.

Usage: ``.venv/bin/python bench/opentasks/run.py [--classes a,b] [--people decline,all]
[--json FILE]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import taskdriver
from taskdriver import TaskOutcome, report, run_task, write_json
from tasks import POLICY, all_tasks

__all__ = ["Daemon", "TaskOutcome", "report", "run_task"]


class Daemon(taskdriver.Daemon):
    """The driver's daemon with this benchmark's policy unless told otherwise."""

    def __init__(self, policy: str = POLICY) -> None:
        super().__init__(policy)


async def run(args: argparse.Namespace) -> list[TaskOutcome]:
    tasks = all_tasks(args.classes.split(",") if args.classes else None)
    return await taskdriver.run_all(tasks, args.people.split(","), POLICY)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--classes", default="", help="comma-separated classes (default: all)")
    parser.add_argument("--people", default="decline,all", help="decline, all, or both")
    parser.add_argument("--json", default="", help="also write every call's verdict to this file")
    args = parser.parse_args(argv)
    started = time.monotonic()
    outcomes = anyio.run(run, args)
    print(report(outcomes, args.people.split(",")))
    print(f"\n{len(outcomes)} task runs in {time.monotonic() - started:.0f} s")
    if args.json:
        write_json(outcomes, Path(args.json))


if __name__ == "__main__":
    main()
