"""The fallback: how a tool that no pack and no policy names is gated, from what its server published.

Theory of operation
-------------------
A server nobody wrote a pack for still has tools that send. The fallback reads what the server
published (and the pins froze): the tool's name, its input schema and, when the caller passes it,
its description. It runs once per tool at tools/list time with word sets and regexes only (the
lexicon is `fallback_words.py`), so the same tool always gets the same rule.

*Destination-shaped parameters* are found by the parts of their names (split on `_`, `-`, `.` and
camelCase: `recipientEmail` is `recipient` + `email`), by schema formats (`email`, `uri`, `iri`,
`hostname`, `ipv4`, ...), by `pattern`s that only match URLs, e-mail addresses or host names, and by
parameter descriptions that say the value is where something goes ("URL to notify", "address to
forward to", "the remote URL"), walking nested objects, arrays, `anyOf`/`oneOf`/`allOf` and local
`$ref`s. A parameter that can only be a boolean or a number never is one, and neither is one whose
name ends in a content word (`emailMessage`). Some are *strong* (a person, an account, or where the
server delivers: `to`, `recipient*`, `*email*`, `member*`, `callback*`, `grantee`, `notify_url`);
others *weak* (a place that may just be stored or read: `url`, `host`, `domain`, `user`,
`channel*`). A few words are destinations only where the tool sends or opens a channel (`target`,
`address`, `server`, `remote`, `bucket`, `with`, `login`): `convert_time(target_timezone)` sends
nothing.

*What the tool does* comes from the words of its name, the first verb found deciding its kind:
- removing verbs (`delete`, `remove`, `revoke`, `unsubscribe`, ...) are never gated;
- name resolution (`dns`, `whois`, `nslookup`, `ping`, `traceroute`, ...) with a host-shaped
  parameter is a send whatever the verb: the resolver of the name's zone sees every label, so no
  lookup is read-only (`get_dns_records(domain)`);
- probing verbs (`test`, `verify`, `validate`, `check`, `lookup`, `resolve`, `connect`) with a host,
  URL or endpoint are sends (`test_webhook(url)`, `dns_lookup(hostname)`, `resolve(name)`); without
  one they keep their meaning (`check_opening_hours(restaurant)` reads);
- fetching verbs (`fetch`, `download`, `open`, `clone`, ...), and reading verbs over a web noun
  (`get_webpage`), make a *fetch* sink of their URL-shaped parameters;
- reading verbs (`get`, `read`, `list`, `search`, `find`, `show`, `view`, `query`, ...) are never
  gated otherwise: `read_channel_messages(channel)` must keep working;
- sending verbs (`send`, `post`, `forward`, `share`, `push`, `upload`, `notify`, `relay`, ...) are
  sends on their destination-shaped parameters; with none, every argument is a sink;
- a *standing channel* (a webhook, callback, subscription, forwarding rule, remote, mirror, replica,
  tunnel, bucket, export, monitor; or a person given access: collaborator, member, permission, grant,
  allowlist) is a send whose destination outlives the session: `create_webhook(url)`,
  `git_remote_add(url)`, `set_forwarding_address(address)`, `add_collaborator(username)`,
  `sync_to(destination)`. It is gated on its place-shaped (or person-shaped) parameters, weak ones
  included, and noted "standing channel" for `policy check` and the report. One that exists to carry
  data somewhere (webhook, callback, forwarding, remote, mirror, tunnel, ...) with no such parameter
  makes every argument a sink, unless its name is that noun and no verb and every argument it
  publishes is a path, a switch or a number (`git_remote(repo_path, verbose)` lists the remotes).
  `sync`, `subscribe`, `register` and `watch` may pull, so their `target` counts only when the name
  says `to`;
- an opening verb (`create`, `open`, `file`, `submit`, ...) over what a code host files in a
  repository (a pull or merge request, an issue, a review, a comment) is a send to the repository or
  project the call names, gated on `owner`/`repo`/`repository`/`project_id` parameters (not a local
  `repo_path`) and its person-shaped ones: `create_pull_request(owner, repo)`;
- an unambiguous sending or probing word after another verb (`schedule_send`, `create_health_check`)
  gates the destination-shaped parameters (or the hosts);
- mutating verbs (`create`, `add`, `update`, ...) are sends when they add someone (`add ... to`),
  write a message-like thing (`add_message`), have a strong destination parameter, write into a
  bucket or remote the call names (`put_object(bucket)`), or store an oddly named value declared
  `format: uri|iri|hostname` (`update_settings(zorp)`), which the server will call: a fetch when its
  name says it is a source of data (`data`, `image`, `file`), nothing when it only links (`website`);
- no verb at all (`email(to, body)`) is a send if any destination-shaped parameter is present.
Names that are nouns as often as verbs (`email`, `message`, `text`, ...) send only when no other
verb is in the name (`email_search` reads).

*The description* can add a gate, never remove one: it is text the server wrote. Only its first
sentence is read, and only for a tool whose name does not read or remove. A leading sending verb
("Sends ...", "Forwards ..."), an unambiguous sending verb later in it ("... and notifies the
address", not "... without notifying anyone"), a leading probe of a host ("Resolves a hostname"),
or a channel opened by its leading verb ("Registers a webhook ...", "Adds a collaborator ...") gate
the tool as those words in its name would, on its destination-shaped parameters only: a description
with no parameter to point at gates nothing.

Deletion-like tools are recognised by whole name parts (`delete_file`; not `get_permissions`), and
path-shaped parameters of tools that do not read become `write_params`, as before. The result is a
`ToolEntry` with source "fallback" and notes that say which parameter matched which rule and which
standing channel a tool opens, so `policy check` can show its reasoning. Misjudgements go one way:
a false positive costs an ask; the lists are biased toward asking.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from typing import Any

from bouncerd.core.constraints import lands_bytes
from bouncerd.core.fallback_words import (
    ADDING_VERBS,
    CONTENT_SUFFIXES,
    CREATING_VERBS,
    DELETE_WORDS,
    DEST_FORMATS,
    DETERMINERS,
    DIRECTORY_NOUNS,
    DIRECTORY_PHRASES,
    DIRECTORY_PLACES,
    HINT_WORDS,
    HOST_FORMATS,
    HOST_NOUNS,
    INHERENT_CHANNELS,
    LISTING_OPTIONS,
    MAIL_CONTEXT,
    MAX_REMEMBERED_NAME_CHARS,
    MOVE_PARAMS,
    MOVE_VERBS,
    NAME_PARAMS,
    NEGATIONS,
    NET_WORDS,
    NON_TEXT_TYPES,
    OPENING_VERBS,
    PATH_FORMATS,
    PATH_WORDS,
    PERSON_WORDS,
    PLACE_WORDS,
    PLAIN_PROBE_WORDS,
    PLAIN_SEND_VERBS,
    PROBE_VERBS,
    READ_VERBS,
    REFERENCE_WORDS,
    REMOVING_VERBS,
    REPOSITORY_PARAMS,
    REPOSITORY_THINGS,
    RESOLVER_NOUNS,
    RESOLVING_WORDS,
    SENT_THINGS,
    SOURCE_WORDS,
    STORE_WORDS,
    TWO_WAY_VERBS,
    URL_FORMATS,
    URL_WORDS,
    WEAK_SEND_VERBS,
    WEB_NOUNS,
    WRITING_VERBS,
    Reading,
    description_hint,
    lead_words,
    name_hint,
    pattern_format,
    read_words,
    verb_of,
    words,
)
from bouncerd.core.rules import ToolEntry

__all__ = ["Guess", "Param", "classify", "destination_params", "lists_local_remotes",
           "looks_like_destination", "verb_of", "words"]  # fmt: skip

# Input schemas nest; real ones go three or four levels deep. Deeper levels are not searched (a
# parameter buried further is still walked by the sink gate when the tool declares no sinks).
MAX_SCHEMA_DEPTH = 8
# `$ref` chains are followed this many hops; a cycle ends there.
MAX_REF_HOPS = 8


@dataclass(frozen=True)
class Guess:
    entry: ToolEntry
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Param:
    path: str
    reason: str
    strong: bool
    url: bool
    word: str = ""  # the name part, or one of HINT_WORDS, that matched
    fmt: str | None = None  # the schema format, declared or implied by a pattern
    context_only: bool = False  # a destination only where the tool sends or opens a channel

    @property
    def net(self) -> bool:
        """Whether the value is a host, an endpoint or a URL: what a probe reaches."""
        return self.url or self.word in NET_WORDS or self.fmt in HOST_FORMATS


# ---- parameters ---------------------------------------------------------------------------------


def looks_like_destination(name: str) -> bool:
    """Whether a parameter name alone looks like it carries a destination (for undeclared parameters
    next to declared sinks: `recipients` beside a declared `to`). Remembered as `words` is."""
    return _named_destination(name) if len(name) <= MAX_REMEMBERED_NAME_CHARS else _names_destination(name)


@lru_cache(maxsize=4096)
def _named_destination(name: str) -> bool:
    return _names_destination(name)


def _names_destination(name: str) -> bool:
    hint = name_hint(words(name), mail_context=False)
    return hint is not None and not hint.context_only


def _deref(schema: Any, root: Mapping[str, Any]) -> Any:
    hops = 0
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str) and hops < MAX_REF_HOPS:
        ref = schema["$ref"]
        if not ref.startswith("#/"):
            return schema
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        if target is None:
            return schema
        schema = target
        hops += 1
    return schema


def _variants(schema: Any, root: Mapping[str, Any], depth: int = 0) -> Iterator[Mapping[str, Any]]:
    """The schema itself, its array items and its anyOf/oneOf/allOf alternatives, dereferenced."""
    schema = _deref(schema, root)
    if not isinstance(schema, Mapping) or depth > MAX_SCHEMA_DEPTH:
        return
    yield schema
    items = schema.get("items")
    for item in items if isinstance(items, list) else [items] if items is not None else []:
        yield from _variants(item, root, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        alts = schema.get(key)
        if isinstance(alts, list):
            for alt in alts:
                yield from _variants(alt, root, depth + 1)


def _keyword(schema: Any, root: Mapping[str, Any], key: str) -> list[str]:
    """Every string value of one schema keyword (`format`, `pattern`, `description`) in the variants."""
    return [v for variant in _variants(schema, root) if isinstance(v := variant.get(key), str)]


def _non_text(schema: Any, root: Mapping[str, Any]) -> bool:
    """True when every alternative of the schema is a boolean, number or null."""
    types: set[str] = set()
    for variant in _variants(schema, root):
        t = variant.get("type")
        if isinstance(t, str):
            types.add(t)
        elif isinstance(t, list):
            types.update(x for x in t if isinstance(x, str))
        elif not any(k in variant for k in ("anyOf", "oneOf", "allOf", "items")):
            return False  # untyped: could be anything
    return bool(types) and types <= NON_TEXT_TYPES


def destination_params(
    input_schema: Mapping[str, Any] | None, mail_context: bool = False, sending: bool = False
) -> list[Param]:
    """Destination-shaped parameters of a schema, as dotted paths (lists are walked transparently).
    With `sending`, also the words that are destinations only where a tool sends (`target`, `with`)."""
    out: list[Param] = []
    if isinstance(input_schema, Mapping):
        _walk(input_schema, input_schema, "", 0, mail_context, out)
    return out if sending else [p for p in out if not p.context_only]


def _param(name: str, sub: Any, root: Mapping[str, Any], here: str, mail_context: bool) -> Param | None:
    """One property as a destination, by its name, then its format or pattern, then its description."""
    parts = words(name)
    hint = name_hint(parts, mail_context)
    fmt = next((f for f in _keyword(sub, root, "format") if f in DEST_FORMATS), None)
    patterns = [] if fmt or hint else _keyword(sub, root, "pattern")
    implied = next(filter(None, map(pattern_format, patterns)), None)
    # Objects are searched inside; a name that says content (`emailMessage`) is content whatever its
    # description says.
    leaf = not any(isinstance(v.get("properties"), Mapping) for v in _variants(sub, root))
    said = None
    if leaf and not (parts and parts[-1] in CONTENT_SUFFIXES) and (hint is None or hint.context_only):
        said = next(filter(None, map(description_hint, _keyword(sub, root, "description"))), None)
    url = bool(URL_WORDS & set(parts)) or any(p.endswith(("url", "uri")) for p in parts)
    if hint is not None:
        why, strong, context_only = hint.why, hint.strong, hint.context_only
        # A `target` declared a URI, or said to be notified, is a destination wherever it is.
        if context_only and (fmt or said):
            also = f"schema format {fmt!r}" if fmt else said.why if said else ""
            why, strong, context_only = f"{why} and {also}", True, False
        return Param(here, why, strong, url or fmt in URL_FORMATS, hint.word, fmt, context_only)
    if fmt or implied:
        declared = fmt or implied or ""
        why = f"schema format {fmt!r}" if fmt else f"a pattern that only matches {declared} values"
        return Param(here, why, declared.endswith("email"), declared in URL_FORMATS, "format", declared)
    if said is not None:
        return Param(here, said.why, said.strong, said.url or url, said.word)
    return None


def _walk(
    schema: Any, root: Mapping[str, Any], path: str, depth: int, mail_context: bool, out: list[Param]
) -> None:
    if depth > MAX_SCHEMA_DEPTH:
        return
    for variant in _variants(schema, root):
        props = variant.get("properties")
        if not isinstance(props, Mapping):
            continue
        for name, sub in props.items():
            if not isinstance(name, str) or any(p.path == (f"{path}.{name}" if path else name) for p in out):
                continue
            here = f"{path}.{name}" if path else name
            if _non_text(sub, root):
                continue
            found = _param(name, sub, root, here, mail_context)
            if found is not None:
                out.append(found)
            else:
                _walk(sub, root, here, depth + 1, mail_context, out)


def _path_params(input_schema: Mapping[str, Any] | None, verb: str | None) -> list[str]:
    if not isinstance(input_schema, Mapping):
        return []
    props = input_schema.get("properties")
    if not isinstance(props, Mapping):
        return []
    out: list[str] = []
    for name, sub in props.items():
        if not isinstance(name, str) or _non_text(sub, input_schema):
            continue
        parts = words(name)
        if not parts or "id" in parts or "ids" in parts:
            continue
        pathlike = bool(PATH_WORDS & set(parts)) or parts[-1].endswith("path")
        # where bytes land by name (`target_dir`, `extract_to`) or by a path format in the schema
        lands = lands_bytes(name) or (isinstance(sub, Mapping) and sub.get("format") in PATH_FORMATS)
        if pathlike or lands or (verb in MOVE_VERBS and MOVE_PARAMS & set(parts)):
            out.append(name)
    return out


# ---- the tool -----------------------------------------------------------------------------------

# What a rule found: (sink kind, sink parameters, why, the standing channel it opens or None).
Found = tuple[str, list[Param], str, str | None]


def _probe_targets(params: list[Param], parts: list[str], schema: Any, by_name: bool = True) -> list[Param]:
    """The parameters a probe reaches: hosts, URLs, endpoints; for a resolver whose name says nothing
    else (`resolve(name)`, `dns_query(name)`) also a bare `name`."""
    reached = [p for p in params if p.net]
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if reached or not by_name or not isinstance(props, Mapping):
        return reached
    named = set(parts)
    resolving = RESOLVING_WORDS & named
    if not resolving or named - RESOLVER_NOUNS - RESOLVING_WORDS - READ_VERBS - PROBE_VERBS.keys():
        return []
    if resolving <= {"lookup", "look"} and not HOST_NOUNS & named:
        return []  # `lookup(name)` may read a dictionary; `dns_lookup(name)` asks a resolver
    return [
        Param(n, "a name the tool resolves", False, False, "host")
        for n, sub in props.items()
        if isinstance(n, str) and not _non_text(sub, schema) and (words(n) or [""])[-1] in NAME_PARAMS
    ]


def _holds_no_destination(schema: Any) -> bool:
    """Whether no argument the schema publishes can carry a destination: each is typed boolean or
    number, names a local path, or is a listing's switch or paging option (`LISTING_OPTIONS`). An
    unknown schema, or any other argument (`spec`, `config`, `name`), could hold one."""
    props = schema.get("properties", {}) if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping):
        return False
    for name, sub in props.items():
        parts = words(name) if isinstance(name, str) else []
        if not parts:
            return False
        if _non_text(sub, schema) or set(parts) <= LISTING_OPTIONS:
            continue
        if parts[-1] in PATH_WORDS or parts[-1].endswith("path"):
            continue
        return False
    return True


def _channel(
    reading: Reading, params: list[Param], source: str, parts: list[str], schema: Any = None
) -> Found | None:
    """The gate of a tool that opens a standing channel: on the place-shaped parameters of a channel
    to a place, the person-shaped ones of a channel to a person, and the strong ones of either. A
    name that is only a channel noun, with no verb, and no argument a destination could be in,
    lists the channels: nothing is gated."""
    place, person, word = reading.place, reading.person, reading.channel
    if word is None:
        return None
    # A `target` is where a sync goes only when the name says so (`sync_to`): `partner_sync` may pull.
    outward = word not in TWO_WAY_VERBS or "to" in parts
    sinks = [
        p for p in params
        if (outward or not p.context_only) and (
            p.strong or (place and (p.word in PLACE_WORDS or p.url or p.fmt or p.word in HINT_WORDS))
            or (person and p.word in PERSON_WORDS)
        )
    ]  # fmt: skip
    standing = f"{source} word {word!r}"
    if sinks:
        return "send", sinks, f"{standing} opens a channel: gated on its destinations", standing
    if reading.kind is None and _holds_no_destination(schema):
        return None  # `git_remote(repo_path, verbose)`, `repo.remotes()`: a noun and no verb lists them
    if word in INHERENT_CHANNELS and source == "tool name":
        why = f"{standing} carries data somewhere and no parameter says where: every argument is a sink"
        return "send", [], why, standing
    return None


def _stored_urls(params: list[Param]) -> Found | None:
    """A mutating tool's oddly named parameters declared URIs or host names: the server will reach
    them. (A parameter *named* `url` or `link` stays what it was: a place that may just be stored.)"""
    declared = [p for p in params if p.word in HINT_WORDS and (p.fmt in URL_FORMATS or p.fmt in HOST_FORMATS)]
    named = {p.path: set(words(p.path.rsplit(".", 1)[-1])) for p in declared}
    if called := [p for p in declared if not named[p.path] & (SOURCE_WORDS | REFERENCE_WORDS)]:
        return "send", called, "a parameter declared a URI or host name, which the server calls: a send", None
    if read := [p for p in declared if named[p.path] & SOURCE_WORDS]:
        return "fetch", read, "a parameter declared a URI the server reads data from: a fetch sink", None
    return None


def _files_into_repository(parts: list[str], params: list[Param], schema: Any) -> Found | None:
    """A tool that opens a pull or merge request, an issue, a review or a comment (`REPOSITORY_THINGS`
    under one of `OPENING_VERBS`) files it where the call says: a send to that repository or project,
    gated on the parameters that name it (`owner` and `repo`, which the sink gate also reads joined
    as `owner/repo`; `repository`; `project_id`, `target_project_id`) and on its person-shaped ones
    (`assignees`, `reviewers`). A local `repo_path` names no repository on a host."""
    opening = next((p for p in parts if p in OPENING_VERBS), None)
    thing = next((p for p in parts if p in REPOSITORY_THINGS), None)
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if opening is None or thing is None or not isinstance(props, Mapping):
        return None
    places: list[Param] = []
    for name, sub in props.items():
        named = words(name) if isinstance(name, str) else []
        if not REPOSITORY_PARAMS & set(named) or named[-1] in PATH_WORDS or named[-1].endswith("path"):
            continue
        if not _non_text(sub, schema) or "id" in named:  # a project id may be typed a number
            places.append(
                Param(name, f"names the repository or project a {thing!r} is filed in", True, False)
            )
    if not places:
        return None
    strong = [p for p in params if p.strong and p.path not in {q.path for q in places}]
    why = f"tool name {opening!r} ... {thing!r} files into the repository or project the call names: a send"
    return "send", [*places, *strong], why, None


def _by_name(parts: list[str], params: list[Param], everything: list[Param], schema: Any) -> Found | None:
    """The gate the tool's name calls for, or None."""
    name = read_words(parts)
    kind, verb = name.kind, name.verb
    if verb in REMOVING_VERBS:
        return None  # `delete_webhook(url)`, `revoke_access(grantee)`, `delete_dns_record(domain)`
    if name.network and (reached := _probe_targets(everything, parts, schema)):
        return "send", reached, f"tool name part {name.network!r} resolves or reaches a host: a send", None
    if kind == "probe":
        if reached := _probe_targets(everything, parts, schema):
            return "send", reached, f"tool name verb {verb!r} reaches a host or an endpoint: a send", None
        kind = PROBE_VERBS[verb or ""]
    url_params = [p for p in params if p.url]
    if (kind == "fetch" or (kind == "read" and WEB_NOUNS & set(parts))) and url_params:
        return "fetch", url_params, f"tool name verb {verb!r} fetches a URL: a fetch sink", None
    if kind == "read":
        return None
    if (filed := _files_into_repository(parts, params, schema)) is not None:
        return filed
    standing = f"tool name word {name.channel!r}" if name.channel else None
    if kind == "send" and everything:
        return "send", everything, f"tool name verb {verb!r} sends: gated on its destinations", standing
    if kind == "send":
        why = f"tool name verb {verb!r} sends, and no parameter looks like a destination: every argument"
        return "send", [], f"{why} is a sink", standing
    if (channel := _channel(name, everything, "tool name", parts, schema)) is not None:
        return channel
    if (later := next((p for p in parts[1:] if p in PLAIN_SEND_VERBS), None)) and everything:
        return "send", everything, f"tool name part {later!r} sends: gated on its destinations", None
    if PLAIN_PROBE_WORDS & set(parts[1:]) and (reached := _probe_targets(everything, parts, schema, False)):
        return "send", reached, "tool name part says the server calls a host or an endpoint: a send", None
    if kind in ("mutate", "channel"):
        if verb in ADDING_VERBS and "to" in parts[1:]:
            return "send", params, f"tool name {verb!r} ... 'to' adds someone somewhere: a send", None
        if verb in CREATING_VERBS and SENT_THINGS & set(parts):
            return "send", params, f"tool name verb {verb!r} writes a message-like thing: a send", None
        if strong := [p for p in params if p.strong]:
            return "send", strong, f"tool name verb {verb!r} with a person-shaped parameter: a send", None
        if verb in WRITING_VERBS and (stores := [p for p in everything if p.word in STORE_WORDS]):
            return "send", stores, f"tool name verb {verb!r} writes into a store the call names: a send", None
        return _stored_urls(everything)
    if kind is None and params:
        why = "no recognisable verb in the tool name, but destination-shaped parameters: a send"
        return "send", params, why, None
    return None


