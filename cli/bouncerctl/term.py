"""Terminal output shared by bouncerctl commands: the width to fit, wrapping in cells, colour.

Width. A line is measured in terminal cells, not characters: an East Asian wide or full-width
character takes two cells, a combining mark or a zero-width character none, an ANSI colour sequence
none. `columns` is the width to fit: ``COLUMNS`` when set (as shells and test harnesses do), else the
size of the terminal on the stream, else None: output that goes to a pipe or a file is not wrapped,
so each record stays on one line for grep (scripts should use ``--json``).

Wrapping never cuts text. `wrap` breaks at spaces, and breaks a word wider than the room (a long
URL, an address with no spaces) at a cell boundary, so every character reaches the screen. Wrapped
lines are indented under the line they continue (`hang`), the way ``systemctl status`` and ``git log``
show a long message.

Colour follows the no-color.org convention: ``NO_COLOR`` set and not empty turns it off;
``FORCE_COLOR`` set and not empty turns it on even through a pipe; otherwise a terminal gets colour
and a pipe does not (click's own test: `echo` strips styles from a stream that is not a tty).
``NO_COLOR`` wins when both are set: asking for no colour is the safer reading.

Nothing here imports more than the standard library's `re` and `unicodedata` (click only when text
is styled or written): every command's start-up pays for this module, and the group's ``--help``,
which is written before click is imported (`bouncerctl.helptext`), uses it too.
"""

from __future__ import annotations

import os
import re
import sys
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, Any

# Narrower than this, a hanging indent leaves too little room to read; lines are fitted to this
# width instead (a terminal this narrow wraps them itself, but no text is lost either way).
MIN_COLUMNS = 32

# A word too long for any line is broken where it stands if at least this much room is left there.
MIN_PIECE = 8

# The indent of a line that continues the one above (a wrapped reason, a long summary).
HANG = "    "

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def columns(stream: IO[Any] | None = None, environ: Mapping[str, str] | None = None) -> int | None:
    """The width to fit output to, in cells; None when the stream is not a terminal and COLUMNS is unset."""
    env = os.environ if environ is None else environ
    stream = sys.stdout if stream is None else stream
    raw = env.get("COLUMNS", "")
    if raw.isdigit() and int(raw) > 0:
        return max(int(raw), MIN_COLUMNS)
    try:
        if not stream.isatty():
            return None
        size = os.get_terminal_size(stream.fileno()).columns
        return max(size, MIN_COLUMNS) if size > 0 else None  # 0: a terminal whose size nobody set
    except (AttributeError, OSError, ValueError):  # a stream with no descriptor (a test runner's)
        return None


