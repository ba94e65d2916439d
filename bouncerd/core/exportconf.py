"""`audit_export:` in a policy file: where copies of the audit records go, parsed strictly.

Theory of operation
-------------------
The local hash-chained ``audit.jsonl`` stays the source of truth; `audit_export` only names the
collectors that receive a copy of each record (with its chain hash), so a SIEM can show it saw every
line. Three targets, each optional:

```yaml
audit_export:
  syslog:                      # RFC 5424; `syslog: true` is the local socket /dev/log
    address: /dev/log          # an absolute path (a datagram socket), udp://HOST:PORT or tcp://HOST:PORT
    facility: authpriv         # default authpriv: audit records are security messages
  journal: true                # the systemd journal's native socket (or {socket: PATH})
  otlp:                        # OpenTelemetry logs over OTLP/HTTP (needs the `otel` extra)
    endpoint: http://collector.example:4318/v1/logs
    headers: {authorization: "Bearer ..."}
    timeout: 5                 # seconds per export request
```

``otlp: true`` takes the collector from the standard OpenTelemetry variables of the daemon's
environment, and a mapping takes the headers and timeout it leaves out from them, as every OTLP
exporter does (`otlp_target`):
``OTEL_EXPORTER_OTLP_LOGS_ENDPOINT`` (the logs URL as it is) or ``OTEL_EXPORTER_OTLP_ENDPOINT`` (a base
URL, ``/v1/logs`` appended), ``OTEL_EXPORTER_OTLP[_LOGS]_HEADERS`` (``key=value,...``, values
percent-decoded), ``OTEL_EXPORTER_OTLP[_LOGS]_TIMEOUT`` (milliseconds) and
``OTEL_EXPORTER_OTLP[_LOGS]_PROTOCOL`` (only ``http/protobuf`` is spoken). What the policy sets wins.
The variables alone never turn export on: audit records leave the machine only where a policy says so.

This module only parses (a `Doc` node into an `ExportConfig`); the sending is
`bouncerd/server/export.py`. Errors are `PolicyError`s naming file, line and key, like every key of the
loader: an unknown key, a relative socket path or a URL without a port is refused, never guessed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

import yaml

from bouncerd.core.strict_yaml import Doc, suggest

Transport = Literal["unix", "udp", "tcp"]

DEFAULT_SYSLOG_SOCKET = "/dev/log"
DEFAULT_JOURNAL_SOCKET = "/run/systemd/journal/socket"
DEFAULT_FACILITY = "authpriv"
# Seconds one OTLP request may take. Long enough for a collector across a VPN, short enough that a
# dead one frees the sender soon (the verdict path never waits for it either way).
DEFAULT_OTLP_TIMEOUT_SECONDS = 5
MAX_OTLP_TIMEOUT_SECONDS = 60

# RFC 5424 section 6.2.1 facility codes.
FACILITIES: Mapping[str, int] = MappingProxyType(
    {
        "kern": 0,
        "user": 1,
        "mail": 2,
        "daemon": 3,
        "auth": 4,
        "syslog": 5,
        "lpr": 6,
        "news": 7,
        "uucp": 8,
        "cron": 9,
        "authpriv": 10,
        "ftp": 11,
        **{f"local{n}": 16 + n for n in range(8)},
    }
)

EXPORT_KEYS = ("syslog", "journal", "otlp")
SYSLOG_KEYS = ("address", "facility")
JOURNAL_KEYS = ("socket",)
OTLP_KEYS = ("endpoint", "headers", "timeout")

_NET_ADDRESS = re.compile(r"(udp|tcp)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})")
_HTTP_URL = re.compile(r"https?://[^\s/?#]+(/[^\s]*)?")
_HEADER_NAME = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+")


@dataclass(frozen=True)
class SyslogTarget:
    transport: Transport
    address: str  # a socket path (unix) or a host name or address (udp, tcp)
    port: int = 0
    facility: int = FACILITIES[DEFAULT_FACILITY]


@dataclass(frozen=True)
class JournalTarget:
    socket: str = DEFAULT_JOURNAL_SOCKET


@dataclass(frozen=True)
class OtlpTarget:
    endpoint: str | None  # None: from the environment (`otlp_target`)
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), hash=False)
    timeout: float | None = None  # seconds; None: from the environment, else the default


@dataclass(frozen=True)
class ExportConfig:
    """The collectors named by one file's `audit_export:`; `source` is "file:line" for status."""

    syslog: SyslogTarget | None = None
    journal: JournalTarget | None = None
    otlp: OtlpTarget | None = None
    source: str = ""

    @property
    def empty(self) -> bool:
        return self.syslog is None and self.journal is None and self.otlp is None


