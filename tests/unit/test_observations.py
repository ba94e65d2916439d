"""The observation index: what `accept` indexes at once and what it leaves to the indexing task."""

from __future__ import annotations

from typing import Any, cast

import anyio
import pytest

from bouncerd.core import taint
from bouncerd.core.engine import Engine
from bouncerd.server.observations import INLINE_EXTRACT_BYTES, ObservationIndex

ADDRESS = "mallory@evil.example"


def _request(seq: int, text: str) -> dict[str, Any]:
    line = b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"%s"}]}}' % (
        seq,
        text.encode(),
    )
    return {"seq": seq, "kind": "result", "tool": "read_inbox", "request_id": seq, "payload": line}


def _index() -> tuple[ObservationIndex, Engine, list[dict[str, Any]]]:
    journal: list[dict[str, Any]] = []
    engine = Engine()
    return ObservationIndex(engine, journal.append), engine, journal


def _accept(index: ObservationIndex, seq: int, text: str) -> int:
    return index.accept(session="s", server="mail", instance="i1", request=_request(seq, text), now=1.0)


def _tainted(engine: Engine, address: str) -> bool:
    return any(address in str(event) for event in engine.snapshot())


def test_small_output_accepted_while_idle_is_indexed_before_accept_returns() -> None:
    """A verdict that reads taint behind it finds it indexed, with no task step in between."""
    index, engine, journal = _index()
    n = _accept(index, 1, f"write to {ADDRESS}")
    assert (index.accepted_upto, index.indexed_upto, index.queued) == (n, n, 0)
    assert _tainted(engine, ADDRESS)
    assert [entry["k"] for entry in journal] == ["obs", "indexed"]  # journalled before it was indexed


def test_small_output_behind_a_queued_one_waits_its_turn() -> None:
    """Arrival order holds: an output is never indexed before one accepted ahead of it."""
    index, engine, journal = _index()
    big = _accept(index, 1, "x" * (INLINE_EXTRACT_BYTES + 1))
    small = _accept(index, 2, f"write to {ADDRESS}")
    assert index.queued == 2 and index.indexed_upto == big - 1
    assert not _tainted(engine, ADDRESS)
    assert [entry["k"] for entry in journal] == ["obs", "obs"]
    assert small == big + 1


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_indexing_task_takes_the_queue_in_order(anyio_backend: str) -> None:
    index, engine, journal = _index()
    _accept(index, 1, "x" * (INLINE_EXTRACT_BYTES + 1))
    last = _accept(index, 2, f"write to {ADDRESS}")
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(index.run)
            await index.wait_indexed(last)
            tg.cancel_scope.cancel()
    assert _tainted(engine, ADDRESS)
    indexed = [entry["n"] for entry in journal if entry["k"] == "indexed"]
    assert indexed == sorted(indexed) == [last - 1, last]


def test_a_failing_seam_leaves_the_scope_blind_not_the_daemon_down() -> None:
    """A bug in reading the seam between two outputs must not let the output count as clean."""

    class BrokenSeams:
        def records(self, scope: tuple[str, str], payload: Any, source: taint.Source) -> list[Any]:
            raise RuntimeError("seam bug")

    index, engine, _ = _index()
    index._seams = cast(taint.Seams, BrokenSeams())
    n = _accept(index, 1, f"write to {ADDRESS}")
    assert index.indexed_upto == n
    assert engine.scope_key("s", "mail") in engine.blind
    assert not _tainted(engine, ADDRESS)  # nothing indexed from it counts: the whole scope is blind
