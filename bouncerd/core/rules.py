"""Tool rules: what one policy layer says about a tool, and how the layers fold into one rule.

Theory of operation
-------------------
A `ToolEntry` is one layer's statement about one tool: a built-in pack, the fallback's guess, the
user's `policy.yaml`, a shim's `--policy` file. Only the keys the layer wrote are set; every other
field is `None`. `resolve` folds the entries of every layer that mentions the tool, lowest first,
into a `ToolRule`: a complete, frozen value with every field filled in and, for each field, the
layer that decided it (`ToolRule.source`), so `bouncerctl policy check` and the report can say why a
tool is gated the way it is.

How a higher layer's key lands on a lower layer's value (the merge semantics)
- Scalars (`exfiltrating`, `sink_kind`, `max_calls`, `on_tainted`, `untrusted_output`, `deletion`,
  `directory`, `consequence`) replace. So turning a pack's sink gate off takes an explicit
  `exfiltrating: false`: leaving the key out keeps the pack's `true`.
- `trusted_destinations` and `trusted_domains` **extend** (union, first mention first). They are
  statements of trust the user made; a shim file that trusts one more address for its server must
  not silently drop the addresses the user trusts everywhere. Built-in packs ship no trust, so
  nothing the user did not write can end up in these lists.
- `sink_params`, `write_params` and `allowed_path_prefixes` **replace**. The first two describe the
  server's input schema, which is one fact, not a union of opinions: a user who restates them is
  correcting a pack for their server version (a parameter renamed from `to` to `recipients`), and
  must be able to drop the old name. A narrowed `sink_params` is noted in `ToolRule.notes` so
  `policy check` shows which parameters are no longer gated. `allowed_path_prefixes` replaces so a
  more specific layer can *narrow* confinement; extending would only ever widen it.
- `arg_patterns` merges per parameter: a higher layer's pattern for `to` replaces the lower one's
  pattern for `to` and leaves the others.
- A layer that declares sinks (`sink_params` or `sink_kind`) above the layer that last set
  `exfiltrating` turns the gate on: writing the destination parameters of a tool and getting no gate
  would be the silent allow this project exists to prevent.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Literal

SinkKind = Literal["send", "fetch"]
OnTainted = Literal["deny", "ask"]
# What a consequential call does (docs/how-it-works.md, "Consequential calls"); `none` turns it off.
Consequence = Literal["destroy", "credential", "payment", "membership", "none"]
CONSEQUENCES: tuple[Consequence, ...] = ("destroy", "credential", "payment", "membership", "none")

SINK_KINDS: tuple[SinkKind, ...] = ("send", "fetch")
ON_TAINTED: tuple[OnTainted, ...] = ("deny", "ask")

EXTENDING_LISTS = frozenset({"trusted_destinations", "trusted_domains"})
REPLACING_LISTS = frozenset({"sink_params", "write_params", "allowed_path_prefixes"})
# Keys that only mean something while the sink gate is on: a layer that writes them next to
# `exfiltrating: false` has made a mistake the loader reports.
SINK_KEYS = frozenset({"sink_kind", "sink_params", "trusted_destinations", "trusted_domains", "on_tainted"})

DEFAULT_SOURCE = "default"
FALLBACK_SOURCE = "fallback"


def _frozen_map(value: Mapping[str, str] | None = None) -> Mapping[str, str]:
    return MappingProxyType(dict(value or {}))


@dataclass(frozen=True)
class ToolEntry:
    """What one layer wrote about one tool. `None` means "this layer did not say"."""

    exfiltrating: bool | None = None
    sink_kind: SinkKind | None = None
    sink_params: tuple[str, ...] | None = None
    trusted_destinations: tuple[str, ...] | None = None
    trusted_domains: tuple[str, ...] | None = None
    write_params: tuple[str, ...] | None = None
    allowed_path_prefixes: tuple[str, ...] | None = None
    arg_patterns: Mapping[str, str] | None = field(default=None, hash=False)
    max_calls: int | None = None
    on_tainted: OnTainted | None = None
    untrusted_output: bool | None = None
    deletion: bool | None = None
    directory: bool | None = None
    consequence: Consequence | None = None

    def written(self) -> Iterator[tuple[str, Any]]:
        """The keys this layer set, in declaration order, with their values."""
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                yield f.name, value


ENTRY_KEYS: tuple[str, ...] = tuple(f.name for f in fields(ToolEntry))


@dataclass(frozen=True)
class ToolRule:
    """The effective rule for one tool on one server: every field resolved, with its source.

    `source[field]` names the layer that decided the field: `"default"`, `"fallback"`,
    `"pack gmail"`, or `"policy.yaml:12"` (file and line of the entry); extended lists join the
    layers that contributed with `" + "`. `notes` explain the fallback's reasoning and any layer
    that narrowed a pack's sinks.
    """

    tool: str
    exfiltrating: bool = False
    sink_kind: SinkKind = "send"
    sink_params: tuple[str, ...] = ()
    trusted_destinations: tuple[str, ...] = ()
    trusted_domains: tuple[str, ...] = ()
    write_params: tuple[str, ...] = ()
    allowed_path_prefixes: tuple[str, ...] = ()
    arg_patterns: Mapping[str, str] = field(default_factory=_frozen_map, hash=False)
    max_calls: int | None = None  # None: no budget; 0 forbids the tool
    on_tainted: OnTainted = "deny"
    untrusted_output: bool = True  # False: the user vouches for this tool's output
    deletion: bool = False
    # The output lists the user's own contacts, members, attendees or counterparties in its identity
    # fields: a recipient listed there (and never seen in free text) is trusted.
    directory: bool = False
    # What the call does that cannot be taken back (`consequence.py`); "" when it does none of that.
    consequence: Consequence | Literal[""] = ""
    source: Mapping[str, str] = field(default_factory=_frozen_map, hash=False, compare=False)
    notes: tuple[str, ...] = field(default=(), compare=False)

    @property
    def forbidden(self) -> bool:
        return self.max_calls == 0


def _union(old: tuple[str, ...], new: tuple[str, ...]) -> tuple[str, ...]:
    seen = dict.fromkeys(old)
    seen.update(dict.fromkeys(new))
    return tuple(seen)


def resolve(tool: str, layers: Sequence[tuple[str, ToolEntry]], notes: Sequence[str] = ()) -> ToolRule:
    """Fold the layers (lowest first, each with its source label) into the effective rule."""
    base = ToolRule(tool)
    values: dict[str, Any] = {name: getattr(base, name) for name in ENTRY_KEYS}
    source: dict[str, str] = dict.fromkeys(ENTRY_KEYS, DEFAULT_SOURCE)
    set_at: dict[str, int] = {}  # key -> index of the layer that last wrote it
    out_notes = list(notes)
    for index, (label, entry) in enumerate(layers):
        for key, value in entry.written():
            old = values[key]
            if key in EXTENDING_LISTS:
                values[key] = _union(old, value)
                source[key] = label if source[key] == DEFAULT_SOURCE else f"{source[key]} + {label}"
            elif key == "arg_patterns":
                merged = dict(old)
                merged.update(value)
                values[key] = _frozen_map(merged)
                source[key] = label if source[key] == DEFAULT_SOURCE else f"{source[key]} + {label}"
            else:
                if key == "sink_params" and old and set(old) - set(value):
                    dropped = ", ".join(sorted(set(old) - set(value)))
                    out_notes.append(
                        f"{label} replaced the sink_params of {source[key]}; no longer gated: {dropped}"
                    )
                values[key] = value
                source[key] = label
            set_at[key] = index
    declared = max(set_at.get("sink_params", -1), set_at.get("sink_kind", -1))
    if not values["exfiltrating"] and declared > set_at.get("exfiltrating", -1) and declared >= 0:
        values["exfiltrating"] = True
        label = layers[declared][0]
        source["exfiltrating"] = f"implied by the sinks declared at {label}"
        out_notes.append(f"{label} declares sinks, so the sink gate is on")
    gate = {source["exfiltrating"], source["sink_params"]}
    if layers and layers[0][0] == FALLBACK_SOURCE and not any(FALLBACK_SOURCE in s for s in gate):
        # The fallback's reasoning about sends no longer decides anything: say so, so that a note
        # never contradicts the effective rule printed above it.
        decided = " and ".join(sorted(gate))
        out_notes = [
            f"{n} (the fallback's guess; the sink gate is set by {decided})"
            if n in notes and any(word in n for word in _GATE_WORDS)
            else n
            for n in out_notes
        ]
    return replace(base, **values, source=_frozen_map(source), notes=tuple(out_notes))


# Words of a fallback note that reasons about the sink gate (what sends, where to), not about the schema.
_GATE_WORDS = ("sink", "destination", "sends", "reads", "channel", "matched")


def describe(rule: ToolRule) -> list[str]:
    """Human-readable lines for `policy check` and the report: the fields that matter, with sources."""
    src = rule.source
    lines: list[str] = []
    if rule.exfiltrating:
        lines.append(
            f"sink gate: on, kind {rule.sink_kind}, on_tainted {rule.on_tainted}  [{src.get('exfiltrating')}]"
        )
        sinks = ", ".join(rule.sink_params) or "(none declared: every argument is a sink)"
        lines.append(f"sink_params: {sinks}  [{src.get('sink_params')}]")
    else:
        lines.append(f"sink gate: off  [{src.get('exfiltrating')}]")
    for key in (
        "trusted_destinations",
        "trusted_domains",
        "write_params",
        "allowed_path_prefixes",
    ):
        value = getattr(rule, key)
        if value:
            lines.append(f"{key}: {', '.join(value)}  [{src.get(key)}]")
    if rule.arg_patterns:
        pats = ", ".join(f"{k}={v!r}" for k, v in sorted(rule.arg_patterns.items()))
        lines.append(f"arg_patterns: {pats}  [{src.get('arg_patterns')}]")
    if rule.max_calls is not None:
        budget = "forbidden (0)" if rule.max_calls == 0 else str(rule.max_calls)
        lines.append(f"max_calls: {budget}  [{src.get('max_calls')}]")
    if not rule.untrusted_output:
        lines.append(f"untrusted_output: false (output vouched for)  [{src.get('untrusted_output')}]")
    if rule.deletion:
        lines.append(f"deletion: true  [{src.get('deletion')}]")
    if rule.consequence:
        lines.append(f"consequence: {rule.consequence}  [{src.get('consequence')}]")
    if rule.allowed_path_prefixes and not rule.write_params:
        lines.append("warning: allowed_path_prefixes is set but no write_params: every call is refused")
    lines.extend(f"note: {n}" for n in rule.notes)
    return lines