def colour(environ: Mapping[str, str] | None = None) -> bool | None:
    """For click.echo's `color`: False under NO_COLOR, True under FORCE_COLOR, else None (tty decides)."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    return None


def echo(
    text: str = "", *, err: bool = False, nl: bool = True, environ: Mapping[str, str] | None = None
) -> None:
    """click.echo with the colour choice of `colour`."""
    import click

    click.echo(text, err=err, nl=nl, color=colour(environ))


def say(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """`echo` with each line of `text` fitted to the width of the stream it goes to (see `fit`)."""
    stream = sys.stderr if err else sys.stdout
    width = columns(stream)
    echo("\n".join(piece for line in text.split("\n") for piece in fit(line, width)), err=err, nl=nl)


def style(text: str, **styles: Any) -> str:
    """click.style; the escape codes are stripped on output where colour is off."""
    import click

    return click.style(text, **styles)


def plain(text: str) -> str:
    return _ANSI.sub("", text)


def char_cells(ch: str) -> int:
    if ch == "\t":
        return 1  # as the ASCII path counts it; wrapped text has its tabs turned to spaces
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf", "Cc"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def cells(text: str) -> int:
    """The terminal cells `text` takes (ANSI escapes take none)."""
    stripped = plain(text)
    if stripped.isascii():
        return sum(1 for ch in stripped if ch.isprintable() or ch == "\t")
    return sum(char_cells(ch) for ch in stripped)


def pad(text: str, width: int, *, right: bool = False) -> str:
    """`text` padded with spaces to `width` cells (never cut)."""
    room = " " * max(width - cells(text), 0)
    return room + text if right else text + room


def _split_word(word: str, room: int) -> tuple[str, str]:
    """The longest head of a plain `word` that fits in `room` cells (at least one character), and the rest."""
    used = 0
    for i, ch in enumerate(word):
        used += char_cells(ch)
        if used > room:
            return (word[:i], word[i:]) if i else (word[:1], word[1:])
    return word, ""


def wrap(text: str, width: int | None, *, first: str = "", indent: str = HANG) -> list[str]:
    """`first` + `text` as lines of at most `width` cells; continuation lines start with `indent`.

    Text that fits is kept as it is; wrapped, whitespace runs become one space. With `width` None
    the whole is one line. `first` (which may be styled) is kept as it is; `text` should be plain
    where a word of it may be too long for a line (it is broken inside).
    """
    if "\n" not in text and (width is None or cells(first) + cells(text) <= max(width, MIN_COLUMNS)):
        return [(first + text).rstrip()]  # fits: kept as it is, inner spacing and all
    words = text.split()
    if width is None:
        return [(first + " ".join(words)).rstrip()]
    width = max(width, MIN_COLUMNS)
    lines: list[str] = []
    line, used = first, cells(first)
    start = used  # nothing but the prefix yet
    for word in words:
        size = cells(word)
        gap = 0 if used == start else 1
        if used + gap + size <= width:
            line += (" " if gap else "") + word
            used += gap + size
            continue
        never_fits = size > width - cells(indent)
        if used > start and never_fits and width - used - gap >= MIN_PIECE:
            line += " " if gap else ""  # broken from here on, not left to leave a short line
            used += gap
        elif used > start:  # the word goes to the next line
            lines.append(line.rstrip())
            line, used = indent, cells(indent)
            start = used
        while used + size > width:  # wider than a whole line: broken, never cut
            head, word = _split_word(word, width - used)
            lines.append(line + head)
            line, used = indent, cells(indent)
            start = used
            size = cells(word)
        if word:
            line += word
            used += size
    if used > start or line[len(indent) :].strip() or not lines:  # a zero-width word counts: never cut
        lines.append(line.rstrip())
    return lines


def wrap_parts(parts: Sequence[str], width: int | None, *, first: str = "", sep: str = " · ") -> list[str]:
    """`parts` joined by `sep`, a line broken only between parts (a part too long is wrapped alone)."""
    if width is None:
        return [first + sep.join(parts)]
    lines: list[str] = []
    line = first
    for i, part in enumerate(parts):
        joined = line + (sep if i else "") + part
        if cells(joined) <= width:
            line = joined
            continue
        if i:
            lines.append((line + sep.rstrip()).rstrip())
            line = HANG[:2]
        if cells(line + part) <= width:
            line += part
        else:
            *whole, line = wrap(part, width, first=line, indent=HANG[:2])
            lines += whole
    lines.append(line.rstrip())
    return lines


def fit(line: str, width: int | None, *, indent: str = HANG) -> list[str]:
    """One already-formatted line fitted to `width`: unchanged if it fits, else wrapped under itself."""
    if width is None or cells(line) <= width:
        return [line]
    lead = line[: len(line) - len(line.lstrip(" "))]
    return wrap(line.strip(), width, first=lead, indent=lead + indent)


def _split_at_space(text: str, room: int) -> tuple[str, str]:
    """`_split_word`, moved back to just after the last space of the head when there is one in its
    second half: a word is broken only when it is too long to move whole to the next line."""
    head, rest = _split_word(text, room)
    if not rest or rest[:1] == " ":
        return head, rest
    cut = head.rfind(" ") + 1
    if cut > len(head) // 2 and head[:cut].strip():
        return head[:cut], head[cut:] + rest
    return head, rest


def fold(line: str, width: int | None, *, indent: str = HANG) -> list[str]:
    """A line whose spacing matters (a diff, a command) broken at `width` cells, spaces kept.

    Breaks fall after a space where one is near the edge, so a word (``approval_timeout``) is not
    cut in two; a word longer than half a line is broken where it stands. Continuation lines start
    with `indent`. The line should be plain: a break may fall inside anything.
    """
    if width is None or cells(line) <= width:
        return [line]
    width = max(width, MIN_COLUMNS)
    out: list[str] = []
    rest, room = line, width
    while cells(rest) > room:
        head, rest = _split_at_space(rest, room)
        out.append(head)
        room = width - cells(indent)
    out.append(rest)
    return [out[0], *(indent + piece for piece in out[1:])]


def table(
    rows: Sequence[Sequence[str]],
    width: int | None,
    *,
    indent: str = "",
    right: Iterable[int] = (),
) -> list[str]:
    """Columns padded to their widest cell; the last column is never padded and wraps under itself.

    When the last column would start too far right to leave room (at least a third of the width),
    it goes on its own line under the row, indented: a cell is never cut.
    """
    if not rows:
        return []
    aligned = set(right)
    count = len(rows[0])
    widths = [max(cells(row[i]) for row in rows) for i in range(count - 1)]
    lead = len(indent) + sum(widths) + 2 * (count - 1)
    below = width is not None and lead > width - max(width // 3, 12)
    out: list[str] = []
    for row in rows:
        cells_ = [pad(cell, widths[i], right=i in aligned) for i, cell in enumerate(row[:-1])]
        head = indent + "  ".join(cells_)
        last = row[-1]
        if below:
            out.append(head.rstrip())
            if last:
                out += wrap(last, width, first=indent + HANG, indent=indent + HANG + "  ")
        else:
            first = head + "  " if count > 1 else head
            out += wrap(last, width, first=first, indent=" " * cells(first)) if last else [head.rstrip()]
    return out


def lines_fit(lines: Iterable[str], width: int | None) -> list[str]:
    """Each of `lines` fitted to `width` (see `fit`)."""
    out: list[str] = []
    for line in lines:
        out += fit(line, width)
    return out
