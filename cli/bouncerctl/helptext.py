"""The command table of ``bouncerctl`` and the group's help, written without importing click.

`COMMANDS` names each command's module and its one-line summary; `GROUPS` sorts the commands into
what a person runs day to day, what they run to set Bouncer up, and what only clients run. `render`
writes the group's help from them: every summary whole, wrapped under itself to the terminal's
width, never cut with "...".

``bouncerctl --help`` and ``--version`` are answered from here by `bouncerctl.__main__` before click
is imported (click alone costs more than the interpreter's own start), and `bouncerctl.app.LazyGroup`
prints the same text when click is asked for the help (``bouncerctl`` with no command, or a test's
CliRunner), so the two cannot drift apart. tests/unit/test_ctl_lazy.py checks each summary is the
one its command shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from bouncerctl import term

PROG: Final = "bouncerctl"
ABOUT: Final = "Talk to bouncerd, the per-user daemon that decides every MCP tools/call."

# click caps help at 80 columns by default: wider lines are harder to read, not more useful.
MAX_HELP_COLUMNS: Final = 80

# Command name -> ("module:attribute" of its click command, its summary in `bouncerctl --help`).
# The summary is what click makes of the command's docstring: its first sentence, on one line.
COMMANDS: Final[Mapping[str, tuple[str, str]]] = {
    "approve": (
        "bouncerctl.approve:approve",
        "Approve the one call that CODE was issued for, after showing it.",
    ),
    "audit": ("bouncerctl.audit_cmd:audit", "Check the audit log."),
    "auth": (
        "bouncerctl.auth_cmd:auth",
        "Log in to remote MCP servers that want OAuth; show or delete the stored tokens.",
    ),
    "demo": (
        "bouncerctl.demo.run:demo",
        "Run the demo: a hijacked agent against a helpdesk, through the real shim and daemon.",
    ),
    "doctor": (
        "bouncerctl.doctor:doctor",
        "Check the socket, daemon, shims, policy, audit chain, service and wrapped clients (read-only).",
    ),
    "hook": (
        "bouncerctl.hook_cmd:hook",
        "Client hook: reads the client's hook JSON on stdin, answers on stdout (see docs).",
    ),
    "init": (
        "bouncerctl.init_cmd:init",
        "Route your MCP clients' stdio servers through bouncer-shim (--undo puts them back).",
    ),
    "logs": ("bouncerctl.daemon_cmd:logs", "Print the end of the daemon's log; -f follows it as it grows."),
    "pending": (
        "bouncerctl.approve:pending",
        "List the open one-time codes: what each would approve and when it expires.",
    ),
    "pins": (
        "bouncerctl.pins:pins",
        "Show or accept tool pins (trust on first use of every part of each tool).",
    ),
    "policy": (
        "bouncerctl.policy_cmd:policy",
        "Check policy files; write a starter one; migrate a bouncer-mcp 0.1.x one.",
    ),
    "reload": (
        "bouncerctl.policy_cmd:reload",
        "Reload policy.yaml in the running daemon (a bad file keeps the policy in force).",
    ),
    "report": (
        "bouncerctl.report:report",
        "Write the review pack: tools and controls, findings, verdicts, OWASP and AIUC-1 mappings.",
    ),
    "restart": (
        "bouncerctl.daemon_cmd:restart",
        "Stop bouncerd if it runs and start it again, now (the autostart backoff is cleared).",
    ),
    "service": (
        "bouncerctl.service:service",
        "Run bouncerd as a per-user service (systemd user units, or a launchd agent on macOS).",
    ),
    "status": (
        "bouncerctl.status:status",
        "Show the daemon, the policy in force, what needs review, its sessions and verdict counts.",
    ),
    "stop": (
        "bouncerctl.daemon_cmd:stop",
        "Stop the running bouncerd (SIGTERM: it saves its journal and audit log first).",
    ),
    "tail": (
        "bouncerctl.tail:tail",
        "Print the latest audit records, one line each; -f follows the log as it grows.",
    ),
}

# Section title -> its commands, in the order a person meets them. Every command is in one section.
GROUPS: Final[Mapping[str, tuple[str, ...]]] = {
    "Daily commands": ("status", "tail", "pending", "approve", "pins", "audit", "report"),
    "Setup commands": ("init", "auth", "policy", "reload", "service", "demo"),
    "When something is wrong": ("doctor", "logs", "restart", "stop"),
    "Internal commands (run by clients)": ("hook",),
}

OPTIONS: Final = (
    ("--version", "Show the version and exit."),
    ("-h, --help", "Show this message and exit."),
)

COMPLETION: Final = (
    'Shell completion: eval "$(_BOUNCERCTL_COMPLETE=bash_source bouncerctl)" in ~/.bashrc '
    "(zsh_source, fish_source for zsh and fish; see docs/operations.md)."
)


def help_columns(columns: int | None) -> int:
    return min(columns or MAX_HELP_COLUMNS, MAX_HELP_COLUMNS)


def _rows(rows: list[tuple[str, str]], width: int, name_width: int) -> list[str]:
    """click's definition list: names in one column across every section, text wrapped beside them."""
    return term.table([["", term.pad(name, name_width), text] for name, text in rows], width)


def render(columns: int | None = None, *, hidden: frozenset[str] = frozenset()) -> str:
    """The group's help at `columns` (None: not a terminal), as click would lay it out, grouped."""
    width = help_columns(columns)
    name_width = max(len(name) for name in [*COMMANDS, *(option for option, _ in OPTIONS)])
    lines = [*term.wrap("[OPTIONS] COMMAND [ARGS]...", width, first=f"Usage: {PROG} "), ""]
    lines += term.wrap(ABOUT, width, first="  ", indent="  ")
    lines += ["", "Options:", *_rows(list(OPTIONS), width, name_width)]
    for title, names in GROUPS.items():
        shown = [(name, COMMANDS[name][1]) for name in names if name not in hidden]
        if shown:
            lines += ["", f"{title}:", *_rows(shown, width, name_width)]
    lines += ["", *term.wrap(COMPLETION, width)]
    return "\n".join(lines) + "\n"


def version() -> str:
    """What ``--version`` prints (click's own format)."""
    from bouncerd import __version__

    return f"{PROG}, version {__version__}\n"
