"""One server's episode on a bare engine, for the pure core's tests: the policy and tools listed, the
prompt vouched as the hook vouches it, calls decided, and outputs recorded as the daemon records them."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bouncerd.core import taint
from bouncerd.core.engine import Engine
from bouncerd.core.model import ServerIdentity, ToolCall, Verdict
from bouncerd.core.policy import load_policy, merge


@dataclass
class Scene:
    policy: str
    server: ServerIdentity
    tools: Sequence[str]
    session: str
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(100))

    def engine(self, prompt: str | None = None) -> Engine:
        eng = Engine(merge([load_policy(self.policy, "policy.yaml")]))
        eng.tools_listed(self.server, [{"name": t} for t in self.tools], now=0.0)
        if prompt is not None:
            for ev in eng.vouch(self.session, prompt):
                eng.apply(ev)
        return eng

    def call(self, eng: Engine, tool: str, arguments: dict[str, Any]) -> tuple[Verdict, int]:
        """The verdict and the request id it was decided under."""
        rid = next(self._ids)
        call = ToolCall(self.session, self.server, tool, arguments, request_id=rid)
        return eng.decide(call, 10.0), rid

    def read(
        self, eng: Engine, tool: str, arguments: dict[str, Any], result: Any, *, names: bool = False
    ) -> None:
        """A read that must be allowed, and its output (text, or JSON of anything else) recorded: its
        taint, and with `names` also the plain names in it (`Engine.read_made`)."""
        verdict, rid = self.call(eng, tool, arguments)
        assert verdict.verdict == "allow", verdict.reason
        text = result if isinstance(result, str) else json.dumps(result)
        msg = {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}}
        source = taint.Source(self.server.name, tool, rid, 1.0)
        for ev in eng.record_taint(self.session, taint.extract(msg, source), self.server.name):
            assert ev["ev"] in ("taint", "listed")
        if names:
            eng.read_made(self.session, self.server.name, rid, json.dumps(msg).encode(), tool, 1.0)
