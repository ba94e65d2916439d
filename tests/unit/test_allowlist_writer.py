"""The "always allow" writer: a destination lands in the user's policy.yaml, and nothing else changes.

The person's file is theirs: comments, order, quoting and indentation must survive an approval, and
the edit is judged by its effect (the strict loader must read it back and trust the destination for
that server and tool), never by how the text looks.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bouncerd.core.policy import load_policy
from bouncerd.errors import PolicyError
from bouncerd.server import allowlist

COMMENT = "# added by bouncerctl/approval 2026-11-30T10:12Z: bob@x.com for gmail/send_email"
BOB = "bob@x.com"


def trusted(text: str, server: str = "gmail", tool: str = "send_email") -> tuple[str, ...]:
    policy = load_policy(text, "policy.yaml")
    entry = policy.servers[server].tools[tool]
    return entry.trusted_destinations or ()


def add(text: str, *dests: str, server: str = "gmail", tool: str = "send_email") -> str:
    return allowlist.add_trusted(text, server, tool, list(dests) or [BOB], COMMENT)


def lines_kept(old: str, new: str) -> bool:
    """Every line of `old` is in `new`, in the same order."""
    rest = iter(new.splitlines())
    return all(any(line == got for got in rest) for line in old.splitlines())


def test_empty_policy_gets_a_whole_entry_under_a_comment() -> None:
    new = add("")
    assert trusted(new) == (BOB,)
    assert COMMENT in new.splitlines()[5]  # the comment sits right above the item it explains


def test_comments_order_and_spelling_of_the_rest_are_kept() -> None:
    old = (
        "# my policy: written by hand\n"
        "version: 1\n"
        "approval_timeout: 60   # one minute\n"
        "tools:\n"
        "  send_email:\n"
        "    max_calls: 3\n"
        "\n"
        "# trailing notes stay where they are\n"
    )
    new = add(old)
    assert lines_kept(old, new)
    assert new.endswith("\n\n# trailing notes stay where they are\n")  # the entry goes above them
    assert trusted(new) == (BOB,)
    assert load_policy(new, "policy.yaml").settings["approval_timeout"] == 60


def test_existing_block_list_gets_the_item_after_its_last_one() -> None:
    old = (
        "servers:\n"
        "  gmail:\n"
        "    tools:\n"
        "      send_email:\n"
        "        trusted_destinations:\n"
        "          - ann@x.com   # my colleague\n"
        "          - 'carl@x.com'\n"
        "        max_calls: 4\n"
    )
    new = add(old)
    assert lines_kept(old, new)
    assert trusted(new) == ("ann@x.com", "carl@x.com", BOB)
    assert new.splitlines()[7:9] == [f"          {COMMENT}", f'          - "{BOB}"']


def test_indentless_list_and_four_space_layout_are_followed() -> None:
    old = (
        "servers:\n"
        "    gmail:\n"
        "        tools:\n"
        "            send_email:\n"
        "                trusted_destinations:\n"
        "                - ann@x.com\n"
    )
    new = add(old)
    assert new.endswith(f'                - "{BOB}"\n')
    assert trusted(new) == ("ann@x.com", BOB)


def test_flow_list_becomes_a_block_list_with_old_spellings_kept() -> None:
    old = (
        "servers:\n"
        "  gmail:\n"
        "    tools:\n"
        "      send_email:\n"
        "        trusted_destinations: [ann@x.com, 'carl@x.com']  # my team\n"
        "        max_calls: 4\n"
    )
    new = add(old)
    assert set(trusted(new)) == {"ann@x.com", "carl@x.com", BOB}
    assert "          - 'carl@x.com'  # my team\n" in new  # the trailing comment stays with the old items
    assert "        max_calls: 4\n" in new


@pytest.mark.parametrize(
    "old",
    [
        "servers:\n  slack:\n    tools:\n      post: {max_calls: 2}\n",  # another server
        "servers:\n  gmail:\n    packs: [gmail]\n",  # the server, no tools
        "servers:\n  gmail:\n    tools:\n      read_email: {max_calls: 9}\n",  # the server, another tool
        "servers:\n  gmail:\n    tools:\n      send_email:\n        max_calls: 4",  # no newline at the end
    ],
    ids=["other_server", "no_tools", "other_tool", "no_final_newline"],
)
def test_missing_levels_are_added_where_their_siblings_are(old: str) -> None:
    new = add(old)
    assert lines_kept(old, new)
    assert trusted(new) == (BOB,)
    original = load_policy(old, "policy.yaml")
    edited = load_policy(new, "policy.yaml")
    for server, section in original.servers.items():
        for tool, entry in section.tools.items():
            if (server, tool) != ("gmail", "send_email"):
                assert edited.servers[server].tools[tool] == entry


def test_names_yaml_would_misread_are_quoted() -> None:
    new = add("", server="true", tool="my tool: v2")
    assert trusted(new, server="true", tool="my tool: v2") == (BOB,)


def test_invisible_characters_are_escaped_in_the_file_and_read_back_exactly() -> None:
    sneaky = "bob\u200b@p\u0430ypal.example"
    new = add("", sneaky)
    assert "\u200b" not in new
    assert '"bob\\u200b@p\u0430ypal.example"' in new
    assert trusted(new) == (sneaky,)


@pytest.mark.parametrize(
    "old",
    [
        "{servers: {gmail: {tools: {}}}}\n",
        "servers: {slack: {tools: {post: {max_calls: 1}}}}\n",
        "servers:\n  gmail:\n    tools:\n      send_email:\n        trusted_destinations: ann@x.com\n",
    ],
    ids=["flow_root", "flow_servers", "scalar_list"],
)
def test_shapes_that_cannot_be_edited_in_place_are_refused(old: str) -> None:
    with pytest.raises(PolicyError, match="by hand"):
        add(old)


@settings(max_examples=150, deadline=None)
@given(
    dest=st.text(min_size=1, max_size=40).filter(lambda s: s == s.strip()),
    server=st.text(min_size=1, max_size=12).filter(lambda s: s == s.strip()),
    tool=st.text(min_size=1, max_size=12).filter(lambda s: s == s.strip()),
)
def test_any_destination_and_names_read_back_exactly(dest: str, server: str, tool: str) -> None:
    """Whatever the agent's call held, the file says exactly that and nothing can break out of it."""
    old = "# mine\nservers:\n  other:\n    tools:\n      x: {max_calls: 1}\n"
    new = allowlist.add_trusted(old, server, tool, [dest], allowlist.comment_line(server, tool, [dest], 0.0))
    assert trusted(new, server, tool) == (dest,)
    assert new.startswith(old)


