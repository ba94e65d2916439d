"""The managed layer: a user or shim policy may tighten what the administrator wrote, never loosen it.

Each test is one way a fooled agent (or a user in a hurry) could edit the user's policy.yaml to get
past a company rule; each must be refused at load time, naming both files and the key.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bouncerd.core.managed import check_layer, managed_keys, problems
from bouncerd.core.policy import PolicyFile, load_policy, merge
from bouncerd.errors import PolicyError

MANAGED = """\
taint_scope: server
on_tainted_identity: deny
audit_arguments: full
deny_trust:
  domains: [evil.example]
  destinations: [drop@attacker.example]
tools:
  send_email:
    exfiltrating: true
    sink_params: [to, cc]
    on_tainted: deny
    trusted_domains: [corp.example]
  write_file:
    write_params: [path]
    allowed_path_prefixes: [/srv/work]
  run_query:
    max_calls: 5
    arg_patterns:
      query: "^SELECT "
  read_inbox:
    untrusted_output: true
  delete_file:
    deletion: true
servers:
  crm:
    tools:
      export_contacts:
        exfiltrating: true
"""


def managed() -> PolicyFile:
    return load_policy(MANAGED, "/etc/bouncer/policy.yaml", managed=True)


def user(text: str, name: str = "/home/u/.config/bouncer/policy.yaml") -> PolicyFile:
    return load_policy(text, name)


def refusal(text: str) -> str:
    with pytest.raises(PolicyError) as refused:
        check_layer(managed(), user(text))
    message = str(refused.value)
    assert "/etc/bouncer/policy.yaml" in message and "/home/u/.config/bouncer/policy.yaml" in message
    return message


def test_user_policy_turning_a_managed_sink_gate_off_is_refused() -> None:
    msg = refusal("tools:\n  send_email:\n    exfiltrating: false\n")
    assert "policy.yaml:2: tools.send_email.exfiltrating" in msg and "sink gate off" in msg
    assert "/etc/bouncer/policy.yaml:8: exfiltrating" in msg


def test_user_policy_re_enables_send_to_denied_domain() -> None:
    msg = refusal("tools:\n  post_message:\n    trusted_domains: [mail.evil.example]\n")
    assert "tools.post_message.trusted_domains" in msg and "deny_trust" in msg


def test_user_policy_trusting_a_parent_of_a_denied_domain_is_refused() -> None:
    """Trusting example-parent covers the denied subdomain: the same send, spelled wider."""
    text = MANAGED.replace("domains: [evil.example]", "domains: [mail.evil.example]")
    m = load_policy(text, "/etc/bouncer/policy.yaml", managed=True)
    with pytest.raises(PolicyError, match="deny_trust"):
        check_layer(m, user("tools:\n  post_message:\n    trusted_domains: [evil.example]\n"))


def test_user_policy_trusting_a_denied_destination_is_refused() -> None:
    msg = refusal("tools:\n  send_email:\n    trusted_destinations: [DROP@attacker.example]\n")
    assert "trusted_destinations" in msg and "deny_trust" in msg


def test_user_policy_trusting_an_address_under_a_denied_domain_is_refused() -> None:
    msg = refusal("tools:\n  post:\n    trusted_destinations: [boss@evil.example]\n")
    assert "tools.post.trusted_destinations" in msg


def test_user_policy_trusting_a_domain_outside_the_managed_allowlist_is_refused() -> None:
    msg = refusal("tools:\n  send_email:\n    trusted_domains: [gmail.example]\n")
    assert "outside the managed allowlist" in msg


def test_user_policy_trusting_a_subdomain_of_the_managed_allowlist_is_allowed() -> None:
    check_layer(managed(), user("tools:\n  send_email:\n    trusted_domains: [eu.corp.example]\n"))


def test_user_policy_dropping_a_managed_sink_parameter_is_refused() -> None:
    """Restating sink_params without cc would let the agent put the attacker in cc."""
    msg = refusal("tools:\n  send_email:\n    sink_params: [to]\n")
    assert "stops gating the managed sink parameter(s) cc" in msg


def test_user_policy_narrowing_an_every_argument_gate_is_refused() -> None:
    msg = refusal("servers:\n  crm:\n    tools:\n      export_contacts:\n        sink_params: [url]\n")
    assert "servers.crm.tools.export_contacts.sink_params" in msg


def test_user_policy_relaxing_on_tainted_deny_to_ask_is_refused() -> None:
    assert "on_tainted" in refusal("tools:\n  send_email:\n    on_tainted: ask\n")


def test_user_policy_changing_the_managed_sink_kind_is_refused() -> None:
    text = MANAGED.replace("    on_tainted: deny\n", "    on_tainted: deny\n    sink_kind: send\n")
    m = load_policy(text, "/etc/bouncer/policy.yaml", managed=True)
    with pytest.raises(PolicyError, match="sink kind"):
        check_layer(m, user("tools:\n  send_email:\n    sink_kind: fetch\n"))


def test_user_policy_widening_a_managed_path_prefix_is_refused() -> None:
    msg = refusal("tools:\n  write_file:\n    allowed_path_prefixes: [/srv]\n")
    assert "widens the managed path prefixes with /srv" in msg


def test_user_policy_with_a_sibling_prefix_sharing_the_managed_string_is_refused() -> None:
    """/srv/workshop starts with /srv/work as a string, not as a path."""
    assert "allowed_path_prefixes" in refusal(
        "tools:\n  write_file:\n    allowed_path_prefixes: [/srv/workshop]\n"
    )


def test_user_policy_narrowing_a_managed_path_prefix_is_allowed() -> None:
    check_layer(managed(), user("tools:\n  write_file:\n    allowed_path_prefixes: [/srv/work/mine]\n"))


def test_user_policy_dropping_a_managed_write_parameter_is_refused() -> None:
    assert "write_params" in refusal("tools:\n  write_file:\n    write_params: [dest]\n")


def test_user_policy_raising_a_managed_budget_is_refused() -> None:
    msg = refusal("tools:\n  run_query:\n    max_calls: 50\n")
    assert "raises the managed budget 5 to 50" in msg


def test_user_policy_lowering_a_managed_budget_is_allowed() -> None:
    check_layer(managed(), user("tools:\n  run_query:\n    max_calls: 2\n"))


def test_user_policy_replacing_a_managed_argument_pattern_is_refused() -> None:
    assert "arg_patterns" in refusal("tools:\n  run_query:\n    arg_patterns:\n      query: '.*'\n")


def test_user_policy_vouching_for_managed_untrusted_output_is_refused() -> None:
    assert "untrusted_output" in refusal("tools:\n  read_inbox:\n    untrusted_output: false\n")


def test_user_policy_turning_the_managed_deletion_gate_off_is_refused() -> None:
    assert "deletion" in refusal("tools:\n  delete_file:\n    deletion: false\n")


def test_user_server_section_cannot_loosen_a_managed_top_level_rule() -> None:
    """servers.S.tools.T sits above the managed tools.T for server S."""
    msg = refusal("servers:\n  mail:\n    tools:\n      send_email:\n        exfiltrating: false\n")
    assert "servers.mail.tools.send_email.exfiltrating" in msg


def test_user_top_level_rule_cannot_loosen_a_managed_server_section() -> None:
    """A user's tools.T applies to every server, the managed server section's too."""
    msg = refusal("tools:\n  export_contacts:\n    exfiltrating: false\n")
    assert "tools.export_contacts.exfiltrating" in msg


def test_user_policy_narrowing_taint_scope_is_refused() -> None:
    assert "taint_scope" in refusal("taint_scope: session\n")


def test_user_policy_relaxing_identity_handling_is_refused() -> None:
    assert "on_tainted_identity" in refusal("on_tainted_identity: ask\n")


def test_user_policy_hiding_arguments_from_the_managed_audit_is_refused() -> None:
    assert "audit_arguments" in refusal("audit_arguments: digest\n")


def test_user_policy_replacing_managed_audit_export_is_refused() -> None:
    text = MANAGED + "audit_export:\n  syslog: true\n"
    m = load_policy(text, "/etc/bouncer/policy.yaml", managed=True)
    with pytest.raises(PolicyError, match="audit_export"):
        check_layer(m, user("audit_export:\n  syslog: false\n"))


def test_every_loosening_is_named_not_only_the_first() -> None:
    msg = refusal("tools:\n  send_email:\n    on_tainted: ask\n  run_query:\n    max_calls: 9\n")
    assert "on_tainted" in msg and "max_calls" in msg


def test_managed_policy_trusting_its_own_denied_domain_is_refused() -> None:
    text = MANAGED.replace("trusted_domains: [corp.example]", "trusted_domains: [evil.example]")
    m = load_policy(text, "/etc/bouncer/policy.yaml", managed=True)
    with pytest.raises(PolicyError, match="contradicts itself"):
        check_layer(m, m)


def test_deny_trust_in_a_user_policy_is_refused_not_silently_ignored() -> None:
    with pytest.raises(PolicyError, match=r"policy.yaml:1: deny_trust: only the administrator"):
        user("deny_trust:\n  domains: [x.example]\n")


def test_tightening_user_policy_is_accepted_and_merged_above_the_managed_layer() -> None:
    m = managed()
    u = user("tools:\n  run_query:\n    max_calls: 1\n  other_tool:\n    exfiltrating: false\n")
    check_layer(m, u)
    rule = merge([m, u], packs={}).rule_for("db", [], "run_query")
    assert rule.max_calls == 1
    assert merge([m], packs={}).rule_for("db", [], "run_query").source["max_calls"].startswith("/etc/bouncer")


def test_no_managed_layer_checks_nothing() -> None:
    check_layer(None, user("tools:\n  send_email:\n    exfiltrating: false\n"))
    assert problems(managed(), managed()) == []


def test_managed_keys_name_every_managed_rule_for_status() -> None:
    keys = managed_keys(managed())
    assert (
        "tools.send_email.exfiltrating" in keys and "servers.crm.tools.export_contacts.exfiltrating" in keys
    )
    assert "taint_scope" in keys and "deny_trust" in keys


def test_review_pack_marks_the_rules_the_managed_policy_decides(tmp_path: Path) -> None:
    """A reviewer must see which controls the user cannot change (data; rendering is elsewhere)."""
    from bouncerctl.report.build import Aggregator, read_log
    from bouncerctl.report.review import build_pack
    from bouncerctl.report.sources import gather

    from bouncerd.managedpolicy import MANAGED_POLICY_ENV, TEST_OWNER_ENV
    from bouncerd.paths import resolve

    d = tmp_path / "managed"
    d.mkdir(mode=0o755)
    (d / "policy.yaml").write_text(MANAGED)
    os.chmod(d / "policy.yaml", 0o644)
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps({"tools": [{"name": "run_query"}, {"name": "other"}]}))
    env = {
        "BOUNCER_HOME": str(tmp_path / "home"),
        MANAGED_POLICY_ENV: str(d / "policy.yaml"),
        TEST_OWNER_ENV: str(os.getuid()),
    }
    sources = gather(resolve(env), tools_file=tools, server=None, called=[], ask_daemon=False, environ=env)
    assert sources.managed_file == str(d / "policy.yaml")
    pack = build_pack(read_log([], Aggregator()), sources, generated="now", filters=[])
    rows = {row.tool: row for srv in pack.servers for row in srv.tools}
    assert "max_calls" in rows["run_query"].managed and "arg_patterns" in rows["run_query"].managed
    assert rows["other"].managed == ()
    # and the reader of either format sees it in the tool's row (before: computed, never printed)
    from bouncerctl.report import html, markdown

    for text in (markdown.render(pack), html.render(pack)):
        assert text.count("held by the managed policy") == 1  # run_query's row, not other's
        row = next(line for line in text.splitlines() if "held by" in line)
        assert "run_query" in row and "max_calls" in row and "arg_patterns" in row


def test_policy_check_refuses_a_file_that_loosens_the_managed_policy(tmp_path: Path) -> None:
    """The user learns before reloading that the daemon would refuse the edit."""
    from bouncerctl.app import main
    from click.testing import CliRunner

    from bouncerd.managedpolicy import MANAGED_POLICY_ENV, TEST_OWNER_ENV

    d = tmp_path / "managed"
    d.mkdir(mode=0o755)
    (d / "policy.yaml").write_text(MANAGED)
    os.chmod(d / "policy.yaml", 0o644)
    mine = tmp_path / "mine.yaml"
    mine.write_text("tools:\n  run_query:\n    max_calls: 50\n")
    env = {MANAGED_POLICY_ENV: str(d / "policy.yaml"), TEST_OWNER_ENV: str(os.getuid())}
    result = CliRunner(env=env).invoke(main, ["policy", "check", str(mine)])
    assert result.exit_code == 1
    assert "raises the managed budget 5 to 50" in result.output and str(d / "policy.yaml") in result.output
    mine.write_text("tools:\n  run_query:\n    max_calls: 2\n")
    result = CliRunner(env=env).invoke(main, ["policy", "check", "--verbose", str(mine)])
    assert result.exit_code == 0 and "max_calls: 2" in result.output
