"""YAML that remembers where everything was, and refuses what a policy file must not contain.

Theory of operation
-------------------
PyYAML's `SafeLoader` turns a document into plain values and forgets the lines. A policy error must
name the file, the line and the key, so this module stops one step earlier: it *composes* the
document into nodes (which carry their marks) and lets the policy reader walk the nodes itself,
asking for a mapping, a list of strings, a boolean, an integer. Every question either returns the
value or raises `PolicyError("FILE:LINE: KEY: REASON")`. The walk refuses what the safe loader would
quietly accept: duplicate keys (the last one would win), non-string keys, null values, and types
that YAML coerces (`"1"` for an int, `true` for an int, a bare string where a list is expected).

Scalars are typed by the safe loader's own resolver, so `yes`/`no`/`on`/`off` are booleans and
`2024-01-01` is a date, exactly as any other YAML tool would read them; the walk then checks the type.

Composing is done by libyaml (PyYAML's C parser) when it is there: the pure-Python composer spends
about 1.3 µs per byte, so a 530 KB policy took most of a second (and several under load) before the
walk began; libyaml composes the same nodes, with the same marks, about eight times faster. A
document libyaml refuses is composed again by the Python composer, so the error a person reads is
the same whichever is installed (and a document either one reads is read the same way: both build
the same nodes and the resolver that types scalars is PyYAML's).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import yaml

from bouncerd.errors import PolicyError

# A policy is written by hand: a megabyte is thousands of entries. Anything larger is a mistake, or
# an attempt to make `bouncerctl policy check` (which reads files it is pointed at) slow.
MAX_POLICY_BYTES = 1024 * 1024
# Aliases let a small file expand into a huge tree ("billion laughs"). Walking stops after this many
# nodes: a megabyte of hand-written YAML composes to far fewer.
MAX_NODES = 200_000
# PyYAML composes recursively, one Python frame (or more) per level of nesting, so depth is checked
# before composing: a hand-written policy nests five or six levels; 64 is far past any real one and far
# below the interpreter's recursion limit.
MAX_NESTING = 64
# No setting or budget needs more than 64 bits; a larger integer (0x followed by 5000 digits is one line)
# is refused before it is compared or printed: Python will not even format one past 4300 digits.
MAX_INTEGER = 2**63 - 1
_FLOW_BRACKETS = re.compile(r"[\[\]{}]")


Collect = Callable[[Callable[[], None]], None]


def raise_at_once(step: Callable[[], None]) -> None:
    step()


class _Loader(yaml.SafeLoader):
    """A SafeLoader of our own, so nothing registered on PyYAML's global loaders leaks in."""


_FastBase: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", _Loader)


class _FastLoader(_FastBase):  # type: ignore[valid-type,misc]
    """The same over libyaml (or the Python one again where PyYAML was built without it)."""


def _compose(text: str) -> tuple[yaml.Node | None, yaml.SafeLoader]:
    """The document's root node and the loader that built it (it constructs the scalars)."""
    if _FastLoader is not _Loader and yaml.reader.Reader.NON_PRINTABLE.search(text) is None:
        fast = _FastLoader(text)
        try:
            return fast.get_single_node(), fast
        except yaml.YAMLError:
            fast.dispose()  # composed again below, for the Python composer's error and line
    loader = _Loader(text)  # the reader rejects control characters already here
    return loader.get_single_node(), loader


