"""Taint index: which keys have appeared in untrusted output, and where each was first seen.

Theory of operation
-------------------
`taint.extract` reads one upstream message into `TokenRecord`s (a key and its provenance);
`TaintIndex.add` records them and the lookups answer whether a destination, or one index key, appeared.

`TaintIndex` maps each key to the provenance to show for it: the first free-text sighting if there
is one (a planted address is refused), else the first identity sighting (a sender is asked about).
Provenance objects are interned, so the per-key cost is one dict slot and the key string. A lookup
canonicalises the destination (`canon.canonicalize`) and probes a handful of keys: its cost does not
depend on how much output was recorded.

Memory bound: at most `max_keys` live keys (default `MAX_KEYS`). Past it the oldest keys (by first
sighting) are evicted in batches into `EvictedFilter`, a Bloom filter over 64-bit hashes of the keys
(`EVICTED_FILTER_BITS`, allocated at the first eviction). A lookup of an evicted key answers
"evicted" (the engine asks, never allows). The filter never forgets: past its design capacity
(`EVICTED_FILTER_CAPACITY` keys at about 1% false positives) its false-positive rate rises, so more
never-seen destinations answer "evicted" (ask instead of unproven-ask for sends, ask instead of allow
for fetches). Memory stays fixed; a deny can turn into an ask, never into an allow.

Retention: `expire_before` forgets keys first seen before a cutoff (the engine passes `now` less the
policy's `taint_retention`); `oldest` says cheaply whether there is anything to forget.

An address seen in free text also records its domain as a host (`shapes.domain_keys`,
`DOMAIN_PREFIX`): a lookup of a host probes it, and of a URL or host destination also its parent
domains (`host_probes`), so a fetch of the domain, a webhook on it or a name lookup of
`<data>.evil.example` is judged as for a planted host.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any, Final, NamedTuple

from bouncerd.core import canon, linkkeys, shapes
from bouncerd.core.model import Provenance
from bouncerd.core.shapes import DOMAIN_PREFIX

MIN_DESTINATION_CHARS: Final = shapes.MIN_KEY_CHARS  # shorter destinations are never tainted
MAX_PARENT_LABELS: Final = 12  # labels of a host read for planted parent domains (a DNS name has at most 127)
# About 165 bytes a key (the key string, its dict slot, a share of a provenance), so ~330 MB at the
# bound, reached after roughly 600 MB of mail-like output in one scope. Past it the oldest are evicted.
MAX_KEYS: Final = 2_000_000
EVICT_BATCH_DIVISOR: Final = 16  # evict 1/16 of the keys at once: dict front-deletion is cheap only in bulk
EVICTED_FILTER_BITS: Final = 1 << 27  # 16 MiB per index, allocated only once something is evicted
EVICTED_FILTER_HASHES: Final = 7  # optimal for ~1% false positives at EVICTED_FILTER_CAPACITY
EVICTED_FILTER_CAPACITY: Final = 14_000_000  # m·ln²2/ln(100): keys at which false positives reach ~1%
MAX_INTERNED: Final = 65_536  # distinct provenances remembered for sharing; clearing only loses sharing


class TokenRecord(NamedTuple):
    """One key seen in one output. A tuple: thousands are made per MB, a dataclass costs 5x more."""

    token: str  # a folded key (shapes.*_key), added to the index as is
    provenance: Provenance


@dataclass(frozen=True)
class Hit:
    state: str  # "tainted" (we know where) or "evicted" (we knew, and forgot where: ask, never allow)
    provenance: Provenance | None
    identity_only: bool  # every sighting of the matched key was in an identity field
    key: str | None = None  # the index key that matched


def encode_records(records: Iterable[TokenRecord]) -> dict[str, Any]:
    """A compact journal form: each distinct provenance once, records point at it by index."""
    index: dict[Provenance, int] = {}
    # Interned provenances are shared: hash each object once. The entry keeps the object alive, so its
    # id cannot be reused by another provenance during this call.
    by_id: dict[int, tuple[Provenance, int]] = {}
    rows: list[list[Any]] = []
    for token, prov in records:
        entry = by_id.get(id(prov))
        if entry is None:
            entry = by_id[id(prov)] = (prov, index.setdefault(prov, len(index)))
        rows.append([token, entry[1]])
    return {"sources": [p.as_dict() for p in index], "records": rows}


def decode_records(data: Mapping[str, Any]) -> list[TokenRecord]:
    provs = [Provenance(**p) for p in data["sources"]]
    return [TokenRecord(tok, provs[i]) for tok, i in data["records"]]


def destination_tokens(value: str) -> list[str]:
    """The destinations inside one argument string: the value itself if it is one destination, else
    the value and every destination token in it (each is a valid `TaintIndex.lookup` argument)."""
    c = canon.canonicalize(value)
    if c.kind != "text":
        return [value]
    return [p for p in c.probes if len(p) >= MIN_DESTINATION_CHARS]


def host_probes(hosts: Iterable[str], *, parents: bool) -> list[str]:
    """The extra keys a host is looked up under: the domain key of each host and, with `parents`, each
    parent domain of two labels or more (`a.b.evil.example`: `b.evil.example`, `evil.example`) as a host
    and as a domain key. IP literals have no parents."""
    out: list[str] = []
    for host in hosts:
        out.append(DOMAIN_PREFIX + host)
        if not parents or host.startswith("[") or host[-1:].isdigit():
            continue
        labels = host.split(".")[-MAX_PARENT_LABELS:]
        for i in range(1, len(labels) - 1):
            parent = ".".join(labels[i:])
            out += (parent, DOMAIN_PREFIX + parent)
    return out


# ---- the index -------------------------------------------------------------------------------------


class EvictedFilter:
    """A Bloom filter over 64-bit hashes of evicted keys: fixed memory, no false negatives."""

    def __init__(self, bits: int, hashes: int = EVICTED_FILTER_HASHES) -> None:
        if bits < 64 or bits & (bits - 1):
            raise ValueError("filter size must be a power of two of at least 64 bits")
        self.bits = bits
        self.hashes = hashes
        self.count = 0
        self.array = bytearray(bits // 8)

    def _hashes(self, key: str) -> tuple[int, int]:
        digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        return int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little") | 1

    def add(self, key: str) -> None:
        h1, h2 = self._hashes(key)
        arr, mask = self.array, self.bits - 1
        for i in range(self.hashes):
            pos = (h1 + i * h2) & mask
            arr[pos >> 3] |= 1 << (pos & 7)
        self.count += 1

    def __contains__(self, key: str) -> bool:
        h1, h2 = self._hashes(key)
        arr, mask = self.array, self.bits - 1
        for i in range(self.hashes):
            pos = (h1 + i * h2) & mask
            if not arr[pos >> 3] & (1 << (pos & 7)):
                return False  # most misses stop at the first or second bit
        return True

    def export(self) -> bytes:
        header = self.bits.to_bytes(8, "big") + self.hashes.to_bytes(1, "big") + self.count.to_bytes(8, "big")
        return header + bytes(self.array)

    @classmethod
    def restore(cls, data: bytes) -> EvictedFilter:
        bits, hashes, count = int.from_bytes(data[:8], "big"), data[8], int.from_bytes(data[9:17], "big")
        if len(data) != 17 + bits // 8:
            raise ValueError("evicted filter state has the wrong length")
        f = cls(bits, hashes)
        f.array[:] = data[17:]
        f.count = count
        return f


class TaintIndex:
    def __init__(self, max_keys: int = MAX_KEYS, evicted_filter_bits: int = EVICTED_FILTER_BITS) -> None:
        if max_keys < 1:
            raise ValueError("max_keys must be positive")
        self.max_keys = max_keys
        self._filter_bits = evicted_filter_bits
        self._live: dict[str, Provenance] = {}
        self._evicted: EvictedFilter | None = None
        self._interned: dict[Provenance, Provenance] = {}
        self._oldest = float("inf")  # no live key was first seen before this (a lower bound)

    def __len__(self) -> int:
        return len(self._live)

    @property
    def evicted(self) -> int:
        """How many keys were evicted to the filter (their provenance is gone)."""
        return self._evicted.count if self._evicted is not None else 0

    def _intern(self, prov: Provenance) -> Provenance:
        interned = self._interned
        if len(interned) < MAX_INTERNED:
            return interned.setdefault(prov, prov)  # one hash (a dataclass hashes in Python)
        got = interned.get(prov)
        if got is None:
            interned.clear()
            got = interned[prov] = prov
        return got

    def add(self, records: Iterable[TokenRecord]) -> int:
        """Record keys (from `extract`, or replayed from the journal); returns how many were new."""
        live = self._live
        room = self.max_keys - len(live)  # new keys before the next eviction
        added = 0
        last_in: Provenance | None = None
        shared: Provenance  # the interned `last_in`, set with it
        for key, prov in records:
            old = live.get(key)  # (compiled: a C call, not a call through a bound method)
            if old is None:
                if len(key) < MIN_DESTINATION_CHARS:
                    continue  # (never live: only this method adds keys)
                if prov is not last_in:
                    last_in, shared = prov, self._intern(prov)
                    self._oldest = min(self._oldest, prov.ts)
                live[key] = shared
                added += 1
                room -= 1
                if room < 0:
                    self._evict()
                    room = self.max_keys - len(live)
            elif old.identity and not prov.identity:
                if prov is not last_in:
                    last_in, shared = prov, self._intern(prov)
                    self._oldest = min(self._oldest, prov.ts)
                live[key] = shared  # a free-text sighting outranks an identity one; order kept
        return added

    def _evict(self) -> None:
        if self._evicted is None:
            self._evicted = EvictedFilter(self._filter_bits)
        batch = list(islice(self._live, max(1, self.max_keys // EVICT_BATCH_DIVISOR)))
        for key in batch:
            del self._live[key]
            self._evicted.add(key)

    @property
    def oldest(self) -> float:
        """No live key was first seen before this (inf when there are none): `expire_before` below it
        is a no-op, so it is cheap to ask whether retention has anything to do."""
        return self._oldest if self._live else float("inf")

    def expire_before(self, cutoff: float) -> int:
        """Forget every live key whose provenance is older than `cutoff` (`taint_retention`); returns how
        many. A forgotten key is unseen again (a send to it is asked as unproven, a fetch of it judged
        as one of a host never seen): that is what a retention period chosen in the policy means.
        Evicted keys stay in the filter (it cannot forget one key)."""
        if self.oldest >= cutoff:
            return 0
        old = [key for key, prov in self._live.items() if prov.ts < cutoff]
        for key in old:
            del self._live[key]
        self._oldest = min((prov.ts for prov in self._live.values()), default=float("inf"))
        self._interned.clear()  # provenances of forgotten keys must not stay reachable through it
        return len(old)

    def items(self) -> Iterator[tuple[str, Provenance]]:
        return iter(self._live.items())

    def export_evicted(self) -> bytes | None:
        """The evicted-key filter, for a snapshot (None when nothing was evicted)."""
        return self._evicted.export() if self._evicted is not None else None

    def import_evicted(self, data: bytes) -> None:
        self._evicted = EvictedFilter.restore(data)

    def _probe(self, probes: Iterable[str]) -> Hit | None:
        live = self._live
        identity_hit: Hit | None = None
        usable = [k for k in probes if len(k) >= MIN_DESTINATION_CHARS]
        for key in usable:
            prov = live.get(key)
            if prov is not None:
                if not prov.identity:
                    return Hit("tainted", prov, False, key)
                if identity_hit is None:
                    identity_hit = Hit("tainted", prov, True, key)
        if identity_hit is not None:
            return identity_hit
        if self._evicted is not None:
            for key in usable:
                if key in self._evicted:
                    return Hit("evicted", None, False, key)
        return None

    def key_hit(self, key: str) -> Hit | None:
        """Whether one index key (already folded, e.g. from `fetchgate.carried_keys`) appeared; a host
        also as the domain of a planted address."""
        if "@" in key or "/" in key or key[:1] == shapes.EXACT_PREFIX:
            return self._probe((key,))
        return self._probe((key, DOMAIN_PREFIX + key))

    def lookup(self, destination: str) -> Hit | None:
        """Whether one destination value appeared in untrusted output (see `canon.canonicalize`). A host
        (of a URL or a host destination) is also looked up as the domain of a planted address, and so
        are its parent domains, as hosts and as such domains: `<data>.evil.example` is a host under a
        planted one."""
        c = canon.canonicalize(destination)
        if not c.hosts:
            return self._probe(c.probes)
        return self._probe((*c.probes, *host_probes(c.hosts, parents=True)))

    def seen_exactly(self, destination: str) -> bool:
        """The destination as a whole appeared: a host or an address as its key, a URL byte for byte
        as written, but for the case of its scheme and host (`linkkeys.exact_url_key`: a case, an
        escape, a slash or a userinfo the wide key folds away could carry data to the host that
        planted it)."""
        c = canon.canonicalize(destination)
        if c.kind == "text" or len(c.key) < MIN_DESTINATION_CHARS or c.key not in self._live:
            return False
        if c.kind != "url":
            return True
        exact = linkkeys.exact_url_key(destination.strip())
        return exact is not None and exact in self._live

    def host_hit(self, destination: str) -> Hit | None:
        """Whether the host of a URL destination appeared (any destination that is not a URL or a
        host is looked up whole)."""
        c = canon.canonicalize(destination)
        if not c.hosts:
            return self._probe(c.probes)
        return self._probe((*c.hosts, *host_probes(c.hosts, parents=False)))
