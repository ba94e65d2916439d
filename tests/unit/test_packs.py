"""The built-in packs: they load, they match the schemas they were checked against, and they name
every destination-carrying parameter and every tool the fallback would gate as a send.

`fixtures/pack_schemas.json` holds the input schemas (descriptions stripped) that each pack's
`checked_against` entry was made from: live tools/list output for the npm/PyPI servers, the
schemas AgentDojo generates from its suite functions for the AgentDojo packs.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from bouncerd.core import fallback
from bouncerd.core.policy import builtin_packs, load_pack, load_policy, merge
from bouncerd.errors import PolicyError

SCHEMAS: dict[str, dict[str, dict[str, Any]]] = json.loads(
    (Path(__file__).parent / "fixtures" / "pack_schemas.json").read_text()
)
PACKS = builtin_packs()

# Destination-shaped parameters a pack deliberately leaves out of sink_params, and why.
NOT_DESTINATIONS = {
    ("agentdojo-slack", "add_user_to_channel", "channel"): "the user added is where data goes",
    ("gmail", "create_filter", "criteria.to"): "selects which mail the filter applies to",
    ("gdrive", "createCalendarEvent", "attachments.fileUrl"): "a Drive file attached; attendees receive it",
    ("gdrive", "updateCalendarEvent", "attachments.fileUrl"): "a Drive file attached; attendees receive it",
}


def schema_params(schema: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Parameter paths as the packs' snapshots spell them: nested objects and arrays of objects dotted."""
    out: list[str] = []
    for name, sub in (schema.get("properties") or {}).items():
        out.append(prefix + name)
        if not isinstance(sub, Mapping):
            continue
        if sub.get("type") == "object":
            out += schema_params(sub, f"{prefix}{name}.")
        items = sub.get("items")
        if sub.get("type") == "array" and isinstance(items, Mapping) and items.get("type") == "object":
            out += schema_params(items, f"{prefix}{name}.")
    return out


def pack_tool_cases() -> list[tuple[str, str, str, Mapping[str, Any]]]:
    cases = []
    for pack_name, by_package in sorted(SCHEMAS.items()):
        for package, tools in sorted(by_package.items()):
            for tool, schema in sorted(tools.items()):
                cases.append((pack_name, package, tool, schema))
    return cases


CASES = pack_tool_cases()


def test_every_pack_loads_and_names_what_it_was_checked_against() -> None:
    expected = {
        "agentdojo-banking",
        "agentdojo-slack",
        "agentdojo-travel",
        "agentdojo-workspace",
        "everything",
        "fetch",
        "filesystem",
        "gdrive",
        "github",
        "gmail",
        "slack",
    }
    assert set(PACKS) == expected
    for pack in PACKS.values():
        assert pack.checked_against, pack.name
        for checked in pack.checked_against:
            assert checked.package and checked.version
            assert checked.method in ("live tools/list", "documented schema")
            assert checked.tools


def test_fixture_and_snapshots_agree() -> None:
    for pack_name, by_package in SCHEMAS.items():
        snapshots = {c.package: c.tools for c in PACKS[pack_name].checked_against}
        for package, tools in by_package.items():
            assert package in snapshots, (pack_name, package)
            assert set(tools) == set(snapshots[package]), (pack_name, package)
            for tool, schema in tools.items():
                assert tuple(schema_params(schema)) == snapshots[package][tool], (pack_name, tool)


@pytest.mark.parametrize("pack_name", sorted(PACKS))
def test_pack_entries_name_tools_and_parameters_that_exist(pack_name: str) -> None:
    pack = PACKS[pack_name]
    for tool, entry in pack.tools.items():
        seen = [c.tools[tool] for c in pack.checked_against if tool in c.tools]
        assert seen, f"{pack_name}: {tool} is in no checked tool list"
        named = (
            list(entry.sink_params or ()) + list(entry.write_params or ()) + list(entry.arg_patterns or {})
        )
        for param in named:
            assert any(param in params for params in seen), f"{pack_name}: {tool}.{param} does not exist"


@pytest.mark.parametrize(
    ("pack_name", "package", "tool", "schema"), CASES, ids=lambda v: v if isinstance(v, str) else ""
)
def test_pack_names_every_destination_parameter_and_every_tool_the_fallback_gates(
    pack_name: str, package: str, tool: str, schema: Mapping[str, Any]
) -> None:
    pack = PACKS[pack_name]
    guess = fallback.classify(tool, schema).entry
    entry = pack.tools.get(tool)
    if guess.exfiltrating:
        assert entry is not None, f"{pack_name}: the fallback would gate {tool}; the pack must decide it"
    if entry is None or not entry.exfiltrating:
        return
    sinks = entry.sink_params or ()
    for param in fallback.destination_params(schema):
        covered = any(param.path == s or param.path.startswith(s + ".") for s in sinks)
        excused = (pack_name, tool, param.path) in NOT_DESTINATIONS
        assert covered or excused, f"{pack_name}: {tool}.{param.path} ({param.reason}) is not a sink"


def rule(pack: str, tool: str, server: str | None = None):  # type: ignore[no-untyped-def]
    policy = merge([load_policy(f"packs: [{pack}]\n", "p.yaml")])
    schema = next((s[tool] for s in SCHEMAS.get(pack, {}).values() if tool in s), None)
    return policy.rule_for(server or "srv", (), tool, schema)


