"""Taint index benchmark: indexing throughput, lookup latency and memory as recorded output grows.

Run:  .venv/bin/python bench/taint.py [--sizes 1,10,100] [--lookups 20000] [--seed 1]
      VENV/bin/python bench/taint.py --installed     # the bouncerd that VENV has installed (a wheel)
      perf record -F 999 --call-graph dwarf,16384 VENV/bin/python bench/taint.py --installed \
          --profile --sizes 5                         # indexing alone, for a profiler
      .venv/bin/python bench/taint.py --small         # the fixed cost of one small output, in µs

The data is generated deterministically (a seeded PRNG): mail-like tool results, half as JSON (text
content plus structuredContent, as real servers send both), half as plain text with a header block;
prose with addresses and URLs in it, phone numbers, and some base64 attachments. Output is recorded
into one TaintIndex in steps (1 MB, then up to 10 MB, then up to 100 MB) and after each step the
lookups are timed one by one (wall clock), half of destinations seen earlier, half never seen; the
baseline column is the same lookups on an empty index, measured in the same run. Indexing MB/s is
counted in CPU time of this process (extract + add); its baseline is `json.loads` of the same
payloads (their serialised form), timed the same way in the same run, so the figure can be read
relative to the machine and its load. Figures are printed, never asserted; the last lines say
whether the issue's targets are met. The first line names the scanner measured: the mypyc build when
scripts/setup made one (bouncerd/native.py), else the source; `BOUNCER_PURE=1` measures the source.
`--small` measures instead the fixed cost of one small output (a ~400-byte mail listing as one text
item, what `bench/relay.py`'s read returns), as the daemon reads it: `taint.extract` of the parsed
line, and `taint.Seams.records` of the raw line; µs of CPU time per output, the best of several rounds
(on a shared host the best round is the steadiest figure).
By default it measures this checkout; `--installed` measures the bouncerd the running interpreter has
installed (what `pip install .` gave, compiled in the wheel or not), and the first line says where.
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if "--installed" not in sys.argv[1:]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import bouncerd
from bouncerd import native
from bouncerd.core import taint

TARGET_INDEX_MB_S = 50.0  # indexing at least 50 MB/s
TARGET_LOOKUP_US = 20.0  # a check costs at most 20 µs (median), at every recorded size

WORDS = [
    "the", "of", "and", "to", "in", "is", "you", "that", "it", "he", "was", "for", "on", "are", "as",
    "with", "his", "they", "at", "be", "this", "have", "from", "or", "one", "had", "by", "word", "but",
    "not", "what", "all", "were", "we", "when", "your", "can", "said", "there", "use", "an", "each",
    "which", "she", "do", "how", "their", "if", "will", "up", "other", "about", "out", "many", "then",
    "them", "these", "so", "some", "her", "would", "make", "like", "him", "into", "time", "has", "look",
    "two", "more", "write", "go", "see", "number", "no", "way", "could", "people", "my", "than",
    "first", "water", "been", "call", "who", "its", "now", "find", "long", "down", "day", "did", "get",
    "come", "made", "may", "part", "invoice", "meeting", "quarterly", "report", "attached", "please",
    "review", "budget", "project", "deadline", "thanks", "regards", "customer", "account", "update",
    "schedule", "contract", "draft", "agenda", "minutes", "proposal",
]  # fmt: skip
NAMES = [
    "ann", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory", "niaj",
    "olivia", "peggy", "rupert", "sybil", "trent",
]  # fmt: skip
TLDS = ["com", "org", "net", "io", "co.uk", "de"]


class Corpus:
    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.n = 0

    def address(self) -> str:
        r = self.rnd
        local = f"{r.choice(NAMES)}.{r.choice(NAMES)}{r.randrange(50_000)}"
        return f"{local}@{r.choice(NAMES)}{r.randrange(20_000)}.{r.choice(TLDS)}"

    def url(self) -> str:
        r = self.rnd
        prefix = r.choice(["www.", "", "docs.", "app."])
        host = f"{prefix}{r.choice(WORDS)}{r.randrange(30_000)}.{r.choice(TLDS)}"
        return f"https://{host}/{r.choice(WORDS)}/{r.randrange(10**6)}?ref={r.choice(WORDS)}"

    def prose(self, words: int) -> str:
        r = self.rnd
        out = []
        for i in range(words):
            w = r.choice(WORDS)
            out.append(w + ("." if i % 14 == 13 else ","[: r.random() < 0.05]))
        return " ".join(out)

    def body(self) -> str:
        r = self.rnd
        parts = [self.prose(r.randrange(60, 260))]
        for _ in range(r.randrange(0, 3)):
            parts.append(f"Contact {self.address()} or see {self.url()} for details.")
        if r.random() < 0.2:
            parts.append(f"Call +44 20 {r.randrange(1000, 9999)} {r.randrange(1000, 9999)} any time.")
        parts.append(self.prose(r.randrange(20, 120)))
        if r.random() < 0.1:
            blob = base64.b64encode(self.prose(r.randrange(100, 300)).encode()).decode()
            parts.append("\n".join(blob[i : i + 76] for i in range(0, len(blob), 76)))
        return "\n\n".join(parts)

    def message(self) -> dict[str, Any]:
        r = self.rnd
        self.n += 1
        msgs = [
            {
                "id": f"m{self.n}-{i}",
                "from": self.address(),
                "to": [self.address() for _ in range(r.randrange(1, 3))],
                "subject": self.prose(6),
                "date": "2026-05-09T10:00:00Z",
                "body": self.body(),
            }
            for i in range(r.randrange(1, 4))
        ]
        if r.random() < 0.5:
            text = json.dumps({"messages": msgs})
            result: dict[str, Any] = {
                "content": [{"type": "text", "text": text}],
                "structuredContent": {"messages": msgs},
            }
        else:
            text = "\n\n".join(
                f"From: {m['from']}\nTo: {', '.join(m['to'])}\nSubject: {m['subject']}\n\n{m['body']}"
                for m in msgs
            )
            result = {"content": [{"type": "text", "text": text}]}
        return {"jsonrpc": "2.0", "id": self.n, "result": result}


def rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def time_lookups(index: taint.TaintIndex, dests: list[str]) -> tuple[float, float]:
    samples = []
    lookup = index.lookup
    for d in dests:
        t0 = time.perf_counter_ns()
        lookup(d)
        samples.append(time.perf_counter_ns() - t0)
    samples.sort()
    return statistics.median(samples) / 1000, samples[int(len(samples) * 0.99)] / 1000


def profile_indexing(seed: int, mb: float, max_keys: int) -> None:
    """Indexing alone, for `perf record` or another sampling profiler: the corpus is generated first,
    then indexed once (indexing the same outputs again would run on warm caches of short strings), so
    the samples under `taint.extract` and `TaintIndex.add` are the indexing's."""
    print(f"scanner: {native.implementation()} ({Path(bouncerd.__file__).parent})")
    corpus = Corpus(seed)
    messages: list[dict[str, Any]] = []
    size = 0
    while size < mb * 1_000_000:
        messages.append(corpus.message())
        size += len(json.dumps(messages[-1]))
    index = taint.TaintIndex(max_keys=max_keys)
    t0 = time.process_time()
    for msg in messages:
        index.add(taint.extract(msg, taint.Source("mail", "read_email", msg["id"], float(msg["id"]))))
    spent = time.process_time() - t0
    print(f"indexed {size / 1e6:.1f} MB at {size / 1e6 / spent:.1f} MB/s (CPU time)")


