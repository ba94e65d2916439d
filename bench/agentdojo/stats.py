"""Configurations, tallies and the report of the AgentDojo replay.

Theory of operation
-------------------
A `Config` is one way of running every pair: ``none`` (no proxy: the server started directly), or
through Bouncer with the prompt hook on or off and one simulated person (`PEOPLE`). A `Tally` counts,
per suite, each replayed call by role (benign: the user task's ground truth; attack: the injection
task's), by class and by its first verdict, plus AgentDojo's utility and attack success per pair.

A call's class comes from the suite's shipped pack (bouncerd/core/packs/agentdojo-SUITE.yaml), read
here only to label calls, never to decide them: ``send`` (exfiltrating, not a fetch), ``fetch``
(``sink_kind: fetch``), ``read`` (everything else, including local writes and deletions).

The first verdict is ``allowed`` (reached the server), ``asked`` (refused with an approval code) or
``denied`` (refused without one). For an ask the person's outcome is kept too (approved, declined).
Every call that misses a target (an attack send allowed or asked, a benign send, fetch or read that
was not allowed) is listed in the JSON with the daemon's reason.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bouncerd.core.packs import pack_sources

PEOPLE = ("decline", "prompt", "all")
PERSON_TEXT = {
    "decline": "always declines",
    "prompt": "approves destinations in the prompt",
    "all": "approves everything",
}
CLASSES = ("send", "fetch", "read")
FIRST = ("allowed", "asked", "denied")
# How many misses the JSON keeps per configuration: enough to see every tool and pattern responsible.
MAX_MISSES = 2000


@dataclass(frozen=True)
class Config:
    name: str
    proxied: bool
    hook: bool = False
    person: str = "decline"

    @property
    def label(self) -> str:
        if not self.proxied:
            return "no proxy"
        return f"hook {'on' if self.hook else 'off'}, {PERSON_TEXT[self.person]}"


def configs_for(hook: str, people: list[str], *, baseline: bool) -> list[Config]:
    out = [Config("none", proxied=False)] if baseline else []
    hooks = {"on": [True], "off": [False], "both": [True, False]}[hook]
    for h in hooks:
        for person in people:
            out.append(Config(f"hook-{'on' if h else 'off'}.{person}", proxied=True, hook=h, person=person))
    return out


def tool_classes() -> dict[str, dict[str, str]]:
    """suite -> tool -> class, from the shipped agentdojo packs."""
    out: dict[str, dict[str, str]] = {}
    for filename, text in pack_sources().items():
        if not filename.startswith("agentdojo-"):
            continue
        pack = yaml.safe_load(text)
        suite = filename.removeprefix("agentdojo-").removesuffix(".yaml")
        classes: dict[str, str] = {}
        for tool, spec in (pack.get("tools") or {}).items():
            if spec.get("exfiltrating"):
                classes[tool] = "fetch" if spec.get("sink_kind") == "fetch" else "send"
        out[suite] = classes
    return out


CLASSES_BY_SUITE = tool_classes()


@dataclass
class Tally:
    config: Config
    calls: Counter[tuple[str, str, str, str]] = field(default_factory=Counter)  # suite, role, class, first
    asks: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # suite, role, ask outcome
    pairs: Counter[str] = field(default_factory=Counter)
    utility: Counter[str] = field(default_factory=Counter)
    attacked: Counter[str] = field(default_factory=Counter)
    attacked_by_task: Counter[tuple[str, str]] = field(default_factory=Counter)  # suite, injection task
    empty_attack: Counter[str] = field(default_factory=Counter)  # pairs whose injection has no calls
    vouched: Counter[str] = field(default_factory=Counter)  # pairs whose prompt vouched a destination
    misses: list[dict[str, str]] = field(default_factory=list)
    by_tool: Counter[tuple[str, str, str, str]] = field(default_factory=Counter)  # suite, role, tool, verdict

    def add(
        self,
        episode: Any,
        verdicts: list[tuple[str, str, str, str]],
        utility: bool,
        attacked: bool,
        vouched: int = 0,
    ) -> None:
        suite = episode.suite.name
        self.pairs[suite] += 1
        self.vouched[suite] += vouched > 0
        self.utility[suite] += utility
        self.attacked[suite] += attacked
        self.attacked_by_task[suite, episode.key.rsplit("/", 1)[-1]] += attacked
        if not any(role == "attack" for role, *_ in verdicts):
            self.empty_attack[suite] += 1
        for role, tool, verdict, reason in verdicts:
            cls = CLASSES_BY_SUITE.get(suite, {}).get(tool, "read")
            first = verdict.split(":", 1)[0]
            self.by_tool[suite, role, tool, verdict] += 1
            self.calls[suite, role, cls, first] += 1
            if first == "asked":
                self.asks[suite, role, verdict.split(":", 1)[1]] += 1
            if self._missed(role, cls, first) and len(self.misses) < MAX_MISSES:
                self.misses.append(
                    {"pair": episode.key, "role": role, "tool": tool, "verdict": verdict, "reason": reason}
                )

    def _missed(self, role: str, cls: str, first: str) -> bool:
        if not self.config.proxied:
            return False
        if role == "attack":
            return cls == "send" and first != "denied"
        return first != "allowed"

    def count(self, suites: list[str], role: str, cls: str, first: str) -> int:
        return sum(self.calls[s, role, cls, first] for s in suites)

    def summary(self, suites: list[str]) -> dict[str, Any]:
        def triple(role: str, cls: str) -> dict[str, int]:
            return {f: self.count(suites, role, cls, f) for f in FIRST}

        return {
            "pairs": sum(self.pairs[s] for s in suites),
            "utility": sum(self.utility[s] for s in suites),
            "attack_success": sum(self.attacked[s] for s in suites),
            "pairs_without_attack_calls": sum(self.empty_attack[s] for s in suites),
            "pairs_with_vouched_destinations": sum(self.vouched[s] for s in suites),
            # per injection goal: which attacks still succeed (their calls are in by_tool)
            "attack_success_by_injection_task": {
                f"{s}/{task}": n
                for (s, task), n in sorted(self.attacked_by_task.items())
                if s in suites and n
            },
            "benign": {c: triple("benign", c) for c in CLASSES},
            "attack": {c: triple("attack", c) for c in CLASSES},
            "asks": {
                role: {
                    o: sum(n for (s, r, o2), n in self.asks.items() if r == role and o2 == o and s in suites)
                    for o in ("approved", "declined", "approved-but-refused")
                }
                for role in ("benign", "attack")
            },
        }


def _cell(d: dict[str, int]) -> str:
    return f"{d['allowed']} / {d['asked']} / {d['denied']}"


def markdown(tallies: dict[str, Tally], suites: list[str]) -> str:
    head = (
        "| suite | configuration | benign sends a/q/d | attack sends a/q/d | benign fetches a/q/d "
        "| benign reads a/q/d | utility | attack success |\n|---|---|---|---|---|---|---|---|"
    )
    rows = [head]
    for scope in [*([[s] for s in suites] if len(suites) > 1 else []), suites]:
        name = scope[0] if len(scope) == 1 and len(suites) > 1 else "all"
        for tally in tallies.values():
            s = tally.summary(scope)
            rows.append(
                f"| {name} | {tally.config.label} | {_cell(s['benign']['send'])} "
                f"| {_cell(s['attack']['send'])} "
                f"| {_cell(s['benign']['fetch'])} | {_cell(s['benign']['read'])} "
                f"| {s['utility']}/{s['pairs']} | {s['attack_success']}/{s['pairs']} |"
            )
    any_tally = next(iter(tallies.values()), None)
    notes = ["", "a/q/d = first verdict allowed / asked (refused with an approval code) / denied outright."]
    if any_tally is not None:
        empty = any_tally.summary(suites)["pairs_without_attack_calls"]
        notes.append(
            f"{empty} of {any_tally.summary(suites)['pairs']} pairs have an injection task with no "
            "ground-truth calls (nothing to gate; their attack success is whatever the user task leaves)."
        )
    return "\n".join(rows + notes)


def write_json(path: Path, tallies: dict[str, Tally], args: dict[str, Any], elapsed: float) -> None:
    suites = list(args["suites"])
    data = {
        "benchmark": "agentdojo 0.1.35, v1.2.2, important_instructions, ground-truth replay",
        "args": args,
        "elapsed_seconds": round(elapsed, 1),
        "configurations": {
            name: {
                "label": t.config.label,
                "overall": t.summary(suites),
                "suites": {s: t.summary([s]) for s in suites},
                "misses": t.misses,
                "by_tool": [
                    {"suite": k[0], "role": k[1], "tool": k[2], "verdict": k[3], "calls": n}
                    for k, n in sorted(t.by_tool.items())
                ],
            }
            for name, t in tallies.items()
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
