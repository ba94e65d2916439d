"""The consequence family's rows of the rule table (`ruleids`): what a fooled agent does without sending.

Each row is (id, verdicts, meaning, what it stops), in the order a call meets the checks
(`bouncerd/core/consequence.py`, `carried.py`, `onetimecode.py`, `fetchacts.py`); `ruleids` adds the
family's mappings and splices the rows into its one table, where they keep this order.
"""

from __future__ import annotations

from typing import Literal

Verdicts = tuple[Literal["allow", "ask", "deny", "event"], ...]

ROWS: tuple[tuple[str, Verdicts, str, str], ...] = (
    (
        "consequence.dictated_secret",
        ("deny",),
        "a credential call (password, token, key) whose secret first appeared in untrusted free text",
        "an account takeover: the password an injected mail dictates",
    ),
    (
        "consequence.unvouched_secret",
        ("ask",),
        "a credential call whose secret you did not type in this session and no output said",
        "a credential changed to a value the agent chose",
    ),
    (
        "consequence.untrusted_value",
        ("ask",),
        "a destroying, paying, booking or membership call with an argument value seen in untrusted free text"
        " (quoted, after an id word, a capitalised name, a code-like word) or in a source your prompt named,"
        " and not typed by you",
        "deleting the file an injection names, booking the hotel a planted review recommends",
    ),
    (
        "consequence.ordered_act",
        ("deny",),
        "a destroying, paying, booking or membership call whose act text in untrusted output orders the "
        "agent to do (inside orders to the agent: addressed to an AI, overriding its instructions, a system "
        "frame), when your prompt asked for no act of that kind and did not type every value of the call",
        "a booking, deletion or invitation an injection orders without naming its value ('book the most "
        "expensive hotel')",
    ),
    (
        "consequence.key_path",
        ("ask",),
        "a call that does not only read names a path into a place that runs or authenticates as you "
        "(`~/.ssh`, a shell start-up file, an autostart entry, a git hook), in any argument",
        "a download or copy that plants an SSH key, a start-up script or an autostart entry",
    ),
    (
        "consequence.carried_destination",
        ("ask",),
        "a send the sink gate let through whose body, subject or other non-recipient argument carries a link"
        " or address that first appeared in untrusted free text, not typed by you nor in a source your "
        "prompt named",
        "phishing through your own account: an injection has the agent send a trusted colleague its link",
    ),
    (
        "consequence.ordered_link",
        ("deny",),
        "a send whose body, subject or other non-recipient argument carries a link that appeared inside text "
        "giving the agent orders to pass it on (addressed to an AI, overriding its instructions, a system "
        "frame), in any source, and not typed by you",
        "phishing through your own account, dictated: 'send a link www.x.example to Alice' in an injection",
    ),
    (
        "consequence.readable_code",
        ("ask",),
        "a verify or confirm call typing a one-time code you did not type, with no call on that server this "
        "session that the gate judged, let through and that waits for it",
        "an account takeover or purchase confirmed with the code mailed to an inbox the agent reads",
    ),
    (
        "consequence.confirmed_code",
        ("allow",),
        "a verify or confirm call whose one-time code confirms the call on that server this session that the"
        " gate judged and let through (its other arguments judged as usual)",
        "—",
    ),
    (
        "consequence.acting_fetch",
        ("ask",),
        "a fetch whose arguments make it act on the page (submit, click, press, run its script, follow its "
        "form or action) at a URL you did not type, approve or allowlist",
        "a planted link whose page submits a purchase or a form with your session",
    ),
    (
        "consequence.budget",
        ("ask",),
        "a destroying tool with no `max_calls` called more often this session than the default budget",
        "mass deletion by a fooled agent",
    ),
)
