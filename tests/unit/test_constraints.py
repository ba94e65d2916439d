"""Path confinement and argument patterns: every escape is a violation, never an exception."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bouncerd.core.constraints import (
    MAX_PATTERN_SUBJECT_CHARS,
    check_paths,
    check_patterns,
    collapse,
    find_values,
    is_inside,
)
from bouncerd.core.rules import ToolRule


def identity(path: str) -> str:
    return path


def symlinks(links: Mapping[str, str]) -> Callable[[str], str]:
    """A fake realpath: rewrites the longest linked prefix, like symlinks of existing components."""

    def resolve(path: str) -> str:
        for link in sorted(links, key=len, reverse=True):
            if path == link or path.startswith(link + "/"):
                return links[link] + path[len(link) :]
        return path

    return resolve


def writer(*prefixes: str, params: tuple[str, ...] = ("path",)) -> ToolRule:
    return ToolRule("write_file", write_params=params, allowed_path_prefixes=prefixes)


OUT = writer("/home/a/out")


def test_no_prefixes_means_no_confinement() -> None:
    assert check_paths(ToolRule("write_file", write_params=("path",)), {"path": "relative"}, identity) is None


def test_path_inside_the_prefix_is_allowed() -> None:
    assert check_paths(OUT, {"path": "/home/a/out/report.txt"}, identity) is None
    assert check_paths(OUT, {"path": "/home/a/out"}, identity) is None
    assert check_paths(OUT, {"path": "/home/a/out/./x//y/../z"}, identity) is None


def test_dotdot_escape_is_a_violation() -> None:
    v = check_paths(OUT, {"path": "/home/a/out/../.ssh/authorized_keys"}, identity)
    assert v is not None
    assert v.rule == "constraint.path"
    assert "'/home/a/.ssh/authorized_keys'" in v.reason
    assert "outside the allowed path prefixes" in v.reason


def test_sibling_directory_sharing_a_name_prefix_is_outside() -> None:
    v = check_paths(OUT, {"path": "/home/a/out2/x"}, identity)
    assert v is not None and "outside" in v.reason


def test_symlink_out_of_the_prefix_is_a_violation() -> None:
    resolve = symlinks({"/home/a/out/link": "/etc"})
    v = check_paths(OUT, {"path": "/home/a/out/link/passwd"}, resolve)
    assert v is not None
    assert "resolves through a symlink to '/etc/passwd'" in v.reason


def test_symlinked_prefix_is_compared_resolved() -> None:
    # macOS: /tmp is a symlink to /private/tmp; both forms of the path must be inside.
    resolve = symlinks({"/tmp": "/private/tmp"})
    assert check_paths(writer("/tmp/work"), {"path": "/tmp/work/a"}, resolve) is None


def test_resolve_failure_is_a_violation() -> None:
    def broken(path: str) -> str:
        raise OSError("loop")

    v = check_paths(OUT, {"path": "/home/a/out/x"}, broken)
    assert v is not None and "cannot resolve symlinks" in v.reason


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("out/x", "is relative"),
        ("./x", "is relative"),
        ("", "is relative"),
        ("~/out/x", "starts with ~"),
        ("~root/x", "starts with ~"),
        ("C:\\Users\\a\\out", "Windows path"),
        ("c:/home/a/out", "Windows path"),
        ("/home/a/out\\..\\..\\etc", "Windows path"),
        ("/home/a/out/x\x00.txt", "NUL byte"),
        (42, "must be a path string"),
        ({"path": "/home/a/out/x"}, "must be a path string"),
        (None, "must be a path string"),
        (["/home/a/out/x", ["/etc"]], "must be a path string"),
    ],
)
def test_unjudgeable_values_are_violations(value: Any, reason: str) -> None:
    v = check_paths(OUT, {"path": value}, identity)
    assert v is not None
    assert reason in v.reason


def test_list_of_paths_checks_each() -> None:
    assert check_paths(OUT, {"path": ["/home/a/out/1", "/home/a/out/2"]}, identity) is None
    v = check_paths(OUT, {"path": ["/home/a/out/1", "/etc/passwd"]}, identity)
    assert v is not None and v.parameter == "path[1]"


def test_missing_write_parameter_is_a_violation() -> None:
    v = check_paths(OUT, {"content": "x"}, identity)
    assert v is not None and "is missing" in v.reason


def test_every_write_parameter_is_checked() -> None:
    rule = writer("/home/a/out", params=("source", "destination"))
    assert check_paths(rule, {"source": "/home/a/out/a", "destination": "/home/a/out/b"}, identity) is None
    v = check_paths(rule, {"source": "/home/a/out/a", "destination": "/home/a/b"}, identity)
    assert v is not None and v.parameter == "destination"


def test_nested_write_parameters_are_walked_through_lists() -> None:
    rule = writer("/repo", params=("files.path",))
    args = {"files": [{"path": "/repo/a", "content": ""}, {"path": "/elsewhere", "content": ""}]}
    v = check_paths(rule, args, identity)
    assert v is not None and v.parameter == "files[1].path"


def test_prefixes_without_write_params_refuse_every_call() -> None:
    v = check_paths(ToolRule("t", allowed_path_prefixes=("/x",)), {"path": "/x/y"}, identity)
    assert v is not None and "no write_params" in v.reason


def test_any_of_several_prefixes_may_hold_the_path() -> None:
    rule = writer("/a", "/b/c")
    assert check_paths(rule, {"path": "/b/c/d"}, identity) is None
    assert check_paths(rule, {"path": "/b/d"}, identity) is not None


def test_root_prefix_holds_everything_absolute() -> None:
    assert check_paths(writer("/"), {"path": "/etc/passwd"}, identity) is None


def test_long_values_are_cut_in_reasons() -> None:
    v = check_paths(OUT, {"path": "/etc/" + "A" * 1000}, identity)
    assert v is not None and len(v.reason) < 300


def test_collapse_and_is_inside() -> None:
    assert collapse("/a/./b/../../..//c/") == "/c"
    assert is_inside("/a/b", "/a")
    assert not is_inside("/ab", "/a")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["..", ".", "", "out", "a", "..."]), max_size=8))
def test_collapsed_paths_never_escape_lexically(parts: list[str]) -> None:
    path = "/home/a/out/" + "/".join(parts)
    v = check_paths(OUT, {"path": path}, identity)
    assert (v is None) == is_inside(collapse(path), "/home/a/out")


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
    )
)
def test_any_argument_value_gives_a_verdict_not_an_exception(value: Any) -> None:
    check_paths(OUT, {"path": value}, identity)
    check_patterns(ToolRule("t", arg_patterns={"path": "[a-z]+"}), {"path": value})


# ---- patterns -----------------------------------------------------------------------------------


def pattern(**patterns: str) -> ToolRule:
    return ToolRule("send_email", arg_patterns=patterns)


def test_pattern_must_fully_match() -> None:
    rule = pattern(to=r"[a-z]+@corp\.com")
    assert check_patterns(rule, {"to": "ann@corp.com"}) is None
    v = check_patterns(rule, {"to": "ann@corp.com.evil.net"})
    assert v is not None
    assert v.rule == "constraint.pattern"
    assert "does not match" in v.reason


def test_missing_parameter_with_a_pattern_fails_closed() -> None:
    v = check_patterns(pattern(to=".*"), {"cc": "x"})
    assert v is not None and "is missing" in v.reason


def test_list_values_are_matched_item_by_item() -> None:
    rule = pattern(to=r"[a-z]+@corp\.com")
    assert check_patterns(rule, {"to": ["a@corp.com", "b@corp.com"]}) is None
    v = check_patterns(rule, {"to": ["a@corp.com", "x@evil.com"]})
    assert v is not None and v.parameter == "to[1]"


def test_scalars_match_their_json_spelling() -> None:
    assert check_patterns(pattern(public="false"), {"public": False}) is None
    assert check_patterns(pattern(public="false"), {"public": True}) is not None
    assert check_patterns(pattern(n=r"[0-9]{1,2}"), {"n": 42}) is None
    assert check_patterns(pattern(n="null"), {"n": None}) is None


def test_mapping_never_matches_a_pattern() -> None:
    v = check_patterns(pattern(to=".*"), {"to": {"address": "a@corp.com"}})
    assert v is not None and "is a dict" in v.reason


def test_overlong_value_is_refused_before_matching() -> None:
    v = check_patterns(pattern(body="(a+)+b"), {"body": "a" * (MAX_PATTERN_SUBJECT_CHARS + 1)})
    assert v is not None and "longer than" in v.reason


def test_nested_pattern_parameters() -> None:
    rule = pattern(**{"action.forward": r".*@corp\.com"})
    assert check_patterns(rule, {"action": {"forward": "me@corp.com"}}) is None
    assert check_patterns(rule, {"action": {"forward": "me@evil.com"}}) is not None


def test_find_values_prefers_a_literal_dotted_key() -> None:
    assert find_values({"a.b": 1, "a": {"b": 2}}, "a.b") == [("a.b", 1)]
    assert find_values({"a": [{"b": 1}, {"c": 2}, {"b": 3}]}, "a.b") == [("a[0].b", 1), ("a[2].b", 3)]
    assert find_values({"a": "x"}, "a.b") == []
