"""The `daemon`, `shared_daemon` and `start` fixtures: a real `bouncerd --foreground` in a short
temporary BOUNCER_HOME.

`daemon` yields a `RunningDaemon` (daemons.py) in a fresh home once the socket answers a ping, and
stops the daemon with SIGTERM at the end (SIGKILL only if it does not exit in time). The daemons come
from one `DaemonPool` (daemons.py): the next one starts while a test runs, and a used one's exit is
not waited for before the next test starts. `shared_daemon` is the same, one
for a whole module: only for tests that read what the daemon holds and change nothing another test
of the module reads (a test that needs its own taint gives its shim a session of its own). Tests
import what they need from daemons.py or harness.py, never from this module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from daemons import DaemonPool, RunningDaemon, short_home, spawn_daemon, wait_until_serving
from harness import write_policy


@pytest.fixture(scope="session")
def daemon_pool() -> Iterator[DaemonPool]:
    pool = DaemonPool()
    yield pool
    pool.close()


def _serving(pool: DaemonPool) -> Iterator[RunningDaemon]:
    running = pool.take()
    try:
        yield running
    finally:
        pool.retire(running)


@pytest.fixture
def daemon(daemon_pool: DaemonPool) -> Iterator[RunningDaemon]:
    yield from _serving(daemon_pool)


@pytest.fixture(scope="module")
def shared_daemon(daemon_pool: DaemonPool) -> Iterator[RunningDaemon]:
    yield from _serving(daemon_pool)


@pytest.fixture
def start(monkeypatch: pytest.MonkeyPatch, daemon_pool: DaemonPool) -> Iterator[Callable[..., RunningDaemon]]:
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
        daemon_pool.retire(running)
