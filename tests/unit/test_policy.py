"""The strict policy loader and the layering: every mistake names file, line, key and reason."""

from __future__ import annotations

import contextlib
import textwrap

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bouncerd.core.policy import (
    DEFAULT_APPROVAL_TIMEOUT_SECONDS,
    Pack,
    ServerTools,
    builtin_packs,
    format_effective,
    load_policy,
    merge,
)
from bouncerd.core.rules import ToolEntry
from bouncerd.errors import PolicyError

GMAIL_UPSTREAM = ("npx", "-y", "@gongrzhe/server-gmail-autoauth-mcp")


def load(text: str, filename: str = "policy.yaml"):  # type: ignore[no-untyped-def]
    return load_policy(textwrap.dedent(text), filename)


def error_of(text: str, filename: str = "/home/u/.config/bouncer/policy.yaml") -> str:
    with pytest.raises(PolicyError) as info:
        load(text, filename)
    return str(info.value)


def assert_names(message: str, filename: str, line: int, key: str, reason: str) -> None:
    assert filename in message, message
    assert f":{line}:" in message, message
    assert key in message, message
    assert reason in message, message


# ---- strict loading: each mistake names file, line, key and reason -----------------------------

STRICT_CASES = [
    pytest.param(
        """
        tools:
          send_email:
            max_calls: "1"
        """,
        4,
        "tools.send_email.max_calls",
        "expected an integer, got the string '1'",
        id="string_max_calls_is_not_a_budget",
    ),
    pytest.param(
        """
        tools:
          send_email:
            max_calls: true
        """,
        4,
        "tools.send_email.max_calls",
        "expected an integer, got the boolean true",
        id="boolean_max_calls_is_not_a_budget",
    ),
    pytest.param(
        """
        tools:
          delete_file:
            max_calls: -1
        """,
        4,
        "tools.delete_file.max_calls",
        "at least 0",
        id="negative_max_calls",
    ),
    pytest.param(
        """
        tools:
          send_email:
        """,
        3,
        "tools.send_email",
        "has no value (null)",
        id="null_entry_does_not_silently_replace_the_pack",
    ),
    pytest.param(
        """
        tools:
          send_email:
            sink_parms: [to]
        """,
        4,
        "tools.send_email.sink_parms",
        'unknown key (did you mean "sink_params"?)',
        id="typo_suggests_closest_key",
    ),
    pytest.param(
        """
        tools:
          send_email:
            sink_params: to
        """,
        4,
        "tools.send_email.sink_params",
        "expected a list, got the string 'to'; write [to]",
        id="string_where_a_list_is_expected",
    ),
    pytest.param(
        """
        tools:
          write_file:
            write_params: [path]
            allowed_path_prefixes: [out/reports]
        """,
        5,
        "tools.write_file.allowed_path_prefixes",
        "is relative",
        id="relative_path_prefix",
    ),
    pytest.param(
        """
        tools:
          write_file:
            allowed_path_prefixes: ["~/out"]
        """,
        4,
        "tools.write_file.allowed_path_prefixes",
        "starts with ~",
        id="tilde_path_prefix",
    ),
    pytest.param(
        """
        tools:
          write_file:
            allowed_path_prefixes: ['C:\\out']
        """,
        4,
        "tools.write_file.allowed_path_prefixes",
        "Windows path",
        id="windows_path_prefix",
    ),
    pytest.param(
        """
        tools:
          send_email:
            arg_patterns:
              to: "([a-z]+@corp\\\\.com"
        """,
        5,
        "tools.send_email.arg_patterns.to",
        "invalid regular expression",
        id="invalid_regex",
    ),
    pytest.param(
        """
        tools:
          send_email:
            exfiltrating: false
            trusted_destinations: [a@corp.com]
        """,
        5,
        "tools.send_email.trusted_destinations",
        "has no effect",
        id="trust_on_a_tool_whose_gate_is_off",
    ),
    pytest.param(
        """
        tools:
          send_email:
            sink_params: [to]
            exfiltrating: false
        """,
        4,
        "tools.send_email.sink_params",
        "exfiltrating: false",
        id="sinks_on_a_tool_whose_gate_is_off",
    ),
    pytest.param(
        """
        tools:
          send_email:
            max_calls: 1
            max_calls: 5
        """,
        5,
        "tools.send_email.max_calls",
        "duplicate key (first on line 4)",
        id="duplicate_key_would_keep_the_last",
    ),
    pytest.param(
        """
        tools:
          send_email: {}
          send_email: {exfiltrating: false}
        """,
        4,
        "tools.send_email",
        "duplicate key",
        id="duplicate_tool_entry",
    ),
    pytest.param(
        """
        tools:
          send_email:
            exfiltrating: "yes please"
        """,
        4,
        "tools.send_email.exfiltrating",
        "expected true or false",
        id="string_for_a_boolean",
    ),
    pytest.param(
        """
        tools:
          fetch:
            sink_kind: download
        """,
        4,
        "tools.fetch.sink_kind",
        "must be one of send, fetch",
        id="unknown_sink_kind",
    ),
    pytest.param(
        """
        tools:
          send_email:
            on_tainted: allow
        """,
        4,
        "tools.send_email.on_tainted",
        "must be one of deny, ask",
        id="on_tainted_allow_does_not_exist",
    ),
    pytest.param(
        """
        tools:
          send_email:
            trusted_domains: ["https://corp.com"]
        """,
        4,
        "tools.send_email.trusted_domains",
        "is not a domain name",
        id="url_for_a_domain",
    ),
    pytest.param(
        """
        send_email:
          exfiltrating: true
        """,
        2,
        "send_email",
        "tool entries go under tools:",
        id="old_top_level_tool_entries",
    ),
    pytest.param(
        """
        taint_scope: global
        """,
        2,
        "taint_scope",
        "must be one of session, server, user",
        id="unknown_taint_scope",
    ),
    pytest.param(
        """
        taint_retention: 30
        """,
        2,
        "taint_retention",
        'expected a duration such as "30d"',
        id="retention_without_unit",
    ),
    pytest.param(
        """
        approval_timeout: "120"
        """,
        2,
        "approval_timeout",
        "expected an integer",
        id="string_approval_timeout",
    ),
    pytest.param(
        """
        approval_timeout: 0
        """,
        2,
        "approval_timeout",
        "between 1 and",
        id="zero_approval_timeout",
    ),
    pytest.param(
        """
        audit_arguments: none
        """,
        2,
        "audit_arguments",
        "must be one of full, digest",
        id="unknown_audit_arguments",
    ),
    pytest.param(
        """
        version: 2
        """,
        2,
        "version",
        "between 1 and 1",
        id="future_version",
    ),
    pytest.param(
        """
        packs: [gmial]
        """,
        2,
        "packs",
        "unknown pack 'gmial' (did you mean \"gmail\"?)",
        id="unknown_pack_name",
    ),
    pytest.param(
        """
        servers:
          mail:
            tool:
              send_email: {}
        """,
        4,
        "servers.mail.tool",
        'unknown key (did you mean "tools"?)',
        id="typo_in_server_section",
    ),
    pytest.param(
        """
        servers:
          mail:
            tools:
              send_email:
                max_calls: 1.5
        """,
        6,
        "servers.mail.tools.send_email.max_calls",
        "expected an integer, got the float 1.5",
        id="float_budget_in_server_section",
    ),
    pytest.param(
        """
        tools:
          send_email:
            sink_params: [to, null]
        """,
        4,
        "tools.send_email.sink_params[1]",
        "has no value (null)",
        id="null_list_item",
    ),
    pytest.param(
        """
        tools:
          send_email:
            sink_params: ["to..cc"]
        """,
        4,
        "tools.send_email.sink_params",
        "not a parameter name or dotted path",
        id="empty_segment_in_dotted_path",
    ),
    pytest.param(
        """
        tools:
          1: {}
        """,
        3,
        "tools",
        "keys must be non-empty strings",
        id="non_string_tool_name",
    ),
    pytest.param(
        """
        tools:
          base: &b {max_calls: 1}
          send_email:
            <<: *b
        """,
        5,
        "tools.send_email",
        "merge keys (<<) are not supported",
        id="merge_keys_could_hide_an_override",
    ),
    pytest.param(
        """
        tools: [send_email]
        """,
        2,
        "tools",
        "expected a mapping of tool name: rule, got a list",
        id="list_of_tools",
    ),
    pytest.param(
        """
        tools:
          send_email: {exfiltrating: true
        """,
        4,
        "(document)",
        "not valid YAML",
        id="broken_yaml",
    ),
]


