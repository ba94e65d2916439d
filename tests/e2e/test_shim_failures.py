"""bouncer-shim as a process: its failures, each named after what it stops.

The shim runs as the client would run it, between this test (the client, raw JSON-RPC lines) and a
tiny raw JSON-RPC server of ours (tests/e2e/upstreams/echo.py, which logs every line it receives so a
test can prove what never reached it). The daemon is the fake of fake_daemon.py (which logs every
request it receives, so a test can check their order), or the real bouncerd where a test needs it.
Every process gets a fresh short BOUNCER_HOME; waits are bounded so a broken relay fails, never hangs.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from bouncer_shim import link
from bouncer_shim.lines import MAX_LINE_BYTES

from bouncerd import autostart

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SHIM = Path(sys.executable).parent / "bouncer-shim"
ECHO = HERE / "upstreams" / "echo.py"
STUBBORN = HERE / "upstreams" / "stubborn.py"
FAKE_DAEMON = HERE / "fake_daemon.py"

MAX_LINE_MIB = MAX_LINE_BYTES >> 20

# Bounds on waits, never expectations: a relay that works answers in milliseconds.
WAIT = 30.0


def short_home() -> Path:
    return Path(tempfile.mkdtemp(prefix="b", dir="/tmp"))


@pytest.fixture
def home() -> Iterator[Path]:
    path = short_home()
    yield path
    shutil.rmtree(path, ignore_errors=True)


class FakeDaemon:
    def __init__(self, home: Path, log_name: str = "daemon.log", *extra: str) -> None:
        self.home = home
        self.log = home / log_name
        self.socket = home / "run" / "bouncerd.sock"
        self.process = subprocess.Popen([sys.executable, str(FAKE_DAEMON), str(home), str(self.log), *extra])
        deadline = time.monotonic() + WAIT
        while not _answers(self.socket):
            assert self.process.poll() is None, "the fake daemon died"
            assert time.monotonic() < deadline, "the fake daemon never listened"
            time.sleep(0.01)

    def requests(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def observed(self, keep: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """The logged `observe` requests `keep` selects, once there is one. The shim releases a line
        as soon as its observation is in the kernel, so the client can have it before this fake has
        read and logged it: read again until one shows up (bounded by WAIT; the caller asserts)."""
        deadline = time.monotonic() + WAIT
        while True:
            found = [r for r in self.requests() if r["op"] == "observe" and keep(r)]
            if found or time.monotonic() > deadline:
                return found
            time.sleep(0.01)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as s:
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


@pytest.fixture
def fake(home: Path) -> Iterator[FakeDaemon]:
    daemon = FakeDaemon(home)
    yield daemon
    daemon.kill()


class Shim:
    """The shim with this test as its client."""

    def __init__(
        self, home: Path, *command: str, env: dict[str, str] | None = None, policy: Path | None = None
    ) -> None:
        self.home = home
        full_env = {
            **os.environ,
            "BOUNCER_HOME": str(home),
            "BOUNCER_NO_AUTOSTART": "1",
            "BOUNCER_SESSION": "e2e",
            "UPSTREAM_LOG": str(home / "upstream.log"),
            **(env or {}),
        }
        options = ["--name", "echo", *(["--policy", str(policy)] if policy is not None else [])]
        argv = [str(SHIM), *options, "--", *(command or (sys.executable, str(ECHO)))]
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr = b""
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        self._next_id = 1000

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self.lines.put(raw.rstrip(b"\n"))
        self.lines.put(None)

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            self.stderr += raw

    def send(self, data: bytes | dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data if isinstance(data, bytes) else json.dumps(data).encode() + b"\n")
        self.process.stdin.flush()

    def recv(self) -> bytes:
        try:
            line = self.lines.get(timeout=WAIT)
        except queue.Empty:
            raise AssertionError(f"no answer; stderr: {self.stderr.decode(errors='replace')}") from None
        assert line is not None, f"the shim closed its stdout; stderr: {self.stderr.decode(errors='replace')}"
        return line

    def recv_json(self) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(self.recv())
        return message

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send a request and return its response (lines before it must be notifications)."""
        self._next_id += 1
        rid = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        while True:
            answer = self.recv_json()
            if answer.get("id") == rid and "method" not in answer:
                return answer
            assert "id" not in answer or "method" in answer, f"unexpected response {answer}"

    def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.request("tools/call", {"name": tool, "arguments": arguments or {}})

    def close_stdin(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()

    def wait(self) -> int:
        """The shim's exit status, once it has exited and its stdout and stderr are read to the end."""
        status = self.process.wait(timeout=WAIT)
        for reader in self._readers:
            reader.join(WAIT)
        return status

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.wait()
        for pipe in (self.process.stdin, self.process.stdout, self.process.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):  # stdin may hold unflushed bytes for a dead shim
                    pipe.close()

    def upstream_received(self) -> list[dict[str, Any]]:
        log = self.home / "upstream.log"
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_bytes().splitlines() if line.strip()]


