"""The files of an audit log: the live ``audit.jsonl`` and its rotated predecessors, by name.

The daemon rotates the live file to ``audit.jsonl.1`` (``.1`` becomes ``.2``, and so on; see
`bouncerd.server.audit`), and the chain runs on across the files, so whoever reads the log walks
``.N`` … ``.1`` and then the live file. Other files beside it (``audit.jsonl.torn-<time>``, a torn
tail moved aside; ``audit.jsonl.replaced-<time>``, a file the daemon found in place of its log) are
not part of the chain. Shared by the daemon, which writes the files, and by
``bouncerctl audit``, ``tail`` and ``report``, which read them without asking the daemon.
"""

from __future__ import annotations

import re
from pathlib import Path

# The rule of the record that opens a new live file after the daemon found the old one lost (deleted,
# moved, replaced): its `prev` names the last record the daemon wrote, so a reader sees the gap.
GAP_RULE = "audit.gap"

# ``.N``, numbered from 1; at most six digits, far more files than rotation ever keeps.
_ROTATED_SUFFIX = re.compile(r"\.([1-9][0-9]{0,5})$")


def rotated_path(path: Path, n: int) -> Path:
    """``audit.jsonl.<n>``: the n-th most recent rotated file."""
    return path.with_name(f"{path.name}.{n}")


def predecessors(path: Path) -> list[Path]:
    """The rotated files of the log at `path` that exist, oldest first (``.N`` … ``.1``)."""
    numbered: list[tuple[int, Path]] = []
    try:
        entries = list(path.parent.iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.startswith(path.name + "."):
            continue
        match = _ROTATED_SUFFIX.search(entry.name[len(path.name) :])
        if match is not None and entry.name == f"{path.name}.{match.group(1)}" and entry.is_file():
            numbered.append((int(match.group(1)), entry))
    return [p for _, p in sorted(numbered, reverse=True)]


def chain_files(path: Path) -> list[Path]:
    """The files to walk, oldest first, for the log at `path`: its rotated predecessors, then itself.

    A rotated file given on its own (``audit.jsonl.2``) is walked alone.
    """
    if _ROTATED_SUFFIX.search(path.name) and path.name.rsplit(".", 1)[0].endswith(".jsonl"):
        return [path]
    return [*predecessors(path), *([path] if path.exists() else [])]