def _by_description(lead: list[str], everything: list[Param], schema: Any) -> Found | None:
    """The gate a description's first sentence adds to a tool its name left ungated, if any. Only
    destination-shaped parameters are gated: a description alone never makes every argument a sink."""
    if not lead or not everything:
        return None
    desc = read_words(lead)
    leading = desc.verb if desc.verb == lead[0] else None
    if leading in WEAK_SEND_VERBS and lead[1:2] and lead[1] not in DETERMINERS:
        leading = None  # "Emails the summary ..." sends; "Email address lookup", "Text formatting" do not
    if leading in REMOVING_VERBS or (leading and desc.kind == "read"):
        return None  # "Deletes the webhook that ...", "Lists the rules that forward ..."
    sends = leading if leading and desc.kind == "send" else None
    for i, w in enumerate(lead):
        if sends is None and w in PLAIN_SEND_VERBS and not NEGATIONS & set(lead[max(0, i - 2) : i]):
            sends = w  # "Runs the job and notifies ...", but not "... without notifying anyone"
    if sends is not None:
        standing = f"description word {desc.channel!r}" if desc.channel else None
        return "send", everything, f"its description says it {sends}s: gated as a send", standing
    reached = _probe_targets(everything, lead, schema, by_name=False)
    if reached and ((desc.kind == "probe" and leading) or desc.network):
        return "send", reached, "its description says it reaches a host: a send", None
    if leading is None or desc.kind in (None, "read"):
        return None
    return _channel(desc, everything, "description", lead)


