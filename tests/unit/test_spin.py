"""The shim's wait for a verdict (shim/bouncer_shim/spin.py): it polls while polling pays, stops on a
host where polls keep missing, and finds out again when the host quietens."""

from __future__ import annotations

import random
import selectors
from typing import Any

import pytest
from bouncer_shim.spin import (
    MAX_SCORE,
    MISS_COST,
    PROBE_EVERY,
    SPIN_SECONDS,
    SPIN_VARIABLE,
    SpinBudget,
    poll_then_wait,
    spin_seconds,
)


def run(budget: SpinBudget, outcomes: list[bool]) -> list[bool]:
    """Drive the budget through waits whose polls would hit (True) or miss (False); which polled."""
    polled = []
    for hit in outcomes:
        polls = budget.should_poll()
        polled.append(polls)
        if polls:
            budget.hit() if hit else budget.miss()
    return polled


@pytest.mark.parametrize("seed", range(20))
def test_a_busy_host_where_polls_miss_stops_burning_the_window(seed: int) -> None:
    """Where most polls miss (the daemon is seldom scheduled within the window), the shim stops
    polling after a few waits: afterwards at most one wait in PROBE_EVERY polls, whatever came before."""
    rng = random.Random(seed)
    budget = SpinBudget()
    run(budget, [rng.random() < 0.9 for _ in range(rng.randrange(0, 200))])  # any history
    hit_rate = rng.uniform(0.0, 0.3)
    polled = run(budget, [rng.random() < hit_rate for _ in range(1600)])
    settled = polled[MAX_SCORE * 4 :]
    assert sum(settled) <= len(settled) * (2 / PROBE_EVERY) + 2


@pytest.mark.parametrize("seed", range(20))
def test_a_quiet_host_where_polls_hit_keeps_polling(seed: int) -> None:
    """Where most polls hit (the verdict comes within the window), the shim polls on nearly every
    wait, occasional misses (a verdict that waits for indexing) included."""
    rng = random.Random(seed)
    budget = SpinBudget()
    run(budget, [rng.random() < 0.1 for _ in range(rng.randrange(0, 200))])  # any history
    hit_rate = rng.uniform(0.85, 1.0)
    polled = run(budget, [rng.random() < hit_rate for _ in range(1600)])
    settled = polled[PROBE_EVERY * 4 :]
    assert sum(settled) >= len(settled) * 0.9


def test_one_hit_after_a_busy_spell_resumes_polling() -> None:
    budget = SpinBudget()
    run(budget, [False] * (MAX_SCORE // MISS_COST))
    assert budget.score == 0
    assert run(budget, [True] * PROBE_EVERY) == [False] * (PROBE_EVERY - 1) + [True]
    assert budget.should_poll()


def test_a_single_miss_on_a_quiet_host_keeps_polling() -> None:
    budget = SpinBudget()
    run(budget, [False])
    assert budget.should_poll()


class FakeSelector:
    """select(0) is ready on the `ready_at`-th poll (None: never); select(timeout) is the sleep."""

    def __init__(self, ready_at: int | None) -> None:
        self.ready_at = ready_at
        self.polls = 0
        self.slept: list[float | None] = []

    def select(self, timeout: float | None = None) -> list[Any]:
        if timeout == 0:
            self.polls += 1
            return [("ready", selectors.EVENT_READ)] if self.polls == self.ready_at else []
        self.slept.append(timeout)
        return [("slept", selectors.EVENT_READ)]


class FakeClock:
    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@pytest.mark.parametrize("ready_at", [1, 2, 5, 9])
def test_an_answer_within_the_window_is_a_hit_without_sleeping(ready_at: int) -> None:
    sel, budget = FakeSelector(ready_at), SpinBudget()
    budget.score = 3
    events: list[Any] = poll_then_wait(sel, 100.0, 10.0, budget, clock=FakeClock(1.0), pause=lambda: None)  # type: ignore[arg-type]
    assert events == [("ready", selectors.EVENT_READ)]
    assert sel.slept == []
    assert budget.score == 4


@pytest.mark.parametrize(("timeout", "rest"), [(None, None), (2.0, 1.5), (0.75, 0.25)])
def test_a_window_that_runs_out_is_a_miss_and_then_sleeps_the_rest(
    timeout: float | None, rest: float | None
) -> None:
    sel, budget = FakeSelector(None), SpinBudget()
    events: list[Any] = poll_then_wait(sel, timeout, 0.5, budget, clock=FakeClock(0.1), pause=lambda: None)  # type: ignore[arg-type]
    assert events == [("slept", selectors.EVENT_READ)]
    assert sel.slept == [rest]
    assert budget.score == MAX_SCORE - MISS_COST


@pytest.mark.parametrize(
    ("value", "expected", "noted"),
    [(None, SPIN_SECONDS, False), ("", SPIN_SECONDS, False), ("0", 0.0, False), ("250", 0.00025, False),
     ("-5", 0.0, False), ("fast", SPIN_SECONDS, True)],
)  # fmt: skip
def test_the_window_comes_from_the_environment(value: str | None, expected: float, noted: bool) -> None:
    environ = {} if value is None else {SPIN_VARIABLE: value}
    seconds, note = spin_seconds(environ)
    assert seconds == pytest.approx(expected)
    assert (note is not None) == noted
