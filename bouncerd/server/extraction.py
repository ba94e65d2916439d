"""Taint extraction of one raw upstream output, in the daemon or in its worker process.

Theory of operation
-------------------
`extract` turns one raw upstream line into taint records: parsed as JSON when it is JSON, else
scanned as text (see `bouncerd.core.taint`). The observation index (observations.py) runs it on the
event loop for small outputs and in a worker process for large ones (`extract_in_worker`).

This module is what the worker process imports to unpickle the function it is sent, so it imports
nothing beyond the standard library and the taint extractor: every import here is start-up time of
a worker that is spawned when a large output arrives, while the client is busy reading that output.
For the same reason the worker lowers its own priority on its first call (WORKER_NICE).
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

from bouncerd.core import taint
from bouncerd.core.model import JsonRpcId

# The worker scans at this niceness. Indexing is background work: the output is already acked and
# released, and a verdict that needs its taint waits for it whatever its priority. Scanning a 10 MB
# result costs about half a second of CPU; at the default priority, on a machine with two cores, it
# takes that from the MCP client and server the person is waiting on (the client is parsing the very
# same result). Niceness 10 gives it about a tenth of a contended CPU and all of an idle one.
WORKER_NICE = 10

_worker_niced = False


def extract(payload: bytes, source: taint.Source) -> list[taint.TokenRecord]:
    """Taint records of one raw upstream line: as parsed JSON if it parses, else as text."""
    text: Any
    try:
        text = json.loads(payload)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested beyond the parser's stack
        text = payload.decode("utf-8", "replace")
    try:
        return taint.extract(text, source)
    except RecursionError:
        return taint.extract(payload.decode("utf-8", "replace"), source)


def extract_in_worker(
    payload: bytes, server: str, tool: str | None, request_id: JsonRpcId, ts: float
) -> dict[str, Any]:
    """`extract`, in the worker process, at a lower CPU priority (see WORKER_NICE).

    Plain values cross the process boundary both ways (the source's fields in, the journal's record
    form out): the scanner's classes may be compiled (bouncerd/native.py), and a compiled frozen
    class cannot be rebuilt by pickle."""
    global _worker_niced
    if not _worker_niced:
        _worker_niced = True
        with contextlib.suppress(OSError, AttributeError):  # not everywhere, and not essential
            os.nice(WORKER_NICE)
    return taint.encode_records(extract(payload, taint.Source(server, tool, request_id, ts)))
