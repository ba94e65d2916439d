"""Audit export: the strict `audit_export:` schema, the RFC 5424 and journal encodings, and the
bounded queue in front of a collector that stops reading (real sockets, no collector double)."""

from __future__ import annotations

import json
import re
import socket
import tempfile
import time
from pathlib import Path

import pytest

from bouncerd.core import audit as chainlib
from bouncerd.core import exportformat
from bouncerd.core.exportconf import FACILITIES, ExportConfig, JournalTarget, SyslogTarget
from bouncerd.core.policy import load_policy
from bouncerd.errors import PolicyError
from bouncerd.server.export import EXPORT_QUEUE_LIMIT, Channel, Exporter, JournalSender, SyslogSender
from bouncerd.server.policies import PolicyState

# Bound for waiting on a sender thread in these tests (never an expectation of speed).
WAIT_SECONDS = 20.0


def _export(text: str) -> ExportConfig:
    layer = load_policy(text, "policy.yaml")
    assert layer.audit_export is not None
    return layer.audit_export


def test_full_audit_export_config_parses() -> None:
    got = _export(
        "audit_export:\n"
        "  syslog:\n    address: udp://siem.example:514\n    facility: local4\n"
        "  journal: true\n"
        "  otlp:\n    endpoint: https://otel.example:4318/v1/logs\n"
        "    headers: {x-token: abc}\n    timeout: 3\n"
    )
    assert got.syslog == SyslogTarget("udp", "siem.example", 514, FACILITIES["local4"])
    assert got.journal == JournalTarget()
    assert got.otlp is not None and got.otlp.timeout == 3 and dict(got.otlp.headers) == {"x-token": "abc"}
    assert got.source == "policy.yaml:1"


def test_syslog_true_is_the_local_socket_and_tcp_ipv6_parses() -> None:
    assert _export("audit_export:\n  syslog: true\n").syslog == SyslogTarget("unix", "/dev/log")
    assert _export("audit_export:\n  syslog: {address: 'tcp://[::1]:601'}\n").syslog == SyslogTarget(
        "tcp", "::1", 601
    )


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("audit_export:\n  sylog: true\n", "policy.yaml:2: audit_export.sylog: unknown key (did you mean"),
        ("audit_export:\n  syslog:\n    adress: /dev/log\n", "policy.yaml:3: audit_export.syslog.adress"),
        ("audit_export:\n  syslog:\n    address: dev/log\n", "policy.yaml:3: audit_export.syslog.address"),
        ("audit_export:\n  syslog:\n    address: udp://host\n", "audit_export.syslog.address"),
        ("audit_export:\n  syslog:\n    facility: security\n", "audit_export.syslog.facility: must be one"),
        ("audit_export:\n  otlp:\n    timeout: 5\n", "audit_export.otlp.endpoint: missing"),
        ("audit_export:\n  otlp:\n    endpoint: ftp://x/\n", "audit_export.otlp.endpoint"),
        ("audit_export:\n  otlp:\n    endpoint: http://x/\n    timeout: 0\n", "audit_export.otlp.timeout"),
        ("audit_export:\n  journal: {socket: rel}\n", "audit_export.journal.socket"),
    ],
)
def test_a_mistyped_audit_export_is_an_error_naming_file_line_and_key(text: str, where: str) -> None:
    """A typo that silently disabled export would leave the SIEM blind with nobody told."""
    with pytest.raises(PolicyError, match=re.escape(where)):
        load_policy(text, "policy.yaml")


def test_shim_policy_with_audit_export_is_refused(tmp_path: Path) -> None:
    """Export is one daemon-wide choice; a per-server file that seemed to set it would mislead."""
    shim = tmp_path / "shim.yaml"
    shim.write_text("audit_export:\n  syslog: true\n")
    state = PolicyState.load(tmp_path / "absent.yaml", 0.0)
    with pytest.raises(PolicyError, match=r"shim.yaml:1: audit_export: belongs in the user's policy.yaml"):
        state.for_shim(str(shim))


RFC5424 = re.compile(
    rb"<(?P<pri>\d{1,3})>1 (?P<ts>\S+) (?P<host>\S+) bouncerd (?P<pid>\d+) (?P<msgid>\S+) "
    rb"(?P<sd>\[bouncer@32473 (?:[^\]\\]|\\.)*\]) \xef\xbb\xbf(?P<msg>.*)\Z",
    re.S,
)


def _record(**fields: object) -> tuple[dict[str, object], bytes]:
    chained = chainlib.chain({"ts": "2026-01-02T03:04:05.678Z", **fields}, chainlib.GENESIS)
    return chained, chainlib.encode_line(chained)[:-1]


def test_rfc5424_message_carries_the_line_and_its_chain_hash() -> None:
    record, line = _record(verdict="deny", rule="sink.tainted", tool='a"b]c\\d', server="mail")
    msg = exportformat.rfc5424(record, line, facility=10, hostname="h", pid=42)
    m = RFC5424.fullmatch(msg)
    assert m is not None, msg
    assert int(m["pri"]) == 10 * 8 + 4 and m["ts"] == b"2026-01-02T03:04:05.678Z" and m["msgid"] == b"verdict"
    assert f'hash="{record["hash"]}"'.encode() in m["sd"]
    assert b'tool="a\\"b\\]c\\\\d"' in m["sd"]  # RFC 5424 6.3.3: ", ] and \ escaped
    assert m["msg"] == line and chainlib.record_hash(json.loads(m["msg"])) == record["hash"]


