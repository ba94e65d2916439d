"""`bouncerctl` loads what it runs: the group lists its commands from a table and imports one on use.

The table's summaries must be the ones the commands show, or `bouncerctl --help` would drift from
each command's own help; and listing or running one command must not import the others (nor the
report, pydantic, mcp or YAML that they pull in).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from bouncerctl.app import COMMANDS, load_command, main
from click.testing import CliRunner

# Widths the listing may be given: a narrow terminal, click's default, a wide one, and no limit.
LIMITS = (10, 30, 45, 67, 80, 120, 10**6)

# What no command but its own may load: the heavy dependencies and the report.
HEAVY = ("pydantic", "mcp", "yaml", "anyio", "bouncerctl.report", "bouncerd.core.policy")


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_table_summary_is_the_commands_own(name: str) -> None:
    target, summary = COMMANDS[name]
    command = load_command(target)
    assert command.name == name
    stand_in = click.Command(name, help=summary)
    for limit in LIMITS:
        assert stand_in.get_short_help_str(limit) == command.get_short_help_str(limit), limit
    assert summary == command.get_short_help_str(10**6)


def test_group_help_lists_every_command_with_its_summary() -> None:
    result = CliRunner().invoke(main, ["--help"], terminal_width=200)
    assert result.exit_code == 0
    listed = result.output.split("Commands:\n", 1)[1].splitlines()
    assert [line.split(None, 1) for line in listed] == [
        [name, COMMANDS[name][1]] for name in sorted(COMMANDS)
    ]


def test_a_mistyped_command_is_still_matched_against_every_name() -> None:
    result = CliRunner().invoke(main, ["pendin"])
    assert result.exit_code == 2
    assert "No such command 'pendin'." in result.output
    assert "'pending'" in result.output and "'pins'" in result.output


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def _modules_after(args: list[str], home: Path) -> set[str]:
    """The modules a fresh `bouncerctl ARGS` has imported when it exits."""
    code = (
        "import atexit, json, sys\n"
        f"sys.argv = ['bouncerctl', *{args!r}]\n"
        "atexit.register(lambda: sys.__stderr__.write('\\nMODULES ' + json.dumps(sorted(sys.modules))))\n"
        "from bouncerctl.__main__ import main\n"
        "main()\n"
    )
    env = dict(os.environ, BOUNCER_HOME=str(home))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    modules: list[str] = json.loads(done.stderr.rsplit("\nMODULES ", 1)[1])
    return set(modules)


def _command_modules() -> set[str]:
    return {target.partition(":")[0] for target, _ in COMMANDS.values()}


@pytest.mark.parametrize("args", [["--help"], ["--version"]], ids=" ".join)
def test_group_help_and_version_import_no_command(args: list[str], tmp_path: Path) -> None:
    loaded = _modules_after(args, tmp_path)
    assert not loaded & _command_modules()
    assert not _heavy(loaded)


def test_status_imports_only_status(tmp_path: Path) -> None:
    loaded = _modules_after(["status"], tmp_path)  # no daemon there: it says so and exits 3
    assert loaded & _command_modules() == {"bouncerctl.status"}
    assert not _heavy(loaded)
    assert "platformdirs" not in loaded  # BOUNCER_HOME is set: nothing to look up


def test_a_commands_help_imports_that_command(tmp_path: Path) -> None:
    loaded = _modules_after(["audit", "--help"], tmp_path)
    assert loaded & _command_modules() == {"bouncerctl.audit_cmd"}
