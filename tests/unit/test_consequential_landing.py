"""Write confinement applies to every argument that names where bytes land.

The attack: the policy confines a download tool's `path` to ~/Downloads; the server also takes a
`target_dir` (or a copy's `destination`, an `extract_to`), which the policy did not list, and an
injected page tells the agent to save into ~/.ssh. The benign twin: the same argument inside the
allowed directory passes, and a source path (read, not written) is never confined.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bouncerd.core import constraints, fallback
from bouncerd.core.engine import Engine
from bouncerd.core.model import ServerIdentity, ToolCall, Verdict
from bouncerd.core.policy import load_policy, merge

SRV = ServerIdentity("files", ("files-server",))
S = "session-landing"
ALLOWED = "/home/a/Downloads"
POLICY = f"""
tools:
  download_file:
    allowed_path_prefixes: [{ALLOWED}]
    write_params: [path]
  copy_file:
    allowed_path_prefixes: [{ALLOWED}]
    write_params: [path]
"""

# (tool, argument that lands bytes, the other arguments)
LANDING = st.sampled_from(
    [
        ("download_file", "target_dir", {"path": f"{ALLOWED}/x.bin", "url": "https://cdn.example/x"}),
        ("download_file", "saveAs", {"path": f"{ALLOWED}/x.bin", "url": "https://cdn.example/x"}),
        ("copy_file", "destination", {"path": f"{ALLOWED}/a.txt"}),
        ("copy_file", "extract_to", {"path": f"{ALLOWED}/a.zip"}),
        ("copy_file", "output_path", {"path": f"{ALLOWED}/a.txt"}),
        ("copy_file", "options.dest", {"path": f"{ALLOWED}/a.txt"}),
    ]
)
name = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=8)
OUTSIDE = st.sampled_from(
    [
        "/home/a/.ssh",
        "/home/a/.ssh/authorized_keys",
        f"{ALLOWED}/../.bashrc",
        "~/.config/autostart/x.desktop",
        "../.ssh",
        "/etc/cron.d/job",
        f"{ALLOWED}2/x",
    ]
)


def _engine() -> Engine:
    eng = Engine(merge([load_policy(POLICY, "policy.yaml")]))
    eng.tools_listed(SRV, [{"name": t} for t in ["download_file", "copy_file"]], now=0.0)
    return eng


def _with(arguments: dict[str, Any], dotted: str, value: str) -> dict[str, Any]:
    out = dict(arguments)
    head, _, tail = dotted.partition(".")
    if tail:
        out[head] = {tail: value}
    else:
        out[head] = value
    return out


def _call(eng: Engine, tool: str, arguments: dict[str, Any]) -> Verdict:
    return eng.decide(ToolCall(S, SRV, tool, arguments, request_id=1), 10.0)


@settings(max_examples=80, deadline=None)
@given(case=LANDING, outside=OUTSIDE)
def test_a_landing_argument_the_policy_did_not_list_is_confined(
    case: tuple[str, str, dict[str, Any]], outside: str
) -> None:
    """Attack: the listed `path` is inside; the unlisted `target_dir`/`destination`/`extract_to`
    points outside (or cannot be judged): denied, naming the argument."""
    tool, arg, others = case
    v = _call(_engine(), tool, _with(others, arg, outside))
    assert (v.verdict, v.rule) == ("deny", "constraint.landing_path"), v.reason
    assert v.parameter == arg


@settings(max_examples=80, deadline=None)
@given(case=LANDING, leaf=name)
def test_the_same_argument_inside_the_allowed_directory_passes(
    case: tuple[str, str, dict[str, Any]], leaf: str
) -> None:
    """Benign: the download saved into ~/Downloads/<name> goes through."""
    tool, arg, others = case
    v = _call(_engine(), tool, _with(others, arg, f"{ALLOWED}/{leaf}"))
    assert v.verdict == "allow", v.reason


@settings(max_examples=40, deadline=None)
@given(outside=st.sampled_from(["/etc/hosts", "/srv/shared/report.pdf", "../notes.txt", "~/a.txt"]))
def test_a_source_is_read_not_written_and_is_not_confined(outside: str) -> None:
    """Benign: copying *from* elsewhere into the allowed directory: the source is not where bytes
    land. (A source in a key place, `~/.ssh`, is asked by `consequence.key_path`.)"""
    v = _call(_engine(), "copy_file", {"path": f"{ALLOWED}/a.txt", "src_path": outside, "from_dir": outside})
    assert v.verdict == "allow", v.reason


def test_what_names_where_bytes_land() -> None:
    """The class by name: landing words, or `target`/`to`/`into` beside a word of place; a source,
    a bare `target` (a deploy environment) or a flag is not one."""
    assert all(
        constraints.lands_bytes(n)
        for n in ["target_dir", "destination", "dest", "extract_to", "output_path", "saveAs", "toPath"]
    )
    assert not any(
        constraints.lands_bytes(n) for n in ["src_path", "source", "target", "to", "from_dir", "query"]
    )
    assert constraints.landing_values({"save": True, "target_dir": "/x", "to": ["a"]}) == [
        ("target_dir", "/x")
    ]


def test_without_a_stated_confinement_nothing_changes() -> None:
    """Benign: a tool the policy does not confine is not refused for its target directory here (key
    places are asked by `consequence.key_path`)."""
    eng = Engine(merge([load_policy("tools: {}\n", "policy.yaml")]))
    eng.tools_listed(SRV, [{"name": "download_file"}], now=0.0)
    v = _call(eng, "download_file", {"url": "https://cdn.example/x", "target_dir": "/srv/data"})
    assert v.rule != "constraint.landing_path", v.reason


def _schema(**props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def test_the_fallback_infers_landing_parameters_by_name_and_schema() -> None:
    """A tool no pack knows: its `target_dir`, `extract_to` or a parameter whose schema says it is a
    path become write_params of a tool that does not read; a reading tool's never do, nor does an id
    (`destinationFolderId` names a folder, it is not a path)."""
    text = {"type": "string"}
    assert fallback.classify("download_file", _schema(url=text, target_dir=text)).entry.write_params == (
        "target_dir",
    )
    where = {"type": "string", "format": "path"}
    assert fallback.classify("unpack_archive", _schema(archive=text, where=where)).entry.write_params == (
        "where",
    )
    assert fallback.classify("search_files", _schema(output_path=text)).entry.write_params is None
    assert (
        fallback.classify("moveItem", _schema(itemId=text, destinationFolderId=text)).entry.write_params
        is None
    )
