"""The `daemon`, `shared_daemon` and `start` fixtures: a real `bouncerd --foreground` in a short
temporary BOUNCER_HOME.

`daemon` yields a `RunningDaemon` (daemons.py) once the socket answers a ping, and stops the daemon
with SIGTERM at the end (SIGKILL only if it does not exit in time). `shared_daemon` is the same, one
for a whole module: only for tests that read what the daemon holds and change nothing another test
of the module reads (a test that needs its own taint gives its shim a session of its own). Tests
import what they need from daemons.py or harness.py, never from this module.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator

import pytest
from daemons import RunningDaemon, short_home, spawn_daemon, wait_until_serving
from harness import write_policy


def _serving() -> Iterator[RunningDaemon]:
    home = short_home()
    running = spawn_daemon(home)
    try:
        wait_until_serving(running)
        yield running
    finally:
        running.stop()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def daemon() -> Iterator[RunningDaemon]:
    yield from _serving()


@pytest.fixture(scope="module")
def shared_daemon() -> Iterator[RunningDaemon]:
    yield from _serving()


@pytest.fixture
def start(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., RunningDaemon]]:
    """start(policy=None, **env) -> a serving daemon of its own (no desktop notifications unless a
    test sets BOUNCER_NO_NOTIFY itself); all are stopped and their homes removed afterwards."""
    started: list[RunningDaemon] = []
    monkeypatch.setenv("BOUNCER_NO_NOTIFY", "1")

    def _start(policy: str | None = None, **env: str) -> RunningDaemon:
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        home = short_home()
        if policy is not None:
            write_policy(home, policy)
        running = spawn_daemon(home)
        started.append(running)
        wait_until_serving(running)
        return running

    yield _start
    for running in started:
        running.stop()
        shutil.rmtree(running.home, ignore_errors=True)
