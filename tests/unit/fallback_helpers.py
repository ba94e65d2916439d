"""The fallback's guess as a whole rule, for the fallback's tests (production resolves it inside
`Policy.rule_for`, together with the packs and the user's layers)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bouncerd.core.fallback import classify
from bouncerd.core.rules import FALLBACK_SOURCE, ToolRule, resolve


def fallback_rule(
    tool_name: str, input_schema: Mapping[str, Any] | None, description: str | None = None
) -> ToolRule:
    """The fallback's guess on its own, as the complete rule the policy would resolve it to."""
    guess = classify(tool_name, input_schema, description)
    return resolve(tool_name, [(FALLBACK_SOURCE, guess.entry)], guess.notes)