@pytest.fixture
def shims() -> Iterator[list[Shim]]:
    started: list[Shim] = []
    yield started
    for shim in started:
        shim.stop()


def start(shims: list[Shim], home: Path, *command: str, **kw: Any) -> Shim:
    shim = Shim(home, *command, **kw)
    shims.append(shim)
    return shim


def initialize(shim: Shim) -> None:
    params = {
        "protocolVersion": "2025-11-25",
        "clientInfo": {"name": "e2e", "version": "1"},
        "capabilities": {},
    }
    assert "result" in shim.request("initialize", params)
    shim.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


def send_call(shim: Shim, rid: int, tool: str, arguments: dict[str, Any]) -> None:
    shim.send(
        {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
    )


def blocked_text(answer: dict[str, Any]) -> str:
    assert answer["result"]["isError"] is True
    text: str = answer["result"]["content"][0]["text"]
    assert text.startswith("[bouncer blocked] ")
    return text


# ---- the gate ------------------------------------------------------------------------------------


def test_denied_call_never_reaches_the_server(home: Path, fake: FakeDaemon, shims: list[Shim]) -> None:
    shim = start(shims, home)
    initialize(shim)
    answer = shim.call("deny_send", {"to": "attacker@evil.test"})
    assert "fake daemon denies deny_send" in blocked_text(answer)
    assert shim.call("echo", {"a": 1})["result"]["content"][0]["text"] == '{"a": 1}'
    received = [m.get("params", {}).get("name") for m in shim.upstream_received()]
    assert "echo" in received and "deny_send" not in received
    verdicts = [r for r in fake.requests() if r["op"] == "verdict"]
    assert [(v["tool"], v["arguments"]) for v in verdicts] == [
        ("deny_send", {"to": "attacker@evil.test"}),
        ("echo", {"a": 1}),
    ]


def test_held_call_cancelled_is_never_forwarded(home: Path, fake: FakeDaemon, shims: list[Shim]) -> None:
    shim = start(shims, home)
    initialize(shim)
    shim.send(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hold_send", "arguments": {}}}
    )
    shim.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}})
    assert shim.request("ping") == {"jsonrpc": "2.0", "id": shim._next_id, "result": {}}
    # The fake sent hold_send's "allow" before it acked ping's result; the shim has seen it by now.
    assert "result" in shim.call("echo")
    received = shim.upstream_received()
    assert not any(m.get("params", {}).get("name") == "hold_send" for m in received)
    assert not any(m.get("method") == "notifications/cancelled" for m in received)
    assert shim.lines.empty()  # and the client got no answer for the cancelled call


def test_client_garbage_is_answered_with_a_parse_error_and_relaying_goes_on(
    home: Path, fake: FakeDaemon, shims: list[Shim]
) -> None:
    shim = start(shims, home)
    initialize(shim)
    for garbage in (b"\xff\xfe\xfa not utf-8\n", b'{"jsonrpc": "2.0", "id": 5, \n', b"][\n"):
        shim.send(garbage)
        answer = shim.recv_json()
        assert answer["id"] is None and answer["error"]["code"] == -32700
    assert "result" in shim.request("ping")
    assert "result" in shim.call("echo")
    assert all(b"not utf-8" not in json.dumps(m).encode() for m in shim.upstream_received())


