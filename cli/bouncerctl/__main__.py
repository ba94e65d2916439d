"""``bouncerctl``: entry point of the console script and of ``python -m bouncerctl``.

``bouncerctl hook ...`` runs on every prompt and tool call of a client, so it is dispatched here,
before click and the command group are imported (click alone costs some 25 ms), and so are
``bouncerctl --help`` and ``--version`` (`bouncerctl.helptext`, the same text click prints). If the hook
cannot even be loaded (a broken install), it exits 2, which the client treats as "blocked": an
uncaught error would exit 1, which Claude Code treats as "go on" (see `bouncerctl.hook`).
"""

from __future__ import annotations

import sys

HOOK_LOAD_FAILED = 2

# Asked for these alone, the group's help and version are written without importing click.
HELP_ARGS = (["--help"], ["-h"])
VERSION_ARGS = (["--version"],)


def main() -> None:
    if sys.argv[1:2] == ["hook"]:
        try:
            from bouncerctl.hook import main as hook_main
        except BaseException as exc:
            sys.stderr.write(f"[bouncer blocked] the hook cannot load ({type(exc).__name__}: {exc})\n")
            raise SystemExit(HOOK_LOAD_FAILED) from None
        raise SystemExit(hook_main(sys.argv[2:]))
    if sys.argv[1:] in HELP_ARGS or sys.argv[1:] in VERSION_ARGS:
        from bouncerctl import helptext, term

        text = helptext.render(term.columns()) if sys.argv[1:] in HELP_ARGS else helptext.version()
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from bouncerctl.app import main as app_main

    app_main()


if __name__ == "__main__":
    main()
