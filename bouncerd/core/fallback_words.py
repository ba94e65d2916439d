"""The fallback's lexicon: the words and patterns `fallback.py` reads names, descriptions and schema
hints with, and the readers that turn one name or one sentence into what it says.

Each set answers one question about a word ("is this a sending verb?", "does this parameter name a
person?"). Why each rule exists is said in `fallback.py` and in docs/policy.md ("The fallback");
the comments here say why a word is in one set and not another. Everything here is a word set, a
regex or a function of strings: no schema and no tool.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


# The first sentence of a tool description says what it does; later ones say what it returns or
# what it does not do ("... without notifying anyone"). Real first sentences are under 200 characters.
MAX_LEAD_CHARS = 200
# Words skipped before a description's leading verb: "Use this tool to send ...".
MAX_LEAD_FILLER = 6
# A parameter's role is said in the first clause of its description; the rest is examples and caveats.
MAX_PARAM_DESCRIPTION_CHARS = 300

# ---- verbs --------------------------------------------------------------------------------------

STRONG_SEND_VERBS = _set(
    "send post reply respond forward share invite publish upload transfer pay notify submit push broadcast "
    "announce deliver dispatch draft compose wire remit donate tip mention ping tell contact relay transmit "
    "emit crosspost repost reshare syndicate"
)
# Network tools: every use reaches the host named, and the resolver of its zone sees every label.
NETWORK_VERBS = _set("ping traceroute tracert tracepath mtr whois nslookup dig nmap portscan telnet netcat")
NETWORK_WORDS = NETWORK_VERBS | _set("dns nameserver nameservers resolver rdns")
# Nouns at least as often as verbs: sending only when no other verb is in the name.
WEAK_SEND_VERBS = _set("email mail message msg text sms dm tweet comment chat")
# `clone` fetches when given a URL (`git_clone(url)`); without one it is a read (`clone_issue(id)`).
FETCH_VERBS = _set("fetch browse download scrape crawl navigate visit open curl wget goto clone")
READ_VERBS = _set(
    "get read list search find show view query describe retrieve count inspect peek preview summarize "
    "summarise history poll load select explain analyze analyse diff status info whoami print display "
    "echo lint"
)
# Verbs that read unless what they act on is a host or an endpoint; the value is what they are then.
PROBE_VERBS: Mapping[str, str | None] = {
    "test": "read", "verify": "read", "validate": "read", "check": "read", "lookup": "read",
    "look": "read", "healthcheck": "read", "diagnose": "read", "resolve": "mutate", "probe": None,
    "reach": None, "connect": None,
}  # fmt: skip
MUTATE_VERBS = _set(
    "create add update set edit modify change delete remove drop purge wipe destroy erase truncate move "
    "rename copy write append insert put patch upsert save store archive unarchive restore mark label tag "
    "toggle trigger run execute start stop cancel reschedule schedule book reserve merge close lock unlock "
    "assign unassign revoke approve reject enable disable install uninstall import convert compress "
    "gzip format apply resize reorder duplicate clear reset login logout manage dismiss rerun fork "
    "checkout commit make new join leave unsubscribe accept decline react star pin configure setup "
    "unpin trash empty replace split batch generate render simulate"
)
# Sending verbs that are never nouns: after another verb they still send (`schedule_send`,
# `create_and_notify`), and in a description's first sentence they say the tool sends.
PLAIN_SEND_VERBS = _set("send forward notify deliver dispatch transmit relay upload broadcast publish")
# Probing words that may follow a creating verb: `create_health_check(url)` makes the server call it.
PLAIN_PROBE_WORDS = _set("check checks test tests probe probes healthcheck ping")
# Words that deny what follows in a description: "... without notifying", "does not send".
NEGATIONS = _set("not never without no nor")
# Verbs that set up something the server keeps using after the call: a place data goes to, or a
# person who gets access. (`watch` is here and not a read: on GitHub and Gmail it subscribes.)
PLACE_CHANNEL_VERBS = _set(
    "subscribe register watch mirror replicate sync synchronize export backup tunnel redirect"
)
PERSON_CHANNEL_VERBS = _set("grant delegate authorize allowlist whitelist")
# Channel verbs that may pull as well as push: their `target` is a destination only `to` it.
TWO_WAY_VERBS = _set("sync synchronize subscribe register watch")
# The verbs that make a new thing; with a message-like noun they send it (`add_message`), while
# `modify_email` or `delete_message` act on one already there.
CREATING_VERBS = _set("add create write insert append put new make")
# `add X to Y`, `invite X to Y`: the verbs that put someone somewhere.
ADDING_VERBS = _set("add invite grant assign")
DELETE_WORDS = _set("delete remove drop purge wipe destroy erase truncate trash unlink rm del shred")
# Verbs that take someone or something away: a destination there is not where data goes.
REMOVING_VERBS = DELETE_WORDS | _set(
    "revoke unassign cancel leave unsubscribe decline reject dismiss clear reset"
)
# What a reading tool lists when it lists the user's own directory: a recipient listed in its identity
# fields is trusted (ToolRule.directory). Members of a place of the user's (`get_users_in_channel`).
DIRECTORY_NOUNS = _set(
    "contact contacts addressbook member members attendee attendees participant participants colleague "
    "colleagues roster payee payees counterparty counterparties calendar transaction transactions"
)
# Two-word names of the same lists (`get_address_book`, `list_phone_book`).
DIRECTORY_PHRASES = frozenset(
    {("address", "book"), ("phone", "book"), ("contact", "list"), ("buddy", "list")}
)
DIRECTORY_PLACES = _set("channel channels team teams workspace workspaces org organization group groups")
MOVE_VERBS = _set("move copy rename")
# Verbs that write data into a store: into a bucket or remote the call names, that is a send
# (`put_object(bucket)` may write into another account's bucket).
WRITING_VERBS = _set("put write save store copy move append insert upsert")

# ---- nouns in tool names ------------------------------------------------------------------------

PLACE_CHANNEL_NOUNS = _set(
    "webhook webhooks hook hooks callback callbacks subscription subscriptions subscriber subscribers "
    "forwarding forwarder forwarders redirect redirects relay relays remote remotes mirror mirrors replica "
    "replicas replication tunnel tunnels sink sinks endpoint endpoints destination destinations export "
    "exports backup backups bucket buckets s3 gcs blob ftp sftp scp rsync notification notifications alert "
    "alerts monitor monitors uptime"
)
PERSON_CHANNEL_NOUNS = _set(
    "collaborator collaborators member members membership memberships permission permissions access grant "
    "grants acl acls share shares sharing delegate delegates delegation invite invites invitation "
    "invitations allowed allowlist whitelist trusted"
)
# Channels that exist to carry data somewhere: with no destination-shaped parameter, every argument
# is a sink (the destination must be in one of them).
INHERENT_CHANNELS = _set(
    "webhook webhooks callback callbacks forwarding forwarder forwarders redirect redirects relay relays "
    "remote remotes mirror mirrors replica replicas replication replicate tunnel tunnels"
)
# Arguments no destination can be in: switches and paging or output options of a listing
# (`git_remote(repo_path, verbose)`, `remotes(all, limit)`). With only these (and paths, and
# values typed boolean or number), a name that is a channel noun and no verb lists the channels.
LISTING_OPTIONS = _set(
    "verbose v vv all long short quiet q detailed details detail json porcelain raw limit max page "
    "per size offset cursor sort order reverse include show"
)
# A mutating verb that writes one of these things is a send: `add_message`, `create_comment`.
SENT_THINGS = _set("message messages comment comments reply replies email mail post dm chat")
# What a code host files in a repository or project for others to read: opening one is a send to
# that repository (`create_pull_request(owner, repo)`, `gh.pulls.create(repository)`,
# `create_merge_request(target_project_id)`, `create_issue`, `add_issue_comment`).
REPOSITORY_THINGS = _set(
    "pull pulls pr prs merge mr mrs issue issues comment comments review reviews discussion discussions"
)
# The verbs that open one (`open` is also a fetching verb, `file` and `raise` are nouns elsewhere).
OPENING_VERBS = CREATING_VERBS | _set("open file raise submit start")
# Parameter name parts that name the repository or project a code host files into.
REPOSITORY_PARAMS = _set(
    "repo repos repository repositories owner project projects namespace org organization organisation"
)
# A reading verb over one of these nouns reads the web: a fetch, not a read.
WEB_NOUNS = _set("url uri webpage web website page link http https html site")
MAIL_CONTEXT = _set("mail email emails message send reply forward forwarding transfer pay wallet")
# The words for which a bare `name` parameter is a host name: `resolve(name)`, `dns_query(name)`.
RESOLVING_WORDS = NETWORK_WORDS | _set("resolve lookup look")
HOST_NOUNS = _set("host hostname hostnames domain domains ip ips fqdn") | NETWORK_WORDS
# Name parts a resolver's name may carry besides its verb (`reverse_dns_lookup`, `resolve_host`).
RESOLVER_NOUNS = HOST_NOUNS | _set("name names address addresses record records up reverse")

# ---- parameter names ----------------------------------------------------------------------------

STRONG_DEST_WORDS = _set(
    "cc bcc iban phone phones mobile sms recipient recipients participant participants attendee "
    "attendees guest guests invitee invitees member members webhook webhooks assignee assignees reviewer "
    "reviewers forward wallet grantee grantees collaborator collaborators subscriber subscribers addressee "
    "addressees delegate delegates"
)
STRONG_DEST_PREFIXES = (
    "recipient", "webhook", "share", "invitee", "member", "attendee", "participant", "callback", "redirect",
)  # fmt: skip
# A place word next to one of these names where something is delivered: `notify_url`, `result_endpoint`.
DELIVERY_WORDS = _set(
    "notify notification notifications alert alerts report reports result results push ping hook hooks "
    "target remote sink destination dest upload return forward forwarding delivery deliver receiver "
    "subscription"
)
WEAK_DEST_WORDS = _set(
    "url urls uri uris link links href host hostname hosts domain domains user users username usernames "
    "userid endpoint endpoints destination destinations dest ip ips ipv4 ipv6 fqdn"
)
WEAK_DEST_PREFIXES = ("channel",)
# Destinations only where the tool sends or opens a channel: `convert_time(target)` sends nothing.
CONTEXT_DEST_WORDS = _set(
    "target targets address addresses addr server servers remote remotes bucket buckets sink sinks hook "
    "hooks with principal principals login logins notify"
)
# Which destination words a channel of places, or of people, is gated on (strong ones always).
PLACE_WORDS = _set(
    "url urls uri uris link links href host hostname hosts domain domains endpoint endpoints destination "
    "destinations dest ip ips ipv4 ipv6 fqdn target targets address addresses addr server servers remote "
    "remotes bucket buckets sink sinks hook hooks notify"
)
PERSON_WORDS = _set(
    "user users username usernames userid domain domains with principal principals login logins"
)
# What a probe reaches: a host, an address on the network, an endpoint.
NET_WORDS = _set(
    "url urls uri uris link links href host hostname hosts domain domains endpoint endpoints ip ips ipv4 "
    "ipv6 fqdn server servers webhook webhooks callback callbacks hook hooks"
)
URL_WORDS = _set("url urls uri uris link links href")
# The parameter of a resolver that carries the name: `resolve(name)`, `nslookup(query)`.
NAME_PARAMS = _set("name names query target record address fqdn")
# What matched a parameter that no name part did.
HINT_WORDS = _set("format description")
# A destination word followed by one of these names a property of the message, not a place:
# `email_subject`, `recipient_count`, `emailMessage`.
CONTENT_SUFFIXES = _set(
    "message messages body subject text content html template format type types count enabled verified "
    "notification notifications label labels style length size limit status"
)
# A URL a mutating tool stores under one of these names is read by the server (a fetch); under one
# of REFERENCE_WORDS it is only shown to people; under any other name the server will call it.
SOURCE_WORDS = _set(
    "data source src from input image images img picture photo avatar icon logo thumbnail file files media "
    "attachment attachments video audio document doc import feed content"
)
REFERENCE_WORDS = _set("website homepage home page site blog profile link links href")
PATH_WORDS = _set("path paths filepath filepaths dir dirs directory directories folder folders dirpath")
MOVE_PARAMS = _set("source destination dest target src")
STORE_WORDS = _set("bucket buckets remote remotes")

# ---- schema hints -------------------------------------------------------------------------------

DEST_FORMATS = _set("email idn-email uri uri-reference iri iri-reference hostname idn-hostname ipv4 ipv6")
URL_FORMATS = _set("uri uri-reference iri iri-reference")
HOST_FORMATS = _set("hostname idn-hostname ipv4 ipv6")
# Formats some servers give a parameter that is a file-system path (not JSON Schema's own list).
PATH_FORMATS = _set("path file-path filepath dir-path dirpath directory")
NON_TEXT_TYPES = frozenset({"boolean", "number", "integer", "null"})
# `pattern`s that only match a URL, or a dotted host name (a TLD-like `{2,}` or repeated labels).
URL_PATTERN = re.compile(r"(?:https?|wss?|s3|gs|ftp|sftp|ssh|git)\??:|://")
HOST_PATTERN = re.compile(r"\{2,\d*\}|\)\+|\]\+\\\.")
# Parameter descriptions that say the value is where something goes: "URL to notify", "address to
# forward to", "the remote URL", "where to send the report", "e-mail of the recipient".
DELIVERED_TO = re.compile(
    r"\b(?:url|uri|address|endpoint|host(?:name)?|server|bucket|destination|location|e-?mail|webhook|callback)"
    r"\b[^.;]{0,40}?\b(?:to|will|that|which|where)\b[^.;]{0,20}?\b(?:notif\w*|call\w*|post\w*|send\w*|sent|"
    r"forward\w*|deliver\w*|push\w*|receiv\w*|export\w*|upload\w*|sync\w*|mirror\w*|replicat\w*|cop(?:y|ied)|"
    r"shared?|invite[ds]?|add(?:ed)?|grant\w*)\b"
)
QUALIFIED_PLACE = re.compile(
    r"\b(?:remote|callback|webhook|notification|forwarding|destination|target|redirect|push|mirror|replica|"
    r"upstream|sink)\s+(?:url|uri|address|endpoint|host|server|bucket|repository|repo|e-?mail)\b"
)
WHERE_TO = re.compile(
    r"\b(?:where|who|whom)\s+(?:to\s+)?(?:send|post|deliver|forward|notify|alert|push|export|upload|sync|mirror)"
)
PERSON_ROLE = re.compile(
    r"^\W*(?:the\s+|an?\s+)?(?:e-?mail\s+(?:address(?:es)?\s+)?(?:of|for)\s+(?:the\s+)?)?"
    r"(?:recipients?|addressees?|grantees?|collaborators?|invitees?|subscribers?)\b"
)
URL_EXAMPLE = re.compile(r"\b(?:https?|wss?|s3|gs|ftp|sftp|ssh|git)://")
NAMES_URL = re.compile(r"\b(?:url|uri|webhook|callback)\b")

# ---- descriptions -------------------------------------------------------------------------------

# After a noun-or-verb ("Emails", "Messages"), these words show it is the verb: "Emails the summary".
DETERMINERS = _set("a an the this that each every all your their its it them someone everyone people")
# Words before a description's leading verb.
LEAD_FILLER = _set(
    "this tool tools use used it to can will you lets let allows allow helps help a an the mcp"
)
SENTENCE_END = re.compile(r"[.!?;:](?:\s|$)|\n")
LETTERS = re.compile(r"[a-z0-9]+")
_KNOWN_FORMS = (
    STRONG_SEND_VERBS | WEAK_SEND_VERBS | NETWORK_WORDS | PROBE_VERBS.keys() | MUTATE_VERBS | READ_VERBS
    | PLACE_CHANNEL_VERBS | PERSON_CHANNEL_VERBS | PLACE_CHANNEL_NOUNS | PERSON_CHANNEL_NOUNS
)  # fmt: skip


def lead_words(description: str | None) -> list[str]:
    """The words of a description's first sentence from its leading verb on, each in its base form:
    "Use this tool to send ..." -> send, ...; "Registers a webhook" -> register, a, webhook."""
    if not isinstance(description, str):
        return []
    first = SENTENCE_END.split(description.strip()[:MAX_LEAD_CHARS], maxsplit=1)[0]
    found = LETTERS.findall(first.lower())
    skip = 0
    while skip < min(len(found), MAX_LEAD_FILLER) and found[skip] in LEAD_FILLER:
        skip += 1
    return [base_form(w) for w in found[skip:]]


def base_form(word: str) -> str:
    """The verb or noun a description word is a form of: sends -> send, notifies -> notify."""
    forms = (word, word[:-3] + "y" if word.endswith("ies") else "", word[:-2], word[:-1])
    return next((f for f in forms if f and f in _KNOWN_FORMS), word)


def verb_of(parts: list[str]) -> tuple[str | None, str | None]:
    """(kind, verb): kind is send, fetch, read, probe, channel, mutate, or None when none is recognised.
    The first part found in a verb list decides."""
    for p in parts:
        if p in STRONG_SEND_VERBS or p in NETWORK_VERBS:
            return "send", p
        if p in FETCH_VERBS:
            return "fetch", p
        if p in READ_VERBS:
            return "read", p
        if p in PROBE_VERBS:
            return "probe", p
        if p in PLACE_CHANNEL_VERBS or p in PERSON_CHANNEL_VERBS:
            return "channel", p
        if p in MUTATE_VERBS:
            return "mutate", p
    for p in parts:
        if p in WEAK_SEND_VERBS:
            return "send", p
    return None, None


@dataclass(frozen=True)
class Reading:
    """What the words of a name, or of a description's first sentence, say the tool does."""

    kind: str | None
    verb: str | None
    place: str | None  # a channel to a place (webhook, remote, sync, ...)
    person: str | None  # a channel to a person (collaborator, grant, ...)
    network: str | None  # a name-resolution word (dns, whois, ...)

    @property
    def channel(self) -> str | None:
        return self.place or self.person


