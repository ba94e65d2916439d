"""Audit export at a real daemon, into real receivers on this machine: a Unix datagram socket standing
in for /dev/log (RFC 5424), one standing in for the journal's socket, and an OTLP/HTTP server decoding
the protobuf with `opentelemetry-proto`. Every verdict arrives once with the chain hash of its local
line; a collector killed mid-run costs no call, and the losses are counted, shown and audited."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from harness import audit_records, short_tmpdir, write_policy

from bouncerd.client import Client
from bouncerd.core import audit as chainlib
from bouncerd.core import exportformat

CALLS = 5
# Bounds for waiting on the daemon's sender threads (never an expectation of speed).
WAIT_SECONDS = 20.0

HAS_OTEL = all(
    importlib.util.find_spec(m) is not None
    for m in ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http", "opentelemetry.proto")
)
needs_otel = pytest.mark.skipif(
    not HAS_OTEL, reason="the otel extra is not installed (pip install -e '.[otel]'; scripts/setup does it)"
)


# ---- receivers ---------------------------------------------------------------------------------------


class Datagrams:
    """A Unix datagram socket that keeps what it receives (a stand-in for /dev/log or the journal)."""

    def __init__(self, directory: Path, name: str) -> None:
        self.path = directory / name
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.path))
        self.sock.settimeout(0.2)
        self.got: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.got.append(self.sock.recv(1 << 20))
            except TimeoutError:
                continue
            except OSError:
                return

    def kill(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()
        self.path.unlink(missing_ok=True)


class OtlpReceiver:
    """An OTLP/HTTP logs endpoint: decodes each ExportLogsServiceRequest and keeps its log records."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2

        received: list[Any] = []
        self.records = received
        headers: list[dict[str, str]] = []
        self.headers = headers  # each request's HTTP headers, names in lower case

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                headers.append({k.lower(): v for k, v in self.headers.items()})
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = logs_service_pb2.ExportLogsServiceRequest()
                request.ParseFromString(body)
                for resource_logs in request.resource_logs:
                    for scope_logs in resource_logs.scope_logs:
                        received.extend(scope_logs.log_records)
                reply = logs_service_pb2.ExportLogsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}/v1/logs"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def kill(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# ---- reading what arrived ----------------------------------------------------------------------------

HEADER = re.compile(rb"<(\d{1,3})>(\d) (\S+) (\S+) (\S+) (\S+) (\S+) ")


def parse_rfc5424(msg: bytes) -> dict[str, Any]:
    """An RFC 5424 message read by the grammar of its section 6 (header, structured data, message)."""
    m = HEADER.match(msg)
    assert m is not None, msg[:200]
    pri, version, ts, host, app, procid, msgid = m.groups()
    rest = msg[m.end() :]
    assert rest.startswith(b"[")
    params: dict[str, str] = {}
    i = rest.index(b" ") + 1
    sd_id = rest[1 : i - 1].decode()
    while rest[i : i + 1] != b"]":
        eq = rest.index(b'="', i)
        name = rest[i:eq].decode()
        j, value = eq + 2, bytearray()
        while rest[j : j + 1] != b'"':
            if rest[j : j + 1] == b"\\":
                j += 1
            value += rest[j : j + 1]
            j += 1
        params[name] = value.decode()
        i = j + 1
        if rest[i : i + 1] == b" ":
            i += 1
    body = rest[i + 1 :]
    assert body.startswith(b" \xef\xbb\xbf")  # SP, then a UTF-8 message with its BOM
    return {
        "facility": int(pri) // 8,
        "severity": int(pri) % 8,
        "version": int(version),
        "timestamp": dt.datetime.strptime(ts.decode(), "%Y-%m-%dT%H:%M:%S.%fZ"),
        "hostname": host.decode(),
        "app": app.decode(),
        "procid": procid.decode(),
        "msgid": msgid.decode(),
        "sd_id": sd_id,
        "params": params,
        "msg": body[4:],
    }


