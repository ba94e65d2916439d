"""The shim's own tools/list, sans I/O: what it knows of the server's tools, and how it learns them.

Theory of operation
-------------------
bouncerd judges a tools/call against the server's pins and its current tool list, which it learns from
the shim's ``tools`` op. A client that calls before it lists (a raw stdio client, one that caches tool
lists across connections, a 2026-07-28 client, ``inspector --method tools/call``) would have every call
refused as unlisted, so the shim lists the tools itself whenever it must decide a call and does not know
the list:

- The list is *known* once a complete listing has passed: the client's own (`ToolList.client_page`:
  every page of a chain that began without a cursor) or the shim's. A
  ``notifications/tools/list_changed`` makes it stale (`stale`): the next call lists again, so a tool
  changed since it was pinned is judged by its new form (and refused) even when the client never
  lists again.
- The shim's request ids are ``bouncer-tools-<64 random bits>-<n>`` (`claims`): no client can predict
  them, their responses are consumed (never relayed, never observed) and a client request using the
  space is refused by the relay. Only the id of the page in flight is read; a late answer is dropped.
- Every page is followed (``nextCursor``) up to MAX_PAGES pages, MAX_TOOLS tools and MAX_LIST_BYTES,
  within LIST_TIMEOUT_SECONDS; an error, a malformed result, a repeated cursor or a bound passed fails the
  listing (`Failed`: the reason each waiting call is refused with) and the next call tries again.
- In the 2026-07-28 era every request carries the client's envelope in ``_meta``: the shim's copy the
  protocol version, client info and capabilities of the call that needed the list.

`SelfLister` is the relay's side: calls wait (`HeldCalls.hold(..., listed=False)`) until the session is
initialized (2025-11-25: the upstream answered ``initialize`` and the client sent
``notifications/initialized``; at once in the 2026-07-28 era or when the client never initialized),
then the list is fetched, remembered for the resync and reported as a ``tools`` op, exactly as a
client's listing is, so pins apply; only after bouncerd acknowledged it are the calls' verdicts
requested. With the link not up the list is only remembered (the resync carries it before any verdict).
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Mapping
from typing import Any, Final

from bouncer_shim import jsonrpc
from bouncer_shim.actions import Action, Diagnose, SendUpstream
from bouncer_shim.held import Held, HeldCalls
from bouncer_shim.lines import MAX_LINE_BYTES
from bouncer_shim.sync import MAX_REMEMBERED_TOOLS, LinkState, LinkSync

ID_PREFIX: Final = "bouncer-tools-"
# Random bits in the shim's tools/list ids: neither the client nor the server can guess them.
ID_RANDOM_BYTES: Final = 8
# Pages followed before the listing is refused. Servers page at 50-100 tools (the TypeScript SDK's
# examples, GitHub's server); 100 pages is far past any real server and stops a cursor that never ends.
MAX_PAGES: Final = 100
# Tools accepted over all pages: what the link remembers for a resync (sync.MAX_REMEMBERED_TOOLS).
MAX_TOOLS: Final = MAX_REMEMBERED_TOOLS
# Bytes of all pages together (what the shim holds while it lists). The list goes to bouncerd in one
# frame (wire.MAX_FRAME_BYTES, 72 MiB), so more could never be reported; real lists are far under a
# megabyte (about 2 KB a tool).
MAX_LIST_BYTES: Final = MAX_LINE_BYTES
# The whole listing, every page: a server lists its tools in milliseconds (npx-started ones a few
# seconds after start-up, and we only list after initialize). Clients give up on a call after 60 s
# (the TypeScript SDK's default), so the refusal with its reason must come well before that.
LIST_TIMEOUT_SECONDS: Final = 30.0
NOW: Final = float("-inf")  # the deadline of a listing whose clock has not started: due at once

# The 2026-07-28 envelope keys copied from the call that needed the list (never its log level: the
# client's logs are not the shim's business, nor a progress token).
ENVELOPE_KEYS: Final = (
    jsonrpc.PROTOCOL_VERSION_KEY,
    jsonrpc.CLIENT_INFO_KEY,
    jsonrpc.CLIENT_CAPABILITIES_KEY,
)
WAITING_FOR_SESSION: Final = (
    "a tools/call came before the session was initialized; it waits for the server's initialize result "
    "and the client's notifications/initialized before Bouncer lists the server's tools to check it"
)
RESERVED_ID_MESSAGE: Final = "Invalid Request: ids starting with this prefix are reserved by bouncer-shim"


class Failed:
    """The listing failed: why, in words for the refusal of each waiting call."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class Knowledge(enum.Enum):
    UNKNOWN = "unknown"  # never listed, or stale: the next call lists
    LISTING = "listing"  # the shim's own tools/list is in flight upstream
    REPORTING = "reporting"  # the full list went to bouncerd; its ack is awaited
    KNOWN = "known"


