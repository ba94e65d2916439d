"""`bouncerctl.term`: lines fitted to a width in terminal cells, text never lost, colour per NO_COLOR.

The property that matters for a security tool's output: whatever the text (a destination with no
spaces, full-width look-alike letters, combining marks), wrapping keeps every character, in order,
and no line is wider than the terminal. Measured here with `unicodedata.east_asian_width` directly,
not with the module's own measure.
"""

from __future__ import annotations

import unicodedata

import click
import pytest
from bouncerctl import term
from hypothesis import example, given, settings
from hypothesis import strategies as st

# Letters a reason may hold: ASCII, full-width look-alikes (two cells), a combining accent, CJK.
ALPHABET = st.sampled_from([*"abcXYZ09@.-_/ ", "Ｅ", "Ｖ", "\u0301", "漢", "é", "\u200b"])


def width_of(line: str) -> int:
    total = 0
    for ch in click.unstyle(line):
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf", "Cc"):
            continue
        total += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return total


@settings(max_examples=300, deadline=None)
@given(text=st.text(ALPHABET, max_size=400), width=st.integers(min_value=term.MIN_COLUMNS, max_value=140))
@example(text="000000000000000000漢漢漢漢漢 \u0301", width=32)  # a zero-width word alone on the last line
def test_wrap_never_cuts_text_and_never_passes_the_width(text: str, width: int) -> None:
    """A cut reason hides where data would go; a line past the edge is torn by the terminal."""
    lines = term.wrap(text, width, first="    ", indent="    ")
    assert all(width_of(line) <= width for line in lines), lines
    assert "".join("".join(lines).split()) == "".join(text.split())


@settings(max_examples=200, deadline=None)
@given(text=st.text(ALPHABET, max_size=300), width=st.integers(min_value=term.MIN_COLUMNS, max_value=120))
def test_fold_keeps_every_character_and_space_of_a_diff_line(text: str, width: int) -> None:
    pieces = term.fold("+" + text, width, indent="+   ")
    assert all(width_of(piece) <= width for piece in pieces)
    assert pieces[0] + "".join(piece[len("+   ") :] for piece in pieces[1:]) == "+" + text


def test_cells_counts_wide_letters_twice_and_marks_and_colour_not_at_all() -> None:
    assert term.cells("ＥＶＩＬ") == 8
    assert term.cells("e\u0301") == 1
    assert term.cells(click.style("DENY", fg="red", bold=True)) == 4


def test_table_puts_a_last_column_too_far_right_under_its_row() -> None:
    rows = [["CODE", "X" * 60, "the destination"], ["A", "b", "c"]]
    lines = term.table(rows, 80)
    assert all(width_of(line) <= 80 for line in lines)
    assert lines[1].strip() == "the destination"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),  # a terminal decides
        ({"NO_COLOR": "1"}, False),
        ({"NO_COLOR": ""}, None),  # set but empty: no-color.org says it does not count
        ({"FORCE_COLOR": "1"}, True),
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, False),  # asking for none is the safer reading
    ],
)
def test_colour_follows_no_color_then_force_color(env: dict[str, str], expected: bool | None) -> None:
    assert term.colour(env) is expected


def test_columns_come_from_columns_else_the_terminal_else_none() -> None:
    class Pipe:
        def isatty(self) -> bool:
            return False

    assert term.columns(Pipe(), {"COLUMNS": "100"}) == 100  # type: ignore[arg-type]
    assert term.columns(Pipe(), {"COLUMNS": "5"}) == term.MIN_COLUMNS  # type: ignore[arg-type]
    assert term.columns(Pipe(), {}) is None  # type: ignore[arg-type]
    assert term.columns(Pipe(), {"COLUMNS": "wide"}) is None  # type: ignore[arg-type]