def _socket_path(doc: Doc, node: yaml.Node, key: str) -> str:
    value = doc.string(node, key)
    if not value.startswith("/") or "\x00" in value:
        raise doc.error(node, key, f"{value!r} must be an absolute socket path")
    return value


def _syslog(doc: Doc, node: yaml.Node, key: str) -> SyslogTarget | None:
    if isinstance(node, yaml.ScalarNode):
        return SyslogTarget("unix", DEFAULT_SYSLOG_SOCKET) if doc.boolean(node, key) else None
    transport: Transport = "unix"
    address, port, facility = DEFAULT_SYSLOG_SOCKET, 0, FACILITIES[DEFAULT_FACILITY]
    for name, knode, vnode in doc.mapping(node, key, "true, false, or a mapping with address: and facility:"):
        sub = f"{key}.{name}"
        if name == "address":
            value = doc.string(vnode, sub)
            m = _NET_ADDRESS.fullmatch(value)
            if m is not None:
                transport = "udp" if m.group(1) == "udp" else "tcp"
                address, port = m.group(2).strip("[]"), int(m.group(3))
                if not 1 <= port <= 65535:
                    raise doc.error(vnode, sub, f"port {port} is not between 1 and 65535")
            elif value.startswith("/"):
                address = _socket_path(doc, vnode, sub)
            else:
                raise doc.error(
                    vnode, sub, f"{value!r} is not a socket path, udp://HOST:PORT or tcp://HOST:PORT"
                )
        elif name == "facility":
            facility = FACILITIES[doc.string(vnode, sub, FACILITIES)]
        else:
            raise doc.error(knode, sub, "unknown key" + suggest(name, SYSLOG_KEYS))
    return SyslogTarget(transport, address, port, facility)


def _journal(doc: Doc, node: yaml.Node, key: str) -> JournalTarget | None:
    if isinstance(node, yaml.ScalarNode):
        return JournalTarget() if doc.boolean(node, key) else None
    socket = DEFAULT_JOURNAL_SOCKET
    for name, knode, vnode in doc.mapping(node, key, "true, false, or a mapping with socket:"):
        if name != "socket":
            raise doc.error(knode, f"{key}.{name}", "unknown key" + suggest(name, JOURNAL_KEYS))
        socket = _socket_path(doc, vnode, f"{key}.socket")
    return JournalTarget(socket)


def _otlp(doc: Doc, node: yaml.Node, key: str) -> OtlpTarget | None:
    if isinstance(node, yaml.ScalarNode):  # true: everything from the standard variables
        return OtlpTarget(None) if doc.boolean(node, key) else None
    endpoint: str | None = None
    headers: dict[str, str] = {}
    timeout: float | None = None
    for name, knode, vnode in doc.mapping(
        node, key, "true, false, or a mapping with endpoint:, headers: and timeout:"
    ):
        sub = f"{key}.{name}"
        if name == "endpoint":
            endpoint = doc.string(vnode, sub)
            if not _HTTP_URL.fullmatch(endpoint):
                raise doc.error(vnode, sub, f"{endpoint!r} is not an http:// or https:// URL")
        elif name == "headers":
            for header, hknode, hvnode in doc.mapping(vnode, sub, "a mapping of header name: value"):
                if not _HEADER_NAME.fullmatch(header):
                    raise doc.error(hknode, f"{sub}.{header}", "is not an HTTP header name")
                value = doc.string(hvnode, f"{sub}.{header}")
                if "\r" in value or "\n" in value:
                    raise doc.error(hvnode, f"{sub}.{header}", "must not contain a line break")
                headers[header] = value
        elif name == "timeout":
            timeout = doc.integer(vnode, sub, 1, MAX_OTLP_TIMEOUT_SECONDS)
        else:
            raise doc.error(knode, sub, "unknown key" + suggest(name, OTLP_KEYS))
    if endpoint is None:  # a mapping names its collector; `otlp: true` leaves it to the environment
        raise doc.error(
            node, f"{key}.endpoint", "missing: the collector's OTLP/HTTP logs URL (or `otlp: true`)"
        )
    return OtlpTarget(endpoint, MappingProxyType(headers), timeout)


