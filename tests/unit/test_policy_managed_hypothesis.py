"""Generative: random user layers over a random managed layer. Whatever `check_layer` lets through, the
effective rule is never looser than the managed one on any dimension the managed layer decides.

The oracle does not reuse the check's reasoning: it reads which keys the managed layer decided from
the merged rule's own sources (`ToolRule.source` names the file), and compares the effective rule
(managed + user) with the managed-only rule, key by key, and every trusted value with deny_trust.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bouncerd.core import canon
from bouncerd.core.managed import problems
from bouncerd.core.policy import DenyTrust, PolicyFile, ServerSection, merge
from bouncerd.core.rules import SINK_KEYS, ToolEntry, ToolRule

MANAGED_FILE = "/etc/bouncer/policy.yaml"
USER_FILE = "/home/u/.config/bouncer/policy.yaml"
TOOLS = ("t1",)  # one tool name: collisions between the layers are what the property is about
SERVERS = ("a", "b")
DOMAINS = ("corp.example", "eu.corp.example", "evil.example", "mail.evil.example", "other.example")
DESTINATIONS = ("a@corp.example", "drop@attacker.example", "b@evil.example", "x@other.example")
PREFIXES = ("/srv", "/srv/work", "/srv/work/a", "/srv/workshop", "/tmp")


def _subset(items: tuple[str, ...]) -> st.SearchStrategy[tuple[str, ...] | None]:
    return _opt(st.lists(st.sampled_from(items), unique=True, max_size=3).map(tuple))


def _opt(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # Mostly unset: a real entry writes two or three keys, and a dense random one is nearly always
    # refused for some key, which would leave the accepted cases (the ones the property is about) rare.
    return st.none() | st.none() | values


entries = st.builds(
    ToolEntry,
    exfiltrating=_opt(st.booleans()),
    sink_kind=_opt(st.sampled_from(("send", "fetch"))),
    sink_params=_subset(("to", "cc", "url")),
    trusted_destinations=_subset(DESTINATIONS),
    trusted_domains=_subset(DOMAINS),
    write_params=_subset(("path", "dest")),
    allowed_path_prefixes=_subset(PREFIXES),
    arg_patterns=_opt(
        st.dictionaries(st.sampled_from(("q", "r")), st.sampled_from(("^a", "^b")), max_size=2)
    ),
    max_calls=_opt(st.integers(0, 6)),
    on_tainted=_opt(st.sampled_from(("deny", "ask"))),
    untrusted_output=_opt(st.booleans()),
    deletion=_opt(st.booleans()),
).filter(lambda e: not (e.exfiltrating is False and any(k in SINK_KEYS for k, _ in e.written())))
# (the loader refuses sink keys next to exfiltrating: false, so no file holds such an entry)

tool_maps = st.dictionaries(st.sampled_from(TOOLS), entries, max_size=1)


@st.composite
def layers(draw: st.DrawFn, filename: str, managed: bool) -> PolicyFile:
    tools = draw(tool_maps)
    servers = {
        name: ServerSection(section, dict.fromkeys(section, 2))
        for name, section in draw(st.dictionaries(st.sampled_from(SERVERS), tool_maps, max_size=2)).items()
    }
    settings_drawn: dict[str, Any] = {}
    if draw(st.booleans()):
        settings_drawn["taint_scope"] = draw(st.sampled_from(("session", "server", "user")))
    if draw(st.booleans()):
        settings_drawn["on_tainted_identity"] = draw(st.sampled_from(("ask", "deny")))
    deny = None
    if managed and draw(st.booleans()):
        deny = DenyTrust(draw(_subset(DESTINATIONS)) or (), draw(_subset(DOMAINS)) or ())
    return PolicyFile(
        filename,
        settings=settings_drawn,
        tools=tools,
        tool_lines=dict.fromkeys(tools, 1),
        servers=servers,
        deny_trust=deny,
        managed=managed,
    )


def _owned(rule: ToolRule, key: str) -> bool:
    return MANAGED_FILE in rule.source.get(key, "")


def _under(d: str, parent: str) -> bool:
    return d == parent or d.endswith("." + parent)


def _looser(m: ToolRule, e: ToolRule) -> list[str]:
    out = []
    if _owned(m, "exfiltrating") and m.exfiltrating:
        if not e.exfiltrating:
            out.append("gate off")
        if not m.sink_params and e.sink_params:
            out.append("every-argument gate narrowed")
        if set(m.sink_params) - set(e.sink_params):
            out.append("sink params dropped")
    if _owned(m, "sink_params") and set(m.sink_params) - set(e.sink_params):
        out.append("sink params dropped")
    if _owned(m, "sink_kind") and m.sink_kind != e.sink_kind:
        out.append("sink kind")
    if _owned(m, "on_tainted") and m.on_tainted == "deny" and e.on_tainted != "deny":
        out.append("on_tainted")
    if (
        _owned(m, "max_calls")
        and m.max_calls is not None
        and (e.max_calls is None or e.max_calls > m.max_calls)
    ):
        out.append("budget")
    if _owned(m, "allowed_path_prefixes") and any(
        not any(p == q or p.startswith(q.rstrip("/") + "/") for q in m.allowed_path_prefixes)
        for p in e.allowed_path_prefixes
    ):
        out.append("prefix widened")
    if _owned(m, "write_params") and set(m.write_params) - set(e.write_params):
        out.append("write params dropped")
    if _owned(m, "arg_patterns") and any(e.arg_patterns.get(p) != rx for p, rx in m.arg_patterns.items()):
        out.append("pattern replaced")
    if _owned(m, "trusted_domains") and any(
        not any(_under(d, p) for p in m.trusted_domains) for d in e.trusted_domains
    ):
        out.append("domain allowlist widened")
    if _owned(m, "trusted_destinations"):
        allowed = {k for d in m.trusted_destinations for k in canon.keys(d)}
        if any(not canon.keys(d) or not set(canon.keys(d)) <= allowed for d in e.trusted_destinations):
            out.append("destination allowlist widened")
    if _owned(m, "untrusted_output") and m.untrusted_output and not e.untrusted_output:
        out.append("output vouched")
    if _owned(m, "deletion") and m.deletion and not e.deletion:
        out.append("deletion off")
    return out


def _trusts_denied(deny: DenyTrust | None, e: ToolRule) -> bool:
    if deny is None:
        return False
    hosts = [h for h in (canon.domain(d) for d in deny.destinations) if h]
    keys = {k for d in deny.destinations for k in canon.keys(d)}
    for d in e.trusted_domains:
        if any(_under(d, x) or _under(x, d) for x in deny.domains) or any(_under(h, d) for h in hosts):
            return True
    for d in e.trusted_destinations:
        host = canon.domain(d)
        if set(canon.keys(d)) & keys or (host and any(_under(host, x) for x in deny.domains)):
            return True
    return False


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers(MANAGED_FILE, True), layers(USER_FILE, False))
def test_no_accepted_user_layer_is_looser_than_the_managed_layer(
    managed: PolicyFile, user: PolicyFile
) -> None:
    assume(not problems(managed, managed))
    assume(not problems(managed, user))
    alone = merge([managed], packs={})
    both = merge([managed, user], packs={})
    for server in (*SERVERS, "elsewhere"):
        for tool in TOOLS:
            m = alone.rule_for(server, [], tool)
            e = both.rule_for(server, [], tool)
            assert _looser(m, e) == [], (server, tool, m, e)
            assert not _trusts_denied(managed.deny_trust, e), (server, tool, e)
    scopes = ("session", "server", "user")
    if "taint_scope" in managed.settings:
        assert scopes.index(both.settings.taint_scope) >= scopes.index(managed.settings["taint_scope"])
    if managed.settings.get("on_tainted_identity") == "deny":
        assert both.settings.on_tainted_identity == "deny"


@settings(max_examples=200, deadline=None)
@given(layers(MANAGED_FILE, True))
def test_a_user_layer_restating_the_managed_rules_is_accepted(managed: PolicyFile) -> None:
    """The check must not refuse what cannot loosen anything (a check that refused every user file
    would pass the test above): a user file that repeats the managed entries word for word."""
    assume(not problems(managed, managed))
    copy = PolicyFile(
        USER_FILE,
        settings=managed.settings,
        tools=managed.tools,
        tool_lines=managed.tool_lines,
        servers=managed.servers,
    )
    assert problems(managed, copy) == []


def _gate_off_globally_on_for_server_a(filename: str, managed: bool, *, with_server: bool) -> PolicyFile:
    servers = {"a": ServerSection(tools={"t1": ToolEntry(sink_kind="send")}, tool_lines={"t1": 2})}
    return PolicyFile(
        filename,
        tools={"t1": ToolEntry(exfiltrating=False)},
        tool_lines={"t1": 1},
        servers=servers if with_server else {},
        managed=managed,
    )


def test_exfiltrating_false_undone_by_a_servers_sink_in_the_same_file_loosens_nothing() -> None:
    # Found by the hypothesis test above: a global "exfiltrating: false" with a server's sink_kind
    # below it leaves the gate on for that server (rules.resolve), so restating both is no loosening.
    managed = _gate_off_globally_on_for_server_a(MANAGED_FILE, True, with_server=True)
    copy = _gate_off_globally_on_for_server_a(USER_FILE, False, with_server=True)
    assert problems(managed, copy) == []
    merged = merge([managed, copy], packs={})
    assert merged.rule_for("a", [], "t1").exfiltrating


def test_exfiltrating_false_alone_below_a_managed_servers_sink_is_refused() -> None:
    # The attack the check stops: a user file's "exfiltrating: false" comes after the managed server
    # entry's sink_kind, so without the check it would turn the managed gate off on that server.
    managed = _gate_off_globally_on_for_server_a(MANAGED_FILE, True, with_server=True)
    user = _gate_off_globally_on_for_server_a(USER_FILE, False, with_server=False)
    assert not merge([managed, user], packs={}).rule_for("a", [], "t1").exfiltrating
    assert any("exfiltrating" in p for p in problems(managed, user))