@pytest.mark.parametrize(("text", "line", "key", "reason"), STRICT_CASES)
def test_strict_loader_names_file_line_key_and_reason(text: str, line: int, key: str, reason: str) -> None:
    filename = "/home/u/.config/bouncer/policy.yaml"
    assert_names(error_of(text, filename), filename, line, key, reason)


def test_null_entry_is_an_error_not_a_silent_replacement_of_the_pack() -> None:
    message = error_of("tools:\n  send_email:\n", "shim.yaml")
    assert message.startswith("shim.yaml:2: tools.send_email: has no value")


def test_string_max_calls_is_an_error() -> None:
    message = error_of("tools:\n  delete_file:\n    max_calls: '0'\n", "p.yaml")
    assert_names(message, "p.yaml", 3, "max_calls", "expected an integer")


def test_empty_policy_file_is_an_empty_layer() -> None:
    assert load("").tools == {}
    assert load("# only a comment\n").settings == {}


def test_empty_entry_mapping_is_allowed_and_changes_nothing() -> None:
    policy = merge([load("tools:\n  send_email: {}\n")])
    rule = policy.rule_for("gmail", GMAIL_UPSTREAM, "send_email")
    assert rule.exfiltrating
    assert rule.sink_params == ("to", "cc", "bcc")


