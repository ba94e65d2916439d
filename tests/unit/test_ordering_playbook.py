"""The ordering argument of docs/how-it-works.md, step by step, as playbooks of the pure machine
(bouncerd/server/ordering.py): events in (`>>`), commands out (`<<`), in order, nothing else.

Each test names the attack it stops: a verdict judged before an output the agent could already have
read is indexed, so the send it judges is let out with that output's data. The benign twins show the
order costs nothing where nothing was read: a call that reads no taint is answered at once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from bouncerd import wire
from bouncerd.errors import ProtocolError
from bouncerd.server.ordering import (
    AckTimerFired,
    Answered,
    AwaitBarrier,
    AwaitIndexed,
    AwaitRoom,
    BarrierPassed,
    Broken,
    CancelAckTimer,
    Close,
    Command,
    DataReceived,
    Dispatch,
    DispatchInBackground,
    EofReceived,
    Event,
    FrameReceived,
    Indexed,
    Ordering,
    PauseReading,
    ReadThrough,
    Request,
    ResumeReading,
    RoomMade,
    Send,
    StartAckTimer,
    Unstalled,
    WritePaused,
    WriteResumed,
)


@dataclass
class World:
    """The daemon as the machine reads it; a playbook changes it with `Set`."""

    has_room: bool = True
    accepted_upto: int = 0
    indexed_upto: int = 0
    settling: bool = False
    marks: list[object] = field(default_factory=list)  # other connections' unread positions
    quiet_tools: frozenset[str] = frozenset({"read_file"})  # tools whose verdict reads no taint

    def needs_taint(self, op: str, message: Mapping[str, Any]) -> bool:
        return message.get("tool") not in self.quiet_tools

    def barrier(self) -> Sequence[object]:
        return list(self.marks)


@dataclass(frozen=True)
class Set:
    """Not an event: the world changes between two events (an indexer ran, another shim wrote)."""

    changes: dict[str, Any]

    def __init__(self, **changes: Any) -> None:
        object.__setattr__(self, "changes", changes)


@dataclass(frozen=True)
class Reply:
    """Answer the latest dispatched request (or the one with `rid`) with `fields`; for hello, `keep`."""

    fields: dict[str, Any]
    rid: int | None = None
    keep: bool = True
    ok: bool = True


def reply(rid: int | None = None, *, keep: bool = True, ok: bool = True, **fields: Any) -> Reply:
    return Reply(fields, rid, keep, ok)


def answer_of(rid: int, ok: bool = True, **fields: Any) -> dict[str, Any]:
    """The reply `reply(rid, **fields)` sends."""
    if not ok:
        return wire.error_reply(rid, "refused", "no")
    return wire.reply(rid, **fields)


def frame(op: str, rid: int, **fields: Any) -> FrameReceived:
    return FrameReceived(wire.request(op, rid, **fields))


def hello(role: str = "shim") -> FrameReceived:
    return frame("hello", 0, version=wire.PROTOCOL_VERSION, role=role, session="s", server="mail")


def observe(rid: int) -> FrameReceived:
    return frame("observe", rid, seq=rid, kind="result", payload=b"{}")


def verdict(rid: int, tool: str = "send_email") -> FrameReceived:
    return frame("verdict", rid, tool=tool, arguments={"to": "a@example.com"})


def req(op: str, rid: int) -> Request:
    """A request as commands name it (compared by op and id)."""
    return Request(op, rid, {}, wire.OP_TABLE[op])


def sent(*replies: dict[str, Any]) -> Send:
    return Send(tuple(replies))


Step = Event | Set | Reply


class Playbook:
    """`Playbook(world) >> event << command ...`, then `assert playbook`: the machine is fed the events
    in order, and the commands it returns after each must be exactly those written after it. A
    Dispatch must come last in its batch: the protocol answers it before anything else happens."""

    def __init__(self, world: World | None = None) -> None:
        self.world = world or World()
        self.machine = Ordering(self.world)
        self.steps: list[tuple[str, Step | Command]] = []
        self._done = 0  # steps already played (a playbook may be asserted, extended, asserted again)
        self._dispatched: list[Request] = []

    def __rshift__(self, step: Step) -> Playbook:
        self.steps.append((">>", step))
        return self

    def __lshift__(self, command: Command) -> Playbook:
        self.steps.append(("<<", command))
        return self

    def __bool__(self) -> bool:
        expected: list[str] = []
        actual: list[str] = []
        dispatched = self._dispatched
        steps, self._done = self.steps[self._done :], len(self.steps)
        for kind, step in steps:
            if kind == "<<":
                expected.append(f"  << {step}")
                continue
            expected.append(f">> {step}")
            actual.append(f">> {step}")
            if isinstance(step, Set):
                for name, value in step.changes.items():
                    setattr(self.world, name, value)
                continue
            event = self._resolve(step, dispatched) if isinstance(step, Reply) else step
            assert isinstance(event, Event)
            commands = self.machine.handle(event)
            for i, command in enumerate(commands):
                if isinstance(command, Dispatch | DispatchInBackground):
                    dispatched.append(command.request)
                    assert isinstance(command, DispatchInBackground) or i == len(commands) - 1, commands
            actual.extend(f"  << {command}" for command in commands)
        if expected != actual:
            raise AssertionError(
                "the machine did otherwise\nexpected:\n"
                + "\n".join(expected)
                + "\nactual:\n"
                + "\n".join(actual)
            )
        return True

    @staticmethod
    def _resolve(step: Reply, dispatched: list[Request]) -> Answered:
        candidates = [r for r in dispatched if step.rid is None or r.rid == step.rid]
        assert candidates, f"{step}: nothing dispatched to answer"
        request = candidates[-1]
        dispatched.remove(request)
        return Answered(request, answer_of(request.rid, step.ok, **step.fields), step.keep)


def greeted(world: World | None = None, role: str = "shim") -> Playbook:
    """A connection whose hello was answered and kept."""
    playbook = Playbook(world)
    return playbook >> hello(role) << Dispatch(req("hello", 0)) >> reply() << sent(answer_of(0))


# ---- step 3: the same shim, in order ------------------------------------------------------------


def test_an_observation_before_a_verdict_on_the_same_connection_is_accepted_and_indexed_before_it() -> None:
    """The attack: a shim relays a result, then the agent's send of its data. Were the verdict judged
    before the result was accepted and indexed, the send would be judged on clean taint."""
    world = World()
    assert (
        greeted(world)
        >> DataReceived(60)
        >> observe(1)
        << Dispatch(req("observe", 1))
        >> Set(accepted_upto=1)  # the observe handler accepted it; the indexer has not run
        >> reply(seq=1)
        << StartAckTimer()
        >> verdict(2)
        << AwaitIndexed(req("verdict", 2), 1)
        >> Set(indexed_upto=1)
        >> Indexed()
        << Dispatch(req("verdict", 2))
        >> reply(verdict="deny")
        << CancelAckTimer()
        << sent(answer_of(1, seq=1), answer_of(2, verdict="deny"))  # the ack first, in the same write
    )


def test_a_verdict_that_reads_no_taint_is_answered_at_once_behind_an_unindexed_observation() -> None:
    """The benign twin: a 10 MB result being indexed must not hold up a call that sends nothing."""
    world = World(accepted_upto=1, indexed_upto=0)
    assert (
        greeted(world)
        >> verdict(2, tool="read_file")
        << Dispatch(req("verdict", 2))
        >> reply()
        << sent(answer_of(2))
    )


def test_a_verdict_whose_observations_are_indexed_is_answered_inline_without_waiting() -> None:
    world = World(accepted_upto=3, indexed_upto=3)
    assert greeted(world) >> verdict(4) << Dispatch(req("verdict", 4)) >> reply() << sent(answer_of(4))


def test_lane_requests_behind_a_waiting_verdict_wait_in_order_while_observations_go_on() -> None:
    """A `tools` that re-pins must not overtake the verdict that arrived before it, and an ack is
    never held up by a verdict that is waiting."""
    world = World(accepted_upto=1, indexed_upto=0)
    assert (
        greeted(world)
        >> verdict(2)
        << AwaitIndexed(req("verdict", 2), 1)
        >> frame("tools", 3, tools=[])
        >> observe(4)
        << Dispatch(req("observe", 4))
        >> reply(seq=4)
        << StartAckTimer()
        >> AckTimerFired()
        << sent(answer_of(4, seq=4))
        >> Set(indexed_upto=1)
        >> Indexed()
        << Dispatch(req("verdict", 2))
        >> reply()
        << sent(answer_of(2))
        << Dispatch(req("tools", 3))
        >> reply()
        << sent(answer_of(3))
    )


def test_frames_behind_a_dispatched_request_wait_for_its_answer() -> None:
    """The answer may change what the next frame finds (an observation fills the index)."""
    world = World()
    assert (
        greeted(world)
        >> observe(1)
        << Dispatch(req("observe", 1))
        >> observe(2)  # a protocol must answer first; the machine holds the frame meanwhile
        >> Set(has_room=False)
        >> reply(seq=1)
        << StartAckTimer()
        << PauseReading()
        << AwaitRoom(req("observe", 2))
    )


# ---- step 4: another shim, the barrier ----------------------------------------------------------


def test_a_verdict_waits_for_another_connections_unread_bytes_then_for_what_they_brought_to_be_indexed() -> (
    None
):
    """The attack: shim B wrote the observation of a result its client already shows; the agent's
    send goes through shim A. B's bytes are still in the kernel when A's verdict is read."""
    world = World(accepted_upto=0, indexed_upto=0, marks=[("shim-b", 120)])
    assert (
        greeted(world)
        >> verdict(2)
        << AwaitBarrier(req("verdict", 2), (("shim-b", 120),))
        >> Set(accepted_upto=1, marks=[])  # B was read up to 120: its observation is accepted
        >> BarrierPassed()
        << AwaitIndexed(req("verdict", 2), 1)
        >> Set(indexed_upto=1)
        >> Indexed()
        << Dispatch(req("verdict", 2))
        >> reply(verdict="deny")
        << sent(answer_of(2, verdict="deny"))
    )


def test_with_no_other_connection_behind_a_verdict_is_answered_at_once() -> None:
    """The benign twin: nothing unread anywhere, nothing accepted and unindexed: no wait at all."""
    assert greeted() >> verdict(2) << Dispatch(req("verdict", 2)) >> reply() << sent(answer_of(2))


def test_after_a_restart_a_send_waits_for_reconnecting_shims_to_replay_even_with_no_unread_bytes() -> None:
    """The attack: the daemon restarted; a shim that released outputs while it was away has not
    reconnected yet, so no socket shows its bytes. The send waits out the settling time."""
    world = World(settling=True)
    assert (
        greeted(world)
        >> verdict(2)
        << AwaitBarrier(req("verdict", 2), ())
        >> Set(settling=False, accepted_upto=2)
        >> BarrierPassed()
        << AwaitIndexed(req("verdict", 2), 2)
        >> Set(indexed_upto=2)
        >> Indexed()
        << Dispatch(req("verdict", 2))
        >> reply()
        << sent(answer_of(2))
    )


def test_this_connection_reports_reaching_a_position_only_once_every_frame_before_it_is_dispatched() -> None:
    """What another connection's verdict asks of this one (`Peer.reached`)."""
    playbook = greeted() >> DataReceived(100)
    assert playbook
    machine = playbook.machine
    assert machine.reached(100)
    assert not machine.reached(101)  # bytes the kernel still holds for it


