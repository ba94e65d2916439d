"""The managed policy layer: what an administrator wrote holds; a layer above may tighten it, never loosen it.

Theory of operation
-------------------
A company installs one managed policy per machine (`bouncerd/managedpolicy.py` finds it and checks
that only root can write it). It is layered right above the built-in packs, below the user's
`policy.yaml` and each shim's `--policy` (`bouncerd.core.policy.merge` is handed the layers in that
order). Because the user's layers sit above it, every key they write would win; `check_layer` is run
on each of them at load time and refuses, with a `PolicyError` naming both files, both lines and the
key, any entry that would loosen a key the managed layer wrote:

- a sink gate the managed layer turned on (or implied by declaring sinks) turned off;
  `on_tainted: deny` relaxed to `ask`; the sink kind changed; a managed sink parameter no longer
  gated (with no managed `sink_params`, every argument is a sink, so any list narrows it);
- `max_calls` above the managed budget;
- an `allowed_path_prefixes` entry outside every managed prefix; a managed `write_params` dropped;
- a managed `arg_patterns` entry replaced (a different regex cannot be shown to be narrower);
- a `trusted_destinations` / `trusted_domains` entry outside a managed allowlist for the same tool;
- `untrusted_output: false` or `deletion: false` over a managed `true`;
- a setting made weaker (`taint_scope` narrower, `taint_retention` shorter, `on_tainted_identity`
  `ask` over `deny`, `audit_arguments` changed); `audit_export` set below a managed one.

Separately, the managed `deny_trust:` lists destinations and domains that no layer (the managed one
included) may trust for any tool; a trusted domain is refused if it is, contains or lies under a
denied one, a trusted destination if it reads as a denied one or delivers under a denied domain.

Scope: a layer's entries are checked per server, as `Policy.rule_for` would fold them: for every
server either file has a section for (and for "any other server"), the layer's `tools.T` and
`servers.S.tools.T` folded together against the managed `tools.T` and `servers.S.tools.T` folded
together. So a user's top-level `tools.T` is held to a managed `servers.S.tools.T` too (it applies
to S), unless the user's own `servers.S.tools.T` restates the key. Keys the managed layer did not
write are the user's. Each layer is checked alone: whichever layer writes a key last, its value is
within the bound, and lists that extend only ever add values that are each within it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from bouncerd.core import canon
from bouncerd.core.policy import TAINT_SCOPES, DenyTrust, PolicyFile
from bouncerd.core.rules import EXTENDING_LISTS, ToolEntry, ToolRule, resolve
from bouncerd.errors import PolicyError

# A user file with many loosening entries gets them all named, up to this many; past it the rest
# are counted (one fix at a time is slow, a wall of text is not read).
MAX_PROBLEMS_SHOWN = 8


@dataclass(frozen=True)
class Bound:
    """What the managed layer says about one tool in one scope: the folded rule and the keys it wrote."""

    rule: ToolRule
    keys: frozenset[str]
    label: str  # "managed.yaml:12" (the line of the most specific managed entry)


def _scoped(layer: PolicyFile, scope: str | None, tool: str) -> list[tuple[str, ToolEntry]]:
    """The entries of `layer` that apply to `tool` on a server named `scope` (None: a server the
    layer has no section for), lowest first, each labelled "file:line: key path"."""
    out: list[tuple[str, ToolEntry]] = []
    if tool in layer.tools:
        out.append((f"{layer.filename}:{layer.tool_lines.get(tool, 1)}: tools.{tool}", layer.tools[tool]))
    section = layer.servers.get(scope) if scope is not None else None
    if section is not None and tool in section.tools:
        where = f"{layer.filename}:{section.tool_lines.get(tool, 1)}: servers.{scope}.tools.{tool}"
        out.append((where, section.tools[tool]))
    return out


def _bound(managed: PolicyFile, scope: str | None, tool: str) -> Bound | None:
    entries = _scoped(managed, scope, tool)
    if not entries:
        return None
    rule = resolve(tool, entries)
    keys = {k for _, e in entries for k, _ in e.written()}
    if rule.exfiltrating:
        keys.add("exfiltrating")  # also when implied by declared sinks
    return Bound(rule, frozenset(keys), entries[-1][0].rsplit(": ", 1)[0])


def _fold(entries: list[tuple[str, ToolEntry]]) -> tuple[ToolEntry, dict[str, str]]:
    """One layer's entries for one tool and server folded as `resolve` folds them, keeping only the
    written keys, with the entry that last wrote each key."""
    values: dict[str, Any] = {}
    where: dict[str, str] = {}
    set_at: dict[str, int] = {}
    for index, (label, entry) in enumerate(entries):
        for key, value in entry.written():
            old = values.get(key)
            if key in EXTENDING_LISTS and old is not None:
                value = tuple(dict.fromkeys((*old, *value)))
            elif key == "arg_patterns" and old is not None:
                value = {**old, **value}
            values[key] = value
            where[key] = label
            set_at[key] = index
    declared = max(set_at.get("sink_params", -1), set_at.get("sink_kind", -1))
    if values.get("exfiltrating") is False and declared > set_at["exfiltrating"]:
        # As `resolve` reads it: sinks declared after the "exfiltrating: false" (a server's entry
        # below a global one) turn the gate back on, so that false turns nothing off.
        values["exfiltrating"] = True
        where["exfiltrating"] = entries[declared][0]
    return ToolEntry(**values), where


def _under(prefix: str, managed: str) -> bool:
    return prefix == managed or prefix.startswith(managed.rstrip("/") + "/")


def _domain_under(domain: str, parent: str) -> bool:
    return domain == parent or domain.endswith("." + parent)


def _loosenings(entry: ToolEntry, bound: Bound) -> Iterator[tuple[str, str]]:
    """(key, what it does) for each key of `entry` that loosens `bound`."""
    r, keys = bound.rule, bound.keys
    if "exfiltrating" in keys and r.exfiltrating and entry.exfiltrating is False:
        yield "exfiltrating", "turns the managed sink gate off"
    if "sink_kind" in keys and entry.sink_kind is not None and entry.sink_kind != r.sink_kind:
        yield "sink_kind", f"changes the managed sink kind {r.sink_kind} to {entry.sink_kind}"
    if entry.sink_params is not None and (
        "sink_params" in keys or ("exfiltrating" in keys and r.exfiltrating)
    ):
        if not r.sink_params and entry.sink_params:
            yield "sink_params", "narrows the managed gate, which treats every argument as a sink"
        dropped = sorted(set(r.sink_params) - set(entry.sink_params))
        if dropped:
            yield "sink_params", f"stops gating the managed sink parameter(s) {', '.join(dropped)}"
    if "directory" in keys and not r.directory and entry.directory:
        yield "directory", "trusts the recipients a tool lists, which the managed policy does not"
    if "on_tainted" in keys and r.on_tainted == "deny" and entry.on_tainted == "ask":
        yield "on_tainted", "relaxes the managed on_tainted: deny to ask"
    budget, asked = r.max_calls, entry.max_calls
    if "max_calls" in keys and budget is not None and asked is not None and asked > budget:
        yield "max_calls", f"raises the managed budget {budget} to {asked}"
    if "allowed_path_prefixes" in keys and entry.allowed_path_prefixes is not None:
        wider = [
            p for p in entry.allowed_path_prefixes if not any(_under(p, m) for m in r.allowed_path_prefixes)
        ]
        if wider:
            yield "allowed_path_prefixes", f"widens the managed path prefixes with {', '.join(wider)}"
    if "write_params" in keys and entry.write_params is not None:
        dropped = sorted(set(r.write_params) - set(entry.write_params))
        if dropped:
            yield "write_params", f"stops confining the managed write parameter(s) {', '.join(dropped)}"
    if "arg_patterns" in keys and entry.arg_patterns is not None:
        changed = sorted(
            p for p, rx in entry.arg_patterns.items() if p in r.arg_patterns and r.arg_patterns[p] != rx
        )
        if changed:
            yield "arg_patterns", f"replaces the managed pattern(s) for {', '.join(changed)}"
    if "trusted_destinations" in keys and entry.trusted_destinations is not None:
        allowed = {k for d in r.trusted_destinations for k in canon.keys(d)}
        extra = [
            d for d in entry.trusted_destinations if not set(canon.keys(d)) <= allowed or not canon.keys(d)
        ]
        if extra:
            yield "trusted_destinations", f"trusts {', '.join(extra)} outside the managed allowlist"
    if "trusted_domains" in keys and entry.trusted_domains is not None:
        parents = [canon.domain_key(d) for d in r.trusted_domains]
        extra = [
            d
            for d in entry.trusted_domains
            if not any(_domain_under(canon.domain_key(d), p) for p in parents)
        ]
        if extra:
            yield "trusted_domains", f"trusts {', '.join(extra)} outside the managed allowlist"
    if "untrusted_output" in keys and r.untrusted_output and entry.untrusted_output is False:
        yield "untrusted_output", "vouches for output the managed policy treats as untrusted"
    if "deletion" in keys and r.deletion and entry.deletion is False:
        yield "deletion", "turns the managed deletion gate off"
    if "consequence" in keys and r.consequence not in ("", "none") and entry.consequence != r.consequence:
        yield "consequence", f"changes the managed consequence {r.consequence} of the tool"


def trust_denied(deny: DenyTrust, destination: str) -> bool:
    """Whether `deny` forbids trusting `destination`: it names the destination (any spelling of it,
    canon.keys), or a domain its host is under. Load time refuses a layer that trusts one
    (`check_layer`); at run time a session approval or a vouch of one is not trust either
    (`bouncerd.core.engine.Engine.trust`), so the call is judged as if nothing trusted it."""
    denied_keys = {k for d in deny.destinations for k in canon.keys(d)}
    if set(canon.keys(destination)) & denied_keys:
        return True
    host = canon.domain(destination)
    return host is not None and any(
        _domain_under(canon.domain_key(host), canon.domain_key(x)) for x in deny.domains
    )


def _denied(managed: PolicyFile, entry: ToolEntry) -> Iterator[tuple[str, str]]:
    deny = managed.deny_trust
    if deny is None:
        return
    denied_domains = [canon.domain_key(d) for d in deny.domains]
    denied_hosts = [h for h in (canon.domain(d) for d in deny.destinations) if h]
    for d in entry.trusted_destinations or ():
        if trust_denied(deny, d):
            yield "trusted_destinations", f"trusts {d}, which the managed deny_trust lists"
    for d in entry.trusted_domains or ():
        td = canon.domain_key(d)
        if any(_domain_under(td, x) or _domain_under(x, td) for x in denied_domains) or any(
            _domain_under(canon.domain_key(h), td) for h in denied_hosts
        ):
            yield "trusted_domains", f"trusts {d}, which covers a destination the managed deny_trust lists"


def _entries(layer: PolicyFile) -> Iterator[tuple[str | None, str, int, ToolEntry]]:
    for tool, entry in layer.tools.items():
        yield None, tool, layer.tool_lines.get(tool, 1), entry
    for server, section in layer.servers.items():
        for tool, entry in section.tools.items():
            yield server, tool, section.tool_lines.get(tool, 1), entry


def _tool_loosenings(managed: PolicyFile, layer: PolicyFile) -> Iterator[str]:
    """Each scope (every server either file has a section for, and "any other server") and each tool:
    the layer's folded entries against the managed fold for the same scope."""
    scopes: list[str | None] = [None, *sorted(set(managed.servers) | set(layer.servers))]
    tools = sorted({t for _s, t, _l, _e in _entries(layer)})
    for scope in scopes:
        for tool in tools:
            bound = _bound(managed, scope, tool)
            mine = _scoped(layer, scope, tool)
            if bound is None or not mine:
                continue
            entry, where = _fold(mine)
            for key, what in _loosenings(entry, bound):
                shown = (
                    ""
                    if scope is None or where[key].endswith(f"servers.{scope}.tools.{tool}")
                    else (f" (on server {scope})")
                )
                out = f"{where[key]}.{key}: {what}{shown} ({bound.label}: {key})"
                yield out