def read_words(parts: list[str]) -> Reading:
    def first(*vocabs: frozenset[str]) -> str | None:  # nouns before verbs: `register_webhook` is a webhook
        return next((p for vocab in vocabs for p in parts if p in vocab), None)

    kind, verb = verb_of(parts)
    return Reading(
        kind,
        verb,
        first(PLACE_CHANNEL_NOUNS, PLACE_CHANNEL_VERBS),
        first(PERSON_CHANNEL_NOUNS, PERSON_CHANNEL_VERBS),
        first(NETWORK_WORDS),
    )


# ---- parameters ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hint:
    """Why a parameter looks like a destination: `word` is the name part (or hint) that matched."""

    why: str
    strong: bool
    word: str
    context_only: bool = False  # a destination only where the tool sends or opens a channel
    url: bool = False  # a description that names a URL (names say so through their parts)


def name_hint(parts: list[str], mail_context: bool) -> Hint | None:
    """Whether a parameter name (split into parts) looks like it carries a destination."""
    if not parts or (len(parts) > 1 and parts[-1] in CONTENT_SUFFIXES):
        return None
    if parts[:3] == ["in", "reply", "to"]:
        return None  # a message id (`inReplyTo`), not an address
    if parts[0] == "to" or parts[-1] == "to":
        return Hint("name part 'to'", True, "to")
    for p in parts:
        if p in STRONG_DEST_WORDS or p.startswith(STRONG_DEST_PREFIXES):
            return Hint(f"name part {p!r}", True, p)
        if "email" in p and parts[-1] not in ("id", "ids"):
            return Hint(f"name part {p!r} (contains 'email')", True, p)
    place = [p for p in parts if p in PLACE_WORDS or p.endswith(("url", "uri"))]
    delivery = [p for p in parts if p in DELIVERY_WORDS]
    if place and delivery and place[-1] != delivery[-1]:
        return Hint(f"name parts {delivery[0]!r} + {place[-1]!r} (where something is delivered)", True,
                    place[-1])  # fmt: skip
    if "address" in parts and (mail_context or MAIL_CONTEXT & set(parts)):
        return Hint("name part 'address' in a mail context", True, "address")
    if "account" in parts and ({"number", "iban"} & set(parts)):
        return Hint("name parts 'account' + 'number'", True, "account")
    if "user" in parts and "id" in parts:
        return Hint("name parts 'user' + 'id'", False, "userid")
    for p in parts:
        if p in WEAK_DEST_WORDS or p.startswith(WEAK_DEST_PREFIXES):
            return Hint(f"name part {p!r}", False, p)
        if p.endswith("url") or p.endswith("uri"):
            return Hint(f"name part {p!r} (ends in 'url')", False, "url")
    # `target`, `bucket_name`, `remote_id`; not `target_timezone` or `targetFileId`.
    last = parts[-2] if len(parts) > 1 and parts[-1] in ("name", "id") else parts[-1]
    if last in CONTEXT_DEST_WORDS:
        return Hint(f"name part {last!r} (a destination where the tool sends)", last in ("address", "with"),
                    last, context_only=True)  # fmt: skip
    return None