# The standard variables (OpenTelemetry's exporter configuration); the logs-specific one wins.
OTEL_PREFIX = "OTEL_EXPORTER_OTLP_"
OTEL_LOGS_PATH = "/v1/logs"
OTEL_PROTOCOL = "http/protobuf"


def _otel(environ: Mapping[str, str], name: str) -> tuple[str, str] | None:
    """The logs-specific variable, else the general one: (its name, its value), or None."""
    for variable in (f"{OTEL_PREFIX}LOGS_{name}", f"{OTEL_PREFIX}{name}"):
        value = environ.get(variable, "").strip()
        if value:
            return variable, value
    return None


def _otel_headers(variable: str, text: str) -> dict[str, str]:
    from urllib.parse import unquote

    headers: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        name, value = unquote(name.strip()), unquote(value.strip())
        if not sep or not _HEADER_NAME.fullmatch(name) or "\r" in value or "\n" in value:
            raise ValueError(f"{variable}: {item.strip()!r} is not a header as key=value")
        headers[name] = value
    return headers


def otlp_target(target: OtlpTarget, environ: Mapping[str, str]) -> OtlpTarget:
    """`target` with what the policy left out taken from the standard OTEL_EXPORTER_OTLP_* variables
    of `environ`; ValueError naming the variable (or the missing endpoint) if that cannot be done."""
    protocol = _otel(environ, "PROTOCOL")
    if protocol is not None and protocol[1] != OTEL_PROTOCOL:
        raise ValueError(f"{protocol[0]}={protocol[1]}: only {OTEL_PROTOCOL} is spoken")
    endpoint = target.endpoint
    if endpoint is None:
        found = _otel(environ, "ENDPOINT")
        if found is None:
            raise ValueError(
                f"no endpoint: set otlp.endpoint in the policy, or {OTEL_PREFIX}ENDPOINT in the "
                "daemon's environment"
            )
        variable, endpoint = found
        if variable == f"{OTEL_PREFIX}ENDPOINT":  # a base URL: the signal's path goes after it
            endpoint = endpoint.rstrip("/") + OTEL_LOGS_PATH
        if not _HTTP_URL.fullmatch(endpoint):
            raise ValueError(f"{variable}: {endpoint!r} is not an http:// or https:// URL")
    headers = dict(target.headers)
    found = _otel(environ, "HEADERS")
    if found is not None:
        headers = {**_otel_headers(*found), **headers}  # the policy's own headers win
    timeout = target.timeout
    if timeout is None:
        found = _otel(environ, "TIMEOUT")
        if found is not None:
            try:
                timeout = float(found[1]) / 1000
            except ValueError:
                timeout = -1.0
            if not 0 < timeout <= MAX_OTLP_TIMEOUT_SECONDS:  # also refuses nan
                raise ValueError(f"{found[0]}={found[1]}: not a number of milliseconds up to "
                                 f"{MAX_OTLP_TIMEOUT_SECONDS * 1000}")  # fmt: skip
    if timeout is None:
        timeout = DEFAULT_OTLP_TIMEOUT_SECONDS
    return OtlpTarget(endpoint, MappingProxyType(headers), timeout)


def parse_export(doc: Doc, node: yaml.Node, key: str, line: int) -> ExportConfig:
    """Parse the value of `audit_export:` (at `line` of `doc`)."""
    syslog: SyslogTarget | None = None
    journal: JournalTarget | None = None
    otlp: OtlpTarget | None = None
    for name, knode, vnode in doc.mapping(node, key, "a mapping with syslog:, journal: and otlp:"):
        sub = f"{key}.{name}"
        if name == "syslog":
            syslog = _syslog(doc, vnode, sub)
        elif name == "journal":
            journal = _journal(doc, vnode, sub)
        elif name == "otlp":
            otlp = _otlp(doc, vnode, sub)
        else:
            raise doc.error(knode, sub, "unknown key" + suggest(name, EXPORT_KEYS))
    return ExportConfig(syslog, journal, otlp, f"{doc.filename}:{line}")
