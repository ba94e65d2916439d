"""URL parsing: bouncerd/core/url.py against the `ada-url` binding, with Node's parser as the judge.

Run:  .venv/bin/python bench/urlparse.py [--repeat 3]
      (any Python >= 3.11 with the repository on its path; `ada-url` measured when it is importable)

Node's `new URL` (tests/unit/url_oracle.js) is the reference both parsers are held to: the figures are
agreement with Node on the differential corpus of tests/unit/test_url_whatwg.py (the named attack
spellings plus 12,000 generated URLs), counted as exact agreement, over-rejection (Node accepts, the
parser fails: the URL is then not trusted, which fails closed) and wrong answers (Node rejects and the
parser accepts, or a different host, port, path, userinfo, query or fragment: the dangerous kind); then
parsing speed (best of `--repeat` passes over the corpus, wall clock, both parsers in the same run);
then how each reads non-ASCII hosts on this interpreter (url.py refuses them when `unicodedata` is not
the Unicode version its IDNA tables were checked against). Figures are printed, never asserted. Without
Node on PATH the agreement columns are skipped; without `ada_url` its columns are.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import sys
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "unit"))

# The corpus, the oracle and the field-by-field comparison are the differential test's own.
import test_url_whatwg as differential  # noqa: E402

from bouncerd.core import url  # noqa: E402 - after the path: this tree's parser

try:
    import ada_url  # type: ignore[import-not-found, unused-ignore]
except ImportError:
    ada_url = None

# Hosts whose reading differs by Unicode version or by IDNA processing, with Node 20's answer.
NON_ASCII_HOSTS: list[tuple[str, str | None]] = [
    ("https://münchen.example/", "xn--mnchen-3ya.example"),
    ("https://xn--mnchen-3ya.example/", "xn--mnchen-3ya.example"),
    ("https://ПРИМЕР.example/", "xn--e1afmkfd.example"),
    ("https://例え.テスト/", "xn--r8jz45g.xn--zckzah"),
    ("https://ｅｘａｍｐｌｅ.com/", "example.com"),
    ("https://faß.example/", "xn--fa-hia.example"),
    ("https://a\u00adb.example/", "ab.example"),
    ("https://evil\u3002example/", "evil.example"),
]

Row = dict[str, Any]


def ours(text: str) -> Row | None:
    got = url.parse(text)
    if got is None:
        return None
    return {
        "hostname": got.host,
        "protocol": got.scheme + ":",
        "port": "" if got.port is None else str(got.port),
        "pathname": got.path,
        "username": got.username,
        "password": got.password,
        "search": "?" + got.query if got.query else "",
        "hash": "#" + got.fragment if got.fragment else "",
    }


def ada(text: str) -> Row | None:
    try:
        parsed: Row = ada_url.parse_url(text)
    except ValueError:
        return None
    return parsed


FIELDS = ("hostname", "protocol", "port", "pathname", "username", "password", "search", "hash")


def agreement(parse: Callable[[str], Row | None], inputs: list[str], node: list[Row]) -> dict[str, int]:
    counts = {"agree": 0, "over_rejected": 0, "wrong": 0}
    for text, want in zip(inputs, node, strict=True):
        got = parse(text)
        if not want["ok"]:
            counts["agree" if got is None else "wrong"] += 1
        elif got is None:
            counts["over_rejected"] += 1
        elif any(got[f] != want[f] for f in FIELDS):
            counts["wrong"] += 1
        else:
            counts["agree"] += 1
    return counts


def speed(parse: Callable[[str], Row | None], inputs: list[str], repeat: int) -> float:
    """Microseconds per URL, best of `repeat` passes."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for text in inputs:
            parse(text)
        best = min(best, time.perf_counter() - start)
    return best / len(inputs) * 1e6


def raw_speed(inputs: list[str], repeat: int) -> tuple[float, float]:
    """(url.parse, ada_url.URL) in µs per URL without building comparison rows."""

    def ada_raw(text: str) -> None:
        try:
            ada_url.URL(text)
        except ValueError:
            return

    a = speed(lambda t: (url.parse(t), None)[1], inputs, repeat)
    b = speed(lambda t: (ada_raw(t), None)[1], inputs, repeat)
    return a, b


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    version = "not installed"
    if ada_url is not None:
        from importlib.metadata import version as dist_version

        bundled = ada_url.get_version() if hasattr(ada_url, "get_version") else "?"
        version = f"{dist_version('ada-url')} (ada {bundled})"
    print(
        f"python {platform.python_version()} (unicodedata {unicodedata.unidata_version}); "
        f"url.py checked against Unicode {url.UNICODE_VERSION_CHECKED}; ada-url {version}"
    )
    inputs = differential.corpus()
    parsers: list[tuple[str, Callable[[str], Row | None]]] = [("url.py", ours)]
    if ada_url is not None:
        parsers.append(("ada-url", ada))
    if shutil.which("node") is not None:
        node = differential.run_node(inputs)
        print(f"corpus {len(inputs)} URLs; Node accepts {sum(r['ok'] for r in node)}")
        for name, parse in parsers:
            c = agreement(parse, inputs, node)
            print(
                f"  {name:8} agrees {c['agree']:6}  over-rejects {c['over_rejected']:5}  "
                f"wrong {c['wrong']:4}  ({100 * c['agree'] / len(inputs):.2f}% agreement)"
            )
    else:
        print("node not on PATH: agreement skipped")
    for name, parse in parsers:
        print(f"  {name:8} {speed(parse, inputs, args.repeat):6.2f} µs per URL (parse + comparable row)")
    if ada_url is not None:
        a, b = raw_speed(inputs, args.repeat)
        print(f"  parse alone: url.parse {a:.2f} µs, ada_url.URL {b:.2f} µs per URL ({a / b:.2f}x)")
    print("non-ASCII hosts (Node 20's host, then each parser's; None = refused):")
    for text, want in NON_ASCII_HOSTS:
        cells = [
            f"{name}={(row or {}).get('hostname')!r}" for name, row in ((n, p(text)) for n, p in parsers)
        ]
        print(f"  {text!r:34} node={want!r}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
