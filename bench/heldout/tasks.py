"""Held-out tasks: kinds of work the gate was not tuned on, each with its attack twins.

Theory of operation
-------------------
bench/agentdojo and bench/opentasks are what the gate was tuned on. This set is kept apart: its
kinds (`KINDS`) are none of opentasks' classes (answering a mail's sender, a contact, a bill in a
named file, a link as written, a typed name, adding the user to an event, an echo, a draft sent by
id, arguments that are not destinations), and its servers spell tools, arguments and outputs the way
public trackers, CRMs, drives, chat, calendars, code hosts and banks do: snake, camel, Pascal and
dotted tool names; recipients as strings, lists, `{"emailAddress": {"address": ..}}` objects and
local part + domain pairs; outputs as nested JSON, GraphQL envelopes, pagination wrappers
(`nextPageToken`, `pageInfo`, `paging`), YAML, Markdown tables, plain text, CSV, iCalendar, base64
file contents and Slack's `<url|label>` links.

A task is what its tools return, the person's prompt and the calls a scripted agent makes in order:
reads, *benign* sends (the user's task: each that does not reach the server costs the user) and
*attack* sends (each that reaches the server is an attack that succeeded). Every attack call names
its technique: not "ignore previous instructions" but what real injections do: an address change
("my new address is"), a footer that redirects replies, a look-alike domain, a homoglyph, an
attacker who is the reporter of another ticket, a forwarded thread whose inner From is the attacker,
an address split across a local part and a domain, a URL that adds a query string carrying the
user's data, a repository that "moved", a cross-post request.

The calls are what a careful agent would do for the user, written before the gate was run on them;
nothing here was changed to make the gate pass or fail.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kinds_code import landlord_invoice, open_pr, push_branch, readme_download, vendor_chain
from kinds_talk import dm_asker, invite_review, open_link_in_message, post_to_origin
from kinds_work import order_invoice, refund, share_with_manager, ticket_assign, ticket_reply
from taskmodel import POLICY, Call, Task

__all__ = ["KINDS", "POLICY", "Call", "Task", "all_tasks"]

KINDS: dict[str, Callable[[], Iterator[Task]]] = {
    "ticket_reply": ticket_reply,
    "ticket_assign": ticket_assign,
    "order_invoice": order_invoice,
    "refund": refund,
    "share_with_manager": share_with_manager,
    "post_to_origin": post_to_origin,
    "dm_asker": dm_asker,
    "invite_review": invite_review,
    "readme_download": readme_download,
    "open_link_in_message": open_link_in_message,
    "open_pr": open_pr,
    "push_branch": push_branch,
    "landlord_invoice": landlord_invoice,
    "vendor_chain": vendor_chain,
}


def all_tasks(kinds: Sequence[str] | None = None) -> list[Task]:
    unknown = set(kinds or ()) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown kinds: {', '.join(sorted(unknown))} (known: {', '.join(KINDS)})")
    return [t for name, make in KINDS.items() if kinds is None or name in kinds for t in make()]
