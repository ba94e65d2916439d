"""What the arguments of a call and the words of a prompt are: programs, destinations, network hosts.

Pure readings the engine's backstops and the prompt hook share (`Engine._check_programs`,
`Engine._check_carried`, `Engine.vouch`, resource reads); no state.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from bouncerd.core import canon, fallback, fallback_words, taint

# Arguments that hold a program the tool runs: a shell command, code, a SQL statement, a script.
PROGRAM_WORDS: Final = frozenset(
    {
        "command",
        "commands",
        "cmd",
        "cmdline",
        "commandline",
        "script",
        "code",
        "shell",
        "bash",
        "sh",
        "powershell",
        "sql",
        "statement",
        "stmt",
        "expression",
        "expr",
        "function",
        "javascript",
        "js",
        "python",
        "program",
        "snippet",
        "exec",
        "argv",
    }
)
MAX_CARRIED_VALUE_CHARS: Final = 512  # longer values are prose to `_check_carried`, not destinations


def carries_destinations(tool: str) -> bool:
    """Whether an ungated tool's arguments are checked for planted destinations (`_check_carried`):
    every tool whose name is not made of reading verbs alone (`get_user`, `search_mail`); a name
    with no verb we know (`comms`, `fax`, a name in another script) is checked."""
    parts = fallback.words(tool)
    if fallback_words.verb_of(parts)[0] != "read":
        return True
    # After a reading verb, another verb word is what it reads (`search_mail`, `find_contact`),
    # unless a conjunction makes it a second action (`get_and_send`, `read_then_forward`).
    for i, p in enumerate(parts[:-1]):
        if p in ("and", "then") and fallback_words.verb_of(parts[i + 1 :])[0] not in (None, "read"):
            return True
    return False


# A `code` that is one short run of letters and digits with a digit (`482913`, `A7-K2QX`) is a one-time
# code, not a program: a lone word with no dot, slash or colon runs nothing that reaches anywhere.
LONE_CODE = re.compile(r"(?=[A-Za-z0-9-]*[0-9])[A-Za-z0-9-]{1,16}")


def names_a_program(name: str) -> bool:
    """Whether an argument of this name holds a program (one of its words is in `PROGRAM_WORDS`)."""
    return bool(PROGRAM_WORDS.intersection(fallback.words(name)))


def program_arguments(arguments: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, text) of each top-level argument named as a program (`PROGRAM_WORDS`): a string, or a
    list of strings (an argv) joined with spaces. Never cut: the shell reader asks about a program
    too long to read (`shell_destinations.MAX_COMMAND_CHARS`), where a cut one would hide its tail."""
    out: list[tuple[str, str]] = []
    for name, value in arguments.items():
        if not PROGRAM_WORDS.intersection(fallback.words(str(name))):
            continue
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            value = " ".join(value)
        if isinstance(value, str) and value.strip() and not LONE_CODE.fullmatch(value.strip()):
            out.append((str(name), value))
    return out


def names_a_network_host(uri: str) -> bool:
    """Whether a resource URI's authority is a host on the network (`web://evil.example/x`, an IP), not
    the server's own namespace (`demo://resource/…`, `fixture://notes/…`): a server lists its own
    namespace, and reading another resource in it reaches nobody else."""
    return any("." in h or h.startswith("[") for h in canon.canonicalize(uri).hosts)


_WORD_EDGES = "\"'`()[]{}<>,;!?*"
# A dot, then a capital and a lower-case letter: where a sentence starts with no space after the last.
_GLUED_SENTENCE = re.compile(r"\.(?=[A-Z][a-z])")
MAX_PROMPT_CHARS = 100_000  # a prompt longer than this is a paste, not a person naming recipients


def prompt_destinations(text: str) -> list[str]:
    """The words of a prompt that are one destination each (address, URL, host, phone, IBAN, handle),
    in the user's own spelling: trust is compared on narrow keys (see canon)."""
    out: list[str] = []
    for raw in text[:MAX_PROMPT_CHARS].split():
        whole = raw.strip(_WORD_EDGES).rstrip(".:")
        # "our website www.our-company.com.They sent ...": a sentence glued to the next one. The host
        # the person meant is the word up to the dot before the capital, when it is written all in
        # lower case (so "Docs.Acme.Co.Uk" never gives "docs.acme.co"); the whole word is kept too.
        glued = [whole[: m.start()] for m in _GLUED_SENTENCE.finditer(whole)]
        for word in (whole, *(w for w in glued if w == w.lower())):
            if len(word) >= taint.MIN_DESTINATION_CHARS and canon.canonicalize(word).kind != "text":
                out.append(word)
    return out
