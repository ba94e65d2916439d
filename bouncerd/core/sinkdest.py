"""Which values of a call are destinations: the declared sink parameters and what hides beside them
(docs/how-it-works.md, "The decision", step 4; the sink gate itself is `sinkgate`).

Theory of operation
-------------------
A tool with `exfiltrating: true` declares its sink parameters. Every string (and number) under them is a
destination: dict keys and values, lists and nested objects, so `{"recipients": {"a@x.com": "Ann"}}` yields
both the address and the display name. Undeclared parameters named like recipients count too, and if no
declared one carries anything every destination-shaped argument does (`destinations`). Pairs of arguments
can spell one destination together (`to_user` + `to_domain`, `owner` + `repo`: `assembled`), and a header
line or a control character smuggled into another argument starts one of its own (`smuggled_destinations`).
This module only finds them; `sinkgate` classifies them and gives the verdict.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bouncerd.core import canon, shapes, tokens
from bouncerd.core.constraints import find_values
from bouncerd.core.fallback import words
from bouncerd.core.model import Verdict

# A destination longer than this is not a destination anyone types: it is a body of text that landed
# in a sink (the every-argument case). It is still classified, but shown truncated in reasons.
SHOWN_DESTINATION_CHARS = 120


@dataclass(frozen=True)
class Destination:
    parameter: str  # dotted path of the argument it came from, e.g. "to[1]" or "recipients.<key>"
    value: str
    parts: tuple[str, ...] = ()  # for a destination assembled from several arguments: their paths


# ---- destinations assembled from several arguments -----------------------------------------------------

# Roles of argument names whose values together make one destination: `to_user` + `to_domain` is an
# address, `owner` + `repo` a repository, `host` + `path` a URL. A name is split into words
# (snake, kebab, camel case); the role word is the last one, the rest (`to`) must agree between the pair.
_LOCAL_ROLE = frozenset({"user", "username", "local", "localpart", "mailbox", "login", "account"})
_DOMAIN_ROLE = frozenset({"domain", "host", "hostname", "server"})
_OWNER_ROLE = frozenset({"owner", "org", "organization", "organisation", "namespace", "workspace"})
_REPO_ROLE = frozenset({"repo", "repository", "project"})
_PATH_ROLE = frozenset({"path", "endpoint", "route", "share"})
_PORT_ROLE = frozenset({"port"})
MAX_ASSEMBLED_PER_OBJECT = 16  # pairs joined per object: a call has a handful of arguments


def _role(name: str) -> tuple[str, str] | None:
    parts = words(name)
    if not parts:
        return None
    last, rest = parts[-1], "_".join(parts[:-1])
    if len(parts) >= 2 and parts[-2] + last in _LOCAL_ROLE | _DOMAIN_ROLE:  # local_part, host_name
        last, rest = parts[-2] + last, "_".join(parts[:-2])
    for role, names in (
        ("local", _LOCAL_ROLE),
        ("domain", _DOMAIN_ROLE),
        ("owner", _OWNER_ROLE),
        ("repo", _REPO_ROLE),
        ("path", _PATH_ROLE),
        ("port", _PORT_ROLE),
    ):
        if last in names:
            return role, rest
    return None


def assembled(arguments: Mapping[str, Any], path: str = "", depth: int = 0) -> list[Destination]:
    """Destinations that only pairs of arguments spell: `user@domain`, `owner/repo`, `host[:port]/path`.

    Each object of the arguments is read on its own (nested ones too, to a small depth)."""
    out: list[Destination] = []
    by_role: dict[tuple[str, str], tuple[str, str]] = {}
    for name, value in arguments.items():
        sub = f"{path}.{name}" if path else str(name)
        if isinstance(value, Mapping) and depth < 3:
            out += assembled(value, sub, depth + 1)
        elif isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            named = _role(str(name))
            if named is not None:
                by_role.setdefault(named, (sub, str(value).strip()))
    for (role, rest), (p1, v1) in by_role.items():
        for second, joiner in (("domain", "@"), ("repo", "/")):
            first = {"domain": "local", "repo": "owner"}[second]
            if role == first and (second, rest) in by_role:
                p2, v2 = by_role[(second, rest)]
                out.append(Destination(f"{p1}+{p2}", f"{v1.lstrip('@')}{joiner}{v2.lstrip('@/')}", (p1, p2)))
        if role == "domain":
            host = v1
            if ("port", rest) in by_role:
                host = f"{v1}:{by_role[('port', rest)][1]}"
            if ("path", rest) in by_role:
                p2, v2 = by_role[("path", rest)]
                out.append(Destination(f"{p1}+{p2}", f"{host}/{v2.lstrip('/')}", (p1, p2)))
    return out[:MAX_ASSEMBLED_PER_OBJECT]


def destinations(
    arguments: Mapping[str, Any],
    sink_params: Sequence[str],
    looks_like_destination: Callable[[str], bool] = lambda _name: False,
) -> tuple[list[Destination], bool]:
    """The destinations of one call, and whether every argument had to be treated as a sink.

    Declared sink parameters that carry something are destinations, and so are undeclared top-level
    parameters whose *name* is destination-shaped (`recipients` next to a declared `to`: a pack that
    missed a parameter must not open a hole). If no declared sink carries anything (absent, null, "",
    [] or {}), the call is ambiguous and every argument is a destination.
    """
    found: list[Destination] = []
    for param in sink_params:
        for concrete, value in find_values(arguments, param):
            found.extend(leaves_under(value, concrete))
    if not found:
        return [d for d in leaves_under(arguments, "") if destination_shaped(d.value)], True
    declared = {d.parameter for d in found}
    for path, value in named_values(arguments, ""):
        if path in declared:
            continue
        name = path.rsplit(".", 1)[-1].split("[", 1)[0]
        nested = "." in path or "[" in path
        if (nested and names_recipient(name)) or (not nested and looks_like_destination(name)):
            found.extend(
                d for d in leaves_under(value, path) if d.parameter not in declared and addressable(d.value)
            )
    return without_display_names(found), False


# The keys of a recipient object that only label it for people: `{"email": "bob@x", "name": "Bob"}`.
# `user_name`, `channel_name` or `account_name` are not among them: those name where it goes.
_DISPLAY_NAME_KEYS = frozenset(
    {("name",), ("display", "name"), ("full", "name"), ("first", "name"), ("last", "name"),
     ("given", "name"), ("family", "name"), ("nick", "name"), ("nickname",), ("displayname",),
     ("fullname",), ("label",)}
)  # fmt: skip


def without_display_names(found: list[Destination]) -> list[Destination]:
    """`found` less the parts of recipient objects that only label them. A field name is not where
    data goes when its value is one destination (`email` in `{"email": "bob@x"}`; an address used as a
    key, `{"bob@x": "Bob"}`, stays). A display name (`to[0].name`, `recipient.displayName`) is not
    either when a sibling in the same object holds one destination (an address, a phone, an IBAN),
    which the server delivers to and which is judged. A name that is itself destination-shaped
    (`"eve@evil.example"`, `"Bob <eve@evil.example>"`), or one with no such sibling, stays."""
    one = {d.parameter: d.value for d in found if canon.canonicalize(d.value.strip()).kind != "text"}
    objects_with_destination = {p.rpartition(".")[0] for p in one if "." in p}
    labels = {
        d.parameter
        for d in found
        if "." in d.parameter
        and d.parameter.rpartition(".")[0] in objects_with_destination
        and tuple(words(d.parameter.rpartition(".")[2])) in _DISPLAY_NAME_KEYS
        and not destination_shaped(d.value)
    }
    out = []
    for d in found:
        field_name = d.parameter.removesuffix(" (key)") if d.parameter.endswith(" (key)") else None
        if d.parameter in labels or (
            field_name is not None
            and (field_name in one or field_name in labels)
            and not destination_shaped(d.value)
        ):
            continue
        out.append(d)
    return out


# An undeclared parameter gated for its name holds an address, a name or a handle; a value longer than
# this, or over several lines, is text the server cannot deliver to (a channel named with a pasted
# paragraph), and what may hide in it is the smuggling check's to find (`smuggled_destinations`).
MAX_GUESSED_DESTINATION_CHARS = 256


def addressable(value: str) -> bool:
    """Whether a value of an undeclared, destination-named parameter can be where data is delivered."""
    if len(value) <= MAX_GUESSED_DESTINATION_CHARS and "\n" not in value and "\r" not in value:
        return True
    return canon.canonicalize(value).kind != "text"


# Inside nested objects only names of recipients count (`headers.Bcc`, `options.cc`, `envelope.to`): a
# link inside a message block (`blocks[0].url`) is content, not where the message goes.
_RECIPIENT_WORDS = frozenset(
    {"to", "cc", "bcc", "recipient", "recipients", "reply", "replyto", "forward", "forwardto", "rcpt",
     "destination", "destinations", "email", "emails", "address", "addresses", "webhook", "callback"}
)  # fmt: skip


def names_recipient(name: str) -> bool:
    parts = words(name)
    return bool(parts) and (parts[-1] in _RECIPIENT_WORDS or (len(parts) > 1 and parts[0] in ("to", "cc")))


MAX_NAMED_DEPTH = 6  # argument objects nest a few levels (headers, options, envelope); deeper is data


def named_values(value: Any, path: str, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """Every (path, value) under a named key of the arguments, nested objects and lists included, so a
    `headers.Bcc` or `options.cc[0]` beside a declared `to` is found by its name."""
    if depth > MAX_NAMED_DEPTH:
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            sub = f"{path}.{k}" if path else str(k)
            yield sub, v
            yield from named_values(v, sub, depth + 1)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from named_values(v, f"{path}[{i}]", depth + 1)


# Values that name no place data can go: a date or a time, a local file path (where bytes land on this
# machine is the write constraint's business, `allowed_path_prefixes`).
_DATE_TIME = re.compile(
    r"\d{4}-\d{1,2}-\d{1,2}(?:[ T]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\d{1,2}:\d{2}(?::\d{2})?(?:\s?[ap]\.?m\.?)?",
    re.IGNORECASE,
)
_LOCAL_PATH = re.compile(r"(?:~|\.{1,2})?/(?!/)[^\s:]*|(?:\.{1,2}|~)(?:[\\/][^\s:\\/]*)+|[A-Za-z]:[\\/][^:]*")


# Top directories that reach other machines by name (autofs `/net/host`, AFS cells) or are not files
# at all (`/dev/tcp/host/port` in a shell, `/proc`): a path under them is not kept on this machine.
_REMOTE_ROOTS = frozenset(
    {"net", "afs", "dev", "proc", "sys", "run", "mnt", "media", "volumes", "smb", "nfs"}
)
_DOTTED_DIRECTORY = re.compile(r"[^./\\]\.[A-Za-z][^/\\]*[/\\]")


def local_path(value: str) -> bool:
    """Whether a value is a path on this machine (`/home/emma/backup/report.pdf`, `~/code/site`,
    `./out`, `C:\\Users\\e\\x.docx`): where bytes land there is the write constraint's business
    (`allowed_path_prefixes`), not the sink gate's. A path under a root that reaches other machines
    (`/net/evil.example/x`), or with a dotted directory that may be a host name, is not one."""
    text = value.strip()
    if not _LOCAL_PATH.fullmatch(text) or _DOTTED_DIRECTORY.search(text):
        return False
    first = text.lstrip("~./\\").replace("\\", "/").split("/", 1)[0].lower()
    return first not in _REMOTE_ROOTS


def destination_shaped(value: str) -> bool:
    """Whether an argument value that no declared sink parameter holds can name where data goes: one
    destination (an address, URL, host, phone, IBAN, handle), or text with destination tokens in it
    (a planted address in a `notes` argument is still read). A time, a date, a local path, a number
    or plain words name no place: a call whose every such argument is of that kind sends nowhere new.
    """
    text = value.strip()
    if _DATE_TIME.fullmatch(text) or _LOCAL_PATH.fullmatch(text):
        return False
    c = canon.canonicalize(text)
    if c.kind != "text":
        return True
    return any(len(p) >= shapes.MIN_KEY_CHARS for p in c.probes[1:])


def leaves(arguments: Mapping[str, Any]) -> Iterator[Destination]:
    """Every string (and number) in a call's arguments, with its path: keys of nested objects too."""
    return leaves_under(arguments, "")


