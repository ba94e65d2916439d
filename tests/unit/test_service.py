"""``bouncerctl service``: the rendered units and plist, and install/uninstall/status with a fake manager.

No systemctl or launchctl runs here: `service.run_command` is replaced by a recorder that answers
as the test says (success, or a container's "Failed to connect to bus"). HOME, XDG_CONFIG_HOME,
XDG_STATE_HOME and XDG_RUNTIME_DIR point at temp directories. `systemd-analyze verify` and real
socket activation are in tests/e2e/test_service_activation.py.
"""

from __future__ import annotations

import os
import plistlib
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from bouncerctl import service
from bouncerctl.app import main
from click.testing import CliRunner, Result

from bouncerd.paths import resolve

BOUNCERD = str(Path(sys.executable).parent / "bouncerd")
NO_BUS = "Failed to connect to bus: No such file or directory"
REAL_RUN_COMMAND = service.run_command  # the fixture replaces it with a FakeManager


@dataclass
class FakeManager:
    answers: dict[str, service.Outcome] = field(default_factory=dict)
    ran: list[list[str]] = field(default_factory=list)

    def __call__(self, argv: Sequence[str]) -> service.Outcome:
        self.ran.append(list(argv))
        for prefix, outcome in self.answers.items():
            if " ".join(argv).startswith(prefix):
                return outcome
        return service.Outcome(0, "")


@dataclass
class Env:
    home: Path
    config: Path
    runtime: Path
    manager: FakeManager

    @property
    def unit_dir(self) -> Path:
        return self.config / "systemd" / "user"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    for name, value in {
        "HOME": tmp_path / "home",
        "XDG_CONFIG_HOME": tmp_path / "config",
        "XDG_STATE_HOME": tmp_path / "state",
        "XDG_RUNTIME_DIR": runtime,
    }.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.delenv("BOUNCER_HOME", raising=False)
    fake = FakeManager()
    monkeypatch.setattr(service, "run_command", fake)
    yield Env(tmp_path / "home", tmp_path / "config", runtime, fake)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["service", *args])


def units(environ: dict[str, str] | None = None) -> dict[str, str]:
    return service.render_systemd(service.template_dir(), BOUNCERD, environ or {})


# ---- what the units say --------------------------------------------------------------------------------


def test_socket_unit_listens_where_bouncerd_and_the_shim_look(env: Env) -> None:
    socket_unit = units()[service.SOCKET_UNIT]
    assert service.listen_path(socket_unit, str(env.runtime)) == str(resolve(os.environ).socket)
    assert service.listen_path(socket_unit, str(env.runtime)) == f"{env.runtime}/bouncer/bouncerd.sock"


def test_socket_is_private_to_the_user() -> None:
    lines = units()[service.SOCKET_UNIT].splitlines()
    assert "SocketMode=0600" in lines
    assert "DirectoryMode=0700" in lines
    assert "WantedBy=sockets.target" in lines


def test_service_runs_the_absolute_bouncerd_in_the_foreground_and_restarts_on_failure() -> None:
    lines = units()[service.SERVICE_UNIT].splitlines()
    assert f"ExecStart={BOUNCERD} --foreground" in lines
    assert "Restart=on-failure" in lines
    assert "Requires=bouncerd.socket" in lines
    assert "RestrictAddressFamilies=AF_UNIX" in lines
    assert not any("@" in line for line in lines if not line.startswith("#"))


def test_service_shares_the_installing_shells_config_and_state_dirs() -> None:
    text = units({"XDG_CONFIG_HOME": "/home/a/my conf", "XDG_STATE_HOME": "/s/100%", "XDG_RUNTIME_DIR": "/r"})
    service_lines = text[service.SERVICE_UNIT].splitlines()
    at = service_lines.index("[Service]")
    assert service_lines[at + 1 : at + 3] == [
        'Environment="XDG_CONFIG_HOME=/home/a/my conf"',
        "Environment=XDG_STATE_HOME=/s/100%%",
    ]
    assert not any("XDG_RUNTIME_DIR" in line for line in service_lines)
    assert not any(
        line.startswith("Environment=")
        for line in units({"XDG_STATE_HOME": "relative"})[service.SERVICE_UNIT].splitlines()
    )


@pytest.mark.parametrize(
    ("word", "quoted"),
    [
        ("/usr/bin/bouncerd", "/usr/bin/bouncerd"),
        ("/opt/my apps/bouncerd", '"/opt/my apps/bouncerd"'),
        ("/a%b", "/a%%b"),
        ('/a"b', '"/a\\"b"'),
    ],
)
def test_systemd_quoting(word: str, quoted: str) -> None:
    assert service.systemd_quote(word) == quoted


def test_exec_start_escapes_what_systemd_would_expand() -> None:
    text = service.render_systemd(service.template_dir(), "/opt/$HOME/100% ok/bouncerd", {})
    assert 'ExecStart="/opt/$$HOME/100%% ok/bouncerd" --foreground' in text[service.SERVICE_UNIT].splitlines()


