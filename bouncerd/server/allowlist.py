"""Always allow: adding a destination to the user's policy.yaml without rewriting the rest of it.

Theory of operation
-------------------
A person who answers "always" trusts a destination for one tool of one server for good. The daemon
records that where the person can read and undo it: as an item of
``servers: NAME: tools: TOOL: trusted_destinations:`` in their own ``policy.yaml``, under a comment
that says when and why (``# added by bouncerctl/approval 2026-11-30T10:12Z: bob@x.com for
gmail/send_email``).

The file is the person's: its comments, order, quoting and indentation are kept. `add_trusted` edits
the *text*: it composes the YAML (positions only, nothing is re-emitted) and splices new lines in
after the deepest part of that path that exists, at the indentation its siblings use. An existing
block list gets the comment and the new items after its last item; a flow list (``[a, b]``) is turned
into a block list whose existing items keep their exact spelling. Shapes it cannot edit without
rewriting the person's text (a flow-style mapping on the path, a value that is not a mapping) are a
`PolicyError` that says so: the person adds the entry by hand.

New text is accepted only if it loads with the strict loader *and* the loaded policy trusts every new
destination for that server and tool (`edited_policy`): the edit is checked by its effect, not by how
it looks. `write_policy` then replaces the file atomically (temp file in the same directory, fsync,
``os.replace``, directory fsync, mode 0600), following a symlinked policy.yaml to its target so a
dotfile link is not replaced by a copy. The daemon reloads the policy afterwards (so the allowlist is in
force) and restores the old bytes if that reload fails (bouncerd/server/approvals.py).

Destinations are written double-quoted with every character that is not plainly visible escaped
(``"bob\\u200b@x.com"``), so the file shows what a look-alike really is; the comment shows the same.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Sequence
from pathlib import Path

import yaml

from bouncerd.atomicfile import write_atomically as write_atomically
from bouncerd.core.canon import visible
from bouncerd.core.policy import PolicyFile, load_policy, merge
from bouncerd.errors import PolicyError
from bouncerd.server.policies import MAX_POLICY_BYTES

# Child keys are indented this much more than their parent in the lines we add (the YAML default).
INDENT_STEP = 2

_PLAIN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]*")


def comment_line(server: str, tool: str, destinations: Sequence[str], now: float) -> str:
    """``# added by bouncerctl/approval 2026-11-30T10:12Z: bob@x.com for gmail/send_email``."""
    when = dt.datetime.fromtimestamp(now, tz=dt.UTC).strftime("%Y-%m-%dT%H:%MZ")
    what = ", ".join(quote(d)[1:-1] for d in destinations)
    return f"# added by bouncerctl/approval {when}: {what} for {quote(server)[1:-1]}/{quote(tool)[1:-1]}"


def add_trusted(text: str, server: str, tool: str, destinations: Sequence[str], comment: str) -> str:
    """`text` with `destinations` appended to servers.SERVER.tools.TOOL.trusted_destinations."""
    if not destinations:
        return text
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise PolicyError(f"the policy is not valid YAML, so it cannot be edited safely: {exc}") from None
    items = [f"- {quote(d)}" for d in destinations]
    path = ["servers", server, "tools", tool, "trusted_destinations"]
    if root is None or (isinstance(root, yaml.ScalarNode) and root.value == ""):
        return _splice(text, len(text), _block(path, 0, comment, items))
    node: yaml.Node = root
    for depth, key in enumerate(path):
        where = ".".join(path[:depth]) or "the top level"
        if not isinstance(node, yaml.MappingNode) or node.flow_style:
            raise PolicyError(f"{where} is not a block mapping; add the entry by hand")
        value = _child(node, key)
        if value is None:
            column = node.value[0][0].start_mark.column if node.value else 0
            return _splice(
                text, _line_after(text, _end_index(node)), _block(path[depth:], column, comment, items)
            )
        node = value
    return _extend_list(text, node, comment, items)


def _extend_list(text: str, seq: yaml.Node, comment: str, items: list[str]) -> str:
    if not isinstance(seq, yaml.SequenceNode):
        raise PolicyError("trusted_destinations is not a list; add the entry by hand")
    if not seq.flow_style:
        column = seq.start_mark.column
        block = "".join(" " * column + line + "\n" for line in [comment, *items])
        return _splice(text, _line_after(text, _end_index(seq)), block)
    # [a, b] → a block list: new items under the comment first, the old ones after them, spelled as they
    # were; whatever followed the closing bracket on its line (a comment) stays on the last old item.
    key_column = _key_column_of(text, seq.start_mark.index)
    column = key_column + INDENT_STEP
    old = [text[item.start_mark.index : item.end_mark.index] for item in seq.value]
    for item in seq.value:
        if not isinstance(item, yaml.ScalarNode):
            raise PolicyError("trusted_destinations holds something other than strings; edit it by hand")
    lines = [comment, *items, *(f"- {spelling}" for spelling in old)]
    start = seq.start_mark.index
    while start > 0 and text[start - 1] in " \t":
        start -= 1
    block = "\n" + "\n".join(" " * column + line for line in lines)
    return text[:start] + block + text[seq.end_mark.index :]