# ---- the file ------------------------------------------------------------------------------------


def test_policy_that_does_not_load_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("sevrers: {}\n")
    with pytest.raises(PolicyError, match="does not load"):
        allowlist.edited_policy(path, "gmail", "send_email", [BOB], 0.0)
    assert path.read_text() == "sevrers: {}\n"


def test_destination_already_trusted_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    text = add("")
    path.write_text(text)
    old, new_text, _ = allowlist.edited_policy(path, "gmail", "send_email", [BOB], 0.0)
    assert old == text.encode() and new_text == text


def test_write_is_atomic_private_and_follows_a_symlinked_policy(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "policy.yaml"
    target.write_text("# mine\n")
    target.chmod(0o644)
    link = tmp_path / "config" / "policy.yaml"
    link.parent.mkdir()
    link.symlink_to(target)
    old, new_text, _ = allowlist.edited_policy(link, "gmail", "send_email", [BOB], 0.0)
    assert old == b"# mine\n"
    allowlist.write_policy(link, new_text.encode())
    assert link.is_symlink()  # a dotfile link is not replaced by a copy
    assert target.read_text() == new_text
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(os.listdir(dotfiles)) == ["policy.yaml"]  # no temp file left behind


def test_missing_policy_and_config_dir_are_created_private(tmp_path: Path) -> None:
    path = tmp_path / "config" / "policy.yaml"
    old, new_text, _ = allowlist.edited_policy(path, "gmail", "send_email", [BOB], 0.0)
    assert old is None
    allowlist.write_policy(path, new_text.encode())
    assert trusted(path.read_text()) == (BOB,)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