# ---- a stalled observation ------------------------------------------------------------------------


def test_a_stalled_observation_holds_the_frames_behind_it_and_the_barrier_of_other_connections() -> None:
    """The attack: an observation read but waiting for room in the index, with the send behind it.
    The verdict must not overtake it, and another connection's verdict must count it as unread."""
    world = World(has_room=False)
    playbook = (
        greeted(world)
        >> DataReceived(200)
        >> observe(1)
        << PauseReading()
        << AwaitRoom(req("observe", 1))
        >> verdict(2)  # behind the stalled observation: nothing happens
    )
    assert playbook
    assert not playbook.machine.reached(200)  # another connection's barrier waits for this one
    assert (
        playbook
        >> Set(has_room=True)
        >> RoomMade()
        << Dispatch(req("observe", 1))
        >> Set(accepted_upto=1)
        >> reply(seq=1)
        << sent(answer_of(1, seq=1))  # acked at once: it has waited long enough
        << Unstalled()
        << ResumeReading()
        << AwaitIndexed(req("verdict", 2), 1)
    )
    assert playbook.machine.reached(200)


# ---- a peer that never reads its replies ----------------------------------------------------------


def test_a_peer_that_never_reads_its_replies_stops_being_read_but_a_barrier_reads_it_on() -> None:
    """The attack on the daemon: a peer that pipelines requests and reads no reply would grow the
    daemon's buffers without end, so it stops being read. But a verdict elsewhere must not wait for
    ever on an observation in that peer's unread bytes: the barrier has it read up to its mark."""
    playbook = (
        greeted()
        >> DataReceived(100)
        >> WritePaused()
        << PauseReading()
        >> ReadThrough(180)  # another connection's verdict needs it read up to 180
        << ResumeReading()
        >> DataReceived(80)
        << PauseReading()  # there: stop again
    )
    assert playbook
    assert playbook.machine.reached(180)
    assert playbook >> WriteResumed() << ResumeReading()


