"""Every red-team class the stdio gate stops is stopped the same way through the bridge.

The gate cases of tests/security/test_gate_spellings.py run there on the pure production path
(`Engine`, in-process). Here a case from each class runs end to end instead: its planted text comes
out of a *remote* server's tool (tests/fixtures/servers/redteam.py over streamable HTTP, through
``bouncer-shim --url``) and the send goes back through the same bridge to the same server, with the
real daemon deciding under the same policy. The verdict and rule in the daemon's audit log must be
the ones the pure path gives for that case (the oracle, computed here from the security module's own
`Gate`), and a send that is not allowed must not reach the server. The benign controls (a trusted
destination, an unrelated fresh one) sit beside the attacks: the bridge must not turn them into
refusals either.

Each case gets a session of its own (BOUNCER_SESSION), so one case's planted text cannot decide
another's verdict.
"""

from __future__ import annotations

import json
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from harness import REPO, audit_records, connect, write_policy
from remotes import bridge_params, fixture_remote

sys.path.insert(0, str(REPO / "tests" / "security"))
import test_gate_spellings as gates

if TYPE_CHECKING:
    from daemons import RunningDaemon

pytestmark = pytest.mark.e2e

# Bounds a case: one shim and bridge start, two calls.
TEST_TIMEOUT = 60

EMAIL = gates.DESTS["email"]
URL = gates.DESTS["url"]
HOST = gates.DESTS["host"]


def case(cid: str, planted: str, tool: str, sent: Any) -> Any:
    return pytest.param(planted, tool, sent, id=cid)


def _one_per_layer() -> list[Any]:
    """Class A: per encoding layer (transport, shape, case, struct), its first encoding, both ways."""
    firsts: dict[str, gates.Encoding] = {}
    for enc in gates.ENCODINGS:
        if "email" in enc.kinds:
            firsts.setdefault(enc.layer, enc)
    found = []
    for layer, enc in firsts.items():
        found.append(case(f"A-{layer}-planted_encoded-{enc.name}", enc(EMAIL), "send_email", EMAIL))
        found.append(case(f"A-{layer}-sent_encoded-{enc.name}", EMAIL, "send_email", enc(EMAIL)))
    return found


CASES = [
    *_one_per_layer(),
    case("A-url-percent_every_char", URL, "post_webhook", gates.BY_NAME["percent_every_char"](URL)),
    *[case(f"B-{i}", HOST, "post_webhook", url) for i, url, _ in gates.NODE_TABLE[:2]],
    *[case(f"B-multi-{i}", HOST, tool, dest) for i, dest, tool, seen in gates.MULTI_READING[:2] if seen],
    *[
        case(f"C-{sid}", EMAIL, "send_email", f"alice@corp.example{sep}{EMAIL}")
        for sid, sep in gates.CONTROL_SEPARATORS[:2]
    ],
    case("E-user_and_domain", EMAIL, "send_email", f"{EMAIL.split('@')[0]} at {EMAIL.split('@')[1]}"),
    *[case(f"X-{i}", HOST, "post_webhook", url) for i, url in gates.BACKSLASH_URLS[:2]],
    case("X-riding_on_trusted", EMAIL, "send_email", f"boss@corp.example?cc={EMAIL}"),
    # benign controls: the bridge must judge these as the pure path does, not refuse them
    case("F-trusted_destination", EMAIL, "send_email", gates.TRUSTED_EMAIL),
    case("F-unrelated_fresh_destination", EMAIL, "send_email", "carol@partner.example"),
    case("F-fetch_exactly_as_planted", URL, "fetch_url", URL),
]


def oracle(planted: str, tool: str, sent: Any) -> tuple[str, str]:
    """The pure production path's verdict and rule for the case."""
    verdict = gates.planted(planted).send(tool, sent)
    return verdict.verdict, verdict.rule


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    where = tmp_path_factory.mktemp("redteam")
    plant, outbox = where / "plant.txt", where / "outbox.json"
    plant.write_text("", encoding="utf-8")
    env = {"FIXTURE_PLANT": str(plant), "FIXTURE_OUTBOX": str(outbox)}
    with fixture_remote("redteam", env=env) as url:
        yield url, plant, outbox


@pytest.fixture(scope="module")
def gated() -> Iterator[RunningDaemon]:
    """One daemon under the red-team policy for every case (each case has a session of its own)."""
    from daemons import short_home, spawn_daemon, wait_until_serving

    home = short_home()
    write_policy(home, gates.POLICY)
    daemon = spawn_daemon(home)
    try:
        wait_until_serving(daemon)
        yield daemon
    finally:
        daemon.stop()
        shutil.rmtree(home, ignore_errors=True)


def deliveries(outbox: Path) -> list[dict[str, Any]]:
    try:
        found: list[dict[str, Any]] = json.loads(outbox.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    return found


@pytest.mark.asyncio
@pytest.mark.parametrize(("planted", "tool", "sent"), CASES)
async def test_red_team_case_is_decided_through_the_bridge_as_on_the_stdio_path(
    planted: str, tool: str, sent: Any, gated: RunningDaemon, server: tuple[str, Path, Path]
) -> None:
    url, plant, outbox = server
    plant.write_text(gates.carrier(planted), encoding="utf-8")
    before = len(deliveries(outbox))
    session = f"redteam-{uuid.uuid4().hex}"
    param, rest = gates.SINK[tool]
    with anyio.fail_after(TEST_TIMEOUT):
        async with connect(
            bridge_params("mail", url, gated.home, session=session), "legacy", kind="shim"
        ) as probe:
            inbox = await probe.client.call_tool("read_inbox", {})
            assert inbox.is_error is not True
            await probe.client.call_tool(tool, {param: sent, **rest})
    records = [r for r in audit_records(gated.home) if r.get("session") == session and r.get("tool") == tool]
    assert records, "no verdict was recorded for the send"
    got = (records[0]["verdict"], records[0]["rule"])
    assert got == oracle(planted, tool, sent)
    arrived = deliveries(outbox)[before:]
    assert (got[0] == "allow") == bool(arrived), (got, arrived)


def test_the_case_table_holds_attacks_and_controls() -> None:
    # The table must exercise both sides: refusals the bridge must keep, and allows it must not break.
    verdicts = {oracle(*p.values)[0] for p in CASES}
    assert "deny" in verdicts and "allow" in verdicts