def test_server_output_that_is_not_json_is_observed_and_relayed_as_is(
    home: Path, fake: FakeDaemon, shims: list[Shim]
) -> None:
    shim = start(shims, home)
    initialize(shim)
    shim.send(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "garbage", "arguments": {}}}
    )
    assert shim.recv() == b"this is not json"
    assert shim.recv_json()["id"] == 1
    others = fake.observed(lambda r: r["kind"] == "other")
    assert others[0]["payload_sha256"] == hashlib.sha256(b"this is not json").hexdigest()


def test_server_requests_reach_the_client_and_its_answer_reaches_the_server(
    home: Path, fake: FakeDaemon, shims: list[Shim]
) -> None:
    shim = start(shims, home)
    initialize(shim)
    shim.send(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sample", "arguments": {}}}
    )
    asked = shim.recv_json()
    assert asked["method"] == "sampling/createMessage"
    shim.send({"jsonrpc": "2.0", "id": asked["id"], "result": {"role": "assistant", "content": "fine"}})
    answer = shim.recv_json()
    assert answer["id"] == 1 and "fine" in answer["result"]["content"][0]["text"]
    kinds = [(r["kind"], r["method"]) for r in fake.observed(lambda r: r["kind"] == "request")]
    assert ("request", "sampling/createMessage") in kinds


def test_server_gets_exactly_the_environment_the_client_gave(home: Path) -> None:
    """No variable added by the shim's interpreter (PEP 538 sets LC_CTYPE under the C locale)."""
    env = {"PATH": os.environ["PATH"], "BOUNCER_HOME": str(home), "BOUNCER_NO_AUTOSTART": "1", "X": "a=b"}
    printenv = shutil.which("env")
    assert printenv is not None
    done = subprocess.run(
        [str(SHIM), "--", printenv],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=WAIT,
        check=True,
    )
    seen = dict(line.split("=", 1) for line in done.stdout.decode().splitlines())
    assert seen == env


# ---- size ----------------------------------------------------------------------------------------


def test_fifty_megabyte_result_passes_through_intact(home: Path, fake: FakeDaemon, shims: list[Shim]) -> None:
    shim = start(shims, home)
    initialize(shim)
    size = 50 * 1000 * 1000
    shim.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "big", "arguments": {"size": size}},
        }
    )
    raw = shim.recv()
    expected = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "x" * size}]}}
    )
    assert hashlib.sha256(raw).hexdigest() == hashlib.sha256(expected.encode()).hexdigest()
    observed = fake.observed(lambda r: r["tool"] == "big")
    assert observed[0]["payload_len"] == len(raw) and observed[0]["kind"] == "result"


def test_an_output_is_released_only_once_its_observation_is_in_the_daemons_socket(
    home: Path, shims: list[Shim]
) -> None:
    """The shim releases an output when its observation has been written to bouncerd, not acked (one
        round trip per call). The attack on that: a daemon that reads slowly, or not at all, while a big
        output's observation is still only in the shim's memory; releasing it then would show the agent
        what bouncerd may never record. Here the daemon stops reading at the first of two outputs, each a
    megabyte more than the shim's socket send buffer can hold (and small enough that the shim's own
    back-pressure does not stop it reading the second)."""
    fake = FakeDaemon(home, "daemon.log", "--stall-at-observe")
    try:
        shim = start(shims, home)
        initialize(shim)
        send_call(shim, 1, "burst", {"count": 2, "size": _socket_send_buffer() + (1 << 20)})
        first = shim.recv_json()  # its observation was read whole before the daemon stalled
        assert first["method"] == "notifications/message"
        assert [r["op"] for r in fake.requests()][-1] == "stalled"
        # The second's observation cannot be written whole (the daemon is not reading), so the client
        # must not get it. Wait a while for it; a shim that released it early shows it here.
        with contextlib.suppress(queue.Empty):
            early = shim.lines.get(timeout=1.0)
            raise AssertionError(f"released before bouncerd could read its observation: {early!r:.80}")
        (home / "unstall").touch()
        second = shim.recv_json()
        assert second["method"] == "notifications/message"
        assert "unstalled" in [r["op"] for r in fake.requests()]
        assert shim.recv_json()["result"]["content"][0]["text"] == "burst done"
        observed = [r for r in fake.requests() if r["op"] == "observe"]
        assert len([r for r in observed if r.get("payload_len", 0) > _socket_send_buffer()]) == 2
    finally:
        fake.kill()