def leaves_under(value: Any, path: str) -> Iterator[Destination]:
    if isinstance(value, str):
        if value.strip():
            yield Destination(path or "(arguments)", value)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            sub = f"{path}.{k}" if path else str(k)
            if path and str(k).strip():  # top-level keys are parameter names, nested ones may be addresses
                yield Destination(f"{sub} (key)", str(k))
            yield from leaves_under(v, sub)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from leaves_under(v, f"{path}[{i}]")
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        # Numbers can be destinations too (a phone number, an account id): compare their text.
        yield Destination(path or "(arguments)", str(value))


def shown(value: str) -> str:
    """A destination as it may appear in a reason: invisible characters made visible, length capped.

    A value that is not one destination (a message body that landed in a sink because the call named
    no destination) is not quoted at all: it may hold text the agent copied from hostile output, and
    the reason goes back to the agent (don't re-inject the injection)."""
    if canon.canonicalize(value).kind == "text":
        return f"(a {len(value)}-character text value)"
    text = canon.visible(value)
    if len(text) > SHOWN_DESTINATION_CHARS:
        text = text[: SHOWN_DESTINATION_CHARS - 1] + "…"
    return repr(text)


def readings_text(value: str) -> str:
    """What a value with several readings reaches, for a reason or a question: the receiver's first."""
    r = canon.reading(value)
    why = ", ".join(q.replace("_", " ") for q in r.quirks)
    if not r.reached:
        return why
    reached = [canon.visible(x)[:SHOWN_DESTINATION_CHARS] for x in r.reached[:4]]
    return f"{why}; the server would reach {reached[0]!r}" + (
        f", other readings: {', '.join(repr(x) for x in reached[1:])}" if len(reached) > 1 else ""
    )


