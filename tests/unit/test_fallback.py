"""The fallback gates unknown sending tools on destination-shaped parameters, and leaves readers alone."""

from __future__ import annotations

from typing import Any

import pytest

from bouncerd.core.fallback import classify, destination_params, fallback_rule, looks_like_destination, words


def schema(**props: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {k: v if isinstance(v, dict) else {"type": v} for k, v in props.items()},
    }


def test_words_split_snake_kebab_and_camel_case() -> None:
    assert words("sendSMS_to-userID") == ["send", "sms", "to", "user", "id"]
    assert words("get-webpage") == ["get", "webpage"]
    assert words("emailAddress") == ["email", "address"]


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
        ("lookup_domain", {"domain": "string"}),
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
