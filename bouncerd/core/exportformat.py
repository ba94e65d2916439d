"""Audit records as collectors read them: RFC 5424 syslog messages and systemd journal entries.

Theory of operation
-------------------
Each exported record is one local audit line: the message body is that line exactly (the JSON the
hash covers, so a SIEM can recompute the chain), and the chain hash, the previous hash and the fields
a SIEM filters on ride as structured data. Pure functions; the sockets are `bouncerd/server/export.py`.

RFC 5424 (syslog): ``<PRI>1 TIMESTAMP HOSTNAME bouncerd PROCID MSGID [bouncer@32473 hash=".." ..] BOM MSG``
with PRI = facility * 8 + severity (deny: warning, ask: notice, others: informational), the record's
own UTC timestamp, MSGID ``verdict`` for a verdict and the rule's first part otherwise (``audit``,
``policy``, ...). 32473 is the enterprise number RFC 5612 reserves for examples and documentation:
Bouncer has none of its own, and an SD-ID with ``@`` is what RFC 5424 section 7.2.2 asks for private
names. Over TCP a message is framed by octet counting (RFC 6587 section 3.4.1).

OTLP (`otel_attributes`): each log record carries ``bouncer.hash``, ``bouncer.prev`` and
``bouncer.<field>`` for the summary fields, and beside them the attributes of OpenTelemetry's
semantic conventions for MCP and GenAI that collectors and dashboards already key on: for a verdict
on a request, ``mcp.method.name`` (``tools/call``, ``resources/read``, ``prompts/get``, ...) and
``gen_ai.tool.name`` / ``gen_ai.operation.name`` (``execute_tool``) for a tool call; for any record
of a session, ``mcp.session.id`` (the session's key), and ``jsonrpc.request.id`` where the record
names the request.

Journal (the native protocol of ``/run/systemd/journal/socket``): one datagram of ``FIELD=value``
lines; a value holding a newline is sent as ``FIELD``, newline, its length as 64-bit little endian,
the bytes, newline. Fields: MESSAGE (a one-line summary), PRIORITY, SYSLOG_IDENTIFIER, SYSLOG_FACILITY
and BOUNCER_* (HASH, PREV, VERDICT, RULE, TOOL, SERVER, SESSION, RECORD: the line).
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Mapping
from typing import Any

APP_NAME = "bouncerd"
SD_ID = "bouncer@32473"
# rsyslog's default maxMessageSize is 8 KiB, and many collectors cut there: a longer line is cut to
# this and flagged (truncated="true"); the hash in the structured data still names the whole line.
SYSLOG_MAX_MESSAGE_BYTES = 8 * 1024
# The journal takes larger datagrams only through a memfd; 64 KiB stays far below the socket's limit.
JOURNAL_MAX_RECORD_BYTES = 64 * 1024

SEVERITY = {"deny": 4, "ask": 5, "allow": 6}  # RFC 5424 6.2.1: warning, notice, informational
DEFAULT_SEVERITY = 6
# The fields a collector filters on, besides the hashes (which every record has).
SUMMARY_FIELDS = ("verdict", "rule", "tool", "server", "session")

_SD_ESCAPE = re.compile(r'["\\\]]')
_PRINTUSASCII = re.compile(r"[^\x21-\x7e]")


# The MCP method a verdict record's `kind` stands for (absent: a tools/call). A resource verdict may
# also be a subscribe; resources/read is the one that carries data back.
MCP_METHODS = {
    "tool": "tools/call",
    "resource": "resources/read",
    "prompt": "prompts/get",
    "completion": "completion/complete",
    "message": "sampling/createMessage",
    "answer": "elicitation/create",
}
GEN_AI_EXECUTE_TOOL = "execute_tool"


def otel_attributes(record: Mapping[str, Any]) -> dict[str, str]:
    """The attributes of one OTLP log record: Bouncer's own, then the semantic conventions'."""
    attributes = {"bouncer.hash": str(record.get("hash", "")), "bouncer.prev": str(record.get("prev", ""))}
    for name in SUMMARY_FIELDS:
        value = record.get(name)
        if value is not None:
            attributes[f"bouncer.{name}"] = str(value)
    if record.get("session") is not None:
        attributes["mcp.session.id"] = str(record["session"])
    if record.get("request_id") is not None:
        attributes["jsonrpc.request.id"] = str(record["request_id"])
    if record.get("verdict") is not None and record.get("tool") is not None:
        kind = record.get("kind") or "tool"
        method = MCP_METHODS.get(str(kind))
        if method is not None:
            attributes["mcp.method.name"] = method
        if kind == "tool":
            attributes["gen_ai.tool.name"] = str(record["tool"])
            attributes["gen_ai.operation.name"] = GEN_AI_EXECUTE_TOOL
    return attributes


def severity(record: Mapping[str, Any]) -> int:
    verdict = record.get("verdict")
    if isinstance(verdict, str) and verdict in SEVERITY:
        return SEVERITY[verdict]
    rule = record.get("rule")
    if isinstance(rule, str) and ("failed" in rule or "dropped" in rule or "repaired" in rule):
        return 4
    return DEFAULT_SEVERITY


def msgid(record: Mapping[str, Any]) -> str:
    if record.get("verdict") is not None:
        return "verdict"
    rule = record.get("rule")
    head = rule.split(".", 1)[0] if isinstance(rule, str) and rule else "audit"
    return _header_token(head, 32)


def _header_token(text: str, limit: int) -> str:
    token = _PRINTUSASCII.sub("_", text)[:limit]
    return token or "-"


def _sd_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return _SD_ESCAPE.sub(lambda m: "\\" + m.group(0), text)


def structured_data(record: Mapping[str, Any], *, truncated: bool = False) -> str:
    params = [f'hash="{_sd_value(record.get("hash", ""))}"', f'prev="{_sd_value(record.get("prev", ""))}"']
    for name in SUMMARY_FIELDS:
        value = record.get(name)
        if value is not None:
            params.append(f'{name}="{_sd_value(value)}"')
    if truncated:
        params.append('truncated="true"')
    return f"[{SD_ID} {' '.join(params)}]"


def rfc5424(record: Mapping[str, Any], line: bytes, *, facility: int, hostname: str, pid: int) -> bytes:
    """One RFC 5424 message for one audit line (`line` without its newline)."""
    pri = facility * 8 + severity(record)
    ts = record.get("ts")
    stamp = ts if isinstance(ts, str) and ts else "-"
    truncated = len(line) > SYSLOG_MAX_MESSAGE_BYTES
    body = line[:SYSLOG_MAX_MESSAGE_BYTES] if truncated else line
    header = (
        f"<{pri}>1 {_header_token(stamp, 64)} {_header_token(hostname, 255)} {APP_NAME} {pid} "
        f"{msgid(record)} {structured_data(record, truncated=truncated)} "
    )
    return header.encode("utf-8") + b"\xef\xbb\xbf" + body


def octet_counted(message: bytes) -> bytes:
    """RFC 6587 framing for syslog over TCP: the length, a space, the message."""
    return str(len(message)).encode("ascii") + b" " + message


def summary(record: Mapping[str, Any]) -> str:
    """A one-line MESSAGE for the journal: what happened, to which tool, and why."""
    parts = [str(record.get("verdict") or record.get("rule") or "audit")]
    if record.get("tool"):
        parts.append(f"{record.get('server')}/{record.get('tool')}")
    if record.get("verdict") and record.get("rule"):
        parts.append(f"[{record.get('rule')}]")
    reason = record.get("reason")
    if isinstance(reason, str) and reason:
        parts.append(reason.replace("\n", " ")[:500])
    return "bouncer: " + " ".join(parts)


def _journal_field(name: str, value: bytes) -> bytes:
    if b"\n" in value:
        return name.encode("ascii") + b"\n" + struct.pack("<Q", len(value)) + value + b"\n"
    return name.encode("ascii") + b"=" + value + b"\n"


def journal_entry(record: Mapping[str, Any], line: bytes, *, facility: int) -> bytes:
    """One datagram of the journal's native protocol for one audit line."""
    fields: list[tuple[str, bytes]] = [
        ("MESSAGE", summary(record).encode("utf-8")),
        ("PRIORITY", str(severity(record)).encode("ascii")),
        ("SYSLOG_IDENTIFIER", APP_NAME.encode("ascii")),
        ("SYSLOG_FACILITY", str(facility).encode("ascii")),
        ("BOUNCER_HASH", str(record.get("hash", "")).encode("utf-8")),
        ("BOUNCER_PREV", str(record.get("prev", "")).encode("utf-8")),
    ]
    for name in SUMMARY_FIELDS:
        value = record.get(name)
        if value is not None:
            fields.append((f"BOUNCER_{name.upper()}", str(value).encode("utf-8")))
    if len(line) <= JOURNAL_MAX_RECORD_BYTES:
        fields.append(("BOUNCER_RECORD", line))
    else:
        fields.append(("BOUNCER_TRUNCATED", b"1"))
    return b"".join(_journal_field(n, v) for n, v in fields)


def parse_journal_entry(data: bytes) -> dict[str, bytes]:
    """The fields of one native-protocol datagram (for tests and for `bouncerctl`-side checks)."""
    out: dict[str, bytes] = {}
    pos = 0
    while pos < len(data):
        nl = data.index(b"\n", pos)
        eq = data.find(b"=", pos, nl)
        if eq >= 0:
            out[data[pos:eq].decode("ascii")] = data[eq + 1 : nl]
            pos = nl + 1
        else:
            name = data[pos:nl].decode("ascii")
            (size,) = struct.unpack("<Q", data[nl + 1 : nl + 9])
            out[name] = data[nl + 9 : nl + 9 + size]
            pos = nl + 9 + size + 1
    return out
