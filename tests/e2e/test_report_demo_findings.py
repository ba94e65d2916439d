"""The review pack of the demo's world never puts one tool in two findings that contradict each other.

`bouncerctl demo --keep` leaves a real world (its daemon running, its audit log, its servers' tools);
the pack is built from it the way `bouncerctl report` builds it (the log, the daemon's tools, the
findings). A tool the pack calls read-only ("read-only tool(s) covered only by the fallback") must not
also be named as one that writes, deletes or sends.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from bouncerctl.report import review
from bouncerctl.report.build import Aggregator, read_log
from bouncerctl.report.review import Finding, build_pack
from bouncerctl.report.sources import gather

from bouncerd.auditfiles import chain_files
from bouncerd.core.rules import ENTRY_KEYS, FALLBACK_SOURCE, ToolRule
from bouncerd.paths import resolve

pytestmark = pytest.mark.e2e

BOUNCERCTL = Path(sys.executable).parent / "bouncerctl"
DEMO_TIMEOUT_SECONDS = 120  # a bound for a broken demo, not an expectation (it takes seconds)
# Findings that say a tool acts: each contradicts calling the same tool read-only.
ACTS = ("writes without confinement", "deletion without a budget", "sends without an allowlist",
        "sink gate turned off")  # fmt: skip
READ_ONLY = "read-only tool(s) covered only by the fallback"


def _tools(finding: Finding) -> set[str]:
    server, _, names = finding.subject.partition(" / ")
    return {f"{server} / {name}" for name in names.split(", ")}


def contradictions(findings: list[Finding]) -> set[str]:
    read_only = set().union(*(_tools(f) for f in findings if f.title.endswith(READ_ONLY)))
    acting = {f.subject for f in findings if f.title in ACTS}
    return read_only & acting


@dataclass
class KeptDemo:
    screen: str  # what `demo --keep` printed, as a person reads it
    environ: dict[str, str]  # the kept world's: BOUNCER_HOME and no autostart


@pytest.fixture(scope="module")
def kept_demo() -> Iterator[KeptDemo]:
    """`bouncerctl demo --keep` once, as a person runs it (its text, not --json); the kept world's
    daemon is stopped and its directory removed afterwards."""
    env = {k: v for k, v in os.environ.items() if k not in ("BOUNCER_HOME", "BOUNCER_SESSION", "COLUMNS")}
    proc = subprocess.run(
        [str(BOUNCERCTL), "demo", "--keep"],
        env={**env, "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_SECONDS,
        check=False,
    )
    home = re.search(r"export BOUNCER_HOME=(\S+)", proc.stdout)
    stop = re.search(r"kill (\d+)\s+\(then: rm -rf (\S+)\)", proc.stdout)
    try:
        assert proc.returncode == 0 and home and stop, proc.stdout + proc.stderr
        yield KeptDemo(proc.stdout, {**env, "BOUNCER_HOME": home[1], "BOUNCER_NO_AUTOSTART": "1"})
    finally:
        if stop:
            os.kill(int(stop[1]), signal.SIGTERM)
            shutil.rmtree(stop[2], ignore_errors=True)


def test_the_demo_pack_never_calls_a_writing_tool_read_only(kept_demo: KeptDemo) -> None:
    """Stops: one tool a medium "writes without confinement" and among the low read-only ones."""
    there = kept_demo.environ
    paths = resolve(there)
    aggregator = Aggregator(since=None, until=None, server=None)
    log = read_log(chain_files(paths.audit), aggregator)
    called = [k for k in aggregator.by_tool if k[0] != "(other)"]
    sources = gather(paths, tools_file=None, server=None, called=called, ask_daemon=True, environ=there)
    pack = build_pack(log, sources, generated="now", filters=[])
    titles = {f.title for f in pack.findings}
    assert "tool changed since it was pinned" in titles  # the demo's rug pull is in the pack
    assert any(title.endswith(READ_ONLY) for title in titles)  # and read-only tools to group
    assert contradictions(pack.findings) == set()


def test_demo_keep_never_suggests_trusting_the_injected_description_without_a_warning(
    kept_demo: KeptDemo,
) -> None:
    """Stops: `demo --keep` ending with "trust the new description" over `pins accept` of the tool
    whose changed description is the demo's injection."""
    lines = kept_demo.screen.splitlines()
    suggested = "bouncerctl pins accept helpdesk export_customers"
    (at,) = [i for i, line in enumerate(lines) if line.strip() == suggested]  # the suggestion, not a reason
    why = lines[at - 1]  # each suggestion's comment is the line above it
    assert "injection" in why and "never this one" in why


def _fallback_rule(tool: str, **values: Any) -> ToolRule:
    return ToolRule(tool, **values, source=dict.fromkeys(ENTRY_KEYS, FALLBACK_SOURCE))


def test_a_writer_and_a_deleter_only_the_fallback_covers_are_not_grouped_as_read_only() -> None:
    """Stops: a fallback-only writer listed both as "writes without confinement" (medium) and among
    the low "read-only tools covered only by the fallback"; the reader keeps its place in the group."""
    rules = {
        "read_file": _fallback_rule("read_file"),
        "write_file": _fallback_rule("write_file", write_params=("path",)),
        "delete_file": _fallback_rule("delete_file", deletion=True),
    }
    tools = [review._Tool("fs", name, rule, False, "ok", True, {}) for name, rule in rules.items()]
    findings = review._group_read_only([f for t in tools for f in review._tool_findings(t)], tools)
    assert contradictions(findings) == set()
    (grouped,) = [f for f in findings if f.title.endswith(READ_ONLY)]
    assert grouped.subject == "fs / read_file"
    assert {f.subject for f in findings if f.title == review.FALLBACK_TITLE} == {
        "fs / write_file",
        "fs / delete_file",
    }


def test_contradictions_are_found_where_a_tool_is_in_both() -> None:
    """The check itself can fail: a writer listed among the read-only tools is a contradiction."""
    findings = [
        Finding("medium", "writes without confinement", "fs / write_file", "", ""),
        Finding("low", "2 " + READ_ONLY, "fs / read_file, write_file", "", ""),
    ]
    assert contradictions(findings) == {"fs / write_file"}
