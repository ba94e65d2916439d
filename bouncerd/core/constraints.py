"""Argument constraints: path confinement for write parameters, and regular-expression patterns.

Theory of operation
-------------------
Both checks run before the sink gate (docs/how-it-works.md, "The decision", step 3) and return a
`Violation` or `None`; they never raise on anything an agent can put in the arguments.

Path confinement (`check_paths`) applies when a rule has `allowed_path_prefixes`. Every value of
every `write_params` parameter must be an absolute POSIX path that is inside a prefix twice over:

1. lexically, after collapsing `.`, `..` and repeated slashes (so `/home/a/out/../.ssh` is
   `/home/a/.ssh`), and
2. after resolving symlinks of the components that exist, through the injected `resolve`
   function (the daemon passes `os.path.realpath`; this module does no I/O), compared with the
   resolved prefix (on macOS `/tmp` itself is a symlink to `/private/tmp`).

Inside means on a component boundary: `/home/a/out2` is not inside `/home/a/out`. Anything this
cannot judge is a violation with a reason, never a pass: relative paths (relative to the *server's*
working directory, which the daemon does not know), `~` (expanded by whom?), Windows drive letters
and backslashes (a POSIX server would create a file literally named `C:\\x`, a Windows server would
write elsewhere: either way the prefix check would be meaningless), NUL bytes (C libraries truncate
there), and values that are not strings or lists of strings. A write parameter that is missing is a
violation too: the server would choose the location. Between the check and the write a symlink can
still be swapped in by someone who can write inside the prefix; that race is out of reach for a
proxy, and documented.

The confinement applies to every argument that names where bytes land, not only the listed ones:
an argument whose name says so (`lands_bytes`: a download's `target_dir`, a copy's `destination`,
an `extract_to`, an `output_path`) is judged the same way when present
(``constraint.landing_path``), so a policy that lists `path` still confines the `target_dir` a
server added later. A source (`src_path`) is read, not written, and is not confined.

Patterns (`check_patterns`): each `arg_patterns` regex must *fully* match its parameter. A missing
parameter is a violation (fail closed: the pattern was written to constrain it). A list is checked
item by item. Booleans, numbers and null are matched against their JSON spelling (`true`, `3`,
`null`), which is how the user sees them in the call; a mapping never matches a pattern.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from bouncerd.core.rules import ToolRule

Resolve = Callable[[str], str]

# Python's `re` has no timeout; a user's pattern with nested quantifiers could backtrack for a long
# time on a long value. Values longer than this are refused rather than matched.
MAX_PATTERN_SUBJECT_CHARS = 64 * 1024
# Compiled patterns are cached; a policy has at most a few hundred of them.
PATTERN_CACHE_SIZE = 512
# Values echoed in a violation's reason are cut to this length: the agent gets the reason back and
# the value may carry text from untrusted output.
MAX_ECHO_CHARS = 80

_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True)
class Violation:
    rule: str  # "constraint.path" or "constraint.pattern"
    parameter: str
    reason: str


def _echo(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_ECHO_CHARS else text[: MAX_ECHO_CHARS - 3] + "..."


# ---- arguments ------------------------------------------------------------------------------------


def find_values(arguments: Mapping[str, Any], dotted: str) -> list[tuple[str, Any]]:
    """The values at a parameter path, with the concrete path of each.

    Segments separated by dots walk mappings; lists on the way are walked element by element, so
    `files.path` names the `path` of every element of `files`. A key that itself contains a dot is
    found too (the whole remaining path is tried as one key first).
    """
    out: list[tuple[str, Any]] = []
    _walk(arguments, dotted, "", out)
    return out


def _walk(value: Any, rest: str, here: str, out: list[tuple[str, Any]]) -> None:
    if isinstance(value, list) and rest:
        for i, item in enumerate(value):
            _walk(item, rest, f"{here}[{i}]", out)
        return
    if not rest:
        out.append((here, value))
        return
    if not isinstance(value, Mapping):
        return
    if rest in value:
        _walk(value[rest], "", f"{here}.{rest}" if here else rest, out)
        return
    head, _, tail = rest.partition(".")
    if head in value:
        _walk(value[head], tail, f"{here}.{head}" if here else head, out)


# ---- paths --------------------------------------------------------------------------------------


def path_problem(path: str) -> str | None:
    """Why `path` cannot be judged as an absolute POSIX path, or None if it can."""
    if "\x00" in path:
        return "contains a NUL byte"
    if path.startswith("~"):
        return "starts with ~, which only a shell expands; write the absolute path"
    if _DRIVE.match(path) or "\\" in path:
        return "is a Windows path (drive letter or backslash); only absolute POSIX paths can be confined"
    if not path.startswith("/"):
        return "is relative; it would be resolved against the server's working directory, which is unknown"
    return None


def collapse(path: str) -> str:
    """Lexically normalise an absolute POSIX path: drop `.` and empty parts, apply `..`."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


def is_inside(path: str, prefix: str) -> bool:
    """Component-wise containment of two collapsed absolute paths."""
    if prefix == "/":
        return True
    return path == prefix or path.startswith(prefix + "/")


