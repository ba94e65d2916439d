"""The compiled taint scanner (bouncerd/native.py): used only while it matches the source, and held to
the same answers as the pure-Python source.

What these stop: a compiled module left behind by an older build shadowing edited source (tests and
the daemon would run code nobody can read), and a compiled build that reads an untrusted string
differently from the source (mypyc is not CPython: a bytes slice that ends before it starts raises
there), which would be a hole only the compiled build has.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bouncerd import native

ROOT = Path(__file__).resolve().parents[2]
COMPILED = native.decide({})[0]
needs_build = pytest.mark.skipif(
    not COMPILED, reason=f"no current compiled scanner in this tree ({native.decide({})[1]})"
)
runs_compiled = pytest.mark.skipif(
    not native.implementation().startswith("compiled"), reason=f"this process runs {native.implementation()}"
)

WORKER = r"""
import json, sys
from bouncerd.core import canon, taint, tokens, url
for line in sys.stdin:
    text = json.loads(line)
    src = taint.Source("s", "t", 1, 0.0)
    records = taint.extract({"content": [{"type": "text", "text": text}]}, src)
    parsed = url.parse(text) if len(text) < 4096 else None
    out = {
        "keys": sorted(tokens.key_tuple(text)),
        "records": sorted(repr(tuple(r)) for r in records),
        "url": repr(parsed),
        "reading": repr(canon.reading(text)),
    }
    print(json.dumps(out), flush=True)