def test_launchd_agent_runs_the_daemon_at_login_and_after_a_crash(tmp_path: Path) -> None:
    log = tmp_path / "state & logs" / "bouncerd.log"
    text = service.render_launchd(service.template_dir(), "/Users/a/b&c/bouncerd", log)[service.LAUNCHD_PLIST]
    agent = plistlib.loads(text.encode("utf-8"))
    assert agent["Label"] == service.LAUNCHD_LABEL
    assert agent["ProgramArguments"] == ["/Users/a/b&c/bouncerd", "--foreground"]
    assert agent["RunAtLoad"] is True
    assert agent["KeepAlive"] == {"SuccessfulExit": False}
    assert agent["Umask"] == 0o077
    assert agent["StandardErrorPath"] == agent["StandardOutPath"] == str(log)


def test_templates_themselves_are_well_formed() -> None:
    templates = service.template_dir()
    agent = plistlib.loads((templates / "launchd" / service.LAUNCHD_PLIST).read_bytes())
    assert agent["ProgramArguments"][0] == service.BOUNCERD_PLACEHOLDER
    assert "ExecStart=@BOUNCERD@ --foreground" in (templates / "systemd" / service.SERVICE_UNIT).read_text()


# ---- install / uninstall / status ----------------------------------------------------------------------


def test_install_writes_the_units_and_enables_the_socket(env: Env) -> None:
    result = invoke("install")
    assert result.exit_code == 0, result.output
    assert (env.unit_dir / "bouncerd.socket").read_text() == units(dict(os.environ))["bouncerd.socket"]
    assert f"ExecStart={BOUNCERD} --foreground" in (env.unit_dir / "bouncerd.service").read_text()
    assert oct((env.unit_dir / "bouncerd.service").stat().st_mode & 0o777) == "0o644"
    assert env.manager.ran[:2] == [
        ["systemctl", "--user", "daemon-reload"],
        ["systemctl", "--user", "enable", "--now", "bouncerd.socket"],
    ]
    assert f"bouncerd starts at the first connection to {env.runtime}/bouncer/bouncerd.sock" in result.stdout


def test_install_without_a_user_manager_says_what_to_run_and_fails(env: Env) -> None:
    env.manager.answers["systemctl --user daemon-reload"] = service.Outcome(1, NO_BUS)
    result = invoke("install")
    assert result.exit_code == 1
    assert "cannot reach the service manager" in result.stderr
    assert NO_BUS in result.stderr
    assert "systemctl --user daemon-reload && systemctl --user enable --now bouncerd.socket" in result.stderr
    assert (env.unit_dir / "bouncerd.socket").exists()


def test_install_without_systemctl_at_all_fails_clearly(env: Env) -> None:
    env.manager.answers["systemctl"] = service.Outcome(127, "systemctl: command not found")
    result = invoke("install")
    assert result.exit_code == 1
    assert "systemctl: command not found" in result.stderr


def test_missing_program_is_an_outcome_not_an_exception() -> None:
    outcome = REAL_RUN_COMMAND(["/nonexistent/bouncer-test-systemctl", "--user"])
    assert outcome == service.Outcome(127, "/nonexistent/bouncer-test-systemctl: command not found")


def test_dry_run_prints_files_and_commands_and_touches_nothing(env: Env) -> None:
    result = invoke("install", "--dry-run")
    assert result.exit_code == 0, result.output
    assert f"would write {env.unit_dir / 'bouncerd.socket'}" in result.stdout
    assert "ListenStream=%t/bouncer/bouncerd.sock" in result.stdout
    assert (
        "would run: systemctl --user daemon-reload && systemctl --user enable --now bouncerd.socket"
        in result.stdout
    )
    assert not env.unit_dir.exists()
    assert env.manager.ran == []