def _socket_send_buffer() -> int:
    """What the kernel grants the shim's daemon socket when it asks for link.SOCKET_SEND_BYTES."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, link.SOCKET_SEND_BYTES)
        granted: int = probe.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    return granted


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the peak RSS from /proc")
def test_over_limit_client_line_is_refused_without_memory_growing_to_it(
    home: Path, fake: FakeDaemon, shims: list[Shim]
) -> None:
    shim = start(shims, home)
    initialize(shim)
    before = _peak_rss_kib(shim.process.pid)
    block = b"y" * (1 << 20)
    shim.send(b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"a":"')
    for _ in range(3 * MAX_LINE_MIB):  # three times the limit: memory must not follow the line
        shim.send(block)
    shim.send(b'"}}}\n')
    answer = shim.recv_json()
    assert answer["id"] is None and answer["error"]["code"] == -32600
    assert "result" in shim.request("ping")
    grown_mib = (_peak_rss_kib(shim.process.pid) - before) / 1024
    # Up to the limit the line may be legitimate and is held; past it, nothing more is.
    assert grown_mib < MAX_LINE_MIB + 16, f"the shim's peak memory grew by {grown_mib:.0f} MiB"
    assert not any(m.get("id") == 9 for m in shim.upstream_received())


def test_over_limit_server_response_becomes_an_error_for_its_request(
    home: Path, fake: FakeDaemon, shims: list[Shim]
) -> None:
    shim = start(shims, home)
    initialize(shim)
    answer = shim.call("oversize", {"size": 65 * 1024 * 1024})
    assert answer["error"]["code"] == -32603 and "exceeds the limit" in answer["error"]["message"]
    assert "result" in shim.request("ping")


# ---- ending --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("arguments", "status"), [({"code": 7}, 7), ({"signal": 9}, 128 + 9)])
def test_upstream_exit_status_propagates(
    home: Path, fake: FakeDaemon, shims: list[Shim], arguments: dict[str, int], status: int
) -> None:
    shim = start(shims, home)
    initialize(shim)
    shim.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "exit", "arguments": arguments},
        }
    )
    assert shim.wait() == status


def test_unstartable_server_is_exit_127_with_a_message(home: Path, shims: list[Shim]) -> None:
    shim = start(shims, home, "/nonexistent/server")
    assert shim.wait() == 127
    assert shim.lines.get(timeout=WAIT) is None  # nothing on stdout
    time.sleep(0.05)
    assert b"bouncer-shim: cannot start" in shim.stderr


def test_client_eof_stops_a_server_that_ignores_stdin_close_and_sigterm(
    home: Path, shims: list[Shim]
) -> None:
    pidfile = home / "stubborn.pid"
    shim = start(shims, home, sys.executable, str(STUBBORN), env={"UPSTREAM_PIDFILE": str(pidfile)})
    deadline = time.monotonic() + WAIT
    while not (pidfile.exists() and pidfile.read_text()):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    server_pid = int(pidfile.read_text())
    shim.close_stdin()
    assert shim.wait() == 128 + signal.SIGKILL
    with pytest.raises(ProcessLookupError):
        os.kill(server_pid, 0)  # reaped by the shim, not left running
    assert b"SIGTERM" in shim.stderr and b"SIGKILL" in shim.stderr


def test_sigterm_to_the_shim_stops_the_server_too(home: Path, fake: FakeDaemon, shims: list[Shim]) -> None:
    shim = start(shims, home)
    initialize(shim)
    shim.process.send_signal(signal.SIGTERM)
    assert shim.wait() == 128 + signal.SIGTERM, shim.stderr  # the server died of the SIGTERM passed on
    assert b"received signal" in shim.stderr


def test_client_eof_lets_a_well_behaved_server_finish_its_work(
    home: Path, fake: FakeDaemon, shims: list[Shim]
) -> None:
    shim = start(shims, home)
    initialize(shim)
    shim.send(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"x": 1}}}
    )
    shim.close_stdin()
    assert shim.recv_json()["id"] == 1  # the held call was still decided and answered
    assert shim.wait() == 0


def test_bad_policy_refused_by_the_daemon_stops_the_shim_with_status_2(home: Path, shims: list[Shim]) -> None:
    daemon = FakeDaemon(home, "daemon.log", "--hello-error", "policy.yaml line 3: unknown key 'sinkz'")
    try:
        shim = start(shims, home)
        assert shim.wait() == 2
        time.sleep(0.05)
        assert b"unknown key 'sinkz'" in shim.stderr
    finally:
        daemon.kill()


# ---- the daemon away -----------------------------------------------------------------------------


def test_daemon_absent_calls_are_refused_with_the_reason_and_the_rest_relayed(
    home: Path, shims: list[Shim]
) -> None:
    shim = start(shims, home)
    initialize(shim)
    assert "result" in shim.request("tools/list")
    assert "unreachable" in blocked_text(shim.call("echo", {"a": 1}))
    assert "result" in shim.request("ping")
    assert not any(m.get("method") == "tools/call" for m in shim.upstream_received())
    assert b"bouncerd is not running" in shim.stderr


def test_daemon_killed_mid_session_replays_observations_before_the_next_verdict(
    home: Path, shims: list[Shim]
) -> None:
    first = FakeDaemon(home, "first.log")
    shim = start(shims, home)
    initialize(shim)
    assert "result" in shim.request("tools/list")
    assert "result" in shim.call("echo", {"n": 1})
    first.kill()
    # While it is away: calls refused at once, everything else relayed (and kept for replay).
    assert "unreachable" in blocked_text(shim.call("echo", {"n": 2}))
    pinged = shim.request("ping")
    second = FakeDaemon(home, "second.log")
    try:
        deadline = time.monotonic() + WAIT
        while "isError" in shim.call("echo", {"n": 3}).get("result", {}):
            assert time.monotonic() < deadline, "the shim never reconnected"
            time.sleep(0.05)
        log = second.requests()
        ops = [r["op"] for r in log]
        assert ops[0] == "hello" and ops[1] == "client" and ops[2] == "tools"
        first_verdict = ops.index("verdict")
        replayed = [r for r in log[:first_verdict] if r["op"] == "observe"]
        ping_sha = hashlib.sha256(json.dumps(pinged).encode()).hexdigest()
        assert ping_sha in [r["payload_sha256"] for r in replayed]
        assert all(
            r["op"] != "observe" or r["seq"] > max(x["seq"] for x in replayed) for r in log[first_verdict:]
        )
        assert log[first_verdict]["arguments"] == {"n": 3}
    finally:
        second.kill()


def test_autostart_starts_a_daemon(home: Path, shims: list[Shim]) -> None:
    """No daemon and autostart on: the shim starts one, says so once with its pid, and the call is
    judged by that daemon (its audit log holds the verdict), not refused as unreachable."""
    shim = start(shims, home, env={"BOUNCER_NO_AUTOSTART": ""})
    pid = None
    try:
        initialize(shim)
        answer = shim.call("echo", {"a": 1})
        pid = _pidfile_pid(home)
        answered = _answers(home / "run" / "bouncerd.sock")
    finally:
        shim.stop()  # its stderr is read to the end
        if pid is None:
            pid = _pidfile_pid(home)
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + WAIT
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
    said = shim.stderr.decode(errors="replace")
    assert pid is not None and answered
    assert said.count("started bouncerd (pid") == 1 and f"started bouncerd (pid {pid};" in said, said
    assert answer["result"]["content"][0]["text"] == json.dumps({"a": 1}, sort_keys=True)  # the server ran it
    verdicts = [(r["tool"], r["verdict"]) for r in _audit(home) if r.get("tool") == "echo"]
    assert verdicts == [("echo", "allow")]


def _audit(home: Path) -> list[dict[str, Any]]:
    path = home / "state" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _pidfile_pid(home: Path) -> int | None:
    try:
        text = (home / "run" / "bouncerd.pid").read_text().strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


def _daemons_of(home: Path) -> list[int]:
    """The live `bouncerd` processes whose BOUNCER_HOME is `home` (zombies are not running)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z" and b"bouncerd" in cmdline and f"BOUNCER_HOME={home}".encode() in environ:
            found.append(int(entry.name))
    return found