def test_yaml_python_tags_are_refused() -> None:
    message = error_of("tools:\n  x:\n    max_calls: !!python/object:os.system 1\n", "p.yaml")
    assert "p.yaml:3:" in message
    assert "cannot read this value" in message


def test_alias_bomb_is_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 8):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    text = "tools:\n  t:\n    sink_params: *a7\n" + "\n".join(lines)
    with pytest.raises(PolicyError):
        load_policy(text, "bomb.yaml")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_loads_or_raises_policy_error(text: str) -> None:
    with contextlib.suppress(PolicyError):
        load_policy(text, "fuzz.yaml")


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
        ),
        max_leaves=20,
    )
)
def test_any_yaml_structure_loads_or_raises_policy_error(value: object) -> None:
    text = yaml.safe_dump({"tools": {"t": value}, "servers": {"s": value}})
    with contextlib.suppress(PolicyError):
        load_policy(text, "fuzz.yaml")


# ---- settings -------------------------------------------------------------------------------------


def test_settings_defaults() -> None:
    s = merge([]).settings
    assert (s.taint_scope, s.approval_timeout, s.audit_arguments, s.on_tainted_identity) == (
        "session",
        DEFAULT_APPROVAL_TIMEOUT_SECONDS,
        "full",
        "ask",
    )
    assert s.source["taint_scope"] == "default"


def test_higher_layer_setting_wins_and_names_its_line() -> None:
    user = load("taint_scope: user\ntaint_retention: 12h\napproval_timeout: 60\n", "user.yaml")
    shim = load("\napproval_timeout: 30\n", "shim.yaml")
    s = merge([user, shim]).settings
    assert s.taint_scope == "user"
    assert s.taint_retention == 12 * 3600
    assert s.approval_timeout == 30
    assert s.source["approval_timeout"] == "shim.yaml:2"
    assert s.source["taint_scope"] == "user.yaml:1"


# ---- layering -----------------------------------------------------------------------------------


def test_user_entry_merges_onto_the_pack_entry_key_by_key() -> None:
    user = load(
        """
        tools:
          send_email:
            trusted_destinations: [boss@corp.com]
            max_calls: 5
        """,
        "user.yaml",
    )
    rule = merge([user]).rule_for("gmail", GMAIL_UPSTREAM, "send_email")
    assert rule.exfiltrating  # kept from the pack: leaving the key out is not turning the gate off
    assert rule.sink_params == ("to", "cc", "bcc")
    assert rule.trusted_destinations == ("boss@corp.com",)
    assert rule.max_calls == 5
    assert rule.source["exfiltrating"] == "pack gmail"
    assert rule.source["max_calls"] == "user.yaml:3"


