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
from bouncerctl.helptext import GROUPS
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


def _sections(text: str) -> dict[str, dict[str, str]]:
    """Section title -> {name: its text, wrapped lines joined} of a help text."""
    sections: dict[str, dict[str, str]] = {}
    rows: dict[str, str] = {}
    name = ""
    for line in text.splitlines():
        if line.endswith(":") and not line.startswith(" "):
            rows = sections.setdefault(line[:-1], {})
        elif line.startswith("  ") and line[2] != " " and rows is not None:
            name, _, rest = line[2:].partition("  ")
            rows[name] = rest.strip()
        elif line.startswith("      ") and name:
            rows[name] += " " + line.strip()
    return sections


@pytest.mark.parametrize("width", [40, 60, 80, 200])
def test_group_help_lists_every_command_once_with_its_whole_summary(width: int) -> None:
    """Summaries cut to "..." (10 of 13) hid what the commands do; 13 names in one list hid which matter."""
    result = CliRunner().invoke(main, ["--help"], terminal_width=width)
    assert result.exit_code == 0
    assert all(len(line) <= max(width, 40) for line in result.output.splitlines())
    assert "..." not in result.output.split("Options:", 1)[1]
    sections = _sections(result.output)
    groups = {title: rows for title, rows in sections.items() if title not in ("Options", "Usage")}
    assert list(groups) == list(GROUPS)
    listed = {name: text for rows in groups.values() for name, text in rows.items()}
    assert sorted(listed) == sorted(COMMANDS)  # each command in exactly one section
    assert sum(len(rows) for rows in groups.values()) == len(COMMANDS)
    assert {name: COMMANDS[name][1] for name in COMMANDS} == listed
    assert "_BOUNCERCTL_COMPLETE=bash_source" in " ".join(result.output.split())


@pytest.mark.parametrize("args", [["--help"], ["-h"], ["--version"]], ids=" ".join)
def test_help_written_before_click_is_the_text_click_prints(args: list[str], tmp_path: Path) -> None:
    """The fast path must not drift from the group's own help (or --version) at any width."""
    for columns in ("50", "80", "120"):
        env = dict(os.environ, BOUNCER_HOME=str(tmp_path), COLUMNS=columns)
        fast = subprocess.run(
            [sys.executable, "-m", "bouncerctl", *args], env=env, capture_output=True, text=True
        )
        assert fast.returncode == 0, fast.stderr
        slow = CliRunner().invoke(main, args, env={"COLUMNS": columns})
        assert (slow.exit_code, slow.output) == (0, fast.stdout)


def test_completion_lists_commands_from_the_table_without_importing_them(tmp_path: Path) -> None:
    env = {"_BOUNCERCTL_COMPLETE": "bash_complete", "COMP_WORDS": "bouncerctl p", "COMP_CWORD": "1"}
    loaded, stdout = _modules_after([], tmp_path, env=env)
    assert stdout.split() == ["plain,pending", "plain,pins", "plain,policy"]
    assert not loaded & _command_modules()
    assert not _heavy(loaded)


def test_a_mistyped_command_is_still_matched_against_every_name() -> None:
    result = CliRunner().invoke(main, ["pendin"])
    assert result.exit_code == 2
    assert "No such command 'pendin'." in result.output
    assert "'pending'" in result.output and "'pins'" in result.output


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def _modules_after(args: list[str], home: Path, env: dict[str, str] | None = None) -> tuple[set[str], str]:
    """The modules a fresh `bouncerctl ARGS` has imported when it exits, and what it wrote."""
    code = (
        "import atexit, json, sys\n"
        f"sys.argv = ['bouncerctl', *{args!r}]\n"
        "atexit.register(lambda: sys.__stderr__.write('\\nMODULES ' + json.dumps(sorted(sys.modules))))\n"
        "from bouncerctl.__main__ import main\n"
        "main()\n"
    )
    full = dict(os.environ, BOUNCER_HOME=str(home), **(env or {}))
    done = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=60)
    modules: list[str] = json.loads(done.stderr.rsplit("\nMODULES ", 1)[1])
    return set(modules), done.stdout


def _command_modules() -> set[str]:
    return {target.partition(":")[0] for target, _ in COMMANDS.values()}


@pytest.mark.parametrize("args", [["--help"], ["--version"]], ids=" ".join)
def test_group_help_and_version_import_no_command(args: list[str], tmp_path: Path) -> None:
    loaded, _ = _modules_after(args, tmp_path)
    assert not loaded & _command_modules()
    assert not _heavy(loaded)


def test_status_imports_only_status(tmp_path: Path) -> None:
    loaded, _ = _modules_after(["status"], tmp_path)  # no daemon there: it says so and exits 3
    assert loaded & _command_modules() == {"bouncerctl.status"}
    assert not _heavy(loaded)
    assert "platformdirs" not in loaded  # BOUNCER_HOME is set: nothing to look up


def test_a_commands_help_imports_that_command(tmp_path: Path) -> None:
    loaded, _ = _modules_after(["audit", "--help"], tmp_path)
    assert loaded & _command_modules() == {"bouncerctl.audit_cmd"}
