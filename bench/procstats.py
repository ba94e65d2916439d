"""What bench/relay.py reads about the processes it runs: Linux /proc figures and cProfile output.

The shim and the daemon are measured from outside, without changing them: CPU time from the
scheduler's nanosecond count (``/proc/PID/schedstat``), wake-ups from the voluntary context
switches, memory from ``/proc/PID/status``; and, with ``--profile``, where each spends its time,
from the profile each writes as it exits.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path


def shim_pid(bindir: Path) -> int | None:
    """The bouncer-shim from `bindir` this process started (Linux /proc), or None."""
    return child_pid(bindir / "bouncer-shim")


def child_pid(script: Path, parent: int | None = None) -> int | None:
    """The child of `parent` (default: this process) running `script` (an argument of its command
    line), or None."""
    script_arg = str(script).encode()
    parent = os.getpid() if parent is None else parent
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            cmdline = (status.parent / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(fields.get("PPid", "0")) == parent and script_arg in cmdline:
            return int(status.parent.name)
    return None


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of `pid` in MB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def cpu_seconds(pid: int | None) -> float:
    """CPU time of `pid` so far (Linux /proc), 0.0 if unknown: the scheduler's nanosecond count where
    there is one (/proc/PID/schedstat), else user + system in clock ticks (10 ms, too coarse to tell
    a 50-call block from the next)."""
    if pid is None:
        return 0.0
    with contextlib.suppress(OSError, IndexError, ValueError):
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sleeps(pid: int | None) -> int:
    """Times `pid` has gone to sleep so far (voluntary context switches, Linux /proc), 0 if unknown.
    Each one is a wake-up some other process's write paid for."""
    if pid is None:
        return 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split(":", 1)[1])
    except (OSError, ValueError):
        pass
    return 0


def load_average() -> str:
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load average unknown"
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


# Functions shown per process by --profile, and the waits left out of them (the time asleep).
PROFILE_TOP = 30
IDLE_FUNCTIONS = ("'poll' of 'select.epoll'", "'select' of 'select.", "sched_yield")


def profile_report(path: Path, calls: int, add: Callable[[str], None]) -> None:
    """The functions `path` (cProfile output) spent most time in themselves, per relayed call."""
    import pstats

    if not path.exists():
        add(f"  {path.name}: no profile written (the process did not exit cleanly)")
        return
    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    rows = []
    for (file, line, name), (_, ncalls, own, cumulative, _) in stats.items():
        if any(idle in name for idle in IDLE_FUNCTIONS):
            continue
        where = name if file == "~" else f"{Path(file).parent.name}/{Path(file).name}:{line}({name})"
        rows.append((own, cumulative, ncalls, where))
    busy = sum(row[0] for row in rows)
    add(
        f"  {path.name}: {busy * 1e6 / calls:.0f} µs a call busy under the profiler (whole run, start-up "
        f"included, over {calls} relayed calls; cProfile slows Python code, compiled code counts as one "
        f"built-in); the top {PROFILE_TOP} by own time, µs a call:"
    )
    for own, cumulative, ncalls, where in sorted(rows, reverse=True)[:PROFILE_TOP]:
        own_us, with_us = own * 1e6 / calls, cumulative * 1e6 / calls
        add(f"    {own_us:7.1f} own {with_us:8.1f} with callees  {ncalls:7d}x  {where}")