class ToolList:
    """The shim's knowledge of the tool list and its own paged listing (no link, no held calls)."""

    __slots__ = ("_bytes", "_chain", "_count", "_current", "_cursors", "_deadline", "_meta", "_pages",
                 "_stale", "_tools", "prefix", "state")  # fmt: skip

    def __init__(self, token: bytes | None = None) -> None:
        random = token if token is not None else os.urandom(ID_RANDOM_BYTES)
        self.prefix = f"{ID_PREFIX}{random.hex()}-"
        self.state = Knowledge.UNKNOWN
        self._count = 0
        self._current: str | None = None  # the id of the page in flight
        self._chain = False  # the client is paging through a listing that began without a cursor
        self._stale = False  # a list_changed came while the shim was listing
        self._meta: dict[str, Any] | None = None
        self._tools: list[Any] = []
        self._cursors: set[str] = set()
        self._pages = 0
        self._bytes = 0
        self._deadline: float | None = None

    @property
    def listing(self) -> bool:
        return self.state is Knowledge.LISTING

    def claims(self, request_id: Any) -> bool:
        """Whether `request_id` is in the shim's tools/list id space."""
        return isinstance(request_id, str) and request_id.startswith(self.prefix)

    # ---- what the client and the server say -------------------------------------------------------

    def stale(self) -> None:
        """The server's tools changed (list_changed): list again on the next call."""
        self._chain = False
        if self.state is Knowledge.KNOWN:
            self.state = Knowledge.UNKNOWN
        elif self.state is not Knowledge.UNKNOWN:
            self._stale = True

    def client_page(self, paged: bool, next_cursor: Any) -> None:
        """A page of the client's own listing passed (`paged`: it was asked for with a cursor)."""
        if not paged:
            self._chain = True
        if self.state not in (Knowledge.UNKNOWN, Knowledge.KNOWN):
            return  # the shim's own listing goes on and decides
        if not self._chain:
            return  # a page of a listing begun before (a cached cursor): not the whole list
        if _more(next_cursor):
            self.state = Knowledge.UNKNOWN  # the daemon holds part of the list until the last page
        else:
            self._chain = False
            self.state = Knowledge.KNOWN

    # ---- the shim's own listing ----------------------------------------------------------------------

    def start(self, meta: Any) -> bytes:
        """The first page's request (the listing is under way)."""
        self.state = Knowledge.LISTING
        self._stale = False
        self._tools, self._cursors, self._pages, self._bytes = [], set(), 0, 0
        self._deadline = None
        self._meta = {k: meta[k] for k in ENVELOPE_KEYS if k in meta} if isinstance(meta, Mapping) else None
        return self._request(None)

    def page(self, message: Mapping[str, Any], size: int) -> bytes | list[Any] | Failed | None:
        """The upstream's response (a line of `size` bytes) to one of the shim's ids: the next page's
        request, the full list, a failure, or None (a late answer to a listing given up: dropped)."""
        if self.state is not Knowledge.LISTING or message.get("id") != self._current:
            return None
        result = message.get("result")
        if "result" not in message:
            return self.fail(f"the server answered tools/list with an error ({_error_text(message)})")
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return self.fail("the server's tools/list result holds no list of tools")
        self._pages += 1
        self._bytes += size
        self._tools.extend(result["tools"])
        if len(self._tools) > MAX_TOOLS:
            return self.fail(f"the server lists more than {MAX_TOOLS} tools")
        if self._bytes > MAX_LIST_BYTES:
            return self.fail(f"the server's tool list exceeds {MAX_LIST_BYTES} bytes")
        cursor = result.get("nextCursor")
        if not _more(cursor):
            if cursor is not None and cursor != "":
                return self.fail("the server's tools/list result has a nextCursor that is not a string")
            tools, self._tools, self._cursors, self._current = self._tools, [], set(), None
            self.state = Knowledge.REPORTING
            return tools
        assert isinstance(cursor, str)
        if cursor in self._cursors:
            return self.fail("the server's tools/list pages loop (a nextCursor came back)")
        if self._pages >= MAX_PAGES:
            return self.fail(f"the server's tool list runs past {MAX_PAGES} pages")
        self._cursors.add(cursor)  # bounded with the pages: MAX_LIST_BYTES
        return self._request(cursor)

    def settled(self) -> None:
        """The list went where it goes (bouncerd acknowledged it, or the resync will carry it)."""
        self.state = Knowledge.UNKNOWN if self._stale else Knowledge.KNOWN
        self._stale = False

    def deadline(self) -> float | None:
        if self.state is not Knowledge.LISTING:
            return None
        return self._deadline if self._deadline is not None else NOW

    def expired(self, now: float) -> Failed | None:
        """A failure if the listing ran out of time; starts its clock on the first call after `start`."""
        if self.state is not Knowledge.LISTING:
            return None
        if self._deadline is None:
            self._deadline = now + LIST_TIMEOUT_SECONDS
            return None
        if now < self._deadline:
            return None
        return self.fail(f"the server did not list its tools within {LIST_TIMEOUT_SECONDS:.0f} s")

    def _request(self, cursor: str | None) -> bytes:
        request_id = f"{self.prefix}{self._count}"
        self._count += 1
        self._current = request_id
        params: dict[str, Any] = {}
        if cursor is not None:
            params["cursor"] = cursor
        if self._meta:
            params["_meta"] = self._meta
        line = jsonrpc.request_line(request_id, "tools/list", params)
        if line is None:  # an envelope JSON cannot write (the client's own parse produced it): go without
            params.pop("_meta", None)
            line = jsonrpc.request_line(request_id, "tools/list", params)
        assert line is not None  # a string id and a string cursor always serialise
        return line

    def fail(self, reason: str) -> Failed:
        """The listing cannot go on (also: the answer was too long to read, bouncerd refused the list)."""
        self.state = Knowledge.UNKNOWN
        self._current = None
        self._tools, self._cursors = [], set()
        return Failed(reason)