def _path_values(param: str, value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield f"{param}[{i}]", item
    else:
        yield param, value


def _check_one(param: str, value: Any, prefixes: list[tuple[str, str]], resolve: Resolve) -> Violation | None:
    if not isinstance(value, str):
        return Violation(
            "constraint.path", param, f"write parameter {param!r} must be a path string, got {_echo(value)}"
        )
    problem = path_problem(value)
    if problem is not None:
        return Violation("constraint.path", param, f"write parameter {param!r} {_echo(value)} {problem}")
    lexical = collapse(value)
    if not any(is_inside(lexical, lex) for lex, _ in prefixes):
        return Violation(
            "constraint.path",
            param,
            f"write parameter {param!r} {_echo(lexical)} is outside the allowed path prefixes",
        )
    try:
        resolved = collapse(resolve(lexical))
    except (OSError, ValueError) as exc:
        why = f"write parameter {param!r}: cannot resolve symlinks ({type(exc).__name__})"
        return Violation("constraint.path", param, why)
    if not any(is_inside(resolved, res) for _, res in prefixes):
        return Violation(
            "constraint.path",
            param,
            f"write parameter {param!r} {_echo(lexical)} resolves through a symlink to {_echo(resolved)}, "
            f"outside the allowed path prefixes",
        )
    return None


def check_paths(rule: ToolRule, arguments: Mapping[str, Any], resolve: Resolve) -> Violation | None:
    """The first write-parameter value outside `allowed_path_prefixes`, or None."""
    if not rule.allowed_path_prefixes:
        return None
    if not rule.write_params:
        return Violation(
            "constraint.path",
            "",
            f"tool {rule.tool!r} has allowed_path_prefixes but no write_params; "
            f"name the parameters that carry paths in the policy",
        )
    prefixes: list[tuple[str, str]] = []
    for prefix in rule.allowed_path_prefixes:
        lexical = collapse(prefix)
        try:
            prefixes.append((lexical, collapse(resolve(lexical))))
        except (OSError, ValueError):
            prefixes.append((lexical, lexical))
    listed: set[str] = set()
    for param in rule.write_params:
        found = find_values(arguments, param)
        if not found:
            return Violation(
                "constraint.path",
                param,
                f"write parameter {param!r} is missing; the server would choose where to write",
            )
        for where, value in found:
            listed.add(where)
            for item_where, item in _path_values(where, value):
                violation = _check_one(item_where, item, prefixes, resolve)
                if violation is not None:
                    return violation
    for where, value in landing_values(arguments):
        if where in listed:
            continue
        for item_where, item in _path_values(where, value):
            violation = _check_one(item_where, item, prefixes, resolve)
            if violation is not None:
                reason = f"{violation.reason} (it names where the call writes, by its name)"
                return Violation("constraint.landing_path", violation.parameter, reason)
    return None


# ---- where bytes land, by name ----------------------------------------------------------------------


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Words of an argument name that say the call writes there, whatever else it is called: a download's
# target directory, a copy's or move's destination, an extraction path, an output file.
LANDING_WORDS = _set(
    "destination destinations dest output outputs outdir outfile outpath save saveto saveas download "
    "downloads extract extraction unzip unpack"
)
# Words that say so only beside a word of place (`target_dir`, `to_path`, `into_folder`): a bare
# `target` may name a deploy environment, a bare `to` a recipient.
LANDING_IF_PLACE = _set("target to into out")
PLACE_WORDS = _set("path paths dir dirs directory directories folder folders file filename location")
MAX_LANDING_DEPTH = 4  # nested objects read for landing arguments: a call's arguments are shallow


def _name_words(name: str) -> set[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return {w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w}


def lands_bytes(name: str) -> bool:
    """Whether an argument's name says the call writes where it points (`target_dir`, `destination`,
    `extract_to`, `output_path`); a source (`src_path`) does not."""
    parts = _name_words(name)
    if "source" in parts or "src" in parts or "from" in parts:
        return False
    return bool(LANDING_WORDS & parts) or bool(LANDING_IF_PLACE & parts and PLACE_WORDS & parts)


def _strings(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def landing_values(arguments: Mapping[str, Any], here: str = "", depth: int = 0) -> list[tuple[str, Any]]:
    """(path, value) of every argument whose name says bytes land there (`lands_bytes`), nested ones
    too; only strings and lists of strings (a flag like `save: true` names no place)."""
    out: list[tuple[str, Any]] = []
    for name, value in arguments.items():
        where = f"{here}.{name}" if here else str(name)
        if isinstance(value, Mapping) and depth < MAX_LANDING_DEPTH:
            out += landing_values(value, where, depth + 1)
        elif lands_bytes(str(name)) and (
            isinstance(value, str)
            or (isinstance(value, list) and value and all(isinstance(v, str) for v in value))
        ):
            out.append((where, value))
    return out


# ---- patterns -----------------------------------------------------------------------------------


@lru_cache(maxsize=PATTERN_CACHE_SIZE)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def pattern_subject(value: Any) -> str | None:
    """The text a pattern is matched against, or None if the value cannot be matched."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    return None


def check_patterns(rule: ToolRule, arguments: Mapping[str, Any]) -> Violation | None:
    """The first argument that does not fully match its `arg_patterns` regex, or None."""
    for param, pattern in sorted(rule.arg_patterns.items()):
        found = find_values(arguments, param)
        if not found:
            return Violation(
                "constraint.pattern", param, f"parameter {param!r} is missing but must match {pattern!r}"
            )
        for where, value in found:
            for item_where, item in _path_values(where, value):
                subject = pattern_subject(item)
                if subject is None:
                    return Violation(
                        "constraint.pattern",
                        item_where,
                        f"parameter {item_where!r} is a {type(item).__name__}, "
                        f"which cannot match {pattern!r}",
                    )
                if len(subject) > MAX_PATTERN_SUBJECT_CHARS:
                    return Violation(
                        "constraint.pattern",
                        item_where,
                        f"parameter {item_where!r} is longer than {MAX_PATTERN_SUBJECT_CHARS} characters",
                    )
                if _compiled(pattern).fullmatch(subject) is None:
                    return Violation(
                        "constraint.pattern",
                        item_where,
                        f"parameter {item_where!r} {_echo(subject)} does not match {pattern!r}",
                    )
    return None
