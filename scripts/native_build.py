"""Compile the taint scanner (bouncerd/core: `native.SCANNER`) with mypyc, and its C scans (`ACCELERATORS`).

    python scripts/native_build.py --inplace      # a development tree (scripts/setup runs this)
    python scripts/native_build.py --out DIR      # DIR/bouncerd/core/*.so + the stamp (the wheel hook)

Needs mypy (which ships mypyc), setuptools, a C compiler and Python's headers; without the last two it
says so and stops at once (`native.toolchain`). It compiles in a temporary directory,
then copies the extension modules and writes the stamp that bouncerd/native.py checks (each source's
SHA-256, the interpreter's cache tag); the stamp is written last, so an interrupted build leaves the
tree on the pure source. `--if-stale` does nothing when the stamp already matches the source.

Under `pip install .` this runs inside pip's isolated build environment, whose packages (mypy,
setuptools, types-PyYAML: [build-system] in pyproject.toml) reach the interpreter only through the
PYTHONPATH pip sets; the compiler's child process keeps it, with the copied tree in front.
Exit status 0 on success (or nothing to do), 1 if the build failed (the tree stays pure).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bouncerd import native  # noqa: E402 - after the path: the tree being built, not an installed copy

# mypyc type-checks what the scanner imports; PyYAML ships no types of its own, and a build environment
# without its stubs (a build without isolation) compiles the same code with `yaml` as Any.
MYPY_INI = """\
[mypy]
[mypy-yaml.*]
ignore_missing_imports = True
"""

SETUP = """\
from setuptools import Extension, setup
from mypyc.build import mypycify

accelerators = [
    Extension(f"bouncerd.core.{{name}}", [f"bouncerd/core/{{name}}.c"]) for name in {accelerators!r}
]
setup(
    name="bouncer-native",
    ext_modules=mypycify({paths!r}, group_name="bouncerd.core._native", opt_level="3") + accelerators,
)
"""


def remove_built(core: Path) -> None:
    (core / native.STAMP_NAME).unlink(missing_ok=True)
    for name in (*native.SCANNER, *native.ACCELERATORS, "_native__mypyc"):
        for so in core.glob(f"{name}.*.so"):
            so.unlink()
        for pyd in core.glob(f"{name}.*.pyd"):
            pyd.unlink()


def child_pythonpath(work: Path, environ: Mapping[str, str]) -> str:
    """The copied tree first (the source being compiled, not an installed copy), then whatever
    PYTHONPATH this process was given: pip's isolated build puts its packages there."""
    return os.pathsep.join([str(work), *(p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p)])


def build(out_root: Path, *, verbose: bool) -> bool:
    """Compile into out_root/bouncerd/core; True on success."""
    try:
        import mypy.version
    except ImportError:
        print("native build skipped: mypy (mypyc) is not installed", file=sys.stderr)
        return False
    if native.toolchain(os.environ) is None:
        print(
            "native build skipped: no C compiler with Python's headers "
            f"(CC={os.environ.get('CC') or sysconfig.get_config_var('CC')!r}, "
            f"headers in {sysconfig.get_paths().get('include')})",
            file=sys.stderr,
        )
        return False
    digests = native.source_digests(str(ROOT / "bouncerd" / "core"))
    core = out_root / "bouncerd" / "core"
    core.mkdir(parents=True, exist_ok=True)
    remove_built(core)
    with tempfile.TemporaryDirectory(prefix="bouncer-native-") as tmp:
        work = Path(tmp)
        shutil.copytree(
            ROOT / "bouncerd", work / "bouncerd", ignore=shutil.ignore_patterns("__pycache__", "*.so")
        )
        paths = [f"bouncerd/core/{name}.py" for name in native.SCANNER]
        (work / "setup.py").write_text(SETUP.format(paths=paths, accelerators=list(native.ACCELERATORS)))
        (work / "mypy.ini").write_text(MYPY_INI)
        env = {**os.environ, "PYTHONPATH": child_pythonpath(work, os.environ)}
        done = subprocess.run(
            [sys.executable, "setup.py", "build_ext", "--inplace"],
            cwd=work,
            env=env,
            capture_output=not verbose,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            tail = (done.stdout or "")[-2000:] + (done.stderr or "")[-2000:]
            print(f"native build failed (the scanner stays pure Python):\n{tail}", file=sys.stderr)
            return False
        built = sorted((work / "bouncerd" / "core").glob("*.so"))
        expected = len(native.SCANNER) + len(native.ACCELERATORS) + 1
        if len(built) != expected:
            print(f"native build produced {[p.name for p in built]}; expected {expected}", file=sys.stderr)
            return False
        for so in built:
            shutil.copy2(so, core / so.name)
    stamp = {"cache_tag": sys.implementation.cache_tag, "mypy": mypy.version.__version__, "sources": digests}
    tmp_stamp = core / (native.STAMP_NAME + ".tmp")
    tmp_stamp.write_text(json.dumps(stamp, indent=1, sort_keys=True) + "\n")
    os.replace(tmp_stamp, core / native.STAMP_NAME)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--inplace", action="store_true", help="build into this tree's bouncerd/core")
    where.add_argument("--out", type=Path, help="build into OUT/bouncerd/core")
    ap.add_argument("--if-stale", action="store_true", help="do nothing if the build matches the source")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    out_root = ROOT if args.inplace else args.out.resolve()
    if args.if_stale and args.inplace:
        fresh, _why = native.decide({}, str(ROOT / "bouncerd" / "core"))
        if fresh:
            return 0
    ok = build(out_root, verbose=args.verbose)
    if ok:
        print(f"native scanner built into {out_root / 'bouncerd' / 'core'}", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