def test_install_stops_a_daemon_running_outside_the_service(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    stopped: list[int] = []
    monkeypatch.setattr(service, "running_daemon", lambda environ: 4242)
    monkeypatch.setattr(service, "_is_ours", lambda pid: True)
    monkeypatch.setattr(service, "terminate", lambda pid: stopped.append(pid) or True)
    env.manager.answers["systemctl --user show"] = service.Outcome(0, "0")
    result = invoke("install")
    assert result.exit_code == 0, result.output
    assert stopped == [4242]
    assert "stopped the bouncerd (pid 4242) running outside the service" in result.stdout


def test_install_leaves_the_services_own_daemon_alone(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    stopped: list[int] = []
    monkeypatch.setattr(service, "running_daemon", lambda environ: 4242)
    monkeypatch.setattr(service, "_is_ours", lambda pid: True)
    monkeypatch.setattr(service, "terminate", lambda pid: stopped.append(pid) or True)
    env.manager.answers["systemctl --user show"] = service.Outcome(0, "4242")
    assert invoke("install").exit_code == 0
    assert stopped == []


def test_reinstall_with_the_same_units_does_not_restart_the_daemon(env: Env) -> None:
    assert invoke("install").exit_code == 0
    assert ["systemctl", "--user", "try-restart", "bouncerd.service"] in env.manager.ran
    env.manager.ran.clear()
    result = invoke("install")
    assert result.exit_code == 0
    assert "unchanged" in result.stdout
    assert ["systemctl", "--user", "try-restart", "bouncerd.service"] not in env.manager.ran


def test_uninstall_disables_and_removes_the_units(env: Env) -> None:
    assert invoke("install").exit_code == 0
    env.manager.ran.clear()
    result = invoke("uninstall")
    assert result.exit_code == 0, result.output
    assert env.manager.ran == [
        ["systemctl", "--user", "disable", "--now", "bouncerd.socket", "bouncerd.service"],
        ["systemctl", "--user", "daemon-reload"],
    ]
    assert not (env.unit_dir / "bouncerd.socket").exists()
    assert not (env.unit_dir / "bouncerd.service").exists()


def test_uninstall_when_systemd_refuses_removes_nothing(env: Env) -> None:
    assert invoke("install").exit_code == 0
    env.manager.answers["systemctl --user disable"] = service.Outcome(1, "Unit bouncerd.socket is masked.")
    result = invoke("uninstall")
    assert result.exit_code == 1
    assert "Nothing was removed" in result.stderr
    assert (env.unit_dir / "bouncerd.socket").exists()


def test_uninstall_without_a_user_manager_removes_the_files_and_says_so(env: Env) -> None:
    assert invoke("install").exit_code == 0
    env.manager.answers["systemctl"] = service.Outcome(1, NO_BUS)
    result = invoke("uninstall")
    assert result.exit_code == 1
    assert "The unit files are removed" in result.stderr
    assert not (env.unit_dir / "bouncerd.socket").exists()


def test_uninstall_when_not_installed_is_fine(env: Env) -> None:
    result = invoke("uninstall")
    assert result.exit_code == 0
    assert "not installed" in result.stdout
    assert env.manager.ran == []


def test_status_exit_codes_say_installed_or_not(env: Env) -> None:
    result = invoke("status")
    assert result.exit_code == service.EXIT_NOT_INSTALLED
    assert "not installed" in result.stdout
    assert invoke("install").exit_code == 0
    env.manager.answers["systemctl --user is-enabled bouncerd.socket"] = service.Outcome(0, "enabled")
    env.manager.answers["systemctl --user is-active bouncerd.socket"] = service.Outcome(0, "active")
    env.manager.answers["systemctl --user is-enabled bouncerd.service"] = service.Outcome(0, "indirect")
    env.manager.answers["systemctl --user is-active bouncerd.service"] = service.Outcome(3, "inactive")
    result = invoke("status")
    assert result.exit_code == 0, result.output
    assert "bouncerd.socket: enabled, active" in result.stdout
    assert "bouncerd.service: indirect, inactive" in result.stdout
    assert f"socket: {env.runtime}/bouncer/bouncerd.sock\n" in result.stdout
    assert "daemon: not running" in result.stdout


def test_status_warns_when_shims_here_would_look_elsewhere(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    assert invoke("install").exit_code == 0
    monkeypatch.setenv("BOUNCER_HOME", str(env.home / "b"))
    result = invoke("status")
    assert f"(but shims started here use {env.home / 'b' / 'run' / 'bouncerd.sock'})" in result.stdout


def test_status_without_a_user_manager_says_it_cannot_ask(env: Env) -> None:
    assert invoke("install").exit_code == 0
    env.manager.answers["systemctl --user is-active"] = service.Outcome(1, NO_BUS)
    result = invoke("status")
    assert result.exit_code == 0
    assert f"cannot ask the systemd user manager: {NO_BUS}" in result.stdout


def test_launchd_install_writes_the_agent_and_bootstraps_it(env: Env) -> None:
    result = invoke("install", "--manager", "launchd")
    assert result.exit_code == 0, result.output
    plist = env.home / "Library" / "LaunchAgents" / service.LAUNCHD_PLIST
    agent = plistlib.loads(plist.read_bytes())
    assert agent["ProgramArguments"] == [BOUNCERD, "--foreground"]
    assert agent["StandardErrorPath"] == str(resolve(os.environ).daemon_log)
    assert resolve(os.environ).state.is_dir()  # launchd does not create the log's directory
    uid = os.getuid()
    assert env.manager.ran == [
        ["launchctl", "bootout", f"gui/{uid}/{service.LAUNCHD_LABEL}"],
        ["launchctl", "bootstrap", f"gui/{uid}", str(plist)],
    ]
    assert invoke("uninstall", "--manager", "launchd").exit_code == 0
    assert not plist.exists()
