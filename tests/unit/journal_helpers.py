"""Writing and reading a journal file whole, for the journal's tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bouncerd.server.journal import Journal, scan


def write_entries(path: Path, entries: list[dict[str, Any]]) -> None:
    """Append `entries` to the journal at `path` through `Journal`, then close it."""
    journal, _ = Journal.open(path, lambda entry: None)
    for entry in entries:
        journal.append(entry)
    journal.close()


def read_entries(path: Path) -> list[dict[str, Any]]:
    """Every entry `scan` reads back from `path`, in order."""
    seen: list[dict[str, Any]] = []
    scan(path, seen.append)
    return seen
