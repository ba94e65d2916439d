"""The fallback gates unknown sending tools on destination-shaped parameters, and leaves readers alone."""

from __future__ import annotations

from typing import Any

import pytest
from fallback_helpers import fallback_rule
from hypothesis import given
from hypothesis import strategies as st

from bouncerd.core import fallback_words
from bouncerd.core.fallback import classify, destination_params, looks_like_destination, words
from bouncerd.core.rules import ToolRule


def schema(**props: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {k: v if isinstance(v, dict) else {"type": v} for k, v in props.items()},
    }


def test_words_split_snake_kebab_and_camel_case() -> None:
    assert words("sendSMS_to-userID") == ["send", "sms", "to", "user", "id"]
    assert words("get-webpage") == ["get", "webpage"]
    assert words("emailAddress") == ["email", "address"]


@given(st.text(alphabet=st.sampled_from("aZ_-9 .Ié"), max_size=fallback_words.MAX_REMEMBERED_NAME_CHARS + 40))
def test_remembered_words_are_the_split_and_each_caller_gets_its_own_list(name: str) -> None:
    # The split is memoised; a caller that changed its list must not change what the next one reads
    # (a tool name whose remembered words lost "send" would no longer be gated as a sender).
    first = words(name)
    assert first == list(fallback_words._split(name))
    first.append("mutated")
    first[:1] = ["x"]
    assert words(name) == list(fallback_words._split(name))
    assert words(name) is not words(name)


def test_recipient_email_parameter_is_gated() -> None:
    # The published 0.1.4 package matched exact names only, and let this one through.
    rule = fallback_rule("notify_customer", schema(recipient_email="string", body="string"))
    assert rule.exfiltrating
    assert rule.sink_kind == "send"
    assert rule.sink_params == ("recipient_email",)
    assert rule.source["exfiltrating"] == "fallback"
    assert any("'recipient_email' matched" in n for n in rule.notes)


@pytest.mark.parametrize(
    ("tool", "props", "sinks"),
    [
        ("send_message", {"to": "string", "text": "string"}, ("to",)),
        ("reply_all", {"reply_to": "string"}, ("reply_to",)),
        ("forward_email", {"forward_to": "string", "messageId": "string"}, ("forward_to",)),
        ("post_update", {"webhook_url": "string", "payload": "string"}, ("webhook_url",)),
        ("publish", {"endpoint": "string"}, ("endpoint",)),
        ("share_document", {"shareWith": "string", "doc_id": "string"}, ("shareWith",)),
        ("transfer_funds", {"iban": "string", "amount": "number"}, ("iban",)),
        ("pay", {"to_account_number": "string"}, ("to_account_number",)),
        ("notify", {"phone": "string"}, ("phone",)),
        ("send_dm", {"user_id": "string"}, ("user_id",)),
        ("send_mail", {"address": "string"}, ("address",)),
        ("submit_form", {"target_host": "string"}, ("target_host",)),
        ("invite", {"invitees": {"type": "array", "items": {"type": "string"}}}, ("invitees",)),
        ("upload_report", {"dest": "string"}, ("dest",)),
        ("send_channel_message", {"channel": "string", "body": "string"}, ("channel",)),
        ("tweet", {"mention_handle": "string", "text": "string"}, ()),
        ("email", {"recipients": {"type": "array", "items": {"type": "string"}}}, ("recipients",)),
        ("send_email", {"contact": {"type": "string", "format": "email"}}, ("contact",)),
        ("send", {"x": {"anyOf": [{"type": "string", "format": "idn-email"}, {"type": "null"}]}}, ("x",)),
    ],
)
def test_sending_verbs_gate_destination_shaped_parameters(
    tool: str, props: dict[str, Any], sinks: tuple[str, ...]
) -> None:
    rule = fallback_rule(tool, schema(**props))
    assert rule.exfiltrating
    assert rule.sink_kind == "send"
    assert rule.sink_params == sinks


def test_sending_verb_without_destination_parameters_makes_every_argument_a_sink() -> None:
    rule = fallback_rule("submit_feedback", schema(text="string"))
    assert rule.exfiltrating
    assert rule.sink_params == ()
    assert any("every argument is a sink" in n for n in rule.notes)


