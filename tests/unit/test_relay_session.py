"""The session key and the hello the shim sends."""

from __future__ import annotations

import os
import sys

import pytest
from bouncer_shim.session import hello_fields, parse_proc_stat, session_key, start_time

from bouncerd import wire


def test_command_name_with_parentheses_cannot_shift_the_start_time() -> None:
    """A process named `x) 1 2 3 (` must not make another field read as its start time."""
    rest = " ".join(str(n) for n in range(3, 53))  # fields 3..52; field 22 holds "22"
    assert parse_proc_stat(f"1234 (x) 9 9 9 (y) {rest}\n".encode()) == "22"


@pytest.mark.parametrize("data", [b"", b"1234 (x", b"1234 (x) S 1", b"1 (x) " + b"a " * 30])
def test_malformed_stat_gives_no_start_time(data: bytes) -> None:
    assert parse_proc_stat(data) is None


def test_two_clients_with_the_same_pid_get_different_sessions() -> None:
    """The key carries the start time, so a reused pid is a new session."""
    key = session_key({}, os.getpid())
    assert key.startswith(f"proc:{os.getpid()}:")
    if sys.platform.startswith("linux"):
        assert key == f"proc:{os.getpid()}:{start_time(os.getpid())}"
        assert key.rsplit(":", 1)[1].isdigit()


def test_bouncer_session_overrides_the_key() -> None:
    assert session_key({"BOUNCER_SESSION": "wrapper-7"}, 1) == "wrapper-7"


def test_vanished_parent_has_an_unknown_start_not_a_crash() -> None:
    assert session_key({}, 2**22 + 12345, platform="linux").endswith(":unknown")
    assert session_key({}, 5, platform="sunos5") == "proc:5:unknown"


def test_hello_passes_the_daemon_s_own_check() -> None:
    hello = hello_fields(
        environ={"BOUNCER_SESSION": "s"},
        server="mail",
        upstream=["npx", "-y", "srv", "\udcff-undecodable-arg"],
        policy_path="/home/u/policy.yaml",
    )
    op, _ = wire.check_request(wire.request("hello", 0, **hello))
    assert op == "hello"
    assert hello["role"] == "shim" and hello["version"] == wire.PROTOCOL_VERSION
    assert hello["client_pid"] == os.getppid() and hello["pid"] == os.getpid()
    assert len(hello["instance"]) == 16
    assert hello["upstream"][3].endswith("-undecodable-arg")
    wire.encode(wire.request("hello", 0, **hello))  # msgpack accepts every string in it