def _key_column_of(text: str, index: int) -> int:
    """The indentation of the line holding `index` (the key a flow list belongs to)."""
    line_start = text.rfind("\n", 0, index) + 1
    line = text[line_start:index]
    return len(line) - len(line.lstrip(" "))


def _child(node: yaml.MappingNode, key: str) -> yaml.Node | None:
    for knode, vnode in node.value:
        if isinstance(knode, yaml.ScalarNode) and knode.value == key:
            found: yaml.Node = vnode
            return found
    return None


def _end_index(node: yaml.Node) -> int:
    """Character offset just past the node's last content (block collections: their last child)."""
    if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
        knode, vnode = node.value[-1]
        return max(_end_index(knode), _end_index(vnode))
    if isinstance(node, yaml.SequenceNode) and not node.flow_style and node.value:
        return _end_index(node.value[-1])
    return int(node.end_mark.index)


def _line_after(text: str, index: int) -> int:
    """Offset of the start of the line after the one holding `index` (a block scalar ends at one)."""
    if index > 0 and text[index - 1] == "\n":
        return index
    newline = text.find("\n", index)
    return len(text) if newline < 0 else newline + 1


def _splice(text: str, at: int, block: str) -> str:
    if at == len(text) and text and not text.endswith("\n"):
        return text + "\n" + block
    return text[:at] + block + text[at:]


def _block(keys: Sequence[str], column: int, comment: str, items: Sequence[str]) -> str:
    lines = [" " * (column + INDENT_STEP * i) + _key(k) + ":" for i, k in enumerate(keys)]
    inner = " " * (column + INDENT_STEP * len(keys))
    lines += [inner + comment, *(inner + item for item in items)]
    return "\n".join(lines) + "\n"


def _key(name: str) -> str:
    """A mapping key as YAML: plain when it reads back as the same string, else double-quoted."""
    if _PLAIN_KEY.fullmatch(name):
        try:
            if yaml.safe_load(f"{name}: 0") == {name: 0}:
                return name
        except yaml.YAMLError:
            pass
    return quote(name)


def quote(value: str) -> str:
    """A YAML double-quoted scalar; anything not plainly visible is escaped so it can be seen."""
    out = ['"']
    shown = visible(value)
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch < "\x7f" or (ch.isprintable() and ch in shown and not ch.isspace()):
            out.append(ch)
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


# ---- the file ----------------------------------------------------------------------------------


def edited_policy(
    path: Path, server: str, tool: str, destinations: Sequence[str], now: float
) -> tuple[bytes | None, str, PolicyFile]:
    """(old bytes or None if absent, new text, the loaded new policy). PolicyError if the new text would
    not load, or would not trust every destination for server/tool."""
    target = Path(os.path.realpath(path))
    try:
        old: bytes | None = target.read_bytes()
    except FileNotFoundError:
        old = None
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if old is not None and len(old) > MAX_POLICY_BYTES:
        raise PolicyError(f"{path}: too large to edit (limit {MAX_POLICY_BYTES} bytes)")
    try:
        text = old.decode("utf-8") if old is not None else ""
    except UnicodeDecodeError:
        raise PolicyError(f"{path}: not UTF-8 text") from None
    current: tuple[str, ...] = ()
    if old is not None:
        try:
            current = _trusted(load_policy(text, str(path)), server, tool)
        except PolicyError as exc:
            raise PolicyError(f"the policy does not load as it is, so it was left alone: {exc}") from None
    new = [d for d in dict.fromkeys(destinations) if d not in current]
    new_text = add_trusted(text, server, tool, new, comment_line(server, tool, new, now))
    loaded = load_policy(new_text, str(path))
    merge([loaded])  # unknown packs and the like fail here, as they would on reload
    missing = [d for d in destinations if d not in _trusted(loaded, server, tool)]
    if missing:
        raise PolicyError(f"the edited policy would not trust {missing[0]!r}; add it by hand")
    return old, new_text, loaded


def _trusted(policy: PolicyFile, server: str, tool: str) -> tuple[str, ...]:
    section = policy.servers.get(server)
    entry = section.tools.get(tool) if section is not None else None
    return entry.trusted_destinations or () if entry is not None else ()


def write_policy(path: Path, data: bytes) -> None:
    """Replace the policy file (its symlink target, if it is one) atomically, mode 0600."""
    target = Path(os.path.realpath(path))
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomically(target, data)
