"""Run bench/heldout: tasks the gate was not tuned on, and their attack twins, through the real stack.

Theory of operation
-------------------
The tasks are `tasks.all_tasks` (kinds of work none of bench/opentasks' classes cover, on servers
spelt as public APIs spell them); the driver is bench/opentasks' (`taskdriver.py`): one `bouncerd
--foreground` in a fresh temporary BOUNCER_HOME whose policy says only who the user is, so every gate
comes from the fallback reading what each server published; per task and person a session, a shim
over tests/fixtures/servers/opentasks.py, the real `mcp.Client`, the prompt vouched as the
UserPromptSubmit hook vouches it, and the task's calls in order. A person who declines every question
and one who approves every question (through the ctl op `approve`, what `bouncerctl approve` sends)
are simulated.

Figures, per kind and in total: benign sends allowed/asked/denied and attack sends
allowed/asked/denied (first verdicts), reads refused, utility per person, attack success per person;
then the same attack counts per technique; then every refused benign call and every attack call
allowed at its first verdict, with its rule. The figures of record and what they show, cause by
cause: README.md beside this file.

Usage: ``.venv/bin/python bench/heldout/run.py [--kinds a,b] [--people decline,all] [--json FILE]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from types import ModuleType

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "opentasks"))

from taskdriver import TaskOutcome, report, run_all, write_json

HERE = Path(__file__).resolve().parent


def load_tasks() -> ModuleType:
    """This directory's tasks.py, under a name of its own (bench/opentasks has a `tasks` too)."""
    name = "heldout_tasks"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / "tasks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def by_technique(outcomes: list[TaskOutcome]) -> str:
    """Each attack technique's first verdicts and how often it reached the server, per person."""
    first: dict[str, Counter[str]] = defaultdict(Counter)
    reached: dict[str, Counter[str]] = defaultdict(Counter)
    people: list[str] = []
    for o in outcomes:
        if o.person not in people:
            people.append(o.person)
        for c in o.calls:
            if c.role != "attack":
                continue
            if o.person == people[0]:
                first[c.technique][c.first] += 1
            reached[c.technique][o.person] += c.reached
    head = ["technique", "sends", "allowed/asked/denied", *(f"reached {p}" for p in people)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for technique in sorted(first):
        f = first[technique]
        row = [technique, str(sum(f.values())), f"{f['allowed']}/{f['asked']}/{f['denied']}"]
        row += [str(reached[technique][p]) for p in people]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


async def run(args: argparse.Namespace) -> list[TaskOutcome]:
    tasks = load_tasks()
    chosen = tasks.all_tasks(args.kinds.split(",") if args.kinds else None)
    return await run_all(chosen, args.people.split(","), tasks.POLICY)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kinds", default="", help="comma-separated kinds (default: all)")
    parser.add_argument("--people", default="decline,all", help="decline, all, or both")
    parser.add_argument("--json", default="", help="also write every call's verdict to this file")
    args = parser.parse_args(argv)
    started = time.monotonic()
    outcomes = anyio.run(run, args)
    people = args.people.split(",")
    text = report(outcomes, people, unit="kind")
    head, _, rest = text.partition("\n\nrefused benign calls")
    print(head)
    print("\nattack sends by technique (first verdicts):\n")
    print(by_technique(outcomes))
    print("\nrefused benign calls" + rest)
    print(f"\n{len(outcomes)} task runs in {time.monotonic() - started:.0f} s")
    if args.json:
        write_json(outcomes, Path(args.json))


if __name__ == "__main__":
    main()