def read_as(dest: Destination) -> str:
    r = canon.reading(dest.value)
    return "" if r.single else f" ({readings_text(dest.value)})"


# A line break, then a header name and a colon: in a mail or HTTP message built by string concatenation the
# rest of the line is a header of its own (`subject: "Q3\r\nBcc: eve@evil.example"`).
_HEADER_INJECTION = re.compile(
    r"[\r\n\x85\u2028\u2029][ \t]*((?:resent-)?(?:to|cc|bcc|from|sender|reply-to|return-path|"
    r"delivered-to|envelope-to|x-forwarded-to|location|host|forwarded|refresh)[ \t]*:[^\r\n]*)",
    re.IGNORECASE,
)
# A message body is not a header: a forwarded mail quotes `From:` and `To:` lines in it on purpose.
_BODY_WORDS = frozenset(
    {"body", "text", "content", "contents", "html", "markdown", "message", "description", "comment", "note"}
)
_CONTROL_SPLIT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]+")


def smuggled_destinations(arguments: Mapping[str, Any], sinks: set[str]) -> list[Destination] | Verdict:
    """Destinations smuggled into the other arguments of a send: a NUL anywhere is refused outright (C
    code stops reading there, so what is checked is not what is sent); a header line after a line break
    and text after another control character become destinations of their own."""
    out: list[Destination] = []
    for d in leaves_under(arguments, ""):
        if "\x00" in d.value:
            return Verdict(
                "deny",
                "sink.nul_character",
                f"argument {d.parameter!r} of a sending tool holds a NUL character: what Bouncer checks "
                f"would not be what the server reads",
                parameter=d.parameter,
            )
        if d.parameter in sinks:
            continue
        name = words(d.parameter.rsplit(".", 1)[-1].split("[", 1)[0])
        if not (name and name[-1] in _BODY_WORDS):
            for m in _HEADER_INJECTION.finditer(d.value):
                value = m.group(1).split(":", 1)[1].strip()
                if canon.canonicalize(value).kind != "text" or tokens.text_keys(value):
                    out.append(Destination(f"{d.parameter} (header line)", value))
        if _CONTROL_SPLIT.search(d.value):
            for part in _CONTROL_SPLIT.split(d.value)[1:]:
                if part.strip() and canon.canonicalize(part.strip()).kind != "text":
                    out.append(Destination(f"{d.parameter} (after a control character)", part.strip()))
    return [d for d in out if d.value]
