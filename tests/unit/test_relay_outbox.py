"""The outbox on its own (outbox.py): numbering, observation, in-order release, replay and its bound.

No relay and no link: a `Recorder` plays `LinkSync.request`, and the link's state is a value passed
in. What comes out is the requests it made and the actions it appended.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from bouncer_shim import outbox
from bouncer_shim.actions import Action, Diagnose, SendClient, SendDaemon
from bouncer_shim.outbox import Outbox, Output
from bouncer_shim.sync import LinkState

UP, CONNECTING, DOWN = LinkState.UP, LinkState.CONNECTING, LinkState.DOWN


class Recorder:
    """Plays `LinkSync.request`: keeps every request and, like it, appends a `SendDaemon` to the
    actions (so the order of frames and released lines shows); ops in `unencodable` cannot be sent."""

    def __init__(self, *unencodable: str, actions: list[Action] | None = None) -> None:
        self.requests: list[tuple[str, Any, dict[str, Any], bool]] = []
        self.actions = actions if actions is not None else []
        self.unencodable = set(unencodable)

    def __call__(self, op: str, target: object, fields: Any, *, sync: bool = False) -> bool:
        if op in self.unencodable:
            return False
        self.requests.append((op, target, dict(fields), sync))
        self.actions.append(SendDaemon([op.encode()]))
        return True

    def ops(self) -> list[str]:
        return [op for op, *_ in self.requests]


def rig(*unencodable: str, release_on_write: bool = True) -> tuple[Outbox, Recorder, list[Action]]:
    actions: list[Action] = []
    daemon = Recorder(*unencodable, actions=actions)
    box = Outbox(daemon, actions)
    box.release_on_write = release_on_write  # what bouncerd's hello reply says
    return box, daemon, actions


def released(actions: list[Action]) -> list[bytes]:
    return [a.line for a in actions if isinstance(a, SendClient)]


def order(actions: list[Action]) -> list[bytes]:
    """Frames to the daemon (their op) and lines to the client, in the order they were asked for."""
    return [
        a.parts[0] if isinstance(a, SendDaemon) else a.line
        for a in actions
        if isinstance(a, SendDaemon | SendClient)
    ]


def test_outputs_are_released_in_arrival_order_each_after_its_observation_and_kept_until_acked() -> None:
    box, daemon, actions = rig()
    first, second = Output(b"first"), Output(b"second")
    box.emit(first, None, UP)
    box.emit(second, None, UP)
    assert [(op, fields["seq"], fields["payload"]) for op, _, fields, _ in daemon.requests] == [
        ("observe", 0, b"first"),
        ("observe", 1, b"second"),
    ]  # pipelined: the second is observed before the first is acknowledged
    assert order(actions) == [b"observe", b"first", b"observe", b"second"]
    assert box.is_released and not box.is_flushed and box.unacked_bytes == len(b"firstsecond")
    box.acked(second)
    assert not box.is_flushed
    box.acked(first)
    assert box.is_flushed and box.unacked_bytes == 0 and released(actions) == [b"first", b"second"]


def test_with_a_daemon_that_does_not_release_on_write_outputs_wait_for_their_acks_in_order() -> None:
    box, _, actions = rig(release_on_write=False)
    first, second = Output(b"first"), Output(b"second")
    box.emit(first, None, UP)
    box.emit(second, None, UP)
    box.acked(second)
    assert released(actions) == []  # the second may not overtake the first
    box.acked(first)
    assert released(actions) == [b"first", b"second"] and box.is_flushed


def test_a_hello_reply_that_allows_release_on_write_releases_what_waited_only_for_acks() -> None:
    box, _, actions = rig(release_on_write=False)
    box.emit(Output(b"sent before the hello reply"), None, UP)
    assert released(actions) == []
    box.daemon_releases_on_write(True)
    assert released(actions) == [b"sent before the hello reply"] and not box.is_flushed


def test_an_observation_carries_what_the_relay_classified() -> None:
    box, daemon, _ = rig()
    out = Output(b'{"id":5,"result":{}}')
    out.kind, out.method, out.tool, out.request_id = "result", "tools/call", "read_email", 5
    box.emit(out, None, UP)
    ((op, target, fields, sync),) = daemon.requests
    assert (op, target, sync) == ("observe", out, False)
    assert fields == {
        "seq": 0,
        "kind": "result",
        "method": "tools/call",
        "tool": "read_email",
        "request_id": 5,
        "payload": out.line,
    }


def test_a_tools_list_is_released_after_both_its_requests_and_kept_until_both_acks() -> None:
    box, daemon, actions = rig()
    tools = [{"name": "send_email"}]
    listed = Output(b"listed")
    box.emit(listed, tools, UP)
    assert daemon.ops() == ["tools", "observe"] and daemon.requests[0][2] == {"tools": tools}
    assert order(actions) == [b"tools", b"observe", b"listed"]
    box.acked(listed)
    assert not box.is_flushed
    box.acked(listed)
    assert box.is_flushed


def test_a_tools_list_that_cannot_be_sent_waits_only_for_its_observation() -> None:
    box, daemon, actions = rig("tools")
    listed = Output(b"listed")
    box.emit(listed, [{"name": "x"}], UP)
    assert daemon.ops() == ["observe"]
    box.acked(listed)
    assert box.is_flushed and released(actions) == [b"listed"]


def test_while_connecting_outputs_wait_unobserved_until_the_link_resends_them() -> None:
    box, daemon, actions = rig()
    out = Output(b"early")
    box.emit(out, None, CONNECTING)
    assert daemon.requests == [] and actions == [] and box.unreleased_bytes == len(b"early")
    box.resend()
    assert [(op, sync) for op, _, _, sync in daemon.requests] == [("observe", True)]
    assert order(actions) == [b"observe", b"early"] and box.unreleased_bytes == 0
    box.acked(out)
    assert box.is_flushed


def test_losing_the_link_releases_everything_and_keeps_the_unacknowledged_for_replay() -> None:
    box, daemon, actions = rig()
    acked_one, unacked, unsent = Output(b"acked"), Output(b"unacked"), Output(b"unsent")
    box.emit(unacked, None, UP)
    box.emit(acked_one, None, UP)
    box.acked(acked_one)
    box.emit(unsent, None, CONNECTING)  # queued, never observed on this connection
    box.lost()
    assert released(actions) == [b"unacked", b"acked", b"unsent"]  # each once
    assert box.is_flushed and box.unreleased_bytes == 0 and box.unacked_bytes == 0
    assert box.replay_count == 2
    daemon.requests.clear()
    box.resend()
    assert [(f["payload"], sync) for _, _, f, sync in daemon.requests] == [
        (b"unacked", True),
        (b"unsent", True),
    ]
    box.acked(unacked)  # the replay was recorded: nothing to keep, nothing to release again
    box.acked(unsent)
    assert box.replay_count == 0 and box.is_flushed
    assert released(actions) == [b"unacked", b"acked", b"unsent"]


def test_losing_the_link_with_an_older_daemon_replays_only_what_it_had_not_acknowledged() -> None:
    box, daemon, actions = rig(release_on_write=False)
    unacked, acked_one = Output(b"unacked"), Output(b"acked")
    box.emit(unacked, None, UP)
    box.emit(acked_one, None, UP)
    box.acked(acked_one)  # acknowledged, but waits behind the first
    box.lost()
    assert released(actions) == [b"unacked", b"acked"] and box.replay_count == 1
    daemon.requests.clear()
    box.resend()
    assert [f["payload"] for _, _, f, _ in daemon.requests] == [b"unacked"]


def test_a_second_loss_before_the_replay_is_acked_keeps_it_for_the_next_connection() -> None:
    box, daemon, _ = rig()
    out = Output(b"once")
    box.emit(out, None, UP)
    box.lost()
    box.resend()
    box.lost()  # the replay was sent on a connection that died before answering
    daemon.requests.clear()
    box.resend()
    assert [f["payload"] for _, _, f, _ in daemon.requests] == [b"once"]


def test_while_down_outputs_are_released_at_once_and_replayed_before_newer_ones() -> None:
    box, daemon, actions = rig()
    while_down = Output(b"while down")
    box.emit(while_down, None, DOWN)
    assert released(actions) == [b"while down"] and daemon.requests == [] and box.replay_count == 1
    box.emit(Output(b"while connecting"), None, CONNECTING)
    box.resend()
    assert [f["payload"] for _, _, f, _ in daemon.requests] == [b"while down", b"while connecting"]
    assert [f["seq"] for _, _, f, _ in daemon.requests] == [0, 1]


def test_replay_past_its_bound_means_observations_are_lost_for_good() -> None:
    box, _, actions = rig()
    for n in range(outbox.MAX_REPLAY_MESSAGES + 3):
        box.emit(Output(b"%d" % n), None, DOWN)
    assert box.observations_lost and box.replay_count == outbox.MAX_REPLAY_MESSAGES
    lost = [a for a in actions if isinstance(a, Diagnose)]
    assert len(lost) == 1 and "lost" in lost[0].message  # said once, not once per line
    assert len(released(actions)) == outbox.MAX_REPLAY_MESSAGES + 3  # the client still sees it all


def test_a_line_the_shim_made_is_not_observed_and_waits_its_turn() -> None:
    box, daemon, actions = rig()
    out = Output(b"server")
    box.emit(out, None, CONNECTING)
    box.emit_made(b"made")
    assert daemon.ops() == [] and actions == []  # behind an output bouncerd has not been sent
    box.resend()
    assert order(actions) == [b"observe", b"server", b"made"]
    box.emit_made(b"alone")  # nothing ahead of it: released at once
    assert released(actions)[-1] == b"alone"


def test_an_observation_that_cannot_be_sent_loses_observations_but_not_the_output() -> None:
    box, _, actions = rig("observe")
    box.emit(Output(b"odd"), None, UP)
    assert box.observations_lost and released(actions) == [b"odd"]
    assert [a.message for a in actions if isinstance(a, Diagnose)] == [
        "an observation could not be encoded for bouncerd",
        "observations were lost; every tool call will be refused from now on",
    ]


def test_losing_observations_is_said_once() -> None:
    box, _, actions = rig()
    box.lose_observations()
    box.lose_observations()
    assert box.observations_lost and len(actions) == 1


def test_the_outbox_is_sans_io() -> None:
    tree = ast.parse(Path(outbox.__file__).read_text())
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not imported & {"os", "socket", "selectors", "select", "time", "anyio", "subprocess", "signal"}
