"""The wheel's build hook: the taint scanner compiled with mypyc (scripts/native_build.py), when it can be.

`pip install .` runs it for the wheel (never for an editable install: scripts/setup builds a
development tree in place). Without a C compiler, or with BOUNCER_PURE=1, or if mypyc fails, the wheel
is the pure-Python one and says so on stderr: the scanner is the same source either way
(bouncerd/native.py decides at import which one runs).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class NativeScanner(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        self._out: str | None = None
        if self.target_name != "wheel" or version == "editable" or os.environ.get("BOUNCER_PURE") == "1":
            return
        out = tempfile.mkdtemp(prefix="bouncer-wheel-native-")
        done = subprocess.run(  # noqa: S603 - fixed argv
            [sys.executable, str(Path(self.root) / "scripts" / "native_build.py"), "--out", out],
            check=False,
        )
        core = Path(out) / "bouncerd" / "core"
        if done.returncode != 0 or not (core / "_native.json").exists():
            print(
                "bouncer: building the pure-Python wheel (the compiled scanner did not build)",
                file=sys.stderr,
            )
            shutil.rmtree(out, ignore_errors=True)
            return
        self._out = out
        for built in sorted(core.iterdir()):
            build_data["force_include"][str(built)] = f"bouncerd/core/{built.name}"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        if getattr(self, "_out", None):
            shutil.rmtree(str(self._out), ignore_errors=True)