def test_turning_a_pack_sink_gate_off_needs_explicit_exfiltrating_false() -> None:
    user = load("tools:\n  send_email:\n    exfiltrating: false\n", "user.yaml")
    rule = merge([user]).rule_for("gmail", GMAIL_UPSTREAM, "send_email")
    assert not rule.exfiltrating
    assert rule.source["exfiltrating"] == "user.yaml:2"


def test_trusted_destinations_extend_across_layers() -> None:
    user = load("tools:\n  send_email:\n    trusted_destinations: [a@corp.com]\n", "user.yaml")
    shim = load("tools:\n  send_email:\n    trusted_destinations: [b@corp.com, a@corp.com]\n", "shim.yaml")
    rule = merge([user, shim]).rule_for("gmail", GMAIL_UPSTREAM, "send_email")
    assert rule.trusted_destinations == ("a@corp.com", "b@corp.com")
    assert rule.source["trusted_destinations"] == "user.yaml:2 + shim.yaml:2"


def test_sink_params_replace_and_the_narrowing_is_noted() -> None:
    user = load("tools:\n  send_email:\n    sink_params: [to, recipients]\n", "user.yaml")
    rule = merge([user]).rule_for("gmail", GMAIL_UPSTREAM, "send_email")
    assert rule.sink_params == ("to", "recipients")
    assert any("no longer gated: bcc, cc" in n for n in rule.notes)


def test_arg_patterns_merge_per_parameter() -> None:
    user = load("tools:\n  t:\n    arg_patterns: {a: 'x+', b: 'y+'}\n", "user.yaml")
    shim = load("tools:\n  t:\n    arg_patterns: {b: 'z+'}\n", "shim.yaml")
    rule = merge([user, shim]).rule_for("s", (), "t")
    assert dict(rule.arg_patterns) == {"a": "x+", "b": "z+"}


def test_allowed_path_prefixes_replace_so_a_shim_can_narrow() -> None:
    user = load("tools:\n  write_file:\n    allowed_path_prefixes: [/home/u]\n", "user.yaml")
    shim = load("tools:\n  write_file:\n    allowed_path_prefixes: [/home/u/out/]\n", "shim.yaml")
    rule = merge([user, shim]).rule_for("filesystem", (), "write_file")
    assert rule.allowed_path_prefixes == ("/home/u/out",)
    assert rule.write_params == ("path",)


def test_server_section_sits_above_the_global_tools_of_its_layer() -> None:
    user = load(
        """
        tools:
          send_email: {max_calls: 10}
        servers:
          gmail:
            tools:
              send_email: {max_calls: 2}
        """,
        "user.yaml",
    )
    policy = merge([user])
    assert policy.rule_for("gmail", GMAIL_UPSTREAM, "send_email").max_calls == 2
    assert policy.rule_for("other", (), "send_email").max_calls == 10


def test_shim_layer_sits_above_the_user_layer() -> None:
    user = load("servers:\n  gmail:\n    tools:\n      send_email: {max_calls: 2}\n", "user.yaml")
    shim = load("tools:\n  send_email: {max_calls: 7}\n", "shim.yaml")
    assert merge([user, shim]).rule_for("gmail", GMAIL_UPSTREAM, "send_email").max_calls == 7


def test_declaring_sinks_on_an_unknown_tool_turns_the_gate_on() -> None:
    user = load("tools:\n  partner_sync:\n    sink_params: [target]\n", "user.yaml")
    rule = merge([user]).rule_for("misc", (), "partner_sync", {"properties": {"target": {"type": "string"}}})
    assert rule.exfiltrating
    assert rule.source["exfiltrating"].startswith("implied by the sinks declared at user.yaml:2")


def test_bare_max_calls_on_an_unknown_tool_keeps_the_fallback_gate() -> None:
    schema = {"properties": {"recipient_email": {"type": "string"}, "body": {"type": "string"}}}
    user = load("tools:\n  notify_customer:\n    max_calls: 3\n", "user.yaml")
    rule = merge([user]).rule_for("crm", (), {"name": "notify_customer", "inputSchema": schema})
    assert rule.exfiltrating
    assert rule.sink_params == ("recipient_email",)
    assert rule.source["exfiltrating"] == "fallback"
    assert rule.max_calls == 3


