"""A fetch that also acts is judged for the act; one that only reads stays a read.

Theory of operation
-------------------
A fetch that carries nothing of the user's is allowed even to a host an output planted: a beacon is
reported, not blocked (docs/what-it-stops.md). Some fetch tools do more than read: they save what
they fetch to disk, submit the page's form, click one of its buttons, run its script. Then the page
chooses an act done with the user's session, and the call is judged for that act (`verdict`), after
the fetch gate let it through:

- *saving*: an argument that names where the bytes land (`constraints.lands_bytes`: `save_to`,
  `target_dir`, `output_path`) in a key place (`consequence.key_place`, passed in: `~/.ssh`, a shell start-up
  file, an autostart entry) is asked (``consequence.key_path``), whatever the URL;
- *acting*: an argument named as an act (`ACT_WORDS`: submit, click, press, execute, script, or
  follow beside action, form, link or button) with a value (not `false`, not empty) makes the
  fetch act on the page; unless its URL is one the user typed, approved or allowlisted, it is asked
  (``consequence.acting_fetch``), with where the URL first appeared when an output planted it.

Following redirects is reading (`follow_redirects: true` is no act), and a fetch with a body,
headers or a writing method is a send, which the sink gate judged already (`fetchgate.fetch_payload`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bouncerd.core import constraints, fallback, sinkgate
from bouncerd.core.model import Provenance, Verdict
from bouncerd.core.rules import ToolRule
from bouncerd.core.taint import Hit


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


ACT_WORDS = _set("submit autosubmit click press tap execute exec script javascript js eval perform")
FOLLOW_OBJECTS = _set("action actions form forms link links button buttons")


def acts(name: str, value: Any) -> bool:
    """Whether an argument makes a fetch act on the page (`submit: true`, `click: "#buy"`)."""
    if value in (None, False, "", [], {}, 0):
        return False
    parts = set(fallback.words(name))
    return bool(ACT_WORDS & parts) or ("follow" in parts and bool(FOLLOW_OBJECTS & parts))


def _where(prov: Provenance | None) -> str:
    if prov is None:
        return "it appeared in earlier untrusted output (details evicted from memory)"
    tool = f"/{prov.tool}" if prov.tool else ""
    return f"it first appeared in the output of {prov.server}{tool} (request {prov.request_id!r})"


def verdict(
    tool: str,
    rule: ToolRule,
    arguments: Mapping[str, Any],
    *,
    trust: sinkgate.Trust,
    lookup: Callable[[str], Hit | None],
    key_place: Callable[[str, str], str | None],
) -> Verdict | None:
    """An ask for a fetch that saves into a key place or acts on a page the user did not name (see
    the module docstring), or None."""
    if not (rule.exfiltrating and rule.sink_kind == "fetch"):
        return None
    for where, value in constraints.landing_values(arguments):
        for item in value if isinstance(value, list) else [value]:
            place = key_place(item, where)
            if place is not None:
                return Verdict(
                    "ask",
                    "consequence.key_path",
                    f"{tool}: its argument {where!r} saves what it fetches into {place!r}, where files "
                    f"run or authenticate as you",
                    parameter=where,
                )
    acting = [str(name) for name, value in arguments.items() if acts(str(name), value)]
    if not acting:
        return None
    sinks = set(rule.sink_params)
    for d in sinkgate.leaves(arguments):
        if d.parameter.split(".", 1)[0].split("[", 1)[0] not in sinks:
            continue
        if sinkgate.trusted_reason(d, trust) is not None:
            continue
        hit = lookup(d.value)
        seen = "" if hit is None else f"; {_where(hit.provenance if hit.state == 'tainted' else None)}"
        return Verdict(
            "ask",
            "consequence.acting_fetch",
            f"{tool} does not only read {d.value!r}: its argument {acting[0]!r} acts on the page (the "
            f"page chooses what is submitted or run, with your session), and you did not name it{seen}",
            destination=d.value,
            parameter=acting[0],
            provenance=hit.provenance if hit is not None else None,
        )
    return None
