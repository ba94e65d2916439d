"""``bouncerctl init`` asks who the user is and writes it to the policy's `you:`: through click's
CliRunner, in a temporary home with one MCP config, never the real one."""

from __future__ import annotations

from pathlib import Path

import pytest
from bouncerctl import init_cmd, init_you
from bouncerctl.app import main
from click.testing import CliRunner, Result

from bouncerd.core.policy import load_policy
from bouncerd.paths import resolve

ME = "emma.johnson@bluesparrow.example"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    home = tmp_path / "home"
    home.mkdir()
    config = home / "mcp.json"
    config.write_text('{"mcpServers": {}}\n')
    shim = tmp_path / "bouncer-shim"
    shim.write_text("#!/bin/sh\nexit 0\n")
    shim.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("BOUNCER_HOME", str(tmp_path / "bouncer"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    policy = resolve({"BOUNCER_HOME": str(tmp_path / "bouncer")}).policy
    return {"config": config, "shim": shim, "policy": policy}


def run(env: dict[str, Path], *args: str, input: str | None = None) -> Result:
    argv = ["init", "--config", str(env["config"]), "--shim", str(env["shim"]), *args]
    return CliRunner().invoke(main, argv, input=input)


def you_of(policy: Path) -> tuple[str, ...]:
    return tuple(load_policy(policy.read_text(), str(policy)).settings.get("you", ()))


def test_you_flags_are_written_to_a_new_policy(env: dict[str, Path]) -> None:
    result = run(env, "--yes", "--you", ME, "--you", "@emma", "--you", "GB33 BUKB 2020 1555 5555 55")
    assert result.exit_code == 0, result.output
    assert you_of(env["policy"]) == (ME, "@emma", "GB33 BUKB 2020 1555 5555 55")
    assert env["policy"].stat().st_mode & 0o777 == 0o600


def test_you_is_added_to_an_existing_policy_keeping_its_text(env: dict[str, Path]) -> None:
    env["policy"].parent.mkdir(parents=True, exist_ok=True)
    original = "# my settings\nversion: 1\nyou:\n  - old@home.example  # personal\ntaint_scope: session\n"
    env["policy"].write_text(original)
    result = run(env, "--yes", "--you", ME, "--you", "old@home.example")
    assert result.exit_code == 0, result.output
    text = env["policy"].read_text()
    assert you_of(env["policy"]) == ("old@home.example", ME)
    assert text.startswith("# my settings\nversion: 1\n") and "taint_scope: session" in text
    backups = list(resolve({"BOUNCER_HOME": str(env["policy"].parents[1])}).state.rglob("*.bak"))
    assert [b.read_text() for b in backups] == [original]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("emma", "not an e-mail address"),
        ("https://bluesparrow.example", "a web address"),
        (f"{ME}, bob@x.example", "one address per value"),
        (" " + ME, "whitespace"),
        ("emma@", "not an e-mail address"),
        ("", "empty"),
    ],
)
def test_a_value_that_is_not_an_address_or_account_is_refused_by_name(
    env: dict[str, Path], value: str, reason: str
) -> None:
    result = run(env, "--yes", "--you", value)
    assert result.exit_code == 1
    assert repr(value) in result.stderr and reason in result.stderr
    assert not env["policy"].exists()


def test_the_question_is_asked_on_a_terminal_and_a_bad_answer_asked_again(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(init_cmd, "can_ask", lambda: True)
    result = run(env, input=f"emma\n{ME}, +44 20 7946 0958\n")
    assert result.exit_code == 0, result.output
    assert init_you.QUESTION in result.stdout
    assert "'emma': not an e-mail address" in result.output
    assert you_of(env["policy"]) == (ME, "+44 20 7946 0958")


def test_an_empty_answer_or_end_of_input_skips_the_question(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(init_cmd, "can_ask", lambda: True)
    for answer in ("\n", ""):
        result = run(env, input=answer)
        assert result.exit_code == 0, result.output
        assert not env["policy"].exists()


def test_a_policy_that_has_you_is_not_asked_again(
    env: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    env["policy"].parent.mkdir(parents=True, exist_ok=True)
    env["policy"].write_text(f"you: [{ME}]\n")
    monkeypatch.setattr(init_cmd, "can_ask", lambda: True)
    result = run(env, input="")
    assert result.exit_code == 0, result.output
    assert init_you.QUESTION not in result.stdout


def test_yes_or_no_terminal_asks_nothing_and_does_not_wait(env: dict[str, Path]) -> None:
    for args in (("--yes",), ()):
        result = run(env, *args)  # CliRunner has no terminal; no input: a question would abort
        assert result.exit_code == 0, result.output
        assert init_you.QUESTION not in result.stdout
    assert not env["policy"].exists()


def test_you_without_yes_and_without_a_terminal_is_not_written(env: dict[str, Path]) -> None:
    result = run(env, "--you", ME)
    assert result.exit_code == 1
    assert "no terminal to ask on" in result.stderr and "--yes" in result.stderr
    assert not env["policy"].exists()


def test_dry_run_shows_the_change_and_writes_nothing(env: dict[str, Path]) -> None:
    result = run(env, "--dry-run", "--you", ME)
    assert result.exit_code == 0, result.output
    assert f'+you: ["{ME}"]' in result.stdout
    assert not env["policy"].exists()


def test_a_policy_that_does_not_load_is_left_alone(env: dict[str, Path]) -> None:
    env["policy"].parent.mkdir(parents=True, exist_ok=True)
    env["policy"].write_text("servers: [\n")
    result = run(env, "--yes", "--you", ME)
    assert result.exit_code == 1
    assert "does not load, so it is left alone" in result.stderr
    assert env["policy"].read_text() == "servers: [\n"


def test_undo_refuses_you(env: dict[str, Path]) -> None:
    result = run(env, "--undo", "--you", ME)
    assert result.exit_code == 2