@pytest.mark.parametrize(
    ("tool", "props"),
    [
        ("read_channel_messages", {"channel": "string"}),
        ("get_user_profile", {"user_id": "string"}),
        ("list_recipients", {"recipient": "string"}),
        ("search_emails", {"sender": "string", "to": "string"}),
        ("find_contact", {"email": "string"}),
        ("lookup_contact", {"email": "string"}),
        ("lookup", {"name": "string"}),
        ("list_webhooks", {}),
        ("get_webhook", {"webhook_id": "string"}),
        ("describe_remote", {"name": "string"}),
        ("search_subscriptions", {"callback_url": "string"}),
        ("list_collaborators", {"repo": "string"}),
        (
            "check_restaurant_opening_hours",
            {"restaurant_names": {"type": "array", "items": {"type": "string"}}},
        ),
        ("query_channel_history", {"channel_id": "string"}),
        ("fetch_messages", {"channel": "string"}),
        ("email_search", {"query": "string", "to": "string"}),
        ("slack_get_channel_history", {"channel_id": "string"}),
        ("describe_webhook", {"webhook_id": "string"}),
    ],
)
def test_reading_tools_are_never_turned_into_sends(tool: str, props: dict[str, Any]) -> None:
    assert not fallback_rule(tool, schema(**props)).exfiltrating


@pytest.mark.parametrize(
    ("tool", "props", "sinks"),
    [
        ("fetch", {"url": {"type": "string", "format": "uri"}, "raw": "boolean"}, ("url",)),
        ("get_webpage", {"url": "string"}, ("url",)),
        ("browse", {"link": "string"}, ("link",)),
        ("download_file", {"source_url": "string", "path": "string"}, ("source_url",)),
        ("scrape_page", {"target": {"type": "string", "format": "uri"}}, ("target",)),
        ("navigate", {"href": "string"}, ("href",)),
        ("read_url", {"uri": "string"}, ("uri",)),
    ],
)
def test_fetch_verbs_make_a_fetch_sink_of_url_parameters(
    tool: str, props: dict[str, Any], sinks: tuple[str, ...]
) -> None:
    rule = fallback_rule(tool, schema(**props))
    assert rule.exfiltrating
    assert rule.sink_kind == "fetch"
    assert rule.sink_params == sinks


@pytest.mark.parametrize(
    ("tool", "props", "sinks"),
    [
        ("add_user_to_channel", {"user": "string", "channel": "string"}, ("user", "channel")),
        ("create_calendar_event", {"title": "string", "participants": {"type": "array"}}, ("participants",)),
        (
            "add_calendar_event_participants",
            {"event_id": "string", "participants": {"type": "array"}},
            ("participants",),
        ),
        ("update_scheduled_transaction", {"id": "integer", "recipient": "string"}, ("recipient",)),
        ("conversations_add_message", {"channel_id": "string", "payload": "string"}, ("channel_id",)),
        (
            "createCalendarEvent",
            {"attendees": {"type": "array", "items": {"type": "string"}}},
            ("attendees",),
        ),
        ("create_webhook", {"webhook": "string"}, ("webhook",)),
    ],
)
def test_mutating_verbs_that_add_someone_are_sends(
    tool: str, props: dict[str, Any], sinks: tuple[str, ...]
) -> None:
    rule = fallback_rule(tool, schema(**props))
    assert rule.exfiltrating
    assert rule.sink_params == sinks


@pytest.mark.parametrize(
    ("tool", "props"),
    [
        ("update_channel_topic", {"channel": "string", "topic": "string"}),
        ("move_file", {"source": "string", "destination": "string"}),
        ("modify_email", {"messageId": "string", "addLabelIds": "array"}),
        ("removePermission", {"fileId": "string", "emailAddress": "string"}),
        ("create_label", {"name": "string"}),
        ("set_notify_members", {"notify_members": "boolean"}),
        ("insertText", {"documentId": "string", "textToFind": "string"}),
        ("delete_email", {"email_id": "string"}),
    ],
)
def test_mutating_verbs_without_a_person_are_not_sends(tool: str, props: dict[str, Any]) -> None:
    assert not fallback_rule(tool, schema(**props)).exfiltrating


def test_no_verb_with_a_destination_parameter_is_a_send() -> None:
    rule = fallback_rule("mailer", schema(to="string", body="string"))
    assert rule.exfiltrating
    assert rule.sink_params == ("to",)


def test_no_verb_without_a_destination_parameter_is_not_gated() -> None:
    assert not fallback_rule("echo_back", schema(message="string")).exfiltrating


