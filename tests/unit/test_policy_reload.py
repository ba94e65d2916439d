"""Policy reloads (bouncerd/server/policies.py): read off the event loop, swapped in whole, one at a time,
and a failed one keeps the last good policy and says what failed."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from bouncerd.core.policy import Policy
from bouncerd.server.policies import Loaded, PolicyState, Reloader

WAIT_SECONDS = 10.0  # bounds a broken test; never an expectation


class Rig:
    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "policy.yaml"
        self.path.write_text("approval_timeout: 10\n")
        self.state = PolicyState(self.path)
        self.state.commit(self.state.read(), now=1.0)
        self.in_force: list[Policy] = []
        self.audited: list[dict[str, Any]] = []
        self.reloader = Reloader(self.state, self.in_force.append, lambda rec, now: self.audited.append(rec))

    def timeout(self) -> int:
        return self.state.base.settings.approval_timeout


def test_a_reload_reads_in_a_worker_thread_while_the_loop_goes_on_with_the_old_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fault: a 530 KB policy was parsed on the event loop, holding every verdict for seconds."""
    rig = Rig(tmp_path)
    rig.path.write_text("approval_timeout: 20\n")
    reading, release = threading.Event(), threading.Event()
    real_read = rig.state.read

    def slow_read() -> Loaded:
        assert threading.current_thread() is not threading.main_thread()
        reading.set()
        release.wait(WAIT_SECONDS)
        return real_read()

    monkeypatch.setattr(rig.state, "read", slow_read)
    seen_meanwhile: list[int] = []

    async def main() -> str | None:
        with anyio.fail_after(WAIT_SECONDS):
            async with anyio.create_task_group() as tg:
                result: list[str | None] = []

                async def reload() -> None:
                    result.append(await rig.reloader.reload(lambda: 2.0))

                tg.start_soon(reload)
                while not reading.is_set():
                    await anyio.sleep(0.01)  # the loop runs: verdicts would be answered here
                seen_meanwhile.append(rig.timeout())
                release.set()
            return result[0]

    assert anyio.run(main) is None
    assert seen_meanwhile == [10]  # while the file was read, the old policy was in force, whole
    assert rig.timeout() == 20 and rig.in_force == [rig.state.base]


def test_a_read_overtaken_by_a_synchronous_reload_is_read_again_so_the_newest_file_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An "always" answer rewrites policy.yaml and reloads it at once while a SIGHUP reload is reading:
    committing the slower, older read afterwards would drop the allowlist entry the person just added."""
    rig = Rig(tmp_path)
    rig.path.write_text("approval_timeout: 20\n")
    real_read = rig.state.read
    reads = 0

    def read() -> Loaded:
        nonlocal reads
        reads += 1
        loaded = real_read()
        if reads == 1:  # the worker's first read: the person's edit and its reload land meanwhile
            rig.path.write_text("approval_timeout: 30\n")
            assert rig.reloader.reload_now(now=2.0) is None
        return loaded

    monkeypatch.setattr(rig.state, "read", read)
    assert anyio.run(rig.reloader.reload, lambda: 3.0) is None
    assert rig.timeout() == 30 and reads == 3


@pytest.mark.parametrize(
    ("failure", "line", "reason"),
    [
        (None, 3, "max_calls"),
        (RecursionError("maximum recursion depth exceeded"), None, "RecursionError"),
    ],
)
def test_a_failed_reload_keeps_the_last_good_policy_and_says_file_line_reason_and_when(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    failure: BaseException | None,
    line: int | None,
    reason: str,
) -> None:
    """Fault: after a failed reload, status still said "loaded" with no failure note (a RecursionError
    from the loader was not even caught)."""
    rig = Rig(tmp_path)
    rig.path.write_text('tools:\n  send_email:\n    max_calls: "1"\n')
    if failure is not None:

        def broken() -> Loaded:
            raise failure

        monkeypatch.setattr(rig.state, "read", broken)
    error = anyio.run(rig.reloader.reload, lambda: 5.0)
    assert error is not None and reason in error
    public = rig.state.public()
    assert public["state"] == "reload failed" and public["loaded_at"] == 1.0
    failed = public["reload_failure"]
    assert isinstance(failed, dict)
    assert (failed["file"], failed["line"], failed["at"]) == (str(rig.path), line, 5.0)
    assert reason in failed["reason"]
    assert rig.timeout() == 10 and rig.in_force == []
    assert [r["rule"] for r in rig.audited] == ["policy.reload_failed"]
    assert "stays in force" in rig.audited[0]["reason"]
    monkeypatch.undo()
    rig.path.write_text("approval_timeout: 40\n")
    assert anyio.run(rig.reloader.reload, lambda: 6.0) is None
    assert rig.state.public()["reload_failure"] is None and rig.timeout() == 40
