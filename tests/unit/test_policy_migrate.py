"""``bouncerctl policy migrate``: a bouncer-mcp 0.1.x policy carried into this layout, loaded for real."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from bouncerctl.app import main
from bouncerctl.policy_migrate import MigrateError, migrate_text
from click.testing import CliRunner

from bouncerd.core.policy import load_policy
from bouncerd.errors import PolicyError

# The example policy bouncer-mcp 0.1.x shipped (examples/bouncer.yaml), comments and all.
OLD = textwrap.dedent(
    """\
    # copy to your project, edit, and pass with --policy bouncer.yaml
    #
    # A user policy REPLACES the pack entry for any tool it defines.

    send_email:
      # exfiltrating + sink_params are REQUIRED here
      exfiltrating: true
      sink_params: [to, cc, bcc]
      trusted_destinations: [you@yourcompany.com]   # your own always-ok recipients

    write_file:
      write_params: [path]
      allowed_path_prefixes: ["/srv/out", '/srv/tmp']

    # Example call budget.
    delete_file:
      write_params: [path]
      max_calls: 2
    """
)


def test_loader_refusal_names_the_migrate_command() -> None:
    """Stops: a 0.1.x user left with "unknown key" and no way to carry the file over."""
    with pytest.raises(PolicyError, match=r"bouncerctl policy migrate /p/bouncer\.yaml"):
        load_policy(OLD, "/p/bouncer.yaml")


def test_migrated_text_keeps_comments_and_loads_with_the_real_loader() -> None:
    result = migrate_text(OLD, "bouncer.yaml")
    assert result.moved == ["send_email", "write_file", "delete_file"]
    assert "# your own always-ok recipients" in result.text
    assert "  # Example call budget." in result.text
    assert yaml.safe_load(result.text) == {"tools": yaml.safe_load(OLD)}
    policy = load_policy(result.text, "bouncer.yaml")
    assert policy.tools["send_email"].sink_params == ("to", "cc", "bcc")
    assert policy.tools["delete_file"].max_calls == 2
    assert any("write_file, delete_file: no exfiltrating key" in note for note in result.notes)


def test_settings_stay_at_the_top_and_crlf_is_kept() -> None:
    text = "version: 1\r\ntaint_scope: server\r\nfetch:\r\n  max_calls: 3\r\n"
    result = migrate_text(text, "p.yaml")
    assert result.text == "version: 1\r\ntaint_scope: server\r\ntools:\r\n  fetch:\r\n    max_calls: 3\r\n"
    load_policy(result.text, "p.yaml")


def test_a_block_scalar_and_a_flow_file_come_out_with_the_same_value() -> None:
    block = "post:\n  arg_patterns:\n    url: |\n      ^https://\n"
    assert yaml.safe_load(migrate_text(block, "p.yaml").text) == {"tools": yaml.safe_load(block)}
    flow = "{send: {max_calls: 1}}\n"
    result = migrate_text(flow, "p.yaml")
    assert yaml.safe_load(result.text) == {"tools": {"send": {"max_calls": 1}}}
    assert any("its comments are gone" in note for note in result.notes)


def test_relative_prefix_is_an_error_unless_a_base_is_given() -> None:
    """Stops: a relative confinement prefix silently meaning whatever directory the client starts in."""
    text = 'write_file:\n  allowed_path_prefixes: ["./out"]\n'
    with pytest.raises(
        MigrateError, match=r"p\.yaml:2: write_file\.allowed_path_prefixes: './out' is relative"
    ):
        migrate_text(text, "p.yaml")
    result = migrate_text(text, "p.yaml", Path("/srv/proj"))
    assert load_policy(result.text, "p.yaml").tools["write_file"].allowed_path_prefixes == ("/srv/proj/out",)


def test_empty_entry_is_an_error_not_a_gate_turned_off() -> None:
    """Stops: 0.1.x's "empty entry = no rules" (a pack's gate off) being carried over silently."""
    with pytest.raises(MigrateError, match=r"p\.yaml:3: send_email: an empty entry"):
        migrate_text("max:\n  max_calls: 1\nsend_email:\n", "p.yaml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tools:\n  a: {max_calls: 1}\n", "already in this layout"),
        ("tools: {}\nsend: {max_calls: 1}\n", "move those under tools: by hand"),
        ("send: [\n", "p.yaml:2: not YAML"),
        ("- a\n", "not a mapping"),
        ("send:\n  max_calls: '1'\n", "the migrated policy would not load"),  # 0.1.x ignored the bad type
    ],
)
def test_what_cannot_be_migrated_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(MigrateError, match=message):
        migrate_text(text, "p.yaml")


def test_command_shows_the_diff_asks_keeps_a_backup_and_writes(tmp_path: Path) -> None:
    path = tmp_path / "bouncer.yaml"
    path.write_text(OLD)
    runner = CliRunner()
    refused = runner.invoke(main, ["policy", "migrate", str(path)])
    assert refused.exit_code == 1 and "no terminal to ask on" in refused.stderr
    assert "+tools:" in refused.stdout
    assert path.read_text() == OLD
    dry = runner.invoke(main, ["policy", "migrate", "--dry-run", str(path)])
    assert dry.exit_code == 0 and path.read_text() == OLD
    done = runner.invoke(main, ["policy", "migrate", "--yes", str(path)])
    assert done.exit_code == 0, done.output
    (saved,) = tmp_path.glob("bouncer.yaml.bouncer-*.bak")
    assert saved.read_text() == OLD
    load_policy(path.read_text(), str(path))
    checked = runner.invoke(main, ["policy", "check", str(path)])
    assert checked.exit_code == 0, checked.output
    again = runner.invoke(main, ["policy", "migrate", "--yes", str(path)])
    assert again.exit_code == 1 and "already in this layout" in again.stderr


def test_command_on_a_missing_file_names_it(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["policy", "migrate", "--yes", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 1
    assert "nope.yaml: cannot read it" in result.stderr and "Traceback" not in result.output
