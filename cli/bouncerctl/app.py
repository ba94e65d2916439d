"""The ``bouncerctl`` command group. Each command lives in its own module, named in `COMMANDS`.

Commands render what the daemon says; they decide nothing. They find the daemon through
`bouncerd.paths.resolve(os.environ)` at call time (see `bouncerctl.common.connect`), so
``BOUNCER_HOME`` works for every command.

A command's module is imported only when that command runs or shows its own help: the report,
pydantic (through mcp), YAML and the policy code cost a hundred milliseconds and more, which
``bouncerctl --help`` and ``bouncerctl status`` have no use for. The group's help lists every
command from the one-line summaries in `COMMANDS`, importing none of them; a test checks that each
summary is the one its command shows (tests/unit/test_ctl_lazy.py), and bench/cli_start.py measures
the start-up.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from gettext import gettext
from typing import Any, Final

import click

from bouncerd import __version__

# Command name -> ("module:attribute" of its click command, its summary in `bouncerctl --help`).
# The summary is what click makes of the command's docstring: its first sentence, on one line.
COMMANDS: Final[Mapping[str, tuple[str, str]]] = {
    "approve": (
        "bouncerctl.approve:approve",
        "Approve the one call that CODE was issued for, after showing it.",
    ),
    "audit": ("bouncerctl.audit_cmd:audit", "Check the audit log."),
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
        "Show or accept tool pins (trust on first use of name, description and schema).",
    ),
    "policy": ("bouncerctl.policy_cmd:policy", "Check policy files; migrate a bouncer-mcp 0.1.x one."),
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


class LazyGroup(click.Group):
    """A group whose commands are imported when first looked up, from "module:attribute" names.

    Listing them (the group's ``--help``) shows the summaries given with the names and imports
    nothing. Commands added with `add_command` work as in any group.
    """

    def __init__(self, *args: Any, lazy_commands: Mapping[str, tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            self.add_command(load_command(self.lazy_commands[cmd_name][0]), cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.NoSuchCommand as exc:
            # click suggests close names from `self.commands`, which holds only the commands loaded.
            raise click.NoSuchCommand(
                exc.command_name, exc.message, possibilities=self.list_commands(ctx), ctx=ctx
            ) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own listing, with a stand-in carrying the summary for each command not loaded."""
        rows: list[tuple[str, click.Command]] = []
        for name in self.list_commands(ctx):
            loaded = self.commands.get(name)
            command = loaded if loaded is not None else click.Command(name, help=self.lazy_commands[name][1])
            if not command.hidden:
                rows.append((name, command))
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section(gettext("Commands")):
                formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in rows])


def load_command(target: str) -> click.Command:
    """The click command at "module:attribute", importing the module."""
    module_name, _, attribute = target.partition(":")
    command = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(command, click.Command):
        raise TypeError(f"{target} is not a click command")
    return command


@click.group(cls=LazyGroup, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="bouncerctl")
def main() -> None:
    """Talk to bouncerd, the per-user daemon that decides every MCP tools/call."""