# How long a shim may be refused after a daemon's death before the test fails: a bound three times the
# target of a few seconds, and well under the 30 s a shim used to wait between autostarts.
RECOVERY_WAIT = 15.0


def _answered_by_a_daemon(shim: Shim, n: int) -> dict[str, Any]:
    deadline = time.monotonic() + RECOVERY_WAIT
    while "unreachable" in json.dumps(answer := shim.call("echo", {"n": n})):
        assert time.monotonic() < deadline, (
            f"no daemon came back; stderr: {shim.stderr.decode(errors='replace')}"
        )
        time.sleep(0.05)
    return answer


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="counts daemons through /proc")
def test_daemon_killed_twice_within_seconds_is_restarted_for_every_shim_and_never_twice_at_once(
    home: Path, shims: list[Shim]
) -> None:
    """Before, each shim autostarted at most once per 30 s: a second crash within 30 s left every
    client refused for 20 s and more. Now a new daemon answers each shim again after each kill, and
    the start lock keeps three shims from starting three daemons."""
    clients = [start(shims, home, env={"BOUNCER_NO_AUTOSTART": ""}) for _ in range(3)]
    try:
        for shim in clients:
            initialize(shim)
            assert "result" in shim.request("tools/list")
        for n, shim in enumerate(clients):
            assert _answered_by_a_daemon(shim, n)["result"]["content"][0]["text"] == json.dumps({"n": n})
        pids = [_pidfile_pid(home)]
        for kill in range(2):
            victim = pids[-1]
            assert victim is not None and _daemons_of(home) == [victim]
            os.kill(victim, signal.SIGKILL)
            for n, shim in enumerate(clients):
                answer = _answered_by_a_daemon(shim, 10 * (kill + 1) + n)
                assert answer["result"]["content"][0]["text"] == json.dumps({"n": 10 * (kill + 1) + n})
            pids.append(_pidfile_pid(home))
            assert pids[-1] not in (None, victim)
            assert _daemons_of(home) == [pids[-1]]  # one daemon serves; no second one started
        log = (home / "state" / "bouncerd.log").read_text(errors="replace")
    finally:
        for shim in clients:
            shim.stop()
        pid = _pidfile_pid(home)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    assert log.count(" serving on ") == 3  # three daemons in all: the first and one per kill
    assert "already running" not in log  # no shim started a daemon that then lost the lock