def test_a_read_through_a_position_already_read_changes_nothing() -> None:
    assert greeted() >> DataReceived(100) >> WritePaused() << PauseReading() >> ReadThrough(50)


# ---- deferred acks --------------------------------------------------------------------------------


def test_acks_leave_alone_when_their_time_is_up_and_never_after_a_later_reply() -> None:
    assert (
        greeted()
        >> observe(1)
        << Dispatch(req("observe", 1))
        >> reply(seq=1)
        << StartAckTimer()
        >> observe(2)
        << Dispatch(req("observe", 2))
        >> reply(seq=2)  # the timer runs already
        >> AckTimerFired()
        << sent(answer_of(1, seq=1), answer_of(2, seq=2))
        >> frame("ping", 3)
        << Dispatch(req("ping", 3))
        >> reply()
        << sent(answer_of(3))
    )


def test_a_refused_observation_is_answered_at_once() -> None:
    assert (
        greeted()
        >> observe(1)
        << Dispatch(req("observe", 1))
        >> reply(ok=False)
        << sent(answer_of(1, ok=False))
    )


# ---- who may ask what, and the end ----------------------------------------------------------------


@pytest.mark.parametrize("op", ["approve", "approve_show", "pending"])
def test_the_agents_side_of_the_wire_cannot_reach_a_persons_approval_ops(op: str) -> None:
    """The attack: the agent's own shim (or hook) approving the ask it just got. Refused by the op's
    row before any handler runs."""
    fields = {"code": "K7Q-F2M"} if op != "pending" else {}
    refusal = wire.error_reply(9, *(wire.role_refusal(op, "shim") or ("", "")))
    assert refusal["error"]["code"] == "not_ctl"
    assert greeted() >> frame(op, 9, **fields) << sent(refusal)
    assert (
        greeted(role="ctl") >> frame(op, 9, **fields) << Dispatch(req(op, 9)) >> reply() << sent(answer_of(9))
    )