def test_server_matching_no_pack_gets_no_pack_and_the_fallback_decides() -> None:
    policy = merge([])
    assert policy.packs_for("my-tool-server", ("python", "server.py")) == ()
    rule = policy.rule_for("my-tool-server", ("python", "server.py"), "send_email")
    assert rule.source["exfiltrating"] == "fallback"


def test_packs_match_by_name_or_by_command_substring() -> None:
    policy = merge([])
    assert policy.packs_for("GMAIL", ()) == ("gmail",)
    assert policy.packs_for("mail", GMAIL_UPSTREAM) == ("gmail",)
    assert policy.packs_for("x", ("uvx", "mcp-server-fetch")) == ("fetch",)


def test_forced_packs_apply_globally_or_per_server() -> None:
    user = load("packs: [fetch]\nservers:\n  bank:\n    packs: [agentdojo-banking]\n", "user.yaml")
    policy = merge([user])
    assert policy.packs_for("bank", ()) == ("fetch", "agentdojo-banking")
    assert policy.packs_for("other", ()) == ("fetch",)
    assert policy.rule_for("bank", (), "send_money").sink_params == ("recipient",)


def test_merge_refuses_a_pack_name_missing_from_the_packs_given() -> None:
    user = load("packs: [gmail]\n", "user.yaml")
    with pytest.raises(PolicyError, match="unknown pack 'gmail'"):
        merge([user], packs={})


def test_custom_packs_can_be_passed_in() -> None:
    pack = Pack(
        "mine", "test", (), ("mine",), (), {"post": ToolEntry(exfiltrating=True, sink_params=("to",))}
    )
    policy = merge([], packs={"mine": pack})
    assert policy.rule_for("mine", (), "post").source["sink_params"] == "pack mine"


def test_builtin_packs_ship_no_trust() -> None:
    for pack in builtin_packs().values():
        for entry in pack.tools.values():
            assert entry.trusted_destinations is None
            assert entry.trusted_domains is None
            assert entry.allowed_path_prefixes is None


# ---- format_effective -----------------------------------------------------------------------------


def test_format_effective_shows_rules_with_their_sources() -> None:
    user = load(
        "approval_timeout: 30\ntools:\n  send_email:\n    trusted_destinations: [a@corp.com]\n", "u.yaml"
    )
    text = format_effective(
        merge([user]),
        [ServerTools("gmail", GMAIL_UPSTREAM, ({"name": "send_email"}, {"name": "read_email"}))],
    )
    assert "approval_timeout: 30  [u.yaml:1]" in text
    assert "server gmail: packs gmail" in text
    assert "sink_params: to, cc, bcc  [pack gmail]" in text
    assert "trusted_destinations: a@corp.com  [u.yaml:3]" in text
    assert "read_email:\n    sink gate: off  [fallback]" in text


def test_format_effective_without_tools_lists_the_named_tools_and_packs() -> None:
    user = load(
        "tools:\n  delete_file: {max_calls: 0}\nservers:\n  gmail:\n    tools:\n      x: {}\n", "u.yaml"
    )
    text = format_effective(merge([user]))
    assert "every server: packs none (fallback only)" in text
    assert "max_calls: forbidden (0)  [u.yaml:2]" in text
    assert "server gmail: packs gmail" in text
    assert "gmail: 9 tools, checked against @gongrzhe/server-gmail-autoauth-mcp 1.1.11" in text


def test_policy_nested_ten_thousand_deep_is_an_error_naming_the_file_not_a_recursion_crash() -> None:
    for text in (
        "tools:\n  send_email:\n    trusted_destinations: " + "[" * 10_000 + "]" * 10_000 + "\n",
        "".join(" " * i + f"k{i}:\n" for i in range(1_000)),
    ):
        with pytest.raises(PolicyError) as caught:
            load_policy(text, "deep.yaml")
        assert "deep.yaml:" in str(caught.value) and "nested more than" in str(caught.value)


def test_regex_with_500_nested_groups_is_an_error_naming_the_key_not_a_recursion_crash() -> None:
    text = "tools:\n  t:\n    arg_patterns:\n      to: '" + "(" * 500 + "a" + ")" * 500 + "'\n"
    with pytest.raises(PolicyError) as caught:
        load_policy(text, "re.yaml")
    assert "re.yaml:" in str(caught.value) and "arg_patterns.to" in str(caught.value)
    assert "nests 500 groups" in str(caught.value)