def test_boolean_and_number_parameters_are_never_destinations() -> None:
    params = destination_params(schema(sendNotificationEmail="boolean", member_count="integer", to="string"))
    assert [p.path for p in params] == ["to"]


def test_content_and_id_suffixes_are_not_destinations() -> None:
    params = destination_params(
        schema(
            email_subject="string", emailMessage="string", email_id="string", inReplyTo="string", cc="string"
        )
    )
    assert [p.path for p in params] == ["cc"]


def test_nested_objects_and_arrays_are_searched_with_dotted_paths() -> None:
    s = schema(
        message={
            "type": "object",
            "properties": {
                "recipients": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"addr": {"type": "string"}}},
                },
                "subject": {"type": "string"},
            },
        },
        attachments={
            "type": "array",
            "items": {"type": "object", "properties": {"callback": {"type": "string", "format": "uri"}}},
        },
    )
    rule = fallback_rule("dispatch", s)
    assert rule.sink_params == ("message.recipients", "attachments.callback")


def test_local_refs_are_followed() -> None:
    s = {
        "type": "object",
        "properties": {"who": {"$ref": "#/$defs/Person"}},
        "$defs": {"Person": {"type": "object", "properties": {"email": {"type": "string"}}}},
    }
    assert fallback_rule("send_invite", s).sink_params == ("who.email",)


def test_ref_cycles_end() -> None:
    s = {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {"$ref": "#/$defs/A"}}}
    assert fallback_rule("send", s).exfiltrating


@pytest.mark.parametrize(
    ("tool", "deletion"),
    [
        ("delete_file", True),
        ("remove_user", True),
        ("drop_table", True),
        ("purge", True),
        ("wipe_device", True),
        ("batchDeleteEmails", True),
        ("get_permissions", False),
        ("list_deleted_items", False),
        ("read_file", False),
        ("get_delete_status", False),
        ("update_password", False),
    ],
)
def test_deletion_is_recognised_by_whole_name_parts(tool: str, deletion: bool) -> None:
    assert fallback_rule(tool, schema()).deletion is deletion


def test_get_permissions_is_not_a_deletion() -> None:
    rule = fallback_rule("get_permissions", schema(file_id="string"))
    assert not rule.deletion
    assert not rule.exfiltrating


def test_path_parameters_of_writing_tools_become_write_params() -> None:
    assert classify("write_file", schema(path="string", content="string")).entry.write_params == ("path",)
    assert classify("move_file", schema(source="string", destination="string")).entry.write_params == (
        "source",
        "destination",
    )
    assert classify(
        "download_attachment", schema(savePath="string", messageId="string")
    ).entry.write_params == ("savePath",)
    assert classify("read_file", schema(path="string")).entry.write_params is None
    assert (
        classify("moveItem", schema(itemId="string", destinationFolderId="string")).entry.write_params is None
    )


def test_without_a_schema_only_the_name_decides() -> None:
    assert fallback_rule("send_email", None).exfiltrating
    assert not fallback_rule("read_email", None).exfiltrating
    assert any("no input schema" in n for n in fallback_rule("mystery", None).notes)


@pytest.mark.parametrize(
    "bad", [{"properties": "x"}, {"properties": {"a": 3}}, {"items": [1, 2]}, {"$ref": 5}]
)
def test_malformed_schemas_do_not_raise(bad: dict[str, Any]) -> None:
    fallback_rule("send_thing", bad)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("recipients", True),
        ("to", True),
        ("webhookUrl", True),
        ("channel_id", True),
        ("body", False),
        ("subject", False),
    ],
)
def test_looks_like_destination_by_name_alone(name: str, expected: bool) -> None:
    assert looks_like_destination(name) is expected


# ---- sinks by meaning --------------------------------------------------------------------


def gated(rule: ToolRule) -> tuple[str, tuple[str, ...]] | None:
    return (rule.sink_kind, rule.sink_params) if rule.exfiltrating else None