def lists_own_directory(parts: list[str]) -> bool:
    """Whether a reading tool's name says it lists the user's own contacts, members, attendees or
    counterparties (`list_contacts`, `get_channel_members`, `get_users_in_channel`, `search_calendar`).
    Plain `users` or `people` are not enough: `search_users` on a public code host lists strangers."""
    names = set(parts)
    if any(pair in DIRECTORY_PHRASES for pair in pairwise(parts)):
        return True
    return bool(DIRECTORY_NOUNS & names) or ("users" in names and bool(DIRECTORY_PLACES & names))


def lists_local_remotes(parts: list[str], input_schema: Any) -> bool:
    """Whether a tool lists the git remotes of a local clone: its name is `remote`/`remotes` and no
    verb (`git_remote`, `repo.remotes`), and it takes nothing but local paths and switches. What it
    prints is the clone's own configuration (the URL it was cloned from, the remotes the user added),
    which no text an attacker writes into a repository can change; a README's or a commit message's
    URL comes through other tools and still taints."""
    return (
        bool(set(parts) & {"remote", "remotes"})
        and verb_of(parts) == (None, None)
        and _holds_no_destination(input_schema)
    )


def classify(tool_name: str, input_schema: Mapping[str, Any] | None, description: str | None = None) -> Guess:
    """The fallback's entry for a tool without one, and the notes that explain it. `description` is
    the tool's description from tools/list; it can add a gate, never remove one."""
    parts = words(tool_name)
    kind, verb = verb_of(parts)
    lead = lead_words(description)
    mail_context = bool(MAIL_CONTEXT & set(parts)) or bool(MAIL_CONTEXT & set(lead))
    everything = destination_params(input_schema, mail_context, sending=True)
    params = [p for p in everything if not p.context_only]
    notes = [f"parameter {p.path!r} matched {p.reason}" for p in everything]
    if input_schema is None:
        notes.append("no input schema: parameter names unknown")
    found = _by_name(parts, params, everything, input_schema)
    reads = kind == "read" or (kind == "probe" and found is None and PROBE_VERBS[verb or ""] == "read")
    if found is None and not reads and verb not in REMOVING_VERBS:
        found = _by_description(lead, everything, input_schema)
    elif found is None and reads and params:
        notes.append(f"tool name verb {verb!r} reads: not gated")
    deletion = not reads and bool(DELETE_WORDS & set(parts))
    directory = reads and lists_own_directory(parts)
    if directory:
        listing = sorted(DIRECTORY_NOUNS & set(parts)) or ["users"]
        notes.append(f"tool name parts {listing} list your own directory")
    if deletion:
        notes.append(f"tool name part {sorted(DELETE_WORDS & set(parts))[0]!r} marks a deletion")
    writes = tuple(_path_params(input_schema, verb)) if not reads else ()
    config = found is None and lists_local_remotes(parts, input_schema)
    if config:
        notes.append("lists the local clone's remotes: its output is your configuration, not planted text")
    if found is None:
        entry = ToolEntry(
            exfiltrating=False,
            deletion=deletion,
            write_params=writes or None,
            directory=directory or None,
            untrusted_output=False if config else None,
        )
        return Guess(entry, tuple(notes))
    sink_kind, sinks, why, standing = found
    notes.append(why)
    if standing:
        notes.append(f"standing channel: {standing}; its destination outlives the session")
    entry = ToolEntry(
        exfiltrating=True,
        sink_kind="fetch" if sink_kind == "fetch" else "send",
        sink_params=tuple(dict.fromkeys(p.path for p in sinks)),
        deletion=deletion,
        write_params=writes or None,
    )
    return Guess(entry, tuple(notes))
