"""The ``bouncerctl`` command group. Each command lives in its own module and is registered below.

Commands render what the daemon says; they decide nothing. They find the daemon through
`bouncerd.paths.resolve(os.environ)` at call time (see `bouncerctl.common.connect`), so
``BOUNCER_HOME`` works for every command.
"""

from __future__ import annotations

import click

from bouncerd import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="bouncerctl")
def main() -> None:
    """Talk to bouncerd, the per-user daemon that decides every MCP tools/call."""


# Registration: one line per command module.
from bouncerctl import status as _status  # noqa: E402 - commands import helpers, never this group

main.add_command(_status.status)

from bouncerctl import pins as _pins  # noqa: E402
from bouncerctl import policy_cmd as _policy  # noqa: E402

main.add_command(_pins.pins)
main.add_command(_policy.policy)
main.add_command(_policy.reload)

from bouncerctl.demo import run as _demo  # noqa: E402

main.add_command(_demo.demo)

from bouncerctl import init_cmd as _init  # noqa: E402
from bouncerctl import service as _service  # noqa: E402

main.add_command(_init.init)
main.add_command(_service.service)

from bouncerctl import approve as _approve  # noqa: E402

main.add_command(_approve.approve)
main.add_command(_approve.pending)

from bouncerctl import audit_cmd as _audit  # noqa: E402
from bouncerctl import tail as _tail  # noqa: E402
from bouncerctl.report import report as _report  # noqa: E402

main.add_command(_audit.audit)
main.add_command(_tail.tail)
main.add_command(_report)

from bouncerctl import hook_cmd as _hook  # noqa: E402

main.add_command(_hook.hook)