def _more(cursor: Any) -> bool:
    return isinstance(cursor, str) and cursor != ""


def _error_text(message: Mapping[str, Any]) -> str:
    error = message.get("error")
    if isinstance(error, dict):
        return f"{error.get('code', 'error')}: {error.get('message', '')}"
    return "no reason given"


def refusal(reason: str) -> str:
    return f"Bouncer could not read this server's tool list to check the call: {reason}."


class SelfLister:
    """The relay's side of the shim's own listing: waiting calls, session readiness, the report."""

    __slots__ = ("_actions", "_answered", "_held", "_initialized", "_initializing", "_meta", "_refuse",
                 "_said_waiting", "_sync", "tools")  # fmt: skip

    def __init__(
        self,
        sync: LinkSync,
        held: HeldCalls,
        actions: list[Action],
        refuse: Callable[[Held, str], None],
        token: bytes | None = None,
    ) -> None:
        self.tools = ToolList(token)
        self._sync = sync
        self._held = held
        self._actions = actions
        self._refuse = refuse  # the relay's refusal of a held call with a reason
        self._initializing = False  # the client sent initialize (2025-11-25 and before)
        self._answered = False  # the upstream answered it
        self._initialized = False  # the client sent notifications/initialized
        self._meta: Any = None  # the _meta of the last call that waits (its 2026-07-28 envelope)
        self._said_waiting = False

    @property
    def needed(self) -> bool:
        """Whether a tools/call must wait for the tool list."""
        return self.tools.state is not Knowledge.KNOWN

    # ---- the session -------------------------------------------------------------------------------

    def client_initialize(self) -> None:
        self._initializing, self._answered, self._initialized = True, False, False

    def upstream_initialize(self, ok: bool) -> None:
        """The upstream answered initialize (`ok`: with a result; after an error nothing waits for it)."""
        self._answered = True
        if not ok:
            self._initializing = False
        self._start_if_ready(modern=False)

    def client_initialized(self) -> None:
        """The client's notifications/initialized went upstream (the shim's request goes after it)."""
        self._initialized = True
        self._start_if_ready(modern=False)

    # ---- calls ---------------------------------------------------------------------------------------

    def wait(self, held: Held, meta: Any, *, modern: bool) -> None:
        """Hold a call until the tool list is known, and start the listing if the session allows."""
        self._held.hold(held, link_up=False, listed=False)
        self._meta = meta
        self._start_if_ready(modern=modern)

    def _start_if_ready(self, *, modern: bool) -> None:
        if self.tools.state is not Knowledge.UNKNOWN or not self._held.unlisted:
            return
        if not modern and self._initializing and not (self._answered and self._initialized):
            if not self._said_waiting:  # a client that never sends it would wait without a word
                self._said_waiting = True
                self._actions.append(Diagnose(WAITING_FOR_SESSION))
            return  # 2025-11-25: a request before the session is initialized would be refused
        self._actions.append(SendUpstream(self.tools.start(self._meta)))

    def upstream_response(self, message: Mapping[str, Any], size: int) -> None:
        """A response in the shim's id space, a line of `size` bytes (consumed: the client never sees it)."""
        outcome = self.tools.page(message, size)
        if isinstance(outcome, bytes):
            self._actions.append(SendUpstream(outcome))
        elif isinstance(outcome, Failed):
            self._failed(outcome)
        elif outcome is not None:
            self._report(outcome)

    def upstream_oversized(self, size: int) -> None:
        if self.tools.listing:
            self._failed(self.tools.fail(f"its tools/list answer of {size} bytes exceeds the line limit"))

    def tick(self, now: float) -> None:
        if (failure := self.tools.expired(now)) is not None:
            self._failed(failure)

    def _report(self, tools: list[Any]) -> None:
        sync = self._sync
        sync.remember_tools(tools, paged=False)
        state = sync.state
        if state is LinkState.UP:
            if not sync.request("tools", self, {"tools": tools}):
                self._failed(self.tools.fail("the list cannot be sent to bouncerd"))
            return  # REPORTING: the verdicts wait for the ack (`reported`)
        if state is LinkState.SYNCING:  # the link is UP only once this is acknowledged too
            sync.request("tools", None, {"tools": tools}, sync=True)
        self.tools.settled()  # CONNECTING: the resync carries it; DOWN: the calls were refused
        self._release()

    def reported(self, ok: bool, error: str) -> None:
        """bouncerd answered the ``tools`` op of the shim's own listing."""
        if ok:
            self.tools.settled()
            self._release()
        else:
            self._failed(self.tools.fail(f"bouncerd refused it ({error})"))

    def link_lost(self) -> None:
        """The link went down: a report in flight is remembered for the resync (the relay refuses the
        calls that waited)."""
        if self.tools.state is Knowledge.REPORTING:
            self.tools.settled()

    def _release(self) -> None:
        """The list is known: the waiting calls go on to their verdicts (now, or once the link is up)."""
        up = self._sync.state is LinkState.UP
        for held in self._held.take_unlisted():
            if held.dropped:
                continue
            if not up:
                self._held.wait(held)
            elif not self._held.request_verdict(held):
                self._refuse(held, jsonrpc.UNENCODABLE_REASON)

    def _failed(self, failure: Failed) -> None:
        for held in self._held.take_unlisted():
            self._refuse(held, refusal(failure.reason))
