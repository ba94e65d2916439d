"""The fast path's daemon side: the ``fastpath`` op's parked requests, and changes that wait for them.

Theory of operation
-------------------
`bouncerd.core.fastpath.Grants` decides who holds which set and when a withdrawal is acknowledged;
this module only waits. A ``fastpath`` request (`request`) is answered at once or parks on an event
until a change answers it; a new request of the same connection answers the parked one with a
withdrawal (the shim reads only the reply to its latest request). `change` brackets a change that
could shrink a set (a policy reload): it withdraws every set, waits until each holder has
acknowledged or left (at most WITHDRAW_TIMEOUT_SECONDS: past it the change is applied anyway, and
a record the late holder sends afterwards is audited as ``fastpath.late``), applies the change, and
grants the parked requests from the state after it. `changed` is the same for changes that are
applied on the spot (a tools list, a closed first-use window, accepted pins): these only shrink a
set in the case docs/how-it-works.md names.

A shim that runs with its own ``--policy`` file gets no set: that file is read again whenever it
changes on disk, with no reload to withdraw before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

import anyio

from bouncerd.core import fastpath
from bouncerd.core.engine import Engine
from bouncerd.core.fastpath import FastTools, Grant, Grants, Holder
from bouncerd.core.policy import Policy
from bouncerd.server.caller import Caller, RefusedError

T = TypeVar("T")

# How long a change waits for the shims to acknowledge a withdrawal. A live shim answers in a
# millisecond; one that is stopped must not hold a policy reload for long.
WITHDRAW_TIMEOUT_SECONDS: Final = 2.0


class _Parked:
    __slots__ = ("answer", "event")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.answer: Grant | None = None


class _Slot:
    __slots__ = ("caller", "holder", "parked")

    def __init__(self, caller: Caller, holder: Holder) -> None:
        self.caller = caller
        self.holder = holder
        self.parked: _Parked | None = None  # the parked request


class FastLane:
    def __init__(self, engine: Engine, base_policy: Callable[[], Policy]) -> None:
        self._engine = engine
        self._base_policy = base_policy
        self.grants = Grants()
        self._slots: dict[int, _Slot] = {}  # id(holder) -> slot
        self._by_caller: dict[int, _Slot] = {}  # id(caller) -> slot
        self._progress = anyio.Event()

    def _compute(self, holder: Holder) -> FastTools:
        slot = self._slots.get(id(holder))
        if slot is None or slot.caller.server is None or slot.caller.policy_path:
            return {}
        return fastpath.fast_tools(self._engine, slot.caller.server.identity, self._base_policy())

    def _answer(self, answers: list[tuple[Holder, Grant]]) -> None:
        for holder, grant in answers:
            slot = self._slots.get(id(holder))
            if slot is not None and slot.parked is not None:
                slot.parked.answer = grant
                slot.parked.event.set()
                slot.parked = None

    def _pulse(self) -> None:
        self._progress.set()
        self._progress = anyio.Event()

    async def request(self, caller: Caller, holding: int | None) -> Grant:
        server = caller.server
        if server is None:
            raise RefusedError("no_server", "only a shim's connection holds a fast-path set")
        slot = self._by_caller.get(id(caller))
        if slot is None:
            slot = _Slot(caller, self.grants.join(server.identity.key))
            self._by_caller[id(caller)] = slot
            self._slots[id(slot.holder)] = slot
        if slot.parked is not None:  # superseded: its reply is read by nobody, but it must end
            self._answer([(slot.holder, Grant(self.grants.epoch, None))])
        grant = self.grants.request(slot.holder, holding, self._compute)
        self._pulse()
        if grant is not None:
            return grant
        parked = slot.parked = _Parked()
        await parked.event.wait()
        return parked.answer if parked.answer is not None else Grant(self.grants.epoch, None)

    def leave(self, caller: Caller) -> None:
        slot = self._by_caller.pop(id(caller), None)
        if slot is not None:
            self._slots.pop(id(slot.holder), None)
            self.grants.leave(slot.holder)
            self._pulse()

    async def change(self, apply: Callable[[], Awaitable[T]], key: str | None = None) -> T:
        """Withdraw the sets `key` concerns (None: all), wait for the acknowledgements, `apply`, grant."""
        self._answer(self.grants.begin_change(key))
        try:
            with anyio.move_on_after(WITHDRAW_TIMEOUT_SECONDS):
                while not self.grants.settled:
                    await self._progress.wait()
            return await apply()
        finally:
            self._answer(self.grants.end_change(self._compute))

    def changed(self, key: str | None = None) -> None:
        """A change already applied on the spot: withdraw and grant again from the state now."""
        self._answer(self.grants.begin_change(key))
        self._answer(self.grants.end_change(self._compute))
