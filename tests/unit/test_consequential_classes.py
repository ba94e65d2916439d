"""The fallback marks consequential tools by meaning, with the care it takes for sends.

A tool nobody wrote a pack for is consequential when its name says it destroys, changes a credential,
pays or books, or changes membership, or when it declares `destructiveHint: true`. A name whose verb
reads (`get_password`, `list_orders`) is never consequential: looking is not doing.
"""

from __future__ import annotations

from typing import Any

import pytest

from bouncerd.core import consequence
from bouncerd.core.policy import load_policy, merge

CONSEQUENTIAL = {
    "delete_repository": "destroy",
    "remove_file": "destroy",
    "purge_queue": "destroy",
    "revoke_session": "destroy",
    "update_password": "credential",
    "change_password": "credential",
    "add_ssh_key": "credential",
    "create_api_key": "credential",
    "reset_2fa": "credential",
    "set_recovery_email": "credential",
    "create_order": "payment",
    "purchase_item": "payment",
    "book_flight": "payment",
    "reserve_table": "payment",
    "pay_invoice": "payment",
    "transfer_funds": "payment",
    "add_collaborator": "membership",
    "set_permissions": "membership",
    "update_member_role": "membership",
}
NOT_CONSEQUENTIAL = [
    "get_password_policy",
    "list_orders",
    "search_bookings",
    "get_ssh_keys",
    "check_payment_status",
    "verify_member",
    "read_permissions",
    "download_invoice",
    "set_key",
    "pin_message",
    "create_event",
    "send_email",
]


@pytest.mark.parametrize(("tool", "kind"), sorted(CONSEQUENTIAL.items()))
def test_a_tool_whose_name_destroys_grants_pays_or_changes_access_is_consequential(
    tool: str, kind: str
) -> None:
    assert consequence.classify(tool)[0] == kind


@pytest.mark.parametrize("tool", NOT_CONSEQUENTIAL)
def test_a_reading_or_unrelated_name_is_not_consequential(tool: str) -> None:
    """A reading verb never becomes consequential, and a word that only looks like one (`set_key` of a
    store, `pin_message`) does not either."""
    assert consequence.classify(tool) == (None, None)


def test_destructive_hint_marks_a_destruction_only_when_the_tool_does_not_read() -> None:
    assert consequence.classify("archive_project", {"destructiveHint": True})[0] == "destroy"
    assert consequence.classify("get_project", {"destructiveHint": True}) == (None, None)
    assert consequence.classify("archive_project", {"destructiveHint": False}) == (None, None)


def _rule(tool: dict[str, Any], policy: str = "") -> Any:
    return merge([load_policy(policy, "policy.yaml")]).rule_for("srv", ("srv",), tool)


def test_the_fallback_rule_carries_the_class_and_says_why() -> None:
    rule = _rule({"name": "delete_repository", "inputSchema": {"type": "object"}})
    assert rule.consequence == "destroy"
    assert rule.source["consequence"] == "fallback"
    assert any("consequential" in n for n in rule.notes)
    hinted = _rule({"name": "wipe", "annotations": {"destructiveHint": True}})
    assert consequence.of(hinted) == "destroy"


def test_policy_can_turn_a_class_off_or_set_one() -> None:
    off = _rule({"name": "delete_repository"}, "tools:\n  delete_repository:\n    consequence: none\n")
    assert consequence.of(off) is None
    on = _rule({"name": "frobnicate"}, "tools:\n  frobnicate:\n    consequence: payment\n")
    assert consequence.of(on) == "payment"


def test_a_misspelt_class_is_a_clear_error() -> None:
    with pytest.raises(Exception, match=r"consequence.*must be one of destroy, credential, payment"):
        load_policy("tools:\n  x:\n    consequence: delete\n", "policy.yaml")
