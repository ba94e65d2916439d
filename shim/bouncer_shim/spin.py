"""How the shim waits for a verdict: poll a little before it sleeps, while polling pays.

Theory of operation
-------------------
A write that wakes a process asleep on another CPU costs the writer tens of microseconds on a
virtual machine, and the sleeper as much again to wake; a shim still polling when bouncerd's verdict
comes costs neither. So while a verdict is awaited the pump polls its descriptors for up to
`SPIN_SECONDS` (yielding the CPU between polls, so a runnable process keeps its turn) before it
sleeps (`poll_then_wait`). The verdict is the one wait the shim adds to a call that is short and
certain to end; the shim polls for nothing else (a server's result, the client's next call, a slow
reader, the daemon's acknowledgements): on 2 CPUs the client, the server, the shim and the daemon
contend for the cores, and a call forwarded before it is asked has the daemon indexing its output
while the client reads it, so polling there took the core one of them needed.

Polling pays only when the answer comes inside the window. On a host busy with other work, bouncerd
is seldom scheduled within it: every poll then runs the whole window for nothing, and the CPU it
burns is taken from the processes the call waits for (bench/relay.py on a shared 2-CPU host: the
shim's CPU a round trip 1.4-1.9x with polling against without, with no gain in latency). `SpinBudget`
learns which case it is in. Each wait that polled ends as a *hit* (something became ready while
polling: the sleep and its wake-up were saved) or a *miss* (the window ran out; the shim sleeps
anyway). A hit adds one to a score, up to MAX_SCORE; a miss takes MISS_COST off, down to zero. The
shim polls while the score is above zero, so polling goes on while at least MISS_COST / (1 +
MISS_COST) of the polls hit (two in three: a miss burns the whole window, a hit only the time to the
answer). At zero it sleeps at once, and polls on one wait in PROBE_EVERY to notice that the host has
become quiet again; one hit is then enough to poll every time again. A single miss on a quiet host
(a verdict that had to wait for indexing) costs nothing: the score stays up.

The budget is sans I/O; `poll_then_wait` takes the selector, the clock and the yield as arguments.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

# How long the shim polls for a verdict before it sleeps. Long enough for bouncerd to answer a verdict
# that reads no large output (~150 µs on an idle 2-CPU VM), short enough that a miss costs little.
# Overridable for benchmarks with BOUNCER_SHIM_SPIN_US (0: never poll).
SPIN_SECONDS: Final = 0.0005
SPIN_VARIABLE: Final = "BOUNCER_SHIM_SPIN_US"

# The score that allows polling: a hit adds one, up to MAX_SCORE, a miss takes MISS_COST off. Eight
# lets a quiet host absorb a run of four misses (a burst of indexing) and still poll; a busy host,
# where most polls miss, gets to zero within a few waits.
MAX_SCORE: Final = 8
MISS_COST: Final = 2

# At zero the shim still polls on one wait in this many, to learn that the host has become quiet: a
# probe that misses costs one window per PROBE_EVERY verdicts, ~30 µs a verdict at 500 µs.
PROBE_EVERY: Final = 16

Event = tuple[Any, int]  # what a selector's select returns: (key or name, ready events)


class Selector(Protocol):
    def select(self, timeout: float | None = None) -> list[Event]: ...


def spin_seconds(environ: Mapping[str, str]) -> tuple[float, str | None]:
    """The polling window from the environment, and a diagnostic when the setting is unusable."""
    value = environ.get(SPIN_VARIABLE)
    if not value:
        return SPIN_SECONDS, None
    try:
        return max(0, int(value)) / 1e6, None
    except ValueError:
        return SPIN_SECONDS, f"{SPIN_VARIABLE}={value!r} is not a whole number of µs; using the default"


class SpinBudget:
    """Whether the next wait for a verdict should poll first, from how the last ones ended."""

    __slots__ = ("_since_probe", "score")

    def __init__(self) -> None:
        self.score = MAX_SCORE  # start polling: a quiet host is the common case
        self._since_probe = 0  # waits at score zero since the last probe

    def should_poll(self) -> bool:
        if self.score > 0:
            return True
        self._since_probe += 1
        if self._since_probe >= PROBE_EVERY:
            self._since_probe = 0
            return True
        return False

    def hit(self) -> None:
        """Something became ready while polling."""
        self.score = min(MAX_SCORE, self.score + 1)
        self._since_probe = 0

    def miss(self) -> None:
        """The window ran out with nothing ready."""
        self.score = max(0, self.score - MISS_COST)


def poll_then_wait(
    sel: Selector,
    timeout: float | None,
    window: float,
    budget: SpinBudget,
    *,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[], None] = os.sched_yield,
) -> list[Event]:
    """Poll `sel` for up to `window` (never past `timeout`), then wait for the rest of `timeout`;
    the outcome is told to `budget`."""
    window = window if timeout is None else min(window, timeout)
    until = clock() + window
    while True:
        events = sel.select(0)
        if events:
            budget.hit()
            return events
        if clock() >= until:
            break
        pause()
    budget.miss()
    return sel.select(None if timeout is None else max(0.0, timeout - window))