def test_daemon_that_keeps_failing_to_start_is_not_restarted_in_a_loop_and_the_refusal_says_why(
    home: Path, shims: list[Shim]
) -> None:
    """A policy.yaml bouncerd refuses: three shims must not restart it as fast as they poll, and
    the refused call must say why and where the log is, not only "unreachable"."""
    (home / "config").mkdir(mode=0o700)
    (home / "config" / "policy.yaml").write_text("servers:\n  echo:\n    no_such_key: 1\n")
    clients = [start(shims, home, env={"BOUNCER_NO_AUTOSTART": ""}) for _ in range(3)]
    for shim in clients:
        initialize(shim)
    deadline = time.monotonic() + RECOVERY_WAIT * 2
    while "starts in a row" not in (text := blocked_text(clients[0].call("echo", {}))):
        assert time.monotonic() < deadline, text
        time.sleep(0.1)
    assert str(home / "state" / "bouncerd.log") in text and "no_such_key" in text
    starts = int((home / "run" / "bouncerd.starts").read_text().split()[0])
    log = (home / "state" / "bouncerd.log").read_text(errors="replace")
    assert starts == autostart.GIVE_UP_AFTER_STARTS == log.count("refusing to start")
    for shim in clients[1:]:  # every shim refuses alike (at its next attempt), and none started its own
        while "starts in a row" not in (text := blocked_text(shim.call("echo", {}))):
            assert time.monotonic() < deadline, text
            time.sleep(0.1)
    assert int((home / "run" / "bouncerd.starts").read_text().split()[0]) == starts


