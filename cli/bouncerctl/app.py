"""The ``bouncerctl`` command group. Each command lives in its own module, named in `COMMANDS`.

Commands render what the daemon says; they decide nothing. They find the daemon through
`bouncerd.paths.resolve(os.environ)` at call time (see `bouncerctl.common.connect`), so
``BOUNCER_HOME`` works for every command.

A command's module is imported only when that command runs or shows its own help: the report,
pydantic (through mcp), YAML and the policy code cost a hundred milliseconds and more, which
``bouncerctl --help`` and ``bouncerctl status`` have no use for. The group's help lists every
command, grouped, from the one-line summaries in `bouncerctl.helptext.COMMANDS`, importing none of
them (and ``bouncerctl --help`` alone is answered before click is imported); a test checks that each
summary is the one its command shows (tests/unit/test_ctl_lazy.py), and bench/cli_start.py measures
the start-up. Shell completion of command names reads the same table.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import click

from bouncerctl import helptext, term
from bouncerctl.helptext import COMMANDS
from bouncerd import __version__

__all__ = ["COMMANDS", "LazyGroup", "load_command", "main"]


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

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The grouped help of `bouncerctl.helptext`, the text `bouncerctl --help` prints without click."""
        hidden = frozenset(name for name, command in self.commands.items() if command.hidden)
        formatter.write(helptext.render(ctx.terminal_width or term.columns(), hidden=hidden))

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[Any]:
        """Command names with their summaries from the table: completing a name imports no command."""
        from click.shell_completion import CompletionItem

        items = [
            CompletionItem(name, help=summary)
            for name, (_, summary) in sorted(self.lazy_commands.items())
            if name.startswith(incomplete)
        ]
        return [*items, *click.Command.shell_complete(self, ctx, incomplete)]


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