def _wait(predicate: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def _verdict_lines(home: Path) -> list[dict[str, Any]]:
    return [r for r in audit_records(home) if r.get("verdict") is not None]


def _call(daemon: Any, n: int, start: int = 0) -> list[dict[str, Any]]:
    with Client.connect(daemon.paths.socket, role="shim", session="s", server="notes", upstream=["n"]) as c:
        c.request("tools", tools=[{"name": "read_note", "inputSchema": {"type": "object"}}])
        return [
            c.request("verdict", request_id=start + i, tool="read_note", arguments={"id": i})
            for i in range(n)
        ]


@pytest.fixture
def receivers() -> Iterator[Path]:
    d = short_tmpdir("r")
    yield d
    for p in d.iterdir():
        p.unlink()
    d.rmdir()


# ---- tests -------------------------------------------------------------------------------------------


def test_syslog_and_journal_receive_one_record_per_verdict_with_its_chain_hash(
    start: Callable[..., Any], receivers: Path
) -> None:
    syslog = Datagrams(receivers, "log")
    journal = Datagrams(receivers, "journal")
    policy = (
        f"audit_export:\n  syslog:\n    address: {syslog.path}\n    facility: local3\n"
        f"  journal:\n    socket: {journal.path}\n"
    )
    try:
        daemon = start(policy)
        replies = _call(daemon, CALLS)
        assert [r["verdict"] for r in replies] == ["allow"] * CALLS
        local = _verdict_lines(daemon.home)
        assert len(local) == CALLS
        verdicts = lambda: [m for m in map(parse_rfc5424, syslog.got) if m["msgid"] == "verdict"]  # noqa: E731
        assert _wait(lambda: len(verdicts()) >= CALLS and len(journal.got) >= CALLS)
        got = verdicts()
        assert len(got) == CALLS  # one each, none twice
        for record, msg in zip(local, got, strict=True):
            assert msg["version"] == 1 and msg["app"] == "bouncerd" and msg["facility"] == 19  # local3
            assert msg["severity"] == 6 and msg["sd_id"] == "bouncer@32473"
            assert msg["timestamp"] == dt.datetime.strptime(record["ts"], "%Y-%m-%dT%H:%M:%S.%fZ")
            assert msg["params"]["hash"] == record["hash"] and msg["params"]["prev"] == record["prev"]
            assert msg["params"]["tool"] == "read_note" and msg["params"]["verdict"] == "allow"
            assert json.loads(msg["msg"]) == record  # the local line itself: the SIEM can recompute
            assert chainlib.record_hash(json.loads(msg["msg"])) == msg["params"]["hash"]
        fields = [exportformat.parse_journal_entry(d) for d in journal.got]
        hashes = [f["BOUNCER_HASH"].decode() for f in fields if f.get("BOUNCER_VERDICT")]
        assert hashes == [r["hash"] for r in local]
        assert all(f["SYSLOG_IDENTIFIER"] == b"bouncerd" for f in fields)
    finally:
        syslog.kill()
        journal.kill()


@needs_otel
def test_otlp_receiver_gets_the_same_records_with_their_chain_hashes(
    start: Callable[..., Any], receivers: Path
) -> None:
    otlp = OtlpReceiver()
    syslog = Datagrams(receivers, "log")
    try:
        daemon = start(
            f"audit_export:\n  syslog: {{address: {syslog.path}}}\n  otlp:\n    endpoint: {otlp.endpoint}\n"
        )
        _call(daemon, CALLS)
        local = _verdict_lines(daemon.home)

        def otlp_verdicts() -> list[Any]:
            return [r for r in otlp.records if _attr(r, "bouncer.verdict")]

        assert _wait(lambda: len(otlp_verdicts()) >= CALLS)
        got = otlp_verdicts()
        assert [_attr(r, "bouncer.hash") for r in got] == [r["hash"] for r in local]
        for record, log_record in zip(local, got, strict=True):
            assert json.loads(log_record.body.string_value) == record
            assert _attr(log_record, "bouncer.prev") == record["prev"]
            assert log_record.time_unix_nano > 0
        syslog_hashes = lambda: [  # noqa: E731
            m["params"]["hash"] for m in map(parse_rfc5424, syslog.got) if m["msgid"] == "verdict"
        ]
        assert _wait(lambda: len(syslog_hashes()) >= CALLS)
        assert syslog_hashes() == [_attr(r, "bouncer.hash") for r in got]  # the same records both ways
    finally:
        otlp.kill()
        syslog.kill()


def _attr(log_record: Any, key: str) -> str | None:
    for kv in log_record.attributes:
        if kv.key == key:
            return str(kv.value.string_value)
    return None


def _export_status(daemon: Any) -> dict[str, Any]:
    with Client.connect(daemon.paths.socket, role="ctl") as ctl:
        export = ctl.request("status")["daemon"]["export"]
    assert isinstance(export, dict)
    return export


def test_collector_killed_mid_run_costs_no_call_and_the_losses_are_shown_and_audited(
    start: Callable[..., Any], receivers: Path
) -> None:
    syslog = Datagrams(receivers, "log")
    otlp = OtlpReceiver() if HAS_OTEL else None
    policy = f"audit_export:\n  syslog: {{address: {syslog.path}}}\n"
    if otlp is not None:
        policy += f"  otlp:\n    endpoint: {otlp.endpoint}\n    timeout: 1\n"
    try:
        daemon = start(policy)
        first = _call(daemon, CALLS)
        assert _wait(lambda: _export_status(daemon)["targets"][0]["sent"] >= CALLS)
        syslog.kill()
        if otlp is not None:
            otlp.kill()
        second = _call(daemon, CALLS, start=100)  # every call answered, collectors dead or not
        assert [r["verdict"] for r in first + second] == ["allow"] * (2 * CALLS)
        assert _wait(lambda: all(t["failed"] > 0 for t in _export_status(daemon)["targets"]))
        export = _export_status(daemon)
        assert export["lost"] > 0 and export["queue_limit"] > 0
        assert all(t["error"] for t in export["targets"])
        _call(daemon, 1, start=200)  # the next append reports the losses in the local log
        dropped = [r for r in audit_records(daemon.home) if r.get("rule") == "audit.export_dropped"]
        assert len(dropped) == 1 and "the local log keeps every line" in dropped[0]["reason"]
        assert len(_verdict_lines(daemon.home)) == 2 * CALLS + 1  # the source of truth lost nothing
    finally:
        syslog.kill()
        if otlp is not None:
            otlp.kill()


def test_reload_that_adds_audit_export_starts_it(start: Callable[..., Any], receivers: Path) -> None:
    """Export configured after start (the file pushed, then a reload) takes effect without a restart."""
    syslog = Datagrams(receivers, "log")
    try:
        daemon = start()
        with Client.connect(daemon.paths.socket, role="ctl") as ctl:
            assert ctl.request("status")["daemon"]["export"] is None
            write_policy(daemon.home, f"audit_export:\n  syslog: {{address: {syslog.path}}}\n")
            assert ctl.request("reload")["error"] is None
        _call(daemon, 1)
        local = _verdict_lines(daemon.home)
        assert _wait(lambda: any(parse_rfc5424(m)["msgid"] == "verdict" for m in syslog.got))
        got = [m for m in map(parse_rfc5424, syslog.got) if m["msgid"] == "verdict"]
        assert [m["params"]["hash"] for m in got] == [r["hash"] for r in local]
    finally:
        syslog.kill()
