"""The policy loader is total over its input: any text is a loaded policy or one PolicyError naming the
file and line, never another exception (a traceback in `policy check`, a daemon that will not start).

Generated inputs: YAML dumped from random structures (wrong types, nulls, deep nesting, huge strings,
huge integers, dates, non-finite floats) shaped like a policy; policies from the real schema with a
random key or value swapped for junk; bad regexes in `arg_patterns`; alias bombs; and raw text and
bytes (control characters, tabs, lone surrogates, unbalanced brackets). "Never half-loaded" for a
pure loader means: the same text always gives the same outcome (no state survives a failed load),
and a loaded file also merges with the built-in packs (the daemon's next step) without an exception.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from _counts import ran
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bouncerd.core.policy import builtin_packs, load_policy, merge
from bouncerd.core.rules import ENTRY_KEYS
from bouncerd.errors import PolicyError
from bouncerd.policyfiles import read_policy

FILENAME = "/fuzz/policy.yaml"
# "/fuzz/policy.yaml:LINE: ..." for every error load_policy raises.
NAMED = re.compile(re.escape(FILENAME) + r":\d+: ")
EXAMPLES = 400
# A bound, not an expectation: opening a FIFO without O_NONBLOCK waits forever; this turns that into
# a failure instead of a hung suite.
BOUND_SECONDS = 10.0

TOP = ["version", "taint_scope", "taint_retention", "approval_timeout", "audit_arguments",
       "on_tainted_identity", "packs", "tools", "servers"]  # fmt: skip
TOOL_KEYS = sorted(ENTRY_KEYS)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.text(max_size=5000).map(lambda s: s * 3),
    st.sampled_from(["2001-13-45", "1:2:3", "0x1f", "0o17", ".inf", "~", "[", "((a)*)*", "(?P<x", "*a",
                     "&a", "!!python/name:os.system", "<<", "1d", "30d", "-1s", "ask", "deny", "session"]),
)  # fmt: skip
keys = st.one_of(
    st.sampled_from(TOP + TOOL_KEYS + ["send_email", "gmail", "arg_patterns"]), st.text(max_size=10)
)


def trees() -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(keys, inner, max_size=5)),
        max_leaves=40,
    )


def tool_entry() -> st.SearchStrategy[dict[str, Any]]:
    value = st.one_of(
        scalars, st.lists(scalars, max_size=3), st.dictionaries(st.text(max_size=5), scalars, max_size=3)
    )
    return st.dictionaries(st.sampled_from(TOOL_KEYS), value, max_size=6)


policies = st.fixed_dictionaries(
    {},
    optional={
        "version": st.one_of(st.just(1), scalars),
        "approval_timeout": scalars,
        "taint_retention": scalars,
        "taint_scope": scalars,
        "packs": st.one_of(st.lists(st.sampled_from([*builtin_packs(), "nope"]), max_size=3), scalars),
        "tools": st.dictionaries(st.text(min_size=1, max_size=10), tool_entry(), max_size=4),
        "servers": st.dictionaries(
            st.text(min_size=1, max_size=8),
            st.fixed_dictionaries(
                {},
                optional={
                    "tools": st.dictionaries(st.text(max_size=8), tool_entry(), max_size=3),
                    "packs": st.lists(st.text(max_size=8), max_size=2),
                },
            ),
            max_size=3,
        ),
    },
)


def dumped(value: Any) -> str:
    try:
        return yaml.safe_dump(value, allow_unicode=True)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError):
        return repr(value)


def bomb(levels: int, width: int) -> str:
    lines = [f"a0: &a0 [{', '.join(['x'] * width)}]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]")
    return "\n".join(lines) + f"\ntools:\n  t:\n    sink_params: *a{levels - 1}\n"


texts = st.one_of(
    trees().map(dumped),
    policies.map(dumped),
    st.text(max_size=300),
    st.text(alphabet="[]{}:- ,'\"&*!|>#\n\t\\%@`", max_size=300),
    st.integers(1, 20_000).map(lambda n: "[" * n),
    st.integers(4000, 6000).map(lambda n: "approval_timeout: " + "9" * n + "\n"),  # int()'s digit limit
    st.tuples(
        st.sampled_from(["version", "approval_timeout", "tools:\n  t:\n    max_calls"]),
        st.sampled_from(["0x", "-0x", "0o", "0b"]),
        st.integers(1, 5000),
    ).map(lambda t: f"{t[0]}: {t[1]}{'1' * t[2]}\n"),
    st.integers(1, 3000).map(lambda n: "".join(f"{' ' * i}a{i}:\n" for i in range(n)) + "  " * n + "x: 1\n"),
    st.integers(1, 600).map(
        lambda n: "tools:\n  t:\n    arg_patterns:\n      a: '" + "(" * n + "a" + ")" * n + "'\n"
    ),
    st.tuples(st.integers(2, 9), st.integers(2, 12)).map(lambda t: bomb(*t)),
    st.tuples(st.integers(2, 9), st.integers(2, 12)).map(
        lambda t: (
            "tools:\n  t:\n    sink_params: &s ["
            + ", ".join(["x"] * t[1])
            + "]\n"
            + "".join(f"  u{i}:\n    sink_params: *s\n" for i in range(t[0]))
        )
    ),
)


def outcome(text: str) -> tuple[str, str]:
    try:
        layer = load_policy(text, FILENAME)
    except PolicyError as exc:
        assert NAMED.match(str(exc)), f"a PolicyError that names no file and line: {exc}"
        return "error", str(exc)
    except RecursionError:
        pytest.fail("RecursionError: nesting must be refused before work, not caught after")
    try:
        merge([layer], builtin_packs())
    except PolicyError as exc:  # e.g. an unknown pack: still one error naming the file
        assert str(exc).startswith(FILENAME), f"a merge error that names no file: {exc}"
        return "merge-error", str(exc)
    return "loaded", ""


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(texts)
@example("version: 1" + "0" * 5000)
@example("tools:\n  t:\n    max_calls: 2001-13-45\n")
@example("[" * 10_000)
def test_any_policy_text_loads_or_is_one_policy_error_naming_file_and_line(text: str) -> None:
    ran("policy loader (load_policy + merge)")
    first = outcome(text)
    assert outcome(text) == first  # nothing of a failed load survives into the next one


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=400))
def test_any_policy_file_bytes_read_or_one_policy_error_naming_the_file(
    tmp_path_factory: pytest.TempPathFactory, data: bytes
) -> None:
    ran("policy file reader (read_policy)")
    path: Path = tmp_path_factory.mktemp("p") / "policy.yaml"
    path.write_bytes(data)
    try:
        read_policy(path)
    except PolicyError as exc:
        assert str(exc).startswith(str(path)), f"an error that names no file: {exc}"


def test_an_integer_of_5000_digits_is_a_policy_error_not_a_valueerror_traceback() -> None:
    with pytest.raises(PolicyError, match=r"policy.yaml:3: tools.t.max_calls: cannot read this value"):
        load_policy("tools:\n  t:\n    max_calls: " + "9" * 5000 + "\n", FILENAME)


def test_a_hex_integer_past_64_bits_is_a_policy_error_not_a_valueerror_when_printed() -> None:
    # 0x and 5000 digits loaded (no digit limit for hex), then `got {value}` could not format it.
    with pytest.raises(PolicyError, match=r"policy.yaml:1: approval_timeout: must fit in 64 bits"):
        load_policy("approval_timeout: 0x" + "f" * 5000 + "\n", FILENAME)
    with pytest.raises(PolicyError, match=r"policy.yaml:3: tools.t.max_calls: must fit in 64 bits"):
        load_policy("tools:\n  t:\n    max_calls: 0x" + "f" * 5000 + "\n", FILENAME)


def test_an_impossible_date_is_a_policy_error_not_a_valueerror_traceback() -> None:
    # YAML reads 2001-13-45 as a timestamp; datetime() then raises ValueError, which escaped the loader.
    with pytest.raises(PolicyError, match=r"policy.yaml:1: \(top level\): cannot read this value"):
        load_policy("2001-13-45: 1\n", FILENAME)
    with pytest.raises(PolicyError, match=r"policy.yaml:3: tools.t.sink_params\[0\]: cannot read"):
        load_policy("tools:\n  t:\n    sink_params: [2001-02-30]\n", FILENAME)


def test_a_policy_path_naming_a_device_is_a_policy_error_not_an_endless_read(tmp_path: Path) -> None:
    # /dev/zero reports size 0, so the size check passed and the read never ended: a shim's
    # `--policy /dev/zero` held the daemon's loop (and its memory) for good. /dev/null shows the check.
    with pytest.raises(PolicyError, match=r"^/dev/null: not a regular file"):
        read_policy(Path("/dev/null"))


def test_a_policy_path_naming_a_fifo_is_a_policy_error_not_a_wait_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "policy.yaml"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            read_policy(fifo)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(BOUND_SECONDS)
    if not outcome:  # unblock the reader (open for writing lets its open return), then fail
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("read_policy waited on a FIFO for a writer")
    assert isinstance(outcome[0], PolicyError) and "not a regular file" in str(outcome[0])