@pytest.mark.parametrize(
    ("pack", "tool", "sinks"),
    [
        ("agentdojo-workspace", "send_email", ("recipients", "cc", "bcc")),
        ("agentdojo-workspace", "share_file", ("email",)),
        ("agentdojo-workspace", "create_calendar_event", ("participants",)),
        ("agentdojo-workspace", "add_calendar_event_participants", ("participants",)),
        ("agentdojo-slack", "invite_user_to_slack", ("user", "user_email")),
        ("agentdojo-slack", "send_direct_message", ("recipient",)),
        ("agentdojo-slack", "send_channel_message", ("channel",)),
        ("agentdojo-slack", "post_webpage", ("url",)),
        ("agentdojo-banking", "send_money", ("recipient",)),
        ("agentdojo-banking", "update_scheduled_transaction", ("recipient",)),
        ("agentdojo-travel", "reserve_hotel", ("hotel",)),
        ("gmail", "send_email", ("to", "cc", "bcc")),
        ("gmail", "create_filter", ("action.forward",)),
        ("slack", "slack_post_message", ("channel_id",)),
        ("slack", "conversations_add_message", ("channel_id",)),
        ("github", "create_issue", ("owner", "repo", "assignees")),
        ("gdrive", "addPermission", ("emailAddress", "domain")),
    ],
)
def test_sending_tools_are_gated_on_their_destinations(pack: str, tool: str, sinks: tuple[str, ...]) -> None:
    r = rule(pack, tool)
    assert r.exfiltrating
    assert r.sink_kind == "send"
    assert r.sink_params == sinks
    assert r.source["sink_params"] == f"pack {pack}"


@pytest.mark.parametrize(
    ("pack", "tool", "sinks"),
    [
        ("agentdojo-slack", "get_webpage", ("url",)),
        ("fetch", "fetch", ("url",)),
        ("everything", "gzip-file-as-resource", ("data",)),
        ("gdrive", "insertImageFromUrl", ("imageUrl",)),
    ],
)
def test_url_readers_are_fetch_sinks(pack: str, tool: str, sinks: tuple[str, ...]) -> None:
    r = rule(pack, tool)
    assert r.exfiltrating and r.sink_kind == "fetch" and r.sink_params == sinks


@pytest.mark.parametrize(
    ("pack", "tool"),
    [
        ("agentdojo-slack", "read_channel_messages"),
        ("agentdojo-slack", "read_inbox"),
        ("agentdojo-slack", "get_users_in_channel"),
        ("slack", "slack_get_channel_history"),
        ("gmail", "read_email"),
        ("gmail", "create_filter_from_template"),
        ("github", "get_issue"),
        ("filesystem", "read_text_file"),
    ],
)
def test_reading_tools_stay_ungated(pack: str, tool: str) -> None:
    assert not rule(pack, tool).exfiltrating


def test_filesystem_write_tools_carry_write_params() -> None:
    assert rule("filesystem", "write_file").write_params == ("path",)
    assert rule("filesystem", "move_file").write_params == ("source", "destination")


def test_deletions_are_marked_and_permission_reads_are_not() -> None:
    assert rule("agentdojo-workspace", "delete_file").deletion
    assert rule("agentdojo-workspace", "delete_email").deletion
    assert rule("gmail", "batch_delete_emails").deletion
    assert not rule("gdrive", "listPermissions").deletion
    assert not rule("gdrive", "removePermission").deletion


def test_gdrive_refuses_public_sharing_by_pattern_until_the_user_overrides_it() -> None:
    assert dict(rule("gdrive", "addPermission").arg_patterns) == {"type": "user|group|domain"}
    user = load_policy("tools:\n  addPermission:\n    arg_patterns: {type: '.*'}\n", "u.yaml")
    assert dict(merge([user]).rule_for("gdrive", (), "addPermission").arg_patterns) == {"type": ".*"}


PACK_TEXT = """\
pack: demo
description: test
checked_against:
  - {package: demo, version: "1", method: live tools/list, tools: {send: [to]}}
tools:
  send:
    exfiltrating: true
    sink_params: [to]
"""


def test_pack_loader_is_strict() -> None:
    assert load_pack(PACK_TEXT, "packs/demo.yaml").tools["send"].sink_params == ("to",)
    with pytest.raises(PolicyError, match=r"demo.yaml:9: tools.send.trusted_destinations: not allowed"):
        load_pack(PACK_TEXT + "    trusted_destinations: [a@b.com]\n", "packs/demo.yaml")
    with pytest.raises(PolicyError, match=r"must live in demo\.yaml"):
        load_pack(PACK_TEXT, "packs/other.yaml")
    with pytest.raises(PolicyError, match=r"must be one of live tools/list, documented schema"):
        load_pack(PACK_TEXT.replace("live tools/list", "guess"), "packs/demo.yaml")
    without = "".join(
        line for line in PACK_TEXT.splitlines(True) if not line.startswith(("checked", "  - {"))
    )
    with pytest.raises(PolicyError, match=r"demo.yaml:1: checked_against: missing"):
        load_pack(without, "packs/demo.yaml")