def _where(server: str | None, tool: str) -> str:
    return f"tools.{tool}" if server is None else f"servers.{server}.tools.{tool}"


_WEAKER_SETTING: dict[str, Callable[[Any, Any], bool]] = {
    "taint_scope": lambda mine, theirs: TAINT_SCOPES.index(theirs) < TAINT_SCOPES.index(mine),
    "taint_retention": lambda mine, theirs: theirs < mine,
    "on_tainted_identity": lambda mine, theirs: mine == "deny" and theirs == "ask",
    "audit_arguments": lambda mine, theirs: theirs != mine,
}


def problems(managed: PolicyFile, layer: PolicyFile) -> list[str]:
    """Every way `layer` loosens `managed` (or, for `layer is managed`, trusts what it denies)."""
    out: list[str] = []
    if layer is not managed:
        for key, value in layer.settings.items():
            weaker = _WEAKER_SETTING.get(key)
            if weaker is not None and key in managed.settings and weaker(managed.settings[key], value):
                out.append(
                    f"{layer.filename}:{layer.setting_lines.get(key, 1)}: {key}: {value} is weaker than "
                    f"{managed.settings[key]} set by the managed policy "
                    f"{managed.filename}:{managed.setting_lines.get(key, 1)}"
                )
        if layer.audit_export is not None and managed.audit_export is not None:
            out.append(
                f"{layer.audit_export.source}: audit_export: the managed policy sets audit_export "
                f"({managed.audit_export.source}); it cannot be replaced below it"
            )
    if layer is not managed:
        out.extend(_tool_loosenings(managed, layer))
    for server, tool, line, entry in _entries(layer):
        for key, what in _denied(managed, entry):
            line_of = managed.deny_trust.line if managed.deny_trust is not None else 1
            out.append(
                f"{layer.filename}:{line}: {_where(server, tool)}.{key}: {what} "
                f"({managed.filename}:{line_of}: deny_trust)"
            )
    return list(dict.fromkeys(out))


def check_layer(managed: PolicyFile | None, layer: PolicyFile) -> None:
    """Raise a PolicyError naming every loosening of `managed` by `layer` (nothing if no managed layer)."""
    if managed is None:
        return
    found = problems(managed, layer)
    if not found:
        return
    shown = found[:MAX_PROBLEMS_SHOWN]
    more = len(found) - len(shown)
    tail = f"\n  (and {more} more)" if more else ""
    kind = "the managed policy contradicts itself" if layer is managed else "loosens the managed policy"
    raise PolicyError(
        f"{layer.filename}: {kind} {managed.filename}; a user or shim policy may tighten managed rules, "
        f"never loosen them:\n  " + "\n  ".join(shown) + tail
    )


def managed_keys(managed: PolicyFile) -> list[str]:
    """Every key the managed layer decides, as "tools.T.key" / "servers.S.tools.T.key" (for status)."""
    out = [f"{key}" for key in managed.settings]
    out.extend(f"{_where(s, t)}.{k}" for s, t, _line, e in _entries(managed) for k, _ in e.written())
    if managed.deny_trust is not None:
        out.append("deny_trust")
    if managed.audit_export is not None:
        out.append("audit_export")
    return out