def pattern_format(pattern: str) -> str | None:
    """The format a `pattern` implies, when it only matches URLs, e-mail addresses or host names."""
    if URL_PATTERN.search(pattern):
        return "uri"
    if "@" in pattern and "\\." in pattern:
        return "email"
    if "\\." in pattern and "a-z" in pattern.lower() and HOST_PATTERN.search(pattern):
        return "hostname"
    return None


def description_hint(text: str) -> Hint | None:
    """Whether a parameter's description says the value is where something goes."""
    said = text[:MAX_PARAM_DESCRIPTION_CHARS].lower()
    if PERSON_ROLE.search(said):
        return Hint("its description, which names a recipient", True, "description")
    if DELIVERED_TO.search(said) or QUALIFIED_PLACE.search(said) or WHERE_TO.search(said):
        url = bool(NAMES_URL.search(said))
        return Hint("its description, which says data is delivered there", True, "description", url=url)
    if URL_EXAMPLE.search(said):
        return Hint("its description, which gives a URL", False, "url", url=True)
    return None


_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_SPLIT = re.compile(r"[^A-Za-z0-9]+")
# Names up to this long have their split remembered (4,096 of them): tool and parameter names. A longer
# one (an argument key the agent made up) is split each time, so the memo stays small.
MAX_REMEMBERED_NAME_CHARS = 128


def words(name: str) -> list[str]:
    """Name parts, lowercased: `sendSMS_to-user` -> send, sms, to, user. A verdict reads the same few
    tool and parameter names many times over, so the split is remembered (`_split_words`)."""
    return list(_split_words(name) if len(name) <= MAX_REMEMBERED_NAME_CHARS else _split(name))


@lru_cache(maxsize=4096)
def _split_words(name: str) -> tuple[str, ...]:
    return _split(name)


def _split(name: str) -> tuple[str, ...]:
    return tuple(w.lower() for part in _SPLIT.split(name) for w in _CAMEL.findall(part))
