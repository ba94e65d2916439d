"""The compiled taint scanner: when it is loaded, and when the pure-Python source is loaded instead.

Theory of operation
-------------------
The scanner modules (`SCANNER`: decoders, fold, shapes, numeric_tokens, tokens, uts46, url, urlquirks,
linkkeys, typed, said, orders, textrecords, taint* of bouncerd/core) can be compiled with mypyc from the very
same source: `scripts/native_build.py` builds them in place for a development tree (`scripts/setup`)
and into the wheel for `pip install .` (hatch_build.py); either way it writes a stamp (`STAMP_NAME`,
beside the modules) with the SHA-256 of each source file it compiled and the interpreter's cache tag. Indexing
output for taint then runs ~1.6x as fast (bench/taint.py).

Beside them, `ACCELERATORS` are small hand-written C extensions (bouncerd/core/NAME.c) for the
hottest scans, each replacing a pure function that stays as the fallback; the same build compiles
them, the same stamp covers their source, and they load only together with the compiled modules.

Python's import system prefers an extension module to a .py file of the same name, so a compiled
module left behind by an older build would silently shadow edited source. `NativeOrSource`, a meta
path finder that bouncerd/__init__.py installs, decides once per process, before the first scanner
module is imported, and for all of them together (compiled modules call each other's code directly,
so a mix would run stale code):

- the compiled modules are used when the stamp exists, names this interpreter, and every source's
  hash matches the stamp, and ``BOUNCER_PURE`` is not set to 1;
- otherwise the .py source of each scanner module is loaded explicitly, whatever else lies beside it.

`implementation()` says which one this process runs and why (benchmarks and `doctor` print it), and
`toolchain()` whether this interpreter could build the compiled one (a C compiler and Python's
headers): `doctor` warns when it could and the pure one runs, and the build skips at once when it
could not.
The compiled build and the source are held to the same answers by tests/unit/test_native.py (a
hypothesis test that runs each example through both, the source in a worker process).

mypyc differs from CPython in one way the scanner had to respect: slicing `bytes` where the slice
ends before it starts (``b[-1:0]`` on a longer string) raises SystemError instead of returning b"".
The scanner guards those slices; the differential test looks for others.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

SCANNER: Final = (
    "decoders",
    "fold",
    "shapes",
    "numeric_tokens",
    "tokens",
    "uts46",
    "url",
    "urlquirks",
    "linkkeys",
    "typed",
    "said",
    "orders",
    "textrecords",
    "taint_index",
    "taint_edges",
    "taint",
)
# Hand-written C extensions built beside them (bouncerd/core/NAME.c), each the pure scanner's own
# fallback when absent: loaded only together with the compiled modules, under the same stamp.
ACCELERATORS: Final = ("_scan", "_readings")
PACKAGE: Final = "bouncerd.core"
STAMP_NAME: Final = "_native.json"
PURE_VARIABLE: Final = "BOUNCER_PURE"
CORE_DIR: Final = os.path.join(os.path.dirname(os.path.abspath(__file__)), "core")

_decision: tuple[bool, str] | None = None


def source_digests(core_dir: str = CORE_DIR) -> dict[str, str]:
    import hashlib

    out = {}
    for name in SCANNER:
        with open(os.path.join(core_dir, f"{name}.py"), "rb") as f:
            out[name] = hashlib.sha256(f.read()).hexdigest()
    for name in ACCELERATORS:
        with open(os.path.join(core_dir, f"{name}.c"), "rb") as f:
            out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


def decide(environ: Mapping[str, str], core_dir: str = CORE_DIR) -> tuple[bool, str]:
    """(use the compiled modules, why) for a tree whose scanner modules sit in `core_dir`."""
    if environ.get(PURE_VARIABLE) == "1":
        return False, f"pure Python ({PURE_VARIABLE}=1)"
    import json

    try:
        with open(os.path.join(core_dir, STAMP_NAME), encoding="utf-8") as f:
            stamp = json.load(f)
    except FileNotFoundError:
        return False, "pure Python (no compiled build)"
    except (OSError, ValueError) as exc:
        return False, f"pure Python (the build stamp cannot be read: {exc})"
    if not isinstance(stamp, dict) or stamp.get("cache_tag") != sys.implementation.cache_tag:
        return False, "pure Python (the compiled build is for another interpreter)"
    try:
        if stamp.get("sources") != source_digests(core_dir):
            return False, "pure Python (the source changed since the compiled build: run scripts/setup)"
    except OSError as exc:
        return False, f"pure Python (a source file cannot be read: {exc})"
    return True, f"compiled with mypyc {stamp.get('mypy', '?')}"


def toolchain(environ: Mapping[str, str]) -> str | None:
    """The C compiler a build for this interpreter would run (setuptools takes `CC` from the
    environment, else the one Python was built with), if it is on PATH and Python's headers are
    installed; else None. A compiler without the headers cannot build an extension, so it counts as
    none."""
    import shlex
    import shutil
    import sysconfig

    try:
        words = shlex.split(environ.get("CC") or str(sysconfig.get_config_var("CC") or "cc"))
    except ValueError:
        return None
    include = sysconfig.get_paths().get("include", "")
    if not words or not os.path.isfile(os.path.join(include, "Python.h")):
        return None
    return shutil.which(words[0], path=environ.get("PATH"))


def implementation() -> str:
    """Which scanner this process runs (deciding now if no scanner module was imported yet)."""
    return _decided()[1]


def _decided() -> tuple[bool, str]:
    global _decision
    if _decision is None:
        _decision = decide(os.environ)
    return _decision


class NativeOrSource:
    """A meta path finder for the scanner modules only: None (the usual finders, which prefer the
    compiled extension) when the compiled build is current, else the .py source's spec."""

    @classmethod
    def find_spec(
        cls, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != PACKAGE or (name not in SCANNER and name not in ACCELERATORS):
            return None
        native, why = _decided()
        if native:
            return None
        if name in ACCELERATORS:  # the source runs its own pure fallback
            raise ModuleNotFoundError(f"{fullname} is not loaded: {why}", name=fullname)
        from importlib.util import spec_from_file_location

        return spec_from_file_location(fullname, os.path.join(CORE_DIR, f"{name}.py"))


def install() -> None:
    if not any(finder is NativeOrSource for finder in sys.meta_path):
        sys.meta_path.insert(0, NativeOrSource)
