"""Edits to a JSON(C) text that keep its layout: indentation, separators, newlines, comments.

Pure: `bouncerctl.jsonc.Document` (text, blanked text, parsed nodes with their offsets) in, edits as
``(start, end, replacement)`` out, applied by `apply_edits`. A member added to an object follows the
layout of the members already there (`layout_of`: one per line with their indentation, or inline);
an array rewritten keeps its items' layout (`array_text`). `indent_more` and `indent_less` shift a
text embedded one level deeper and back, exactly inverse, so a text kept inside a document comes
back byte for byte. What to change in an MCP client's config is `bouncerctl.mcpconfig`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from bouncerctl.jsonc import Document, Node


def line_start(text: str, i: int) -> int:
    return text.rfind("\n", 0, i) + 1


def indent_at(text: str, i: int) -> str:
    start = j = line_start(text, i)
    while j < len(text) and text[j] in " \t":
        j += 1
    return text[start:j]


def first_on_line(blanked: str, i: int) -> bool:
    return not blanked[line_start(blanked, i) : i].strip()


def indent_more(text: str, unit: str) -> str:
    """`unit` added before every non-empty line after the first."""
    if not unit:
        return text
    lines = text.split("\n")
    return "\n".join([lines[0], *(unit + line if line.strip("\r") else line for line in lines[1:])])


def indent_less(text: str, unit: str) -> str | None:
    """The inverse of `indent_more`; None if some line does not start with `unit` (edited by hand)."""
    if not unit:
        return text
    lines = text.split("\n")
    out = [lines[0]]
    for line in lines[1:]:
        if not line.strip("\r"):
            out.append(line)
        elif line.startswith(unit):
            out.append(line[len(unit) :])
        else:
            return None
    return "\n".join(out)


@dataclass
class Layout:
    separator: str  # between two members: "," plus the newline and indentation, or ", "
    colon: str
    unit: str  # what one level deeper adds to a line's indentation inside the entry


def layout_of(doc: Document, entry: Node) -> Layout:
    blanked, text = doc.blanked, doc.text
    first = (entry.members or [])[0]
    colon = ":" if blanked[first.key_end : first.value.start] == ":" else ": "
    if "\n" in blanked[entry.start : first.key_start] and first_on_line(blanked, first.key_start):
        member_indent = indent_at(text, first.key_start)
        entry_indent = indent_at(text, entry.start)
        unit = member_indent[len(entry_indent) :] if member_indent.startswith(entry_indent) else ""
        return Layout("," + doc.newline + member_indent, colon, unit)
    return Layout(", ", colon, "")


def array_text(doc: Document, array: Node, items: list[str]) -> str:
    blanked, text, nl = doc.blanked, doc.text, doc.newline
    old = array.items or []
    if old and "\n" in blanked[array.start : old[0].start] and first_on_line(blanked, old[0].start):
        indent = indent_at(text, old[0].start)
        closing = nl + indent_at(text, array.end - 1) if first_on_line(blanked, array.end - 1) else ""
        return "[" + nl + indent + ("," + nl + indent).join(items) + closing + "]"
    separator = ", "
    if len(old) >= 2:
        between = blanked[old[0].end : old[1].start]
        if between.strip() == "," and "\n" not in between:
            separator = between
    pad = ""
    if old and not blanked[array.start + 1 : old[0].start].strip("\t ") and blanked[array.start + 1] == " ":
        pad = " "
    return "[" + pad + separator.join(items) + pad + "]"


def apply_edits(text: str, base: int, edits: list[tuple[int, int, str]]) -> str:
    """Replace [start, end) by each string; edits at the same place keep the order they were made in."""
    ordered = sorted(enumerate(edits), key=lambda pair: (pair[1][0], pair[0]), reverse=True)
    for _, (start, end, replacement) in ordered:
        text = text[: start - base] + replacement + text[end - base :]
    return text


def add_strings_edit(
    doc: Document, obj: Node, key: str, strings: Mapping[str, str]
) -> tuple[int, int, str] | None:
    """The edit that adds `strings` to the object `obj[key]` (or adds `key` holding them after the last
    member of `obj`); None when there is nothing to add."""
    if not strings:
        return None
    layout = layout_of(doc, obj)
    member = obj.member(key)
    if member is None:
        inline = "{" + ", ".join(pair(k, v, ": ") for k, v in strings.items()) + "}"
        last = (obj.members or [])[-1].value
        return (
            last.end,
            last.end,
            layout.separator + json.dumps(key, ensure_ascii=False) + layout.colon + inline,
        )
    node = member.value
    if not node.members:  # {} (or only whitespace and comments inside): replaced by an inline object
        return (node.start, node.end, "{" + ", ".join(pair(k, v, ": ") for k, v in strings.items()) + "}")
    inner = layout_of(doc, node)
    last = node.members[-1].value
    return (
        last.end,
        last.end,
        "".join(inner.separator + pair(k, v, inner.colon) for k, v in strings.items()),
    )


def pair(key: str, value: str, colon: str) -> str:
    """A member `key: value` of two JSON strings, with `colon` as written in the document."""
    return json.dumps(key, ensure_ascii=False) + colon + json.dumps(value, ensure_ascii=False)
