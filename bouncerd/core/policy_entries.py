"""The strict parser of tool entries: the keys of one `tools.NAME` mapping of a policy or a pack.

Each key has its parser in `_ENTRY_PARSERS` (one per `rules.ENTRY_KEYS`, checked at import); a value
that does not parse is a `PolicyError` naming file, line, key and reason (STYLE §5). Lists of
destinations, domains, parameter names and prefixes keep their first occurrence of each value; a
regular expression is refused before compiling when its groups nest deeper than
`MAX_PATTERN_NESTING`. The layering of entries is `bouncerd.core.rules.resolve`; the files around
them are `bouncerd.core.policy`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import partial
from types import MappingProxyType
from typing import Any

import yaml

from bouncerd.core.constraints import collapse, path_problem
from bouncerd.core.rules import CONSEQUENCES, ENTRY_KEYS, ON_TAINTED, SINK_KEYS, SINK_KINDS, ToolEntry
from bouncerd.core.strict_yaml import Collect, Doc, raise_at_once, suggest

Node = yaml.Node

_DOMAIN = re.compile(r"[^\s/@:?#]+")


def _param_list(doc: Doc, node: Node, key: str) -> tuple[str, ...]:
    out: list[str] = []
    for value, item in doc.strings(node, key):
        if any(not seg for seg in value.split(".")) or value != value.strip():
            raise doc.error(item, key, f"{value!r} is not a parameter name or dotted path (a.b)")
        out.append(value)
    return tuple(dict.fromkeys(out))


def parse_destinations(doc: Doc, node: Node, key: str) -> tuple[str, ...]:
    out: list[str] = []
    for value, item in doc.strings(node, key):
        if value != value.strip():
            raise doc.error(item, key, f"{value!r} has leading or trailing whitespace")
        out.append(value)
    return tuple(dict.fromkeys(out))


def parse_domains(doc: Doc, node: Node, key: str) -> tuple[str, ...]:
    out: list[str] = []
    for value, item in doc.strings(node, key):
        domain = value.lower().removeprefix("*.").rstrip(".")
        if not _DOMAIN.fullmatch(domain) or "." not in domain or ".." in domain:
            raise doc.error(
                item,
                key,
                f"{value!r} is not a domain name; write the bare domain (example.com), "
                f"which also covers its subdomains",
            )
        out.append(domain)
    return tuple(dict.fromkeys(out))


def _prefixes(doc: Doc, node: Node, key: str) -> tuple[str, ...]:
    out: list[str] = []
    for value, item in doc.strings(node, key):
        problem = path_problem(value)
        if problem is not None:
            raise doc.error(item, key, f"path prefix {value!r} {problem}; prefixes must be absolute")
        out.append(collapse(value))
    return tuple(dict.fromkeys(out))


# Python's regex compiler recurses once per nested group; a pattern for an argument needs a few levels.
MAX_PATTERN_NESTING = 32
_ESCAPE_OR_PAREN = re.compile(r"\\.|\[(?:\\.|[^\]\\])*\]|[()]")


def _group_nesting(pattern: str) -> int:
    """How deep the groups of a regex nest (escapes and character classes skipped), read before compiling."""
    depth = deepest = 0
    for m in _ESCAPE_OR_PAREN.finditer(pattern):
        piece = m.group(0)
        if piece == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif piece == ")":
            depth = max(0, depth - 1)
    return deepest


def _patterns(doc: Doc, node: Node, key: str) -> Mapping[str, str]:
    out: dict[str, str] = {}
    for name, _knode, vnode in doc.mapping(node, key, "a mapping of parameter: regex"):
        sub = f"{key}.{name}"
        pattern = doc.string(vnode, sub)
        nesting = _group_nesting(pattern)
        if nesting > MAX_PATTERN_NESTING:
            raise doc.error(
                vnode, sub, f"regular expression nests {nesting} groups deep (at most {MAX_PATTERN_NESTING})"
            )
        try:
            re.compile(pattern)
        except re.error as exc:
            raise doc.error(vnode, sub, f"invalid regular expression {pattern!r}: {exc}") from None
        out[name] = pattern
    return MappingProxyType(out)


_ENTRY_PARSERS: dict[str, Any] = {
    "exfiltrating": Doc.boolean,
    "sink_kind": lambda doc, node, key: doc.string(node, key, SINK_KINDS),
    "sink_params": _param_list,
    "trusted_destinations": parse_destinations,
    "trusted_domains": parse_domains,
    "write_params": _param_list,
    "allowed_path_prefixes": _prefixes,
    "arg_patterns": _patterns,
    "max_calls": lambda doc, node, key: doc.integer(node, key, 0),
    "on_tainted": lambda doc, node, key: doc.string(node, key, ON_TAINTED),
    "untrusted_output": Doc.boolean,
    "deletion": Doc.boolean,
    "directory": Doc.boolean,
    "consequence": lambda doc, node, key: doc.string(node, key, CONSEQUENCES),
}
assert set(_ENTRY_PARSERS) == set(ENTRY_KEYS)


def _entry(
    doc: Doc,
    node: Node,
    key: str,
    forbidden: frozenset[str] = frozenset(),
    each: Collect = raise_at_once,
) -> ToolEntry:
    """One tool entry; with a collecting `each` (`policy check`), every key's error is noted, not
    only the first (an entry with two mistakes shows two)."""
    values: dict[str, Any] = {}
    nodes: dict[str, Node] = {}
    what = "a mapping of rule keys (exfiltrating, sink_params, ...)"

    def one(name: str, knode: Node, vnode: Node) -> None:
        sub = f"{key}.{name}"
        if name not in _ENTRY_PARSERS:
            raise doc.error(knode, sub, "unknown key" + suggest(name, ENTRY_KEYS))
        if name in forbidden:
            raise doc.error(knode, sub, "not allowed in a built-in pack: trust and paths are the user's")
        values[name] = _ENTRY_PARSERS[name](doc, vnode, sub)
        nodes[name] = knode

    for name, knode, vnode in doc.mapping(node, key, what):
        each(partial(one, name, knode, vnode))
    if values.get("exfiltrating") is False:
        for name in ENTRY_KEYS:
            if name in SINK_KEYS and name in values:
                raise doc.error(
                    nodes[name],
                    f"{key}.{name}",
                    "has no effect: this entry sets exfiltrating: false, which turns the sink gate off",
                )
    return ToolEntry(**values)


def _one_tool(
    doc: Doc,
    entries: dict[str, ToolEntry],
    lines: dict[str, int],
    name: str,
    knode: Node,
    vnode: Node,
    where: str,
    forbidden: frozenset[str],
    each: Collect = raise_at_once,
) -> None:
    entries[name] = _entry(doc, vnode, where, forbidden, each)
    lines[name] = knode.start_mark.line + 1


def parse_tools(
    doc: Doc, node: Node, key: str, forbidden: frozenset[str] = frozenset(), each: Collect = raise_at_once
) -> tuple[dict[str, ToolEntry], dict[str, int]]:
    """The tool entries of a `tools` mapping by name, and the line of each name. A key of `forbidden`
    (a pack's trust and paths) is an error."""
    entries: dict[str, ToolEntry] = {}
    lines: dict[str, int] = {}
    for name, knode, vnode in doc.mapping(node, key, "a mapping of tool name: rule"):
        each(partial(_one_tool, doc, entries, lines, name, knode, vnode, f"{key}.{name}", forbidden, each))
    return entries, lines
