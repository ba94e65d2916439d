"""Taint index: which destinations have appeared in untrusted output, and where.

INTERIM (foundation issue): exact, case-folded e-mail and URL tokens only. The engine issue replaces
the internals (decoding, folding, canonicalisation, field provenance, bounded memory) behind the same
interface: `extract` (pure, expensive, off the hot path) turns one output into `TokenRecord`s, `add`
applies records (also used to replay the journal), `lookup` answers for one destination.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from bouncerd.core.model import JsonRpcId, Provenance

MIN_DESTINATION_CHARS = 6  # shorter tokens ("a@b.c", "x.io") collide with ordinary text too often

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s\"'<>]+", re.IGNORECASE)


@dataclass(frozen=True)
class Source:
    """One upstream output."""

    server: str
    tool: str | None
    request_id: JsonRpcId
    ts: float


@dataclass(frozen=True)
class TokenRecord:
    token: str
    provenance: Provenance


@dataclass(frozen=True)
class Hit:
    state: str  # "tainted" (we know where) or "evicted" (we knew, and forgot where: ask, never allow)
    provenance: Provenance | None
    identity_only: bool


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _tokens(text: str) -> Iterator[str]:
    for m in _EMAIL.finditer(text):
        yield m.group(0).casefold()
    for m in _URL.finditer(text):
        yield m.group(0).casefold().rstrip(".,;:)")


def extract(payload: Any, source: Source) -> list[TokenRecord]:
    prov = Provenance(server=source.server, tool=source.tool, request_id=source.request_id, ts=source.ts)
    seen: dict[str, TokenRecord] = {}
    for s in _strings(payload):
        for tok in _tokens(s):
            if len(tok) >= MIN_DESTINATION_CHARS and tok not in seen:
                seen[tok] = TokenRecord(tok, prov)
    return list(seen.values())


def destination_tokens(value: str) -> list[str]:
    """The destination-shaped tokens inside one argument string."""
    return [t for t in _tokens(value) if len(t) >= MIN_DESTINATION_CHARS]


class TaintIndex:
    def __init__(self) -> None:
        self._first: dict[str, Provenance] = {}

    def __len__(self) -> int:
        return len(self._first)

    def add(self, records: Iterable[TokenRecord]) -> int:
        added = 0
        for rec in records:
            if rec.token not in self._first:
                self._first[rec.token] = rec.provenance
                added += 1
        return added

    def items(self) -> Iterator[tuple[str, Provenance]]:
        return iter(self._first.items())

    def lookup(self, destination: str) -> Hit | None:
        prov = self._first.get(destination.strip().casefold())
        if prov is None:
            return None
        return Hit(state="tainted", provenance=prov, identity_only=prov.identity)