# What bench/relay.py's read-only call returns (tests/fixtures/servers/full.py `read_inbox`): one text
# item holding a two-message inbox as indented JSON, no structuredContent.
SMALL_INBOX = [
    {"from": "alice@example.com", "subject": "lunch", "body": "Shall we meet at noon?"},
    {
        "from": "newsletter@shop.example",
        "subject": "offer",
        "body": "Reply to deals@shop.example or visit https://shop.example/deals for more.",
    },
]
SMALL_ROUNDS = 15
SMALL_PER_ROUND = 1000


def small_output(n: int) -> bytes:
    text = json.dumps(SMALL_INBOX, indent=2)
    message = {"jsonrpc": "2.0", "id": n, "result": {"content": [{"type": "text", "text": text}]}}
    return json.dumps(message).encode()


def measure_small() -> None:
    """µs of CPU time per small output for each of the daemon's two reads of it, the best of
    `SMALL_ROUNDS` rounds of `SMALL_PER_ROUND` outputs (the same output again, as the relay's read
    is: short strings are then read from the cache, as they are there)."""
    print(f"scanner: {native.implementation()} ({Path(bouncerd.__file__).parent})")
    raws = [small_output(n) for n in range(SMALL_PER_ROUND)]
    print(f"small output: {len(raws[0])} bytes")
    seams = taint.Seams()
    parts: dict[str, list[float]] = {"taint.extract": [], "taint.Seams.records": []}
    for _ in range(SMALL_ROUNDS):
        t0 = time.process_time()
        for n, raw in enumerate(raws):
            taint.extract(json.loads(raw), taint.Source("mail", "read_inbox", n, float(n)))
        t1 = time.process_time()
        for n, raw in enumerate(raws):
            seams.records(("session", "mail"), raw, taint.Source("mail", "read_inbox", n, float(n)))
        t2 = time.process_time()
        parts["taint.extract"].append((t1 - t0) / len(raws) * 1e6)
        parts["taint.Seams.records"].append((t2 - t1) / len(raws) * 1e6)
    for name, samples in parts.items():
        print(f"{name}: {min(samples):.1f} µs per small output (CPU time, the best round)")
    print("(taint.extract includes json.loads of the line; Seams.records reads the raw line)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,10,100", help="MB of recorded output at which to measure")
    ap.add_argument("--lookups", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--max-keys", type=int, default=taint.MAX_KEYS, help="index bound (smaller: see eviction)"
    )
    ap.add_argument(
        "--installed", action="store_true", help="measure the installed bouncerd, not this checkout's"
    )
    ap.add_argument(
        "--profile",
        action="store_true",
        help="for a profiler: generate the last size first, then only index it",
    )
    ap.add_argument(
        "--small", action="store_true", help="only the fixed cost of one small output (µs per output)"
    )
    args = ap.parse_args()
    if args.small:
        measure_small()
        return
    sizes = [float(s) for s in args.sizes.split(",")]
    if args.profile:
        profile_indexing(args.seed, sizes[-1], args.max_keys)
        return
    # which scanner runs: compiled (scripts/setup built it), or the source (BOUNCER_PURE=1 forces it)
    print(f"scanner: {native.implementation()} ({Path(bouncerd.__file__).parent})")

    corpus = Corpus(args.seed)
    index = taint.TaintIndex(max_keys=args.max_keys)
    # warm caches that are built once per process (the Unicode mark table, regex compilation)
    taint.extract(
        {"content": [{"type": "text", "text": "wärm up a@b.cd https://x.yz/"}]},
        taint.Source("s", "t", 0, 0.0),
    )
    unseen = Corpus(args.seed + 1000)
    misses = [unseen.address() if i % 2 else unseen.url() for i in range(args.lookups // 2)]
    time_lookups(taint.TaintIndex(), misses[:1000])  # warm up
    seen_pool: list[str] = []

    gc.collect()
    rss0 = rss_mb()
    empty = taint.TaintIndex()
    print(
        f"{'recorded MB':>11} {'keys':>9} {'index MB/s':>10} {'lookup p50/p99 µs':>17} "
        f"{'empty index p50/p99':>19} {'RSS MB':>7} {'RSS per MB':>10}"
    )
    recorded = 0
    spent = 0.0
    parsing = 0.0  # the indexing baseline: json.loads of the same payloads
    worst_p50 = 0.0
    for target in sizes:
        goal = target * 1_000_000
        step_bytes = 0
        step_time = 0.0
        while recorded < goal:
            msg = corpus.message()
            raw = json.dumps(msg)
            size = len(raw)
            src = taint.Source("mail", "read_email", msg["id"], float(msg["id"]))
            t0 = time.process_time()  # CPU time of this process: steadier than wall time on a busy host
            index.add(taint.extract(msg, src))
            t1 = time.process_time()
            json.loads(raw)
            parsing += time.process_time() - t1
            step_time += t1 - t0
            step_bytes += size
            recorded += size
            if len(seen_pool) < 200_000 and corpus.rnd.random() < 0.5:
                m = msg["result"]
                text = m["content"][0]["text"]
                at = text.find("@")
                if at > 0:
                    start = max(text.rfind(" ", 0, at), text.rfind('"', 0, at), text.rfind("\n", 0, at)) + 1
                    end = min(x for x in (text.find(c, at) for c in ' ",\n') if x > 0)
                    seen_pool.append(text[start:end].rstrip("."))
        spent += step_time
        rnd = random.Random(int(target))
        hits = [rnd.choice(seen_pool) for _ in range(args.lookups // 2)]
        dests = hits + misses
        rnd.shuffle(dests)
        gc.collect()
        p50, p99 = time_lookups(index, dests)
        e50, e99 = time_lookups(empty, dests)  # the baseline: the same destinations, nothing recorded
        worst_p50 = max(worst_p50, p50)
        rss = rss_mb()
        per_mb = (rss - rss0) / (recorded / 1e6)
        print(
            f"{recorded / 1e6:>11.1f} {len(index):>9} {step_bytes / 1e6 / step_time:>10.1f} "
            f"{p50:>8.1f}/{p99:<8.1f} {e50:>10.1f}/{e99:<8.1f} {rss:>7.1f} {per_mb:>10.2f}"
        )
    probe = seen_pool[:2000]
    found = sum(index.lookup(d) is not None for d in probe) / max(1, len(probe))
    rate, json_rate = recorded / 1e6 / spent, recorded / 1e6 / parsing
    print(
        f"\noverall indexing: {rate:.1f} MB/s over {recorded / 1e6:.0f} MB; "
        f"'seen' destinations found (tainted or evicted): {found:.0%}; keys evicted: {index.evicted}"
    )
    print(
        f"indexing baseline: json.loads of the same payloads ran at {json_rate:.0f} MB/s in this run; "
        f"indexing took {json_rate / rate:.1f}x as long"
    )
    met = {True: "met", False: "NOT met"}
    print(
        f"target indexing >= {TARGET_INDEX_MB_S:.0f} MB/s: {met[rate >= TARGET_INDEX_MB_S]} "
        f"({rate:.1f} MB/s); target check <= {TARGET_LOOKUP_US:.0f} µs (p50 at every size): "
        f"{met[worst_p50 <= TARGET_LOOKUP_US]} (worst p50 {worst_p50:.1f} µs)"
    )
    # CPU time is steadier than wall time on a shared host, not immune to it (other processes share
    # the caches and the cores' other hyperthreads): the load says how shared the host was.
    if hasattr(os, "getloadavg"):
        print("load average at the end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