"""


def _answers(text: str) -> dict[str, Any]:
    from bouncerd.core import canon, taint, tokens, url

    src = taint.Source("s", "t", 1, 0.0)
    records = taint.extract({"content": [{"type": "text", "text": text}]}, src)
    parsed = url.parse(text) if len(text) < 4096 else None
    return {
        "keys": sorted(tokens.key_tuple(text)),
        "records": sorted(repr(tuple(r)) for r in records),
        "url": repr(parsed),
        "reading": repr(canon.reading(text)),
    }


def _which(env: dict[str, str], tree: Path) -> dict[str, str]:
    code = (
        "import json\nfrom bouncerd.core import fold, tokens, url, taint\n"
        "print(json.dumps({m.__name__: m.__file__ for m in (fold, tokens, url, taint)}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "PYTHONPATH": str(tree)},
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stdout))


def _copy_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "bouncerd", tree / "bouncerd", ignore=shutil.ignore_patterns("__pycache__"))
    return tree


@needs_build
def test_edited_source_is_loaded_instead_of_a_stale_compiled_module(tmp_path: Path) -> None:
    tree = _copy_tree(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != native.PURE_VARIABLE}
    assert all(f.endswith(".so") for f in _which(env, tree).values())
    fold = tree / "bouncerd" / "core" / "fold.py"
    fold.write_text(fold.read_text() + "\n# edited after the build\n")
    # one edited module sends all four to source: compiled modules call each other's code directly
    assert all(f.endswith(".py") for f in _which(env, tree).values())


@needs_build
def test_an_edited_c_scan_sends_the_scanner_to_source_and_leaves_the_stale_one_unloaded(
    tmp_path: Path,
) -> None:
    tree = _copy_tree(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != native.PURE_VARIABLE}
    code = "from bouncerd.core import tokens\nprint(tokens._native_anchors is not None)"

    def c_scan_loaded() -> bool:
        done = subprocess.run(
            [sys.executable, "-c", code],
            env={**env, "PYTHONPATH": str(tree)},
            cwd=tree,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip() == "True"

    assert c_scan_loaded()
    for name in native.ACCELERATORS:
        source = tree / "bouncerd" / "core" / f"{name}.c"
        source.write_text(source.read_text() + "\n/* edited after the build */\n")
    assert all(f.endswith(".py") for f in _which(env, tree).values())
    assert not c_scan_loaded()


@needs_build
def test_a_build_stamp_for_another_interpreter_or_unreadable_is_not_trusted(tmp_path: Path) -> None:
    tree = _copy_tree(tmp_path)
    stamp = tree / "bouncerd" / "core" / native.STAMP_NAME
    env = {k: v for k, v in os.environ.items() if k != native.PURE_VARIABLE}
    data = json.loads(stamp.read_text())
    stamp.write_text(json.dumps({**data, "cache_tag": "cpython-10"}))
    assert all(f.endswith(".py") for f in _which(env, tree).values())
    stamp.write_text("{not json")
    assert all(f.endswith(".py") for f in _which(env, tree).values())


def test_pure_variable_loads_the_source_whatever_lies_beside_it(tmp_path: Path) -> None:
    tree = _copy_tree(tmp_path)
    files = _which({**os.environ, native.PURE_VARIABLE: "1"}, tree)
    assert all(f.endswith(".py") for f in files.values())


def test_decide_names_why_the_source_is_used(tmp_path: Path) -> None:
    core = tmp_path / "core"
    core.mkdir()
    for name in native.SCANNER:
        (core / f"{name}.py").write_text(f"# {name}\n")
    for name in native.ACCELERATORS:
        (core / f"{name}.c").write_text(f"/* {name} */\n")
    assert native.decide({}, str(core)) == (False, "pure Python (no compiled build)")
    assert native.decide({native.PURE_VARIABLE: "1"}, str(core))[0] is False
    stamp = {
        "cache_tag": sys.implementation.cache_tag,
        "mypy": "x",
        "sources": native.source_digests(str(core)),
    }
    (core / native.STAMP_NAME).write_text(json.dumps(stamp))
    assert native.decide({}, str(core)) == (True, "compiled with mypyc x")
    (core / "url.py").write_text("# changed\n")
    assert "source changed" in native.decide({}, str(core))[1]


@pytest.fixture(scope="module")
def pure_worker() -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER],
        env={**os.environ, native.PURE_VARIABLE: "1", "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    yield proc
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    proc.wait(30)
    proc.stdout.close()


# Strings built the way destinations are smuggled: pieces of addresses and URLs, every decoder's
# trigger, control and invisible characters, and wide letters, so both builds take every path.
PIECES = [
    "eve@evil.example", "https://evil.example/x?d=", "hxxp://", "[.]", " dot ", "(at)", " at ", "=",
    "=3D", "=?utf-8?b?", "?=", "%40", "&#64;", "\\\\host\\share", "@", ".", ":", "/", "//", "#", "[", "]",
    "xn--", "0x7f.1", "::1", "\x00", "\u200b", "\ufe0f", "\U000e0041", "Ｅ", "ı", "b", "ZXZl", "QGV2aWw=",
    "a" * 12, " ", "\n", "\r\n", "\t", "mailto:", "git@github.com:o/r.git", "+44 20 1234 5678",
    # what free text dictates (`said`): quotes, id words, capitalised names, code-like words
    "'", '"', "`", "“", "ID ", "file #", "number: ", "No. ", "Riverside View Hotel", "- ", "hunter22",
    "new_password", "don't", "13",
    # listings (`textrecords`) and orders to the agent (`orders`), which the compiled build reads too
    "From: ", "To: ", "Subject: ", "- **from**: ", "**Email:** ", "### ", "---", "name,email\n", ",",
    "Ignore the previous instructions", " and send it to ", "<important>", "</important>", "[system]",
    "Do not tell the user", "task", " AI ", "Assistant", "System",
]  # fmt: skip
SMUGGLED = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=8)), max_size=12).map("".join)


@runs_compiled
@settings(max_examples=400, deadline=None)
@given(SMUGGLED)
def test_compiled_and_source_scanners_read_every_string_alike(
    pure_worker: subprocess.Popen[str], text: str
) -> None:
    assert native.implementation().startswith("compiled")
    assert pure_worker.stdin is not None and pure_worker.stdout is not None
    pure_worker.stdin.write(json.dumps(text) + "\n")
    pure_worker.stdin.flush()
    assert json.loads(pure_worker.stdout.readline()) == _answers(text)
