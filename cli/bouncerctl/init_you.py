"""`bouncerctl init`'s identity step: the user's own addresses and accounts, into policy's `you:`.

An output that names the user (their profile, the attendees of their own event) must not make their
own address look planted, and a send to it is theirs to make: policy's `you:` says who they are. Init
asks for them on a terminal when the policy has none yet (comma-separated, Enter skips), or takes them
from ``--you VALUE`` (repeatable), which is how scripts and ``--yes`` runs give them: with ``--yes``,
``--dry-run`` or no terminal nothing is asked, so nothing waits for an answer.

Each value must be one destination Bouncer can recognise (`check_you`): an e-mail address, a handle
(``@name``), a phone number, an IBAN or account number. A plain word, a web address or a list in one
value is refused with the value and the reason. The values are added to the `you:` list of the
policy the daemon reads (created when missing); a `you:` already there keeps its entries and the rest
of the file keeps its text and comments. The new text must load (`load_policy`, strict) and say
exactly the union, or nothing is written. Written as init writes every file: the diff shown, confirmed
on a terminal unless ``--yes``, a backup in the state directory, the new text replaced atomically.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from bouncerctl import term
from bouncerctl.init_files import InitError, backup, state_backup_dir, tilde, unified_diff, write_atomically

MAX_YOU_CHARS = 254  # the longest e-mail address; an account id or handle is shorter
# Kinds of destination that name a person or an account; a URL or host is a site, trusted with
# `trusted_domains:`, and `text` is a word that names nothing Bouncer can match.
ACCEPTED_KINDS = ("email", "handle", "phone", "iban")  # an account number reads as `phone` or `iban`
QUESTION = "Your own e-mail addresses and accounts, comma-separated (Enter to skip)"


def check_you(value: str) -> str:
    """`value` as it goes into `you:`, or InitError naming it and saying why it cannot."""
    from bouncerd.core import canon  # loaded by init only: `bouncerctl --help` stays light

    shown = repr(value)
    if not value.strip():
        raise InitError(f"{shown}: empty; give an e-mail address or account")
    if value != value.strip():
        raise InitError(f"{shown}: has leading or trailing whitespace")
    if len(value) > MAX_YOU_CHARS:
        raise InitError(f"{shown}: longer than {MAX_YOU_CHARS} characters")
    if any(c in value for c in ",;") or ("@" in value and any(c.isspace() for c in value)):
        raise InitError(f"{shown}: one address per value; repeat --you for each")
    if any(not c.isprintable() for c in value):
        raise InitError(f"{shown}: has a control character")
    kind = canon.canonicalize(value).kind
    if kind in ("url", "host"):
        raise InitError(
            f"{shown}: a web address, not a person or account; trust a site with trusted_domains: "
            "in the policy"
        )
    if kind not in ACCEPTED_KINDS:
        raise InitError(
            f"{shown}: not an e-mail address, handle (@name), phone number or account number "
            "(IBAN) that Bouncer can recognise"
        )
    return value


def _answer(text: str) -> list[str]:
    """A typed answer: comma-separated values, each checked (click asks again on an error)."""
    values = [v.strip() for v in text.split(",") if v.strip()]
    try:
        return [check_you(v) for v in values]
    except InitError as exc:
        raise click.BadParameter(exc.message) from None


def current_you(text: str, filename: str) -> tuple[str, ...]:
    from bouncerd.core.policy import load_policy

    return tuple(load_policy(text, filename).settings.get("you", ()))


def with_you(text: str, filename: str, values: Sequence[str]) -> str:
    """The policy `text` with `values` added to its `you:` list (created if missing). The rest of the
    text is kept as written. InitError if the result would not load or would say something else."""
    from bouncerd.core.policy import load_policy
    from bouncerd.errors import PolicyError

    try:
        old = current_you(text, filename)
    except PolicyError as exc:
        raise InitError(f"{filename} does not load, so it is left alone: {exc}") from None
    wanted = tuple(dict.fromkeys([*old, *values]))
    flow = "[" + ", ".join(json.dumps(v, ensure_ascii=False) for v in wanted) + "]"
    span = _you_value_span(text)
    if span is None:
        body = text if not text or text.endswith("\n") else text + "\n"
        new = (body or "version: 1\n") + f"you: {flow}\n"
    else:
        start, end = span
        lead = " " if start > 0 and text[start - 1] == ":" else ""
        new = text[:start] + lead + flow + text[end:]
    try:
        got = tuple(load_policy(new, filename).settings.get("you", ()))
    except PolicyError as exc:
        raise InitError(f"{filename}: adding you: would not load, so nothing is written: {exc}") from None
    if got != wanted:
        raise InitError(f"{filename}: could not add you: in place; add {', '.join(values)} by hand")
    return new


def _you_value_span(text: str) -> tuple[int, int] | None:
    """Where the top-level `you:` value is in `text` (start, end), or None when there is no `you:`."""
    import yaml

    root: Any = yaml.compose(text, Loader=yaml.SafeLoader) if text.strip() else None
    if not isinstance(root, yaml.MappingNode):
        return None
    for key, value in root.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "you":
            end = value.end_mark.index
            if isinstance(value, yaml.SequenceNode) and not value.flow_style and value.value:
                end = value.value[-1].end_mark.index  # a block list ends at the next key: keep what follows
            return value.start_mark.index, end
    return None


def update_you(
    environ: Mapping[str, str],
    given: Sequence[str],
    *,
    yes: bool,
    dry_run: bool,
    can_ask: bool,
    now: datetime,
) -> None:
    """Add `given` (``--you``) or, on a terminal with none given, the typed answer to policy's `you:`."""
    from bouncerd.errors import PolicyError
    from bouncerd.paths import resolve

    values = [check_you(v) for v in given]
    if not values and (yes or dry_run or not can_ask):
        return  # nothing to add, and nobody to ask
    path = resolve(environ).policy
    shown = tilde(path, environ)
    try:
        st = os.stat(path) if path.exists() else None
        raw = path.read_bytes() if st is not None else b""
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InitError(f"{shown}: cannot read it: {getattr(exc, 'strerror', None) or exc}") from None
    if not values:
        try:
            if current_you(text, shown):
                return
        except PolicyError:
            term.say(f"\n{shown} does not load (`bouncerctl policy check` says why): you: not asked")
            return
        term.say(
            "\nBouncer trusts your own addresses as destinations and never takes them for planted when "
            "an output names them (your profile, your own event)."
        )
        try:
            values = click.prompt(QUESTION, default="", show_default=False, value_proc=_answer)
        except click.Abort:  # end of input: skipped, as an empty answer
            values = []
        if not values:
            term.say(f"{shown}: you: left as it was (add it later with `bouncerctl init --you ADDRESS`)")
            return
    new = with_you(text, shown, values)
    if new == text:
        term.say(f"{shown}: you: already lists {', '.join(values)}")
        return
    term.say("")
    term.echo(unified_diff(text, new, shown, "with you:"), nl=False)
    if dry_run:
        term.say("Dry run: the policy is not written.")
        return
    if not yes and given:
        if not can_ask:
            raise InitError(f"not writing {shown}: there is no terminal to ask on. Re-run with --yes.")
        if not click.confirm(f"Write {shown}?", default=False):
            term.say(f"left {shown} unchanged")
            return
    _write(path, raw, st, new, environ, now)
    term.say(f"wrote {shown}; `bouncerctl reload` loads it into a running daemon")


def _write(
    path: Path, raw: bytes, st: os.stat_result | None, new: str, environ: Mapping[str, str], now: datetime
) -> None:
    shown = tilde(path, environ)
    try:
        if (path.read_bytes() if path.exists() else b"") != raw:
            raise InitError(f"{shown}: changed since it was read; not written. Run init again.")
        if st is None:
            from bouncerd import atomicfile

            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            atomicfile.write_atomically(path, new.encode("utf-8"), mode=0o600)
        else:
            backup(path, raw, st.st_mode, now, state_backup_dir(environ))
            write_atomically(path, new.encode("utf-8"), st)
    except OSError as exc:
        raise InitError(f"{shown}: not written: {exc.strerror or exc}") from None