# ---- the same against the real bouncerd (the `daemon` fixture of conftest.py) ----------------------


def test_real_daemon_denies_an_unpinned_tool_and_allows_a_listed_one(daemon: Any, shims: list[Shim]) -> None:
    shim = start(shims, daemon.home)
    initialize(shim)
    assert "result" in shim.request("tools/list")  # trust on first use: these are pinned now
    assert shim.call("echo", {"a": 1})["result"]["content"][0]["text"] == '{"a": 1}'
    assert "not in the pinned tool list" in blocked_text(shim.call("unlisted_tool"))
    received = [m.get("params", {}).get("name") for m in shim.upstream_received()]
    assert "echo" in received and "unlisted_tool" not in received


def test_real_daemon_killed_mid_session_refuses_calls_then_checks_them_again(
    daemon: Any, shims: list[Shim]
) -> None:
    shim = start(shims, daemon.home)
    initialize(shim)
    assert "result" in shim.request("tools/list")
    assert "result" in shim.call("echo", {"n": 1})
    daemon.proc.kill()
    daemon.proc.wait()
    assert "unreachable" in blocked_text(shim.call("echo", {"n": 2}))
    assert "result" in shim.request("ping")
    daemon.restart()
    deadline = time.monotonic() + WAIT
    while "unreachable" in json.dumps(answer := shim.call("echo", {"n": 3})):
        assert time.monotonic() < deadline, "the shim never reconnected"
        time.sleep(0.05)
    assert answer["result"]["content"][0]["text"] == '{"n": 3}'  # pins survived the restart
    verdicts = [(r["arguments"], r["verdict"]) for r in daemon_audit(daemon.home)]
    assert ({"n": 1}, "allow") in verdicts and ({"n": 3}, "allow") in verdicts
    assert all(args != {"n": 2} for args, _ in verdicts)  # refused by the shim, never asked


def daemon_audit(home: Path) -> list[dict[str, Any]]:
    path = home / "state" / "audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_real_daemon_relays_a_ten_megabyte_result_intact(daemon: Any, shims: list[Shim]) -> None:
    shim = start(shims, daemon.home)
    initialize(shim)
    assert "result" in shim.request("tools/list")
    size = 10 * 1000 * 1000
    answer = shim.call("big", {"size": size})
    assert answer["result"]["content"][0]["text"] == "x" * size


def test_real_daemon_bad_policy_stops_the_shim_with_status_2(daemon: Any, shims: list[Shim]) -> None:
    policy = daemon.home / "bad-policy.yaml"
    policy.write_text("servers:\n  echo:\n    no_such_key: 1\n")
    shim = Shim(daemon.home, env={}, policy=policy)
    shims.append(shim)
    assert shim.wait() == 2
    assert b"no_such_key" in shim.stderr
    assert shim.lines.get(timeout=WAIT) is None  # nothing reached the client