def test_the_first_request_must_be_hello() -> None:
    commands = Ordering(World()).handle(verdict(1))
    assert len(commands) == 1 and isinstance(commands[0], Close)
    assert isinstance(commands[0].error, ProtocolError) and "must be hello" in str(commands[0].error)


def test_a_refused_hello_is_answered_then_the_connection_closes_and_nothing_more_is_taken() -> None:
    assert (
        Playbook()
        >> hello()
        << Dispatch(req("hello", 0))
        >> reply(keep=False, ok=False)
        << sent(answer_of(0, ok=False))
        << Close()
        >> verdict(1)
    )


def test_a_broken_frame_ends_the_connection_after_the_frames_before_it_are_answered() -> None:
    error = ProtocolError("undecodable frame")
    playbook = (
        greeted()
        >> frame("ping", 1)
        << Dispatch(req("ping", 1))
        >> Broken(error)  # it waits behind the ping's answer
        >> reply()
        << sent(answer_of(1))
        << Close(error)
        >> verdict(2)
    )
    assert playbook
    assert playbook.machine.ended and playbook.machine.reached(10**9)  # no barrier waits on it


def test_after_the_peers_eof_the_connection_stays_open_until_its_waiting_verdict_is_answered() -> None:
    world = World(accepted_upto=1)
    assert (
        greeted(world)
        >> verdict(2)
        << AwaitIndexed(req("verdict", 2), 1)
        >> EofReceived()
        >> Set(indexed_upto=1)
        >> Indexed()
        << Dispatch(req("verdict", 2))
        >> reply()
        << sent(answer_of(2))
        << Close()
    )


def test_a_reload_is_answered_in_the_background_while_later_requests_go_on() -> None:
    assert (
        greeted(role="ctl")
        >> frame("reload", 1)
        << DispatchInBackground(req("reload", 1))
        >> frame("ping", 2)
        << Dispatch(req("ping", 2))
        >> reply(2)
        << sent(answer_of(2))
        >> EofReceived()
        >> reply(1, error=None)
        << sent(answer_of(1, error=None))
        << Close()
    )


def test_every_event_and_command_is_handled_by_the_machine_and_the_protocol() -> None:
    """A new event the machine has no row for, or a command the protocol cannot carry out, fails here
    rather than on a live connection."""
    from bouncerd.server import connection, ordering

    events: Callable[[], set[type]] = lambda: set(ordering.Event.__args__)  # noqa: E731
    commands = set(ordering.Command.__args__)
    assert set(ordering._ON) == events()
    assert set(connection._DO) == commands
