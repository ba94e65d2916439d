"""Mutation check of the core's rules: break each rule once, by one line, and see which test fails.

Run:  .venv/bin/python bench/mutation.py [--rule RULE ...] [--list] [--no-baseline]

Theory of operation
-------------------
A suite that only ever sees rules work cannot tell a rule that works from one that was never
checked. `MUTANTS` holds one mutant per rule id in bouncerd/core/ruleids.py that a verdict can carry
(allow, ask or deny; audit-only ids are not decisions): one line of the core, found by its exact text
(and a line it follows, where the text repeats), replaced by a line that breaks that rule the way a
careless edit would (its guard never true, a condition dropped, an off-by-one, a deny turned allow).

The tree is copied once to a temporary directory (compiled modules included, `.venv` and `.git`
not) and put first on ``PYTHONPATH``; each mutant is written into the copy, the tests run, and the
file is restored in a ``finally``. The tests are tests/unit and tests/security, with ``-x -q
-p no:cacheprovider -p no:randomly``, in two stages to keep the run bounded: first the test files
that name the rule id (and any a mutant lists in `first`), then, only if the mutant survived them,
all of them. A mutant is killed by
the first test that fails (or errors); one that passes every test SURVIVED. A baseline run of the
first-stage files on the unmutated copy goes first, so a failure is the mutant's, not the tree's.

The table printed says, for each rule: its verdicts, where the line is, the mutation, and the test
that killed it or SURVIVED. The exit status is 1 if a mutant of a deny or ask rule survived, if a
rule that a verdict can carry has no mutant here, or if a mutant's line is no longer in the source
(the table must be kept with the code). The run's wall time is printed; it is a figure, not a bound
the script enforces.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TEST_DIRS = ("tests/unit", "tests/security")
# Not copied: the environment and history are not the code under test; node_modules is linked.
IGNORED = shutil.ignore_patterns(
    ".venv", ".git", "node_modules", "__pycache__", ".hypothesis", ".mypy_cache", ".ruff_cache", "build"
)
# One pytest run per stage: a mutant that makes a test loop forever is killed by the timeout.
RUN_TIMEOUT_SECONDS = 900


@dataclass(frozen=True)
class Mutant:
    rule: str
    path: str  # relative to the repository
    before: str  # the line's text, stripped
    after: str  # what replaces it (the line's indentation is kept)
    what: str  # the mutation in words
    follows: str | None = None  # a text one of the 4 lines before must contain, where `before` repeats
    first: tuple[str, ...] = ()  # test files to run in the first stage, beside those naming the rule


CORE = "bouncerd/core"
MUTANTS: tuple[Mutant, ...] = (
    # ---- the decider ----
    Mutant(
        "policy.unreadable",
        f"{CORE}/decision.py",
        "if policy_error is not None:  # the shim's --policy went bad after it started: refuse, never guess",
        "if False:",
        "a policy that no longer loads is ignored",
    ),
    Mutant(
        "call.invalid_arguments",
        f"{CORE}/decision.py",
        "elif invalid:",
        "elif False:",
        "arguments the shim could not read are judged anyway",
    ),
    Mutant(
        "approval.bad_state",
        f"{CORE}/approvals.py",
        "if nonce in used:",
        "if False:",
        "a requestState already used is honoured again (replay)",
    ),
    Mutant(
        "approval.closed",
        f"{CORE}/decision.py",
        "if pending is None:",
        "if False:",
        "an answer to a closed code is not refused",
        follows='return out.refuse("not_yours"',
    ),
    Mutant(
        "approval.full",
        f"{CORE}/decision.py",
        "if len(self.approvals.pending) >= ap.MAX_PENDING:",
        "if False:",
        "a full desk hands out a code it does not keep",
    ),
    Mutant(
        "approval.stale",
        f"{CORE}/decision.py",
        'stale = self._tainted_since_asked(pending) if action == "accept" else None',
        "stale = None",
        "a yes given before the destination turned up in untrusted output still counts",
    ),
    Mutant(
        "approval.declined",
        f"{CORE}/decision.py",
        '"deny", "approval.declined", "a person declined this call; do not retry it", binding.destination',
        '"allow", "approval.elicited", "a person declined this call; do not retry it", binding.destination',
        "a person's no allows the call",
    ),
    Mutant(
        "approval.timeout",
        f"{CORE}/decision.py",
        '"deny", rule, f"{said}, so this call is denied.{hint}", binding.destination, binding.parameter',
        '"allow", "approval.elicited", f"{said}", binding.destination, binding.parameter',
        "a question nobody answered (or dismissed) allows the call",
    ),
    Mutant(
        "approval.always_failed",
        f"{CORE}/decision.py",
        "if error is None:",
        "if True:",
        "an 'always' answer whose policy edit failed is granted anyway",
        follows="binding, code = edit.binding, edit.context.code",
    ),
    Mutant(
        "approval.elicited",
        f"{CORE}/decision.py",
        "return Verdict(",
        'return Verdict("deny", "approval.declined", "mutant") or Verdict(',
        "a person's yes denies the call",
        follows="**context.how(),",
    ),
    # ---- pins ----
    Mutant(
        "pin.unknown_tool",
        f"{CORE}/pins.py",
        "if pin_now:",
        "if True:",
        "a tool listed after the first-use window is pinned without a person",
    ),
    Mutant(
        "pin.duplicate_tool",
        f"{CORE}/pins.py",
        "if sp is not None and sp.live.get(name) == DUPLICATED_TOOL:",
        "if False:",
        "a tool listed twice in different forms is not named as such",
    ),
    Mutant(
        "pin.unlisted_tool",
        f"{CORE}/pins.py",
        "if live is None:",
        "if False:",
        "a pinned tool the server no longer lists is not named as such",
        follows="live = sp.live.get(name)",
    ),
    Mutant(
        "pin.changed_tool",
        f"{CORE}/pins.py",
        "if live != sp.pins[name].digest:",
        "if False:",
        "a tool whose listed form differs from its pin runs",
    ),
    # ---- the fast path ----
    Mutant(
        "fastpath.late",
        f"{CORE}/fastpath.py",
        'if late.verdict == "allow":',
        "if True:",
        "the record of a forwarded call the daemon would now refuse is audited as that refusal",
    ),
    # ---- budget and constraints ----
    Mutant(
        "budget.forbidden",
        f"{CORE}/gates.py",
        "if rule.max_calls == 0:",
        "if False:",
        "max_calls: 0 is not a forbidden tool",
    ),
    Mutant(
        "budget.exceeded",
        f"{CORE}/gates.py",
        "if tried > rule.max_calls:",
        "if tried > rule.max_calls + 1:",
        "one call more than max_calls is allowed (off by one)",
    ),
    Mutant(
        "state.budget_spent",
        f"{CORE}/restricted.py",
        "if restriction is None or max_calls is None:",
        "if True:",
        "a damaged journal's lost attempts are never counted as spent",
    ),
    Mutant(
        "state.unproven_send",
        f"{CORE}/restricted.py",
        'if verdict.rule in ALLOWED_FOR_WANT_OF_TAINT or (sends and verdict.rule == "default.allow"):',
        "if False:",
        "after a damaged journal, a send allowed for want of taint stays allowed",
    ),
    Mutant(
        "constraint.path",
        f"{CORE}/constraints.py",
        "if not rule.allowed_path_prefixes:",
        "if True:",
        "allowed_path_prefixes is never checked",
    ),
    Mutant(
        "constraint.landing_path",
        f"{CORE}/constraints.py",
        "if where in listed:",
        "if True:",
        "only the listed write_params are confined",
        first=("tests/unit/test_consequential_landing.py",),
    ),
    Mutant(
        "constraint.pattern",
        f"{CORE}/constraints.py",
        "if _compiled(pattern).fullmatch(subject) is None:",
        "if _compiled(pattern).search(subject) is None:",
        "arg_patterns match anywhere in the value, not the whole of it",
    ),
    # ---- the sink gate: sends ----
    Mutant(
        "sink.nul_character",
        f"{CORE}/sinkdest.py",
        'if "\\x00" in d.value:',
        "if False:",
        "a NUL in an argument of a send is not refused",
    ),
    Mutant(
        "sink.no_destination",
        f"{CORE}/sinkgate.py",
        "return Verdict(",
        'return Verdict("allow", "sink.trusted", "mutant") or Verdict(',
        "a send that names no destination is allowed",
        follows="# A sending tool called with nothing we can read as a destination",
    ),
    Mutant(
        "sink.tainted_destination",
        f"{CORE}/sinkgate.py",
        'if (c.state == "tainted" and on_tainted == "deny") or (',
        'if (c.state == "tainted" and on_tainted == "deny" and False) or (',
        "a destination planted in untrusted output is asked about, not denied",
    ),
    Mutant(
        "sink.tainted_identity",
        f"{CORE}/sinkgate.py",
        'if c.state in ("tainted", "tainted_identity"):',
        'if c.state in ("tainted",):',
        "a destination seen only as a sender is not asked about",
        follows="provenance=c.provenance,",
    ),
    Mutant(
        "sink.tainted_ask",
        f"{CORE}/sinkgate.py",
        'rule = "sink.tainted_identity" if c.state == "tainted_identity" else "sink.tainted_ask"',
        'rule = "sink.tainted_identity"',
        "under on_tainted: ask, a planted destination is asked as a sender's identity",
    ),
    Mutant(
        "sink.tainted_named_source",
        f"{CORE}/sinkgate.py",
        'if c.state == "tainted_named" and c.provenance is not None:',
        "if False:",
        "a destination from a source the prompt named is not asked about",
    ),
    Mutant(
        "sink.named_source_orders",
        f"{CORE}/sinkgate.py",
        "and c.provenance.orders is not None",
        "and False",
        "a destination inside orders to the agent in a named source is only asked about",
    ),
    Mutant(
        "sink.planted_name",
        f"{CORE}/sinkgate.py",
        'if c.state == "planted_name":',
        "if False:",
        "a plain name seen only inside untrusted prose is not refused",
    ),
    Mutant(
        "sink.dictated_content",
        f"{CORE}/sinkgate.py",
        "if dictated is not None:  # before the object the prompt asked for: the text chose what it says",
        "if False:",
        "a send whose title an untrusted text dictated is not refused",
    ),
    Mutant(
        "sink.no_new_destination",
        f"{CORE}/sinkgate.py",
        'why = "changes an existing object" if updates else _creates_what_you_asked(tool, trust)',
        "why = None",
        "an update that names no destination is asked",
    ),
    Mutant(
        "sink.ambiguous_reading",
        f"{CORE}/sinkgate.py",
        'if c.state == "ambiguous":',
        "if False:",
        "a destination that reads more than one way is not asked about",
    ),
    Mutant(
        "sink.evicted",
        f"{CORE}/sinkgate.py",
        'if c.state in ("evicted", "unproven"):',
        'if c.state in ("unproven",):',
        "a destination seen in untrusted output whose details were evicted is allowed",
    ),
    Mutant(
        "sink.ambiguous",
        f"{CORE}/sinkgate.py",
        'else ("sink.ambiguous" if everything else "sink.unproven")',
        'else "sink.unproven"',
        "a call with no destination parameter is asked as if it named one",
    ),
    Mutant(
        "sink.unproven",
        f"{CORE}/sinkgate.py",
        'if c.state in ("evicted", "unproven"):',
        'if c.state in ("evicted",):',
        "a destination nobody vouched for is allowed",
    ),
    Mutant(
        "sink.trusted",
        f"{CORE}/sinkgate.py",
        "if why is not None:",
        "if False:",
        "an allowlisted destination is not trusted",
        follows="why = trusted_reason(dest, trust)",
    ),
    # ---- the sink gate: fetches ----
    Mutant(
        "fetch.tainted_host_new_path",
        f"{CORE}/fetchgate.py",
        "if hit is not None:",
        "if False:",
        "a new path on a host planted in untrusted output is fetched",
        follows="hit = host_hit(d.value)",
    ),
    Mutant(
        "fetch.named_source",
        f"{CORE}/fetchgate.py",
        "if hit.identity_only and hit.provenance is not None and hit.provenance.named is not None:",
        "if False:",
        "a new path on a host a named page mentions is denied, not asked",
    ),
    Mutant(
        "fetch.evicted",
        f"{CORE}/fetchgate.py",
        'if hit.state == "evicted":',
        "if False:",
        "a host whose taint details were evicted is judged as if they were kept",
        follows="if hit is not None:",
    ),
    Mutant(
        "fetch.carries_tainted",
        f"{CORE}/fetchgate.py",
        'if carried is not None and carried.state == "tainted":',
        "if False:",
        "a URL that carries a planted name in its host, path or query is fetched",
    ),
    Mutant(
        "fetch.ambiguous_reading",
        f"{CORE}/fetchgate.py",
        "if ambiguous is None and not canon.reading(d.value).single:",
        "if False:",
        "a URL that reads more than one way is fetched",
    ),
    Mutant(
        "fetch.allowed",
        f"{CORE}/fetchgate.py",
        "if trusted_reason(d, trust) is not None or seen_exactly(d.value):",
        "if trusted_reason(d, trust) is not None:",
        "a URL fetched exactly as it appeared is judged as a new one",
    ),
    Mutant(
        "fetch.blind",
        f"{CORE}/gates.py",
        'if verdict.verdict != "allow" or view.scope_key(call.session, call.server.name) not in view.blind:',
        "if True:",
        "a fetch after an output that could not be indexed is allowed",
    ),
    # ---- programs, the backstop, messages, grants ----
    Mutant(
        "program.carries_tainted",
        f"{CORE}/gates.py",
        'if hit is not None and hit.state == "tainted" and key not in trust.destinations:',
        "if False:",
        "a program argument naming a planted destination runs",
        first=("tests/unit/test_ungated_backstop.py",),
    ),
    Mutant(
        "consequence.dictated_secret",
        f"{CORE}/consequence.py",
        "if secret and prov is not None and not prov.named:",
        "if False:",
        "a password an output dictated is only asked about",
        first=("tests/unit/test_consequential_gate.py",),
    ),
    Mutant(
        "consequence.untrusted_value",
        f"{CORE}/consequence.py",
        "if hit is not None:",
        "if False:",
        "a file id, hotel or member an output dictated is not judged",
        first=("tests/unit/test_consequential_gate.py",),
    ),
    Mutant(
        "consequence.unvouched_secret",
        f"{CORE}/consequence.py",
        "if secret:",
        "if False:",
        "a password nobody typed passes",
        first=("tests/unit/test_consequential_gate.py",),
    ),
    Mutant(
        "consequence.key_path",
        f"{CORE}/consequence.py",
        "if place is not None:",
        "if False:",
        "a download into ~/.ssh passes",
        first=("tests/unit/test_consequential_gate.py",),
    ),
    Mutant(
        "consequence.carried_destination",
        f"{CORE}/carried.py",
        "if planted(hit) and asked is None:",
        "if False:",
        "a message to a trusted colleague carries the injection's phishing link",
        first=("tests/unit/test_consequential_carried.py",),
    ),
    Mutant(
        "consequence.ordered_link",
        f"{CORE}/carried.py",
        "if marker is not None and hit is not None:",
        "if False:",
        "a message to a real member carries the link an injection's orders dictate, only asked about",
        first=("tests/unit/test_orders_dictate.py",),
    ),
    Mutant(
        "consequence.ordered_act",
        f"{CORE}/orderedacts.py",
        "if label is not None:",
        "if False:",
        "a booking the injection ordered and the prompt never asked for is only asked about",
        first=("tests/unit/test_orders_dictate.py",),
    ),
    Mutant(
        "consequence.readable_code",
        f"{CORE}/onetimecode.py",
        "if pending is not None:",
        "if True:",
        "a code read from the inbox confirms an act nobody judged",
        first=("tests/unit/test_consequential_codes.py",),
    ),
    Mutant(
        "consequence.confirmed_code",
        f"{CORE}/gates.py",
        "pending=view.codes.latest(call.session, call.server.name),",
        "pending=None,",
        "a code the service mailed for the purchase the user asked for is asked about",
        first=("tests/unit/test_consequential_codes.py",),
    ),
    Mutant(
        "consequence.acting_fetch",
        f"{CORE}/fetchacts.py",
        "if not acting:",
        "if True:",
        "a fetch that submits the planted page's form passes as a read",
        first=("tests/unit/test_consequential_fetch_acts.py",),
    ),
    Mutant(
        "consequence.budget",
        f"{CORE}/consequence.py",
        'if kind == "destroy" and rule.max_calls is None and attempts > DEFAULT_DESTROY_BUDGET:',
        "if False:",
        "a destroying tool has no default budget",
        first=("tests/unit/test_consequential_gate.py",),
    ),
    Mutant(
        "default.tainted_argument",
        f"{CORE}/gates.py",
        'if hit is not None and hit.state == "tainted":',
        "if False:",
        "an ungated tool's argument that is a planted destination is not asked about",
        follows="hit = index.lookup(d.value)",
        first=("tests/unit/test_ungated_backstop.py",),
    ),
    Mutant(
        "default.allow",
        f"{CORE}/engine.py",
        'verdict = Verdict("allow", "default.allow", "no rule objected")',
        'verdict = Verdict("ask", "sink.unproven", "no rule objected")',
        "a call nothing objected to is asked about",
    ),
    Mutant(
        "message.invalid_params",
        f"{CORE}/gates.py",
        "if not isinstance(uri, str) or not uri.strip():",
        "if not isinstance(uri, str):",
        "a resource read with an empty URI is judged as a fetch of nothing",
    ),
    Mutant(
        "message.no_tainted_destination",
        f"{CORE}/gates.py",
        'if verdict.verdict != "deny" and verdict.rule not in ("sink.tainted_identity", "sink.evicted"):',
        "if False:",
        "a request whose arguments name no planted destination is judged as a send",
    ),
    Mutant(
        "approval.once",
        f"{CORE}/engine.py",
        "if grant is None:",
        "if True:",
        "a call a person approved once is asked about again",
    ),
    # ---- a client's own tools ----
    Mutant(
        "builtin.bouncer_control",
        f"{CORE}/builtin_tools.py",
        'if kind == "control":',
        "if False:",
        "a shell command that changes Bouncer's policy runs",
    ),
    Mutant(
        "builtin.unreadable",
        f"{CORE}/builtin_tools.py",
        'if kind == "opaque":',
        "if False:",
        "a shell command that cannot be read for destinations runs",
    ),
    Mutant(
        "builtin.no_destination",
        f"{CORE}/builtin_tools.py",
        'return Verdict("allow", "builtin.no_destination", f"{tool_name}: this call names no destination")',
        'return Verdict("allow", "builtin.no_tainted_destination", f"{tool_name}: no destination")',
        "a call with no destination is said to have only untainted ones",
    ),
    Mutant(
        "builtin.no_tainted_destination",
        f"{CORE}/builtin_tools.py",
        'if v.rule == "sink.unproven":  # Claude Code\'s permission prompt asks about the command',
        "if False:",
        "every destination of a shell command nobody vouched for is asked about",
    ),
)


def rules_with_verdicts() -> dict[str, tuple[str, ...]]:
    """Every rule id a verdict can carry, with its verdicts (from ruleids, as the copy would load it)."""
    sys.path.insert(0, str(REPO))
    from bouncerd.core.ruleids import RULES

    return {rid: info.verdicts for rid, info in RULES.items() if set(info.verdicts) - {"event"}}


def locate(m: Mutant, text: str) -> int:
    """The index of the one line `m` mutates; ValueError if it is gone or not one."""
    lines = text.splitlines()
    hits = [
        i
        for i, line in enumerate(lines)
        if line.strip() == m.before
        and (m.follows is None or any(m.follows in ln for ln in lines[max(0, i - 4) : i]))
    ]
    if len(hits) != 1:
        raise ValueError(f"{m.rule}: {len(hits)} lines of {m.path} read {m.before!r}; update MUTANTS")
    return hits[0]


def mutate(m: Mutant, text: str) -> tuple[str, int]:
    lines = text.splitlines(keepends=True)
    i = locate(m, text)
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    lines[i] = indent + m.after + "\n"
    return "".join(lines), i + 1


def copy_tree(dest: Path) -> None:
    shutil.copytree(REPO, dest, ignore=IGNORED, symlinks=True)
    modules = REPO / "tests" / "npm" / "node_modules"
    if modules.is_dir():
        (dest / "tests" / "npm" / "node_modules").symlink_to(modules)


def files_naming(root: Path, rule: str) -> list[str]:
    found = []
    for d in TEST_DIRS:
        for p in sorted((root / d).rglob("test_*.py")):
            if f'"{rule}"' in p.read_text(encoding="utf-8", errors="replace"):
                found.append(str(p.relative_to(root)))
    return found


# pytest -rfE: "FAILED tests/x.py::test_y[param id] - AssertionError: ..." (an id may hold spaces).
_FAILED = re.compile(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", re.MULTILINE)


def run_tests(root: Path, targets: list[str]) -> tuple[bool, str]:
    """(passed, the first failing test or why it did not pass)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(root / "cli"), str(root / "shim")])
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    argv = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    argv += ["-rfE", "--no-header", *targets]
    try:
        proc = subprocess.run(
            argv, cwd=root, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS
        )
    except subprocess.TimeoutExpired:
        return False, f"(timeout after {RUN_TIMEOUT_SECONDS} s)"
    if proc.returncode == 0:
        return True, ""
    failed = _FAILED.search(proc.stdout)
    if failed:
        return False, failed.group(1)
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or ["?"]
    return False, f"(pytest exit {proc.returncode}: {tail[0][:80]})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--rule", action="append", help="only the mutant of this rule (repeatable)")
    parser.add_argument("--list", action="store_true", help="print the mutants and exit")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run")
    args = parser.parse_args()

    verdicts = rules_with_verdicts()
    problems = [
        f"{rid}: no mutant in bench/mutation.py" for rid in sorted(set(verdicts) - {m.rule for m in MUTANTS})
    ]
    problems += [f"{m.rule}: not a rule a verdict can carry" for m in MUTANTS if m.rule not in verdicts]
    for m in MUTANTS:
        try:
            locate(m, (REPO / m.path).read_text(encoding="utf-8"))
        except ValueError as exc:
            problems.append(str(exc))
    chosen = [m for m in MUTANTS if not args.rule or m.rule in args.rule]
    for p in problems:
        print(f"TABLE: {p}")
    if args.list:
        for m in chosen:
            print(f"{m.rule:34} {m.path}: {m.before!r} -> {m.after!r}")
    if problems or args.list:
        return 1 if problems else 0

    started = time.monotonic()
    rows: list[tuple[Mutant, int, str]] = []
    with tempfile.TemporaryDirectory(prefix="bouncer-mutation-") as tmp:
        root = Path(tmp) / "tree"
        copy_tree(root)
        if not args.no_baseline:
            baseline = sorted({f for m in chosen for f in [*files_naming(root, m.rule), *m.first]})
            ok, why = run_tests(root, baseline)
            if not ok:
                print(f"the unmutated tree fails {why}: fix that first")
                return 1
            print(f"baseline: {len(baseline)} test files pass unmutated ({time.monotonic() - started:.0f} s)")
        for m in chosen:
            target = root / m.path
            original = target.read_text(encoding="utf-8")
            mutated, lineno = mutate(m, original)
            t0 = time.monotonic()
            try:
                target.write_text(mutated, encoding="utf-8")
                first = [
                    *files_naming(root, m.rule),
                    *(f for f in m.first if f not in files_naming(root, m.rule)),
                ]
                ok, killer = run_tests(root, first) if first else (True, "")
                if ok:
                    ok, killer = run_tests(root, list(TEST_DIRS))
            finally:
                target.write_text(original, encoding="utf-8")
            result = "SURVIVED" if ok else killer
            rows.append((m, lineno, result))
            print(f"  {m.rule}: {result} ({time.monotonic() - t0:.0f} s)", flush=True)
    elapsed = time.monotonic() - started

    print()
    print("| rule | verdicts | line | mutation | killed by |")
    print("| --- | --- | --- | --- | --- |")
    for m, lineno, result in rows:
        kinds = "/".join(verdicts[m.rule])
        print(f"| `{m.rule}` | {kinds} | {m.path}:{lineno} | {m.what}: `{m.after}` | {result} |")
    survived = [m for m, _, r in rows if r == "SURVIVED"]
    fatal = [m for m in survived if set(verdicts[m.rule]) & {"deny", "ask"}]
    print()
    print(
        f"{len(rows)} mutants, {len(rows) - len(survived)} killed, {len(survived)} survived "
        f"({len(fatal)} of a deny or ask rule); {elapsed:.0f} s"
    )
    for m in survived:
        print(f"SURVIVED: {m.rule} ({m.what})")
    return 1 if fatal else 0


if __name__ == "__main__":
    sys.exit(main())
