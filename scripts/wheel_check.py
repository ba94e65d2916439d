"""What `pip install .` gives a user, checked as a user gets it: the wheel built by pip, in clean venvs.

    python3 scripts/wheel_check.py              # both installs below, then the figures
    python3 scripts/wheel_check.py --keep DIR   # keep the venvs and wheel in DIR (else a temp dir)
    python3 scripts/wheel_check.py --python python3.13   # venvs of another interpreter

1. With the C compiler this interpreter was built with: `pip wheel --no-deps .` from a fresh venv
   (pip's isolated build: nothing of the checkout's .venv), then `pip install` of that wheel into
   another fresh venv. The wheel must be tagged for this interpreter (not `py3-none-any`); its
   `bouncerctl doctor` must say "compiled" with an `ok`, and its scanner must give, on the same inputs
   (bench/taint.py's generated tool results and strings built to take every decoder's path), the same
   keys and records as the checkout's pure-Python source (BOUNCER_PURE=1). Then the decision core's
   own tests (`WHEEL_TESTS`, copied outside the checkout) run against that installed wheel.
2. Without a compiler (`CC` names a program that does not exist): `pip install .` into a fresh venv.
   The wheel must be the pure one; `doctor` must say "pure Python" with an `ok` while the compiler is
   still missing, and warn (`warn  scanner`) once one is there, naming the reinstall.

It prints the wall and CPU time of each pip command (the build's CPU is counted in pip's children),
so "pip install with and without a compiler" is read in one run. Exit status 0 when every check
passed, 1 otherwise (each failure printed). It takes about 1.5-3 minutes on 2 cores, most of it
mypyc and the C compiler; it runs outside pytest for that reason (scripts/test runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MISSING_CC = "bouncer-no-such-compiler"

# Run by the installed interpreter (cwd outside the checkout, so `bouncerd` is the installed one) and
# by the checkout's pure source: one JSON line per input.
ANSWERS = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import bouncerd
from taint import Corpus  # bench/taint.py's generator
from bouncerd import native
from bouncerd.core import taint, tokens
PIECES = [
    "eve@evil.example", "https://evil.example/x?d=", "hxxp://", "[.]", " dot ", "(at)", " at ", "=3D",
    "=?utf-8?b?", "%40", "&#64;", "\\\\host\\share", "xn--", "0x7f.1", "::1", "\x00", "\u200b", "Ｅ",
    "ZXZl", "QGV2aWw=", "mailto:", "git@github.com:o/r.git", "+44 20 1234 5678", "U04ABCDEF12",
    "DE89 3704 0044 0532 0130 00", "http://[2001:db8::1]:8080/", "www.example-docs.com/shared/123",
]
texts = [a + " " + b for a in PIECES for b in PIECES]
corpus = Corpus(7)
messages = [corpus.message() for _ in range(300)]
print(json.dumps({"implementation": native.implementation(), "at": bouncerd.__file__}))
src = taint.Source("s", "t", 1, 0.0)
for text in texts:
    print(json.dumps(sorted(tokens.key_tuple(text))))
for msg in messages:
    print(json.dumps(sorted(repr(tuple(r)) for r in taint.extract(msg, src))))
"""


INTERPRETER = (
    "import sys; print(sys.version.split()[0], sys.implementation.cache_tag.replace('cpython-', 'cp'))"
)


class Check:
    def __init__(self) -> None:
        self.failures: list[str] = []

    def that(self, ok: bool, what: str) -> None:
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
        if not ok:
            self.failures.append(what)


# What the core's tests need beyond the wheel's own dependencies (versions from requirements.lock).
TEST_DEPS = ("pytest", "pytest-asyncio", "hypothesis")
# The decision core's tests that need no process, socket or fixture beyond their own file.
WHEEL_TESTS = (
    "test_taint.py",
    "test_canon.py",
    "test_consequential_gate.py",
    "test_consequential_classes.py",
    "test_pin_profiles.py",
    "test_precision_typed.py",
    "test_engine.py",
)