@pytest.mark.parametrize(
    ("tool", "props", "sinks"),
    [
        ("lookup_domain", {"domain": "string"}, ("domain",)),
        ("test_webhook", {"url": "string"}, ("url",)),
        ("verify_endpoint", {"endpoint": "string"}, ("endpoint",)),
        ("check_port", {"host": "string", "port": "integer"}, ("host",)),
        ("validate_callback", {"callback": {"type": "string", "format": "uri"}}, ("callback",)),
        ("resolve", {"name": "string"}, ("name",)),
        ("resolve_hostname", {"hostname": "string"}, ("hostname",)),
        ("dns_query", {"name": "string", "type": "string"}, ("name",)),
        ("connect", {"host": "string", "port": "integer"}, ("host",)),
    ],
)
def test_probing_verbs_with_a_host_or_endpoint_are_sends(
    tool: str, props: dict[str, Any], sinks: tuple[str, ...]
) -> None:
    assert gated(fallback_rule(tool, schema(**props))) == ("send", sinks)


@pytest.mark.parametrize(
    ("tool", "props"),
    [
        ("check_access", {"user": "string", "resource": "string"}),
        ("validate_schema", {"schema": "string"}),
        ("verify_signature", {"payload": "string", "signature": "string"}),
        ("test_connection", {}),
        ("resolve_conflict", {"name": "string"}),
        ("resolve_issue", {"issue_id": "string"}),
        ("lookup", {"name": "string"}),
    ],
)
def test_probing_verbs_without_a_host_keep_their_meaning(tool: str, props: dict[str, Any]) -> None:
    assert not fallback_rule(tool, schema(**props)).exfiltrating


def test_name_resolution_is_a_send_even_under_a_reading_verb() -> None:
    # The resolver of the attacker's zone sees the label: `secret.attacker.example` is a message.
    assert gated(fallback_rule("get_dns_records", schema(domain="string"))) == ("send", ("domain",))
    assert gated(fallback_rule("query_dns", schema(domain="string"))) == ("send", ("domain",))
    assert not fallback_rule("get_dns_status", schema(zone_id="string")).exfiltrating


def test_a_standing_channel_is_noted_for_policy_check() -> None:
    rule = fallback_rule("create_webhook", schema(url="string", events="array"))
    assert gated(rule) == ("send", ("url",))
    assert "standing channel: tool name word 'webhook'; its destination outlives the session" in rule.notes


@pytest.mark.parametrize(
    ("tool", "props"),
    [
        ("delete_webhook", {"url": "string"}),
        ("remove_collaborator", {"username": "string"}),
        ("revoke_access", {"grantee": "string"}),
        ("unsubscribe", {"callback_url": "string"}),
        ("delete_dns_record", {"domain": "string"}),
        ("remove_remote", {"name": "string"}),
    ],
)
def test_taking_a_channel_away_is_not_a_send(tool: str, props: dict[str, Any]) -> None:
    assert not fallback_rule(tool, schema(**props)).exfiltrating


def test_context_words_are_destinations_only_where_the_tool_sends() -> None:
    assert not fallback_rule("convert_time", schema(target_timezone="string", time="string")).exfiltrating
    assert not fallback_rule("git_diff", schema(repo_path="string", target="string")).exfiltrating
    assert gated(fallback_rule("send", schema(target="string", body="string"))) == ("send", ("target",))
    assert not looks_like_destination("target")
    assert destination_params(schema(target="string")) == []
    assert [p.path for p in destination_params(schema(target="string"), sending=True)] == ["target"]


def test_a_target_declared_a_uri_is_a_destination_anywhere() -> None:
    params = destination_params(schema(target={"type": "string", "format": "uri"}))
    assert [(p.path, p.strong) for p in params] == [("target", True)]


def test_two_way_channel_verbs_send_to_a_target_only_when_the_name_says_to() -> None:
    assert not fallback_rule("partner_sync", schema(target="string")).exfiltrating
    assert gated(fallback_rule("sync_to", schema(target="string"))) == ("send", ("target",))
    assert gated(fallback_rule("sync_repo", schema(url="string"))) == ("send", ("url",))


def test_a_channel_that_exists_to_carry_data_makes_every_argument_a_sink() -> None:
    rule = fallback_rule("create_tunnel", schema(port="integer", label="string"))
    assert gated(rule) == ("send", ())
    # Channels that may name nobody (a member list, a bucket) stay ungated without a destination.
    assert not fallback_rule("update_permission", schema(permission_id="string", role="string")).exfiltrating
    assert not fallback_rule("create_bucket", schema(name="string")).exfiltrating
    assert not fallback_rule("register_device", schema(name="string")).exfiltrating