def test_rfc5424_cuts_an_oversized_line_and_says_so() -> None:
    record, line = _record(verdict="allow", reason="x" * (2 * exportformat.SYSLOG_MAX_MESSAGE_BYTES))
    m = RFC5424.fullmatch(exportformat.rfc5424(record, line, facility=1, hostname="h", pid=1))
    assert m is not None and len(m["msg"]) == exportformat.SYSLOG_MAX_MESSAGE_BYTES
    assert b'truncated="true"' in m["sd"] and f'hash="{record["hash"]}"'.encode() in m["sd"]


def test_journal_entry_round_trips_a_value_with_a_newline() -> None:
    record, line = _record(verdict="ask", rule="sink.unproven", reason="two\nlines", tool="t", server="s")
    fields = exportformat.parse_journal_entry(exportformat.journal_entry(record, line, facility=10))
    assert fields["BOUNCER_HASH"] == str(record["hash"]).encode() and fields["BOUNCER_RECORD"] == line
    assert fields["PRIORITY"] == b"5" and fields["SYSLOG_IDENTIFIER"] == b"bouncerd"
    assert b"\n" not in fields["MESSAGE"]


def _dgram_receiver() -> tuple[socket.socket, str]:
    path = tempfile.mktemp(prefix="bx", dir="/tmp")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    return sock, path


def _settled(channel: Channel, offered: int) -> bool:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        p = channel.public()
        if p["sent"] + p["failed"] + p["dropped"] == offered and p["queued"] == 0:
            return True
        time.sleep(0.05)
    return False


def test_collector_that_stops_reading_costs_drops_never_a_blocked_offer() -> None:
    """The receiver never reads: its socket buffer fills, the sender blocks, the queue fills, and
    every further copy is dropped and counted (`offer` returned every time). Then the collector dies:
    what was queued is counted failed, and every copy is accounted for."""
    sock, path = _dgram_receiver()
    try:
        channel = Channel("syslog", lambda: SyslogSender(SyslogTarget("unix", path)))
        offered = 3 * EXPORT_QUEUE_LIMIT
        record, line = _record(verdict="allow", reason="y" * 2000)
        for _ in range(offered):
            channel.offer(record, line)
        assert channel.dropped > 0
        sock.close()
        Path(path).unlink()
        assert _settled(channel, offered), channel.public()
        assert channel.failed > 0
        channel.close(1.0)
    finally:
        sock.close()
        Path(path).unlink(missing_ok=True)


def test_exporter_reports_new_losses_once_in_the_audit_log() -> None:
    sock, path = _dgram_receiver()
    sock.close()  # nobody listens: every send fails
    exporter = Exporter(ExportConfig(syslog=SyslogTarget("unix", path), source="policy.yaml:1"))
    record, line = _record(verdict="allow")
    exporter.offer(record, line)
    assert _settled(exporter.channels[0], 1) and exporter.lost == 1
    appended: list[dict[str, object]] = []
    exporter.report_losses(lambda fields, now: appended.append(fields), 1000.0)
    exporter.report_losses(lambda fields, now: appended.append(fields), 1001.0)  # nothing new
    assert [a["rule"] for a in appended] == ["audit.export_dropped"]
    assert "1 exported copies" in str(appended[0]["reason"])
    exporter.close()
    Path(path).unlink(missing_ok=True)


def test_journal_sender_writes_native_protocol_datagrams() -> None:
    sock, path = _dgram_receiver()
    try:
        sender = JournalSender(JournalTarget(path), facility=10)
        record, line = _record(verdict="deny", rule="budget.exceeded", tool="t", server="s")
        sender.send([(record, line)])
        fields = exportformat.parse_journal_entry(sock.recv(1 << 16))
        assert fields["BOUNCER_HASH"] == str(record["hash"]).encode() and fields["BOUNCER_VERDICT"] == b"deny"
        sender.close()
    finally:
        sock.close()
        Path(path).unlink()


def test_syslog_over_udp_and_tcp_reaches_real_listeners() -> None:
    """UDP: one datagram per record; TCP: octet-counted frames (RFC 6587), so records never run together."""
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(WAIT_SECONDS)
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(1)
    tcp.settimeout(WAIT_SECONDS)
    try:
        records = [_record(verdict="allow", request_id=i) for i in range(3)]
        u = SyslogSender(SyslogTarget("udp", "127.0.0.1", udp.getsockname()[1]))
        u.send(records)
        got = [udp.recv(1 << 16) for _ in records]
        assert [RFC5424.fullmatch(g)["msg"] for g in got] == [line for _, line in records]  # type: ignore[index]
        t = SyslogSender(SyslogTarget("tcp", "127.0.0.1", tcp.getsockname()[1]))
        t.send(records)
        conn, _ = tcp.accept()
        conn.settimeout(WAIT_SECONDS)
        stream = b""
        frames: list[bytes] = []
        while len(frames) < len(records):
            stream += conn.recv(1 << 16)
            while b" " in stream:
                size, _, rest = stream.partition(b" ")
                if len(rest) < int(size):
                    break
                frames.append(rest[: int(size)])
                stream = rest[int(size) :]
        assert [RFC5424.fullmatch(f)["msg"] for f in frames] == [line for _, line in records]  # type: ignore[index]
        conn.close()
        u.close()
        t.close()
    finally:
        udp.close()
        tcp.close()