def run(
    argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None
) -> tuple[str, float, float]:
    """(stdout and stderr, wall seconds, CPU seconds of the command and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)  # noqa: S603
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = done.stdout + done.stderr
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{out[-4000:]}")
    return out, wall, cpu


def venv(where: Path, interpreter: str) -> Path:
    subprocess.run([interpreter, "-m", "venv", str(where)], check=True)  # noqa: S603
    return where / "bin" / "python"


def doctor(python: Path, env: dict[str, str]) -> str:
    bouncerctl = python.parent / "bouncerctl"
    done = subprocess.run(  # noqa: S603 - a fixed argv
        [str(bouncerctl), "doctor"], env=env, capture_output=True, text=True, check=False
    )
    lines = [line for line in done.stdout.splitlines() if "scanner" in line]
    return lines[0] if lines else f"(no scanner line; exit {done.returncode}: {done.stdout}{done.stderr})"


def answers(python: Path, env: dict[str, str], cwd: Path) -> tuple[dict[str, str], list[str]]:
    out = subprocess.run(  # noqa: S603 - a fixed argv
        [str(python), "-c", ANSWERS, str(ROOT / "bench"), "--installed"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return json.loads(out[0]), out[1:]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keep", type=Path, help="keep the venvs and the wheel here")
    ap.add_argument("--python", default=sys.executable, help="the interpreter of the venvs")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bouncer-wheel-check-")) if args.keep is None else args.keep
    base.mkdir(parents=True, exist_ok=True)
    check = Check()
    env = {
        k: v for k, v in os.environ.items() if k not in ("BOUNCER_PURE", "PYTHONPATH", "VIRTUAL_ENV", "CC")
    }
    home = base / "home"  # doctor's state and config: never the real home's
    user_env = {**env, "BOUNCER_HOME": str(home), "HOME": str(home)}
    try:
        builder = venv(base / "build", args.python)
        version, tag = run([str(builder), "-c", INTERPRETER], env=env)[0].split()
        print(f"1. with a C compiler (Python {version})")
        wheels = base / "wheels"
        out, build_wall, build_cpu = run(
            [str(builder), "-m", "pip", "wheel", "--no-deps", "-w", str(wheels), str(ROOT)], env=env
        )
        built = sorted(wheels.glob("bouncer-*.whl"))
        check.that(len(built) == 1, f"pip wheel made one wheel: {[w.name for w in built]}")
        wheel = built[0]
        check.that(f"-{tag}-{tag}-" in wheel.name, f"the wheel is for this interpreter: {wheel.name}")
        target = venv(base / "compiled", args.python)
        _, install_wall, install_cpu = run([str(target), "-m", "pip", "install", str(wheel)], env=env)
        line = doctor(target, user_env)
        check.that(line.startswith("ok") and "compiled" in line, f"doctor: {line.strip()}")
        got, installed = answers(target, user_env, base)
        check.that(got["implementation"].startswith("compiled"), f"the scanner that ran: {got}")
        check.that(str(base) in got["at"], "the installed bouncerd ran, not the checkout's")
        pure_env = {**user_env, "BOUNCER_PURE": "1", "PYTHONPATH": str(ROOT)}
        want, source = answers(target, pure_env, base)  # the checkout first on the path, pure
        check.that(
            want["implementation"].startswith("pure") and str(ROOT) in want["at"],
            f"the reference, the checkout's pure source: {want}",
        )
        differ = [i for i, (a, b) in enumerate(zip(installed, source, strict=False)) if a != b]
        check.that(
            len(installed) == len(source) and not differ,
            f"the wheel's scanner and the pure source agree on {len(source)} inputs"
            + (f" (first difference at input {differ[0]})" if differ else ""),
        )

        # The decision core's own tests, run against the installed wheel: a copy of them outside the
        # checkout, so `bouncerd` can only be the one pip installed.
        run(
            [str(target), "-m", "pip", "install", "-q", "-c", str(ROOT / "requirements.lock"), *TEST_DEPS],
            env=env,
        )
        suite = base / "suite"
        (suite / "tests" / "unit").mkdir(parents=True)
        for name in WHEEL_TESTS:
            shutil.copy2(ROOT / "tests" / "unit" / name, suite / "tests" / "unit" / name)
        shutil.copy2(ROOT / "pyproject.toml", suite / "pyproject.toml")  # the pytest settings only
        out, tests_wall, _ = run(
            [str(target), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], env=user_env, cwd=suite
        )
        check.that(
            " passed" in out and " failed" not in out,
            f"the core's tests on the wheel: {out.splitlines()[-1]}",
        )
        print(f"  the core's tests against the installed wheel: {tests_wall:.1f} s")

        print("2. without a C compiler (CC names no program)")
        no_cc = {**env, "CC": MISSING_CC}
        plain = venv(base / "pure", args.python)
        out, pure_wall, pure_cpu = run([str(plain), "-m", "pip", "install", "-v", str(ROOT)], env=no_cc)
        check.that("no C compiler" in out, "the build said why it stayed pure Python")
        check.that("py3-none-any" in out, "pip built the pure wheel (py3-none-any)")
        line = doctor(plain, {**user_env, "CC": MISSING_CC})
        check.that(line.startswith("ok") and "pure Python" in line, f"doctor, no compiler: {line.strip()}")
        line = doctor(plain, user_env)
        check.that(
            line.startswith("warn") and "compiler" in line, f"doctor, a compiler now there: {line.strip()}"
        )

        print("\nfigures (wall / CPU of the command and its children):")
        print(f"  with a compiler:    pip wheel {build_wall:.1f} s / {build_cpu:.1f} s, "
              f"then pip install of the wheel {install_wall:.1f} s / {install_cpu:.1f} s: "
              f"{build_wall + install_wall:.1f} s / {build_cpu + install_cpu:.1f} s in all")  # fmt: skip
        print(f"  without a compiler: pip install . {pure_wall:.1f} s / {pure_cpu:.1f} s")
        print(f"  load average at the end: {os.getloadavg()[0]:.2f}")
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    if check.failures:
        print(f"\n{len(check.failures)} check(s) failed", file=sys.stderr)
        return 1
    print("\nevery check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