@pytest.mark.parametrize(
    ("tool", "props", "expected"),
    [
        ("update_settings", {"zorp": {"type": "string", "format": "uri"}}, ("send", ("zorp",))),
        ("configure", {"collector": {"type": "string", "format": "hostname"}}, ("send", ("collector",))),
        ("set_avatar", {"image": {"type": "string", "format": "uri"}}, ("fetch", ("image",))),
        ("update_profile", {"website": {"type": "string", "format": "uri"}}, None),
        ("create_bookmark", {"url": {"type": "string", "format": "uri"}}, None),
    ],
)
def test_a_uri_a_mutating_tool_stores_is_called_read_or_only_linked(
    tool: str, props: dict[str, Any], expected: tuple[str, tuple[str, ...]] | None
) -> None:
    assert gated(fallback_rule(tool, schema(**props))) == expected


def test_writing_into_a_store_the_call_names_is_a_send() -> None:
    assert gated(fallback_rule("put_object", schema(bucket="string", key="string"))) == ("send", ("bucket",))
    assert not fallback_rule("write_file", schema(path="string", content="string")).exfiltrating
    assert not fallback_rule("copy_file", schema(source="string", destination="string")).exfiltrating


@pytest.mark.parametrize(
    ("props", "path", "strong"),
    [
        ({"a": {"type": "string", "pattern": "^https?://.+"}}, "a", False),
        ({"a": {"type": "string", "pattern": "^[^@]+@[^@]+\\.[a-z]+$"}}, "a", True),
        ({"a": {"type": "string", "pattern": "^([a-z0-9-]+\\.)+[a-z]{2,}$"}}, "a", False),
        ({"a": {"type": "string", "description": "URL to notify when the job ends"}}, "a", True),
        ({"a": {"type": "string", "description": "Address to forward to"}}, "a", True),
        ({"a": {"type": "string", "description": "The remote URL"}}, "a", True),
        ({"a": {"type": "string", "description": "E-mail address of the recipient"}}, "a", True),
        ({"a": {"type": "string", "description": "for example s3://bucket/prefix"}}, "a", False),
    ],
)
def test_patterns_and_parameter_descriptions_mark_destinations(
    props: dict[str, Any], path: str, strong: bool
) -> None:
    params = destination_params(schema(**props))
    assert [(p.path, p.strong) for p in params] == [(path, strong)]


@pytest.mark.parametrize(
    "props",
    [
        {"a": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}},
        {"a": {"type": "string", "pattern": "^\\d+\\.\\d+\\.\\d+$"}},
        {"a": {"type": "string", "description": "The file to upload"}},
        {"emailMessage": {"type": "string", "description": "Message for the e-mail sent to the recipient"}},
        {"account": {"type": "string", "description": "Alias of the Google account to target"}},
    ],
)
def test_patterns_and_descriptions_that_name_no_destination(props: dict[str, Any]) -> None:
    assert destination_params(schema(**props)) == []


def test_a_description_can_add_a_gate() -> None:
    rule = fallback_rule(
        "generate_report", schema(period="string", target="string"), "Sends the report to target."
    )
    assert gated(rule) == ("send", ("target",))
    rule = fallback_rule(
        "order_events", schema(target="string"), "Registers a webhook that will POST orders."
    )
    assert gated(rule) == ("send", ("target",))
    assert any(n.startswith("standing channel: description word 'webhook'") for n in rule.notes)


def test_a_description_never_gates_a_reading_tool_or_removes_a_gate() -> None:
    assert not fallback_rule(
        "get_report", schema(target="string"), "Sends the report to target."
    ).exfiltrating
    assert fallback_rule("send_email", schema(to="string"), "Lists e-mails.").sink_params == ("to",)


def test_a_description_gates_only_parameters_that_look_like_destinations() -> None:
    described = "Uploads a local image to Drive and inserts it into the document."
    assert not fallback_rule(
        "insert_local_image", schema(path="string", index="integer"), described
    ).exfiltrating


@pytest.mark.parametrize(
    ("description", "sends"),
    [
        ("Runs the job and notifies the target when it ends.", True),
        ("Runs the job without notifying anyone at the target.", False),
        ("Emails the summary to the target.", True),
        ("Email address lookup for the target.", False),
        ("Deletes the webhook that posts to the target.", False),
        ("Lists the jobs that notify the target.", False),
    ],
)
def test_description_verbs_are_read_as_verbs(description: str, sends: bool) -> None:
    rule = fallback_rule("process_job", schema(job_id="string", target="string"), description)
    assert rule.exfiltrating is sends
