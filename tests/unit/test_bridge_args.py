"""The shim's ``--url`` mode and the bridge's pure parts: arguments, header references, waiting requests.

The attacks and failures these stop: a secret written into a client's config in clear (headers
carry ``${VAR}`` references, expanded only inside the bridge, and an unset one is named rather than
sent empty); a remote request left waiting forever (`Pending` gives each a deadline that only the
server's own traffic extends); an answer delivered twice (a late answer after the bridge gave up).
A stdio shim must not pay for the bridge: ``--url`` is the only way the SDK is imported.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from bouncer_shim.__main__ import parse_args
from bouncer_shim.bridge import MissingVariable, Pending, expand
from hypothesis import given
from hypothesis import strategies as st


def test_url_mode_runs_the_bridge_and_names_the_server_by_its_url_without_query() -> None:
    args = parse_args(
        [
            "--name",
            "mail",
            "--url",
            "https://mail.example/mcp?key=SECRET",
            "--header",
            "X-Team=core",
            "--timeout=5",
        ]
    )
    assert args.name == "mail"
    assert args.command[:3] == [sys.executable, "-m", "bouncer_shim.bridge"]
    assert args.command[3:] == [
        *("--name", "mail", "--url", "https://mail.example/mcp?key=SECRET"),
        *("--header", "X-Team=core", "--timeout", "5"),
    ]
    assert args.identity == ["https://mail.example/mcp"]  # a key in the query never reaches hello or audit


def test_stdio_mode_is_unchanged() -> None:
    args = parse_args(["--name", "fs", "--", "npx", "server"])
    assert (args.name, args.command, args.identity) == ("fs", ["npx", "server"], ["npx", "server"])


@pytest.mark.parametrize(
    "argv",
    [
        ["--url", "https://x.example/mcp"],  # no name: policy and audit could not tell servers apart
        ["--name", "x", "--url", "file:///etc/passwd"],  # only http(s)
        ["--name", "x", "--url", "https://x.example/mcp", "--", "cmd"],  # both at once
        ["--name", "x", "--header", "A=b", "--", "cmd"],  # a remote-only option on a stdio server
    ],
)
def test_url_mode_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_args(argv)
    assert exited.value.code == 2


def test_header_reference_is_expanded_from_the_environment() -> None:
    assert expand("Bearer ${TOKEN}", {"TOKEN": "t0k"}) == "Bearer t0k"
    assert expand("${MISSING:-fallback}", {}) == "fallback"


def test_unset_header_reference_is_named_not_sent_empty() -> None:
    with pytest.raises(MissingVariable) as missing:
        expand("Bearer ${TOKEN}", {})
    assert missing.value.args == ("TOKEN",)


@given(st.text(alphabet=st.characters(blacklist_characters="$"), max_size=40))
def test_text_without_a_reference_is_left_alone(value: str) -> None:
    assert expand(value, {}) == value


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_silent_request_becomes_overdue_and_is_answered_once() -> None:
    clock = Clock()
    pending = Pending(10.0, clock)
    pending.add(1)
    pending.add("1")  # a different id from 1
    clock.now = 9.0
    assert pending.overdue() == []
    pending.heard()  # the server spoke: the silence starts again
    clock.now = 18.0
    assert pending.overdue() == []
    clock.now = 19.5
    assert sorted(map(json.dumps, pending.overdue())) == ['"1"', "1"]
    assert pending.answer(1) is False  # a late answer finds nothing waiting: it is dropped


def test_stdio_shim_does_not_import_the_sdk() -> None:
    code = (
        "import sys; from bouncer_shim.__main__ import parse_args; "
        "parse_args(['--name','x','--','cmd']); import bouncer_shim.pump, bouncer_shim.relay; "
        "heavy = ('mcp.', 'httpx2', 'bouncer_shim.bridge'); "
        "print(any(m == 'mcp' or m.startswith(heavy) for m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