@dataclass
class Doc:
    """One composed document and the counters the walk needs."""

    filename: str
    root: yaml.Node | None
    loader: yaml.SafeLoader
    nodes: int = 0

    # ---- errors -----------------------------------------------------------------------------

    def collector(self, errors: list[PolicyError] | None) -> Collect:
        """How a loader runs each independent part of the document (a top-level key, a server, a
        tool entry): at once, the first error raising; or, with an `errors` list, noting the error
        and going on to the next part. What loads is the same either way; a document too large to
        walk stops at once in both."""
        if errors is None:
            return raise_at_once

        def collect(step: Callable[[], None]) -> None:
            try:
                step()
            except PolicyError as exc:
                if self.nodes > MAX_NODES:
                    raise
                errors.append(exc)

        return collect

    def error(self, node: yaml.Node | None, key: str, reason: str) -> PolicyError:
        line = node.start_mark.line + 1 if node is not None else 1
        return PolicyError(f"{self.filename}:{line}: {key or '(top level)'}: {reason}")

    def _count(self) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise PolicyError(
                f"{self.filename}:1: (document): more than {MAX_NODES} YAML nodes after expanding aliases"
            )

    # ---- questions ----------------------------------------------------------------------------

    def mapping(
        self, node: yaml.Node, key: str, what: str = "a mapping"
    ) -> list[tuple[str, yaml.Node, yaml.Node]]:
        """The (key, key node, value node) pairs of a mapping, in file order."""
        self._count()
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, key, f"expected {what}, got {describe(self, node)}")
        seen: dict[str, int] = {}
        out: list[tuple[str, yaml.Node, yaml.Node]] = []
        for knode, vnode in node.value:
            self._count()
            if knode.tag == "tag:yaml.org,2002:merge":
                # A merged key can be overridden silently by a later one: the ambiguity strictness is for.
                raise self.error(knode, key, "merge keys (<<) are not supported; write the keys out")
            name = self.scalar(knode, key) if isinstance(knode, yaml.ScalarNode) else None
            if not isinstance(name, str) or not name:
                raise self.error(knode, key, f"keys must be non-empty strings, got {describe(self, knode)}")
            sub = f"{key}.{name}" if key else name
            if name in seen:
                raise self.error(
                    knode, sub, f"duplicate key (first on line {seen[name]}); YAML would keep the last"
                )
            seen[name] = knode.start_mark.line + 1
            if is_null(vnode):
                raise self.error(knode, sub, "has no value (null); write the value, or remove the line")
            out.append((name, knode, vnode))
        return out

    def scalar(self, node: yaml.Node, key: str) -> Any:
        self._count()
        if not isinstance(node, yaml.ScalarNode):
            raise self.error(node, key, f"expected a single value, got {describe(self, node)}")
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            raise self.error(node, key, f"cannot read this value: {_problem(exc)}") from None
        except (ValueError, OverflowError) as exc:  # PyYAML's int/date constructors: 5000 digits, 2001-13-45
            raise self.error(node, key, f"cannot read this value: {str(exc).splitlines()[0]}") from None

    def string(self, node: yaml.Node, key: str, choices: Iterable[str] | None = None) -> str:
        value = self.scalar(node, key)
        if not isinstance(value, str):
            raise self.error(node, key, f"expected a string, got {describe(self, node)}")
        if choices is not None:
            options = tuple(choices)
            if value not in options:
                raise self.error(node, key, f"must be one of {', '.join(options)}; got {value!r}")
        if not value:
            raise self.error(node, key, "must not be empty")
        return value

    def boolean(self, node: yaml.Node, key: str) -> bool:
        value = self.scalar(node, key)
        if not isinstance(value, bool):
            raise self.error(node, key, f"expected true or false, got {describe(self, node)}")
        return value

    def integer(self, node: yaml.Node, key: str, minimum: int, maximum: int | None = None) -> int:
        value = self.scalar(node, key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(node, key, f"expected an integer, got {describe(self, node)}")
        if abs(value) > MAX_INTEGER:
            raise self.error(node, key, f"must fit in 64 bits; got {node.value[:40]}…")
        if value < minimum or (maximum is not None and value > maximum):
            bound = f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
            raise self.error(node, key, f"must be {bound}; got {value}")
        return value

    def strings(self, node: yaml.Node, key: str) -> list[tuple[str, yaml.Node]]:
        """A list of non-empty strings, each with its node (for per-item errors)."""
        self._count()
        if not isinstance(node, yaml.SequenceNode):
            hint = ""
            if isinstance(node, yaml.ScalarNode) and isinstance(self.scalar(node, key), str):
                hint = f"; write [{node.value}] for a list of one"
            raise self.error(node, key, f"expected a list, got {describe(self, node)}{hint}")
        out: list[tuple[str, yaml.Node]] = []
        for i, item in enumerate(node.value):
            if is_null(item):
                raise self.error(item, f"{key}[{i}]", "has no value (null)")
            out.append((self.string(item, f"{key}[{i}]"), item))
        return out


def parse(text: str, filename: str) -> Doc:
    """Compose one YAML document. An empty file composes to `root=None`."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_POLICY_BYTES:
        raise PolicyError(f"{filename}:1: (document): larger than {MAX_POLICY_BYTES} bytes")
    deep = _too_deep(text)
    if deep is not None:
        raise PolicyError(
            f"{filename}:{deep}: (document): nested more than {MAX_NESTING} levels deep; a policy needs a few"
        )
    try:
        root, loader = _compose(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        raise PolicyError(f"{filename}:{line}: (document): not valid YAML: {_problem(exc)}") from None
    return Doc(filename, root, loader)


def _too_deep(text: str) -> int | None:
    """The line where nesting passes `MAX_NESTING` (block indentation, `- - -` items, flow brackets, each
    counted the way the composer recurses), or None. Brackets inside quoted strings count too: a policy
    that holds 64 of them in one string is refused with the others, which costs nothing real."""
    depth = 0
    for m in _FLOW_BRACKETS.finditer(text):
        depth += 1 if m.group(0) in "[{" else -1
        if depth > MAX_NESTING:
            return text.count("\n", 0, m.start()) + 1
    indents: list[int] = []
    for number, line in enumerate(text.splitlines(), 1):
        rest = line.lstrip(" ")
        if not rest or rest.startswith("#"):
            continue
        indent = len(line) - len(rest)
        while indents and indents[-1] >= indent:
            indents.pop()
        indents.append(indent)
        items = 0
        while rest.startswith("- ") or rest == "-":
            items += 1
            rest = rest[2:].lstrip(" ")
        if len(indents) + items > MAX_NESTING:
            return number
    return None


def is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def describe(doc: Doc, node: yaml.Node) -> str:
    """What the user wrote, in words: 'the string "1"', 'a list', 'true'."""
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if is_null(node):
        return "nothing (null)"
    try:
        value = doc.loader.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, OverflowError):
        return f"the value {node.value[:80]!r}"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    return f"the {type(value).__name__} {node.value[:80]}"


def suggest(name: str, known: Iterable[str]) -> str:
    """' (did you mean "x"?)' for a likely typo, else ''."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f' (did you mean "{close[0]}"?)' if close else ""


def _problem(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None)
    return str(problem) if problem else str(exc).splitlines()[0]
