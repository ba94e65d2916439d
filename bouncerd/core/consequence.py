"""Consequential calls: what a call destroys, grants, pays or books, judged by where its arguments came from.

Theory of operation
-------------------
The sink gate judges where a call sends. A fooled agent does harm without sending too: it deletes the
file an injected mail names, books the hotel a planted review recommends, sets the password the
injection dictates. Such a call is *consequential*, of one class (`rules.Consequence`):

- ``destroy``: deletes, removes, purges, revokes (a pack's ``deletion: true`` is this class);
- ``credential``: changes a password, a token, a key, a recovery address, a second factor;
- ``payment``: pays, transfers, orders, buys, books, reserves;
- ``membership``: changes who is a member of something or what they may do.

Packs say it (``consequence:``); the fallback reads it from the tool's name, and from an explicit
``destructiveHint: true`` annotation (`classify`). A name whose verb reads (`get_password`,
`list_orders`) is never consequential.

Each argument value of a consequential call is traced as a destination is (`judge`), in the one taint
index: typed by the user or approved (`sinkgate.trusted_reason`) passes; seen as a destination or as a
*said* value (`said`) in untrusted free text is the injection's signature; seen only where an output
lists it (an identity field, a listing's whole value) or nowhere passes. Of a send (a booking whose
payee is its sink), only the sink parameters are read here: the sink gate judged them as
destinations, this reads them as values. Verdicts:

- a credential value that untrusted free text dictated: denied (``consequence.dictated_secret``);
- a credential value the user did not type and no output said: asked (``consequence.unvouched_secret``);
- any other value from untrusted free text, or any value from a source the user's prompt named: asked
  (``consequence.untrusted_value``), with the provenance in the question;
- a destroying tool with no ``max_calls`` past `DEFAULT_DESTROY_BUDGET` attempts in the session: asked
  (``consequence.budget``); a ``max_calls`` in policy replaces the default.

A fetch that also acts (saves into a key place, submits, clicks, runs the page's script) is judged
for that act (`fetchacts`); one that only reads stays allowed.

A send the sink gate let through is also judged for what it carries (`carried`): a link in its body
that first appeared in untrusted free text the user never pointed to is asked
(``consequence.carried_destination``): the injection's phishing sent from the user's own account.

Key places: a call that does not only read and names, in any argument, a path into a place that runs
or authenticates as the user (``~/.ssh``, a shell start-up file, an autostart entry, a launch agent,
a git hook, cloud and signing credentials: `KEY_PLACE`) is asked (``consequence.key_path``), whatever
the argument is called: a download's target, a copy's or move's destination, an extraction path.

Short values (a file id ``13``) are judged by position: free text says one only quoted or after an id
word (`said`), so a number in prose does not taint the id of the file the agent chose from a listing;
and the prompt vouches for one only in those positions too (`_trusted`: "on June 13" is a date).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from itertools import pairwise
from typing import Any, Final

from bouncerd.core import canon, carried, fallback, fallback_words, fetchacts, said, sinkgate, typed
from bouncerd.core.model import Provenance, Verdict
from bouncerd.core.rules import Consequence, ToolRule
from bouncerd.core.taint import Hit

# Calls of one destroying tool in a session before a person is asked (policy `max_calls` replaces it).
DEFAULT_DESTROY_BUDGET: Final = 5
MAX_JUDGED_VALUE_CHARS: Final = 200  # a longer value is a body of text, not a value an injection dictates
SHORT_VALUE_CHARS: Final = 6  # shorter values (ids, numbers) are judged by position, typed ones too


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


DESTROY_WORDS = fallback_words.DELETE_WORDS | _set("revoke deactivate terminate uninstall")
CREDENTIAL_WORDS = _set(
    "password passwords passwd passphrase credential credentials token tokens apikey secret secrets 2fa mfa "
    "otp totp recovery sshkey gpgkey"
)
# A key is a credential only with what kind of key it is: `add_ssh_key`, not `set_key` of a store.
CREDENTIAL_KEY_KINDS = _set("ssh gpg pgp api deploy access signing private public auth")
PAYMENT_WORDS = _set(
    "pay payment payments purchase buy order checkout transfer book booking reserve reservation charge "
    "donate tip remit wire"
)
MEMBERSHIP_WORDS = _set(
    "member members membership permission permissions role roles collaborator collaborators access acl acls "
    "admin admins owner owners grant invite"
)
# Argument names that hold the secret of a credential call (the rest are judged as any value).
SECRET_PARAM_WORDS = _set("password passwd passphrase secret token key code otp pin credential value")


def classify(
    tool: str, annotations: Mapping[str, Any] | None = None
) -> tuple[Consequence | None, str | None]:
    """The consequence a tool's name says, with the note that explains it. A reading verb never
    becomes consequential; an explicit `destructiveHint: true` on a tool that does not read is a
    destruction when its name says nothing else."""
    parts = fallback.words(tool)
    kind, verb = fallback_words.verb_of(parts)
    if kind in ("read", "fetch") or (
        kind == "probe" and fallback_words.PROBE_VERBS.get(verb or "") == "read"
    ):
        return None, None
    names = set(parts) | {a + b for a, b in pairwise(parts)}  # `2fa` is split into 2, fa; `api_key`
    keyed = "key" in names and bool(CREDENTIAL_KEY_KINDS & names)
    found: tuple[Consequence, frozenset[str]] | None = None
    if CREDENTIAL_WORDS & names or keyed:
        found = "credential", (CREDENTIAL_WORDS & names) or frozenset({"key"})
    elif DESTROY_WORDS & names:
        found = "destroy", DESTROY_WORDS & names
    elif PAYMENT_WORDS & names:
        found = "payment", PAYMENT_WORDS & names
    elif MEMBERSHIP_WORDS & names:
        found = "membership", MEMBERSHIP_WORDS & names
    if found is not None:
        return found[0], f"tool name part {sorted(found[1])[0]!r} marks a consequential call ({found[0]})"
    if annotations is not None and annotations.get("destructiveHint") is True and kind is not None:
        return "destroy", "annotation destructiveHint marks a consequential call (destroy)"
    return None, None


def of(rule: ToolRule) -> Consequence | None:
    """The consequence class a rule gives its tool (`deletion: true` is a destruction)."""
    if rule.consequence == "none":
        return None
    if rule.consequence:
        return rule.consequence
    return "destroy" if rule.deletion else None


def _where(prov: Provenance | None) -> str:
    if prov is None:
        return "in earlier untrusted output (details evicted from memory)"
    tool = f"/{prov.tool}" if prov.tool else ""
    field = f", field {prov.field}" if prov.field else ""
    named = f", a source your prompt named ({prov.named})" if prov.named else ""
    return f"in the output of {prov.server}{tool} (request {prov.request_id!r}{field}{named})"


def _from_text(
    value: str, key_hit: Callable[[str], Hit | None], lookup: Callable[[str], Hit | None]
) -> Hit | None:
    """The sighting that makes a value the output's and not the user's: free text (said, or as a
    destination), a source the prompt named, or forgotten (evicted: asked, never allowed)."""
    key = said.said_key(value)
    hits = [key_hit(key) if key is not None else None]
    if canon.canonicalize(value).kind != "text":
        hits.append(lookup(value))
    for hit in hits:
        if hit is None:
            continue
        if hit.state != "tainted" or not hit.identity_only or (hit.provenance and hit.provenance.named):
            return hit
    return None


def _trusted(dest: sinkgate.Destination, trust: sinkgate.Trust) -> bool:
    """Typed, approved or allowlisted. A short value (`13`) the prompt typed vouches only where the
    prompt said it as a value (quoted, after an id word: its said key is vouched): "on June 13" types
    a date, not the id of a file an injection names."""
    typed_as = typed.typed_key(dest.value)
    if typed_as is None or len(typed.unmarked(typed_as)) >= SHORT_VALUE_CHARS:
        return sinkgate.trusted_reason(dest, trust) is not None
    if said.said_key(dest.value) in trust.destinations:
        return True
    return any(k in trust.destinations for k in canon.keys(dest.value, exact=True))


def trusted_value(dest: sinkgate.Destination, trust: sinkgate.Trust) -> bool:
    """Whether the user typed (or approved) this argument value, judged by position for a short one."""
    return _trusted(dest, trust)


def _judged(rule: ToolRule, arguments: Mapping[str, Any]) -> Iterable[sinkgate.Destination]:
    """The argument values a consequential call is judged by: a send's sink parameters (its payee),
    or every value of any other call."""
    values = list(sinkgate.leaves(arguments))
    if rule.exfiltrating and rule.sink_params:
        top = set(rule.sink_params)
        values = [d for d in values if d.parameter.split(".", 1)[0].split("[", 1)[0] in top]
    return [d for d in values if len(d.value.strip()) <= MAX_JUDGED_VALUE_CHARS]


def judged_values(rule: ToolRule, arguments: Mapping[str, Any]) -> list[sinkgate.Destination]:
    """The argument values a consequential call is judged by (`_judged`)."""
    return list(_judged(rule, arguments))


def judge(
    tool: str,
    rule: ToolRule,
    arguments: Mapping[str, Any],
    *,
    trust: sinkgate.Trust,
    key_hit: Callable[[str], Hit | None],
    lookup: Callable[[str], Hit | None],
    attempts: int,
) -> Verdict | None:
    """The verdict on a consequential call (see the module docstring), or None when nothing objects.
    A send is also judged for what it carries (`carried`): a link planted in free text, passed on."""
    kind = of(rule)
    if kind is None:
        return carried.verdict(tool, rule, arguments, trust=trust, key_hit=key_hit) or fetchacts.verdict(
            tool, rule, arguments, trust=trust, lookup=lookup, key_place=key_place
        )
    what = f"{tool} is a consequential call ({kind})"
    values = list(_judged(rule, arguments))
    secret_params = [
        d for d in values if SECRET_PARAM_WORDS & set(fallback.words(d.parameter.split(".")[-1]))
    ]
    secrets = {id(d) for d in (secret_params or values)} if kind == "credential" else set()
    for d in values:
        value = d.value.strip()
        if _trusted(d, trust):
            continue
        hit = _from_text(value, key_hit, lookup)
        secret = id(d) in secrets
        if hit is not None:
            prov = hit.provenance
            where = _where(prov)
            if secret and prov is not None and not prov.named:
                return Verdict(
                    "deny",
                    "consequence.dictated_secret",
                    f"{what}: its argument {d.parameter!r} is a secret that first appeared {where}, "
                    f"not one you typed: the output chose it",
                    parameter=d.parameter,
                    provenance=prov,
                )
            return Verdict(
                "ask",
                "consequence.untrusted_value",
                f"{what}: its argument {d.parameter!r} is {sinkgate.shown(value)}, which appeared {where}, "
                f"not typed by you",
                parameter=d.parameter,
                provenance=prov,
            )
        if secret:
            return Verdict(
                "ask",
                "consequence.unvouched_secret",
                f"{what}: its argument {d.parameter!r} is a secret you did not type in this session",
                parameter=d.parameter,
            )
    if kind == "destroy" and rule.max_calls is None and attempts > DEFAULT_DESTROY_BUDGET:
        return Verdict(
            "ask",
            "consequence.budget",
            f"{what}: this is attempt {attempts} this session, past the default budget of "
            f"{DEFAULT_DESTROY_BUDGET} (set max_calls in policy to allow more)",
        )
    return carried.verdict(tool, rule, arguments, trust=trust, key_hit=key_hit)


# Places whose files run or authenticate as the user: writing there is taking the account over.
KEY_PLACE = re.compile(
    r"(?:^|/)(?:\.ssh|\.gnupg|\.aws|\.kube|\.docker|\.netrc|\.pgpass|\.git-credentials|\.config/autostart"
    r"|\.config/systemd|\.config/fish/config\.fish|library/launchagents|library/launchdaemons|\.git/hooks"
    r"|start menu/programs/startup|\.(?:bash_profile|bash_login|bash_logout|bashrc|profile|zshrc|zprofile"
    r"|zshenv|zlogin|login|xprofile|xinitrc|xsessionrc|pam_environment))(?:/|$)"
)
MAX_PATH_CHARS: Final = 4096


def key_place(value: str, parameter: str) -> str | None:
    """The key place a path value lands in, or None. A value with white space is read as a path only
    under a parameter named as one (`path`, `target`, `destination`, ...): prose that mentions
    `~/.bashrc` in a note's body is not where the note is written."""
    text = value.strip()
    if not text or len(text) > MAX_PATH_CHARS or "\n" in text or "://" in text:
        return None
    names = set(fallback.words(parameter.split(".")[-1].split("[")[0]))
    if any(map(str.isspace, text)) and not (
        fallback_words.PATH_WORDS & names or fallback_words.MOVE_PARAMS & names
    ):
        return None
    path = text.replace("\\", "/").casefold()
    m = KEY_PLACE.search(path)
    return None if m is None else m.group(0).strip("/")


def key_path_verdict(tool: str, arguments: Mapping[str, Any]) -> Verdict | None:
    """An ask for a call that names a key place in any argument (the caller skips reading tools)."""
    for d in sinkgate.leaves(arguments):
        place = key_place(d.value, d.parameter)
        if place is not None:
            return Verdict(
                "ask",
                "consequence.key_path",
                f"{tool}: its argument {d.parameter!r} is a path into {place!r}, where files run or "
                f"authenticate as you",
                parameter=d.parameter,
            )
    return None
