"""CLI start-up benchmark: how long `bouncerctl` takes to start, against a bare Python on this machine.

Run:  .venv/bin/python bench/cli_start.py [--runs 15]

Four commands are started as child processes, each with its output thrown away, and timed from
spawn to exit: ``python -c pass`` (the floor: the interpreter and `site` alone), ``bouncerctl
--help``, ``bouncerctl status`` and ``bouncerctl --version``. ``status`` runs against an empty
temporary ``BOUNCER_HOME``, so it finds no daemon and exits 3 saying so: what is timed is the start
and the failed connect, never a reply. Runs are interleaved (each round starts all four, and the
first of a round rotates), so drift in the machine's load hits every command alike; one warm-up
round goes first and is not counted.

``bouncerctl`` is the console script installed beside this interpreter, run by this interpreter (so
both sides start the same Python); without one, ``python -m bouncerctl``. The package it loads is
whatever this interpreter imports (set ``PYTHONPATH`` to measure another checkout) and is printed
in the first lines. Each line gives the median and the minimum, and both as a multiple of the bare
Python's; the target is a median within 4 x bare Python for ``--help`` and ``status``. The figures
are printed, not asserted.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_RATIO = 4.0
TARGETED = ("bouncerctl --help", "bouncerctl status")
NOT_RUNNING_EXIT = 3  # bouncerctl.common.EXIT_NOT_RUNNING


def _bouncerctl() -> list[str]:
    script = Path(sys.executable).parent / "bouncerctl"
    if script.is_file():
        return [sys.executable, str(script)]
    return [sys.executable, "-m", "bouncerctl"]


def _run(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - start


def _warm_up(commands: dict[str, list[str]], env: dict[str, str]) -> None:
    """One uncounted round, which also checks that each command does what is meant to be timed."""
    for name, argv in commands.items():
        done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        expected = NOT_RUNNING_EXIT if name == "bouncerctl status" else 0
        if done.returncode != expected:
            print(f"warning: {name} exited {done.returncode}, not {expected}: {done.stderr.strip()[:200]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs of each command (default 15)")
    args = parser.parse_args()

    ctl = _bouncerctl()
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "bouncerctl --help": [*ctl, "--help"],
        "bouncerctl status": [*ctl, "status"],
        "bouncerctl --version": [*ctl, "--version"],
    }
    names = list(commands)
    with tempfile.TemporaryDirectory(prefix="bouncer-bench-", dir="/tmp") as home:
        env = dict(os.environ, BOUNCER_HOME=home, PYTHONPYCACHEPREFIX=os.path.join(home, "pycache"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        where = subprocess.run(
            [sys.executable, "-c", "import bouncerctl, os; print(os.path.dirname(bouncerctl.__file__))"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(
            f"python {platform.python_version()} on {sys.platform}, {os.cpu_count()} CPUs, "
            f"load {load}; {args.runs} runs each, interleaved"
        )
        print(f"bouncerctl: {' '.join(ctl[1:]) or ctl[0]} (package {where})")
        _warm_up(commands, env)
        times: dict[str, list[float]] = {name: [] for name in names}
        for round_no in range(args.runs):
            shift = round_no % len(names)
            for name in names[shift:] + names[:shift]:
                times[name].append(_run(commands[name], env))

    base_median = statistics.median(times[names[0]])
    base_min = min(times[names[0]])
    print(f"{'':22} {'median':>9} {'min':>9} {'median/py':>10} {'min/py':>8}")
    for name in names:
        median, fastest = statistics.median(times[name]), min(times[name])
        ratio = median / base_median
        line = (
            f"{name:22} {median * 1000:7.1f}ms {fastest * 1000:7.1f}ms "
            f"{ratio:9.2f}x {fastest / base_min:7.2f}x"
        )
        if name in TARGETED:
            line += f"   target <= {TARGET_RATIO:g}x: {'met' if ratio <= TARGET_RATIO else 'MISSED'}"
        print(line)


if __name__ == "__main__":
    main()
