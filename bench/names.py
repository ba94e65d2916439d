"""Plain-name record benchmark: what reading names costs beside taint extraction, and a lookup's cost.

Run:  .venv/bin/python bench/names.py [--mb 10] [--lookups 2000] [--seed 1]

The outputs are bench/taint.py's mail-like corpus (the same seeded generator). For each output the
daemon now runs `taint.extract` and then `NameLedger.read` (`bouncerd/core/names.py`); this prints the
CPU throughput of extraction alone (the baseline, measured in the same run on the same payloads), of
both together, and of the names reading alone, all in MB/s of serialised output. Then, with one scope
holding its full `MAX_SCOPE_PROSE_CHARS` of prose and the whole values of those outputs, the wall time
of a plain-name lookup (a name never seen, a name seen inside prose) and of a content lookup, median
and 99th percentile, and the memory the record holds (its prose characters and whole values) beside
the taint index's key count. An output over `MAX_READ_BYTES` is not read at all (it marks the scope
incomplete), so a 10 MB output costs the names record nothing. Figures are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from taint import Corpus  # bench/taint.py's generator

from bouncerd.core import names, taint


def _timed(fn: object, values: list[str]) -> tuple[float, float]:
    samples = []
    for v in values:
        t0 = time.perf_counter_ns()
        fn(v)  # type: ignore[operator]
        samples.append(time.perf_counter_ns() - t0)
    samples.sort()
    return statistics.median(samples) / 1000, samples[int(len(samples) * 0.99)] / 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=10.0, help="MB of output to index")
    ap.add_argument("--lookups", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    corpus = Corpus(args.seed)
    payloads: list[bytes] = []
    size = 0
    while size < args.mb * 1_000_000:
        payloads.append(json.dumps(corpus.message()).encode())
        size += len(payloads[-1])
    mb = size / 1e6

    def extract_all() -> None:
        for i, p in enumerate(payloads):
            taint.extract(json.loads(p), taint.Source("mail", "read_email", i, 0.0))

    def names_all(ledger: names.NameLedger) -> None:
        for i, p in enumerate(payloads):
            ledger.read(f"s{i % 8}", "s", names.Output("mail", "read_email", i, 0.0), p)

    t0 = time.process_time()
    extract_all()
    t_extract = time.process_time() - t0
    t0 = time.process_time()
    names_all(names.NameLedger())
    t_names = time.process_time() - t0
    print(f"output: {mb:.1f} MB in {len(payloads)} outputs")
    print(f"taint.extract alone (baseline):   {mb / t_extract:7.1f} MB/s (CPU)")
    print(f"taint.extract + names.read:       {mb / (t_extract + t_names):7.1f} MB/s (CPU)")
    print(f"names.read alone:                 {mb / t_names:7.1f} MB/s (CPU)")

    ledger = names.NameLedger()
    full_at = None
    read = 0
    for i, p in enumerate(payloads):
        ledger.read("all", "s", names.Output("mail", "read_email", i, 0.0), p)
        read += len(p)
        if full_at is None and ledger.scope("all").incomplete:
            full_at = read / 1e6
    print(
        f"one scope given all {mb:.1f} MB: "
        + (
            f"whole values passed {names.MAX_WHOLE_NAMES} after {full_at:.1f} MB (incomplete: asks)"
            if full_at
            else "complete"
        )
    )
    ledger = names.NameLedger()
    read = 0
    for i, p in enumerate(payloads):  # a scope full of prose, its whole values within their cap
        ledger.read("one", "s", names.Output("mail", "read_email", i, 0.0), p)
        read += len(p)
        if read >= 2 * names.MAX_SCOPE_PROSE_CHARS:
            break
    scope = ledger.scope("one")
    prose_chars = sum(len(e.text) for e in scope.prose)
    print(
        f"one scope: {prose_chars / 1e6:.2f} M prose characters kept (cap "
        f"{names.MAX_SCOPE_PROSE_CHARS / 1e6:.2f} M), {len(scope.whole)} whole values (cap "
        f"{names.MAX_WHOLE_NAMES}), incomplete={scope.incomplete}"
    )
    unseen = [f"Zorblax{i}" for i in range(args.lookups)]
    in_prose = [
        corpus.rnd.choice(["quarterly report", "budget", "Contract draft"]) for _ in range(args.lookups)
    ]
    content = [f"please review the quarterly agenda number {i}" for i in range(args.lookups)]
    for label, fn, values in (
        ("plain name never seen", scope.prose_only, unseen),
        ("plain name seen in prose", scope.prose_only, in_prose),
        ("content never seen", scope.dictated, content),
    ):
        med, p99 = _timed(fn, values)
        print(f"lookup, {label:26}: median {med:8.1f} µs, p99 {p99:8.1f} µs")
    one_mb: list[bytes] = []
    while sum(map(len, one_mb)) < names.MAX_READ_BYTES * 0.95:
        one_mb.append(json.dumps(corpus.message()["result"]).encode())
    page = (
        b'{"jsonrpc":"2.0","id":1,"result":{"content":['
        + b",".join(json.dumps({"type": "text", "text": m.decode()}).encode() for m in one_mb)
        + b"]}}"
    )
    spent_ms = []
    for _ in range(5):
        t0 = time.process_time()
        names.NameLedger().read("page", "s", names.Output("mail", "read_email", 1, 0.0), page)
        spent_ms.append((time.process_time() - t0) * 1e3)
    med = statistics.median(spent_ms)
    print(f"one {len(page) / 1e6:.2f} MB output read (on the daemon's event loop): median {med:.1f} ms CPU")
    item = {"type": "text", "text": "x" * 10_000_000}
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"content": [item]}}).encode()
    t0 = time.perf_counter()
    ledger.read("big", "s", names.Output("mail", "read_email", 1, 0.0), big)
    spent = (time.perf_counter() - t0) * 1e3
    print(f"a 10 MB output: {spent:.3f} ms (not read; its scope is marked incomplete)")


if __name__ == "__main__":
    main()
