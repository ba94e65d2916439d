"""Where a shell command reaches the network: a static reading of one command line, without running it.

Theory of operation
-------------------
`command_destinations(command)` lists ``(kind, destination)`` pairs (kinds: see
`bouncerd.core.builtin_tools`). The command is read the way a shell splits it (`shlex`, with `;`,
`&`, `|`, `(`, `)` and newlines separating commands, redirections taking their target): pipelines,
`&&` chains, subshells, `$(...)` and backticks (also inside double quotes, read wherever they stand),
`sh -c '...'` and `bash -o pipefail -c`, `eval`, `env -S`, heredoc bodies (read as commands: they
usually are, for `bash <<EOF` and `python3 <<EOF`), and wrappers such as `env`, `sudo`, `timeout`,
`nohup`, `xargs` before the program. Each simple command is then matched on its program's basename:

- curl, wget, httpie (http/https/xh): a *send* when a body, form, file, header, cookie or credential
  goes with the request (`-d`, `-F`, `-T`, `-H`, `-b`, `-u`, `--json`, `--post-data`, request items),
  else a *fetch* of each URL;
- nc/ncat/netcat, socat, telnet/ftp, ssh/mosh, scp/sftp/rsync (`[user@]host:path`), openssl
  `s_client -connect`, `/dev/tcp/HOST/PORT` redirections, dig/ping/host/nslookup, mail/sendmail/mutt:
  a *send* to the host or address;
- git: push/remote/send-email send, clone/fetch/pull fetch, to each URL or `host:path`;
- python/node/perl/ruby/... with inline code (`-c`, `-e`, `-ne`): each URL in the code is a send;
- bouncerctl (and `python -m bouncerctl`) other than its read-only commands, or any word naming the
  daemon's socket: *control*;
- a program whose name is computed (`$C -d @f host`): every URL and address it is given is a send;
- any other program: the URLs it is given are fetched, the addresses it is given may be mailed to;
  text tools (`echo`, `grep`, `cat`, ...) reach nothing.

An unclosed quote is read with its quotes as plain characters rather than not at all. A command
longer than `MAX_COMMAND_CHARS` or nested deeper than `MAX_NESTING` is *opaque* (asked about).

Not seen: scripts run from files or from stdin (`curl ... | sh`), destinations computed at run time
(`curl "$HOST"`), programs not listed here that reach the network without a URL argument (`gh`,
`aws s3`), data leaked through DNS lookups of a *subdomain* of a tainted host (the taint index matches
hosts exactly), and obfuscation a static reading cannot undo (`$'\\x63url'`). Those calls are judged by
the client's own permission prompt alone.

Standard library only: the hook imports this to know, without the daemon, whether a command reaches
the network at all.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Final, Literal

from bouncerd.core import shapes

Kind = Literal["fetch", "send", "control", "opaque"]
Destination = tuple[Kind, str]

# A shell command longer than this is a paste or an attempt to drown the parser: it is asked about
# rather than read in part.
MAX_COMMAND_CHARS: Final = 100_000
# sh -c 'sh -c "..."', eval and $(...) nest; real commands go two or three deep. Deeper is asked.
MAX_NESTING: Final = 6

# ---- program tables ---------------------------------------------------------------------------------


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox", "fish", "tcsh", "csh"})
# wrapper -> (its options that take a value, how many positional words precede the wrapped command)
_WRAPPERS: Mapping[str, tuple[str, int]] = {
    "sudo": ("ugpCDrtUh", 0),
    "doas": ("uC", 0),
    "env": ("uCS", 0),
    "timeout": ("sk", 1),
    "nice": ("n", 0),
    "nohup": ("", 0),
    "time": ("fo", 0),
    "command": ("", 0),
    "exec": ("a", 0),
    "builtin": ("", 0),
    "stdbuf": ("ioe", 0),
    "setsid": ("", 0),
    "ionice": ("cnpt", 0),
    "chrt": ("", 1),
    "taskset": ("", 1),
    "flock": ("wEn", 1),
    "caffeinate": ("tw", 0),
    "torsocks": ("aPu", 0),
    "proxychains": ("f", 0),
    "proxychains4": ("f", 0),
    "xargs": ("aEedIiLlnPs", 0),
    "watch": ("dn", 0),
    "strace": ("eoOpsSuIbPX", 0),
    "unbuffer": ("", 0),
}
# Programs that only read or transform text and files: URLs in their arguments go nowhere.
_TEXT_ONLY = _names(
    "echo printf cat tac head tail less more wc sort uniq cut tr paste column fold fmt nl grep egrep "
    "fgrep rg ag ack jq yq sed tee ls find stat file test [ [[ true false cd pwd export unset set read "
    "sleep date basename dirname realpath readlink mkdir rmdir touch rm cp mv ln chmod chown diff cmp "
    "tar gzip gunzip zip unzip xz bzip2 base64 md5sum sha1sum sha256sum shasum hexdump xxd od strings "
    "which type whoami id uname ps kill pkill pgrep df du free history alias local declare return "
    "exit source . : mktemp"
)
_CURL_VALUE_SHORT = "AbcCdDeEFHKmoPQrTtuUwxXyYz"
_CURL_VALUE_LONG = _names(
    "data data-ascii data-binary data-raw data-urlencode form form-string json header output user "
    "user-agent referer cookie cookie-jar request upload-file proxy max-time connect-timeout write-out "
    "config range cert key cacert capath url resolve connect-to proxy-user retry retry-delay "
    "retry-max-time limit-rate time-cond output-dir dump-header trace trace-ascii stderr ftp-port quote "
    "interface dns-servers max-filesize mail-from mail-rcpt mail-auth telnet-option variable "
    "oauth2-bearer aws-sigv4 proto proto-redir max-redirs ciphers cert-type key-type pass unix-socket "
    "abstract-unix-socket noproxy preproxy socks4 socks4a socks5 socks5-hostname local-port "
    "netrc-file pinnedpubkey proxy-header service-name speed-limit speed-time tls-max"
)
# curl options whose value travels to the server: the body, a form, a file, headers, credentials.
_CURL_SEND_SHORT = frozenset("dFTHbueA")
_CURL_SEND_LONG = _names(
    "data data-ascii data-binary data-raw data-urlencode form form-string json upload-file header "
    "cookie user referer user-agent oauth2-bearer mail-rcpt aws-sigv4 proxy-header"
)
_WGET_VALUE_SHORT = "OoaPUetTwiBlARDQIX"
_WGET_VALUE_LONG = _names(
    "post-data post-file body-data body-file header user password http-user http-password method "
    "referer user-agent output-document output-file directory-prefix input-file load-cookies "
    "save-cookies tries timeout wait level accept reject domains exclude-domains quota base "
    "ca-certificate certificate private-key execute proxy-user proxy-password"
)
_WGET_SEND_LONG = _names(
    "post-data post-file body-data body-file header user password http-user http-password method "
    "referer user-agent"
)
_HTTPIE_VALUE = _names(
    "a A o p s auth auth-type output session session-read-only verify cert cert-key proxy timeout "
    "print pretty style format-options max-redirects default-scheme boundary raw ssl ciphers "
    "response-charset response-mime"
)
_HTTP_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_SSH_VALUE = "BbcDEeFIiJLlmOopQRSWw"
_SCP_VALUE = "cFiJlPoSDX"
_SFTP_VALUE = "BbcDFiJloPRsS"
_RSYNC_VALUE = "eBfMT"
_NC_VALUE = "IiMmOPpsTVWwXxecodgG"
_GIT_SEND = frozenset({"push", "remote", "send-email", "request-pull"})
_GIT_FETCH = frozenset({"clone", "fetch", "pull", "ls-remote", "submodule", "archive"})
_NC = frozenset({"nc", "ncat", "netcat"})
_REMOTE_SHELLS = frozenset({"telnet", "ftp", "lftp", "tftp"})
_RESOLVERS = _names("dig host nslookup ping ping6 traceroute tracepath mtr whois")
_MAILERS = frozenset({"mail", "mailx", "sendmail", "mutt", "neomutt", "msmtp", "s-nail", "swaks"})
_INTERPRETER = re.compile(
    r"(?:python|pypy)[\d.]*|node(?:js)?|deno|bun|perl[\d.]*|ruby[\d.]*|php[\d.]*|lua[\d.]*|osascript|pwsh"
)
_CODE_FLAGS = frozenset({"-c", "-e", "-E", "-r", "-p", "--eval", "--print", "-Command"})
_CODE_CLUSTER = re.compile(r"-[A-Za-z]*[ceE]")  # perl -ne, -pe, -lne; python -Bc
# Bouncer's own commands that only read: anything else changes what Bouncer allows.
_BOUNCERCTL_READ_ONLY = frozenset({"status", "pending", "report", "tail", "audit", "policy", "demo"})
_BOUNCER_SOCKET = "bouncerd.sock"  # bouncerd.paths.SOCKET_NAME (the core may not import paths)

_OPERATOR_CHARS = "();<>|&\n"
_ROUGH_WORDS = re.compile(r"[();<>|&\n]+|[^\s();<>|&]+")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]{1,15}://[^\s'\"<>(){}\[\]\\,;`|]+")
_EMAIL = shapes.EMAIL_RUN  # every address-shaped run: see asymmetry 1 in shapes
_HOST = re.compile(r"(?:[\w-]+\.)+[A-Za-z][\w-]*\.?|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9A-Fa-f:.]+\]")
_DEV_NET = re.compile(r"/dev/(?:tcp|udp)/([^/\s]+)")
_SOCAT_NET = re.compile(
    r"(?i)(?:tcp|udp|sctp|dccp)[46]?(?:-connect|-sendto|-datagram)?:([^:,]+)|"
    r"(?:openssl|ssl|socks4a?|socks5|proxy)(?:-connect)?:(?:[^:,]+:)?([^:,]+)"
)
_REMOTE_PATH = re.compile(r"(?:[^@/:\s]+@)?(\[[0-9A-Fa-f:.]+\]|[^@/:\s]+):(?!//)")


class _TooDeep(Exception):
    """The command nests further than MAX_NESTING."""


def command_destinations(command: str) -> list[Destination]:
    """Where one shell command line sends or fetches, in order, without repeats."""
    if len(command) > MAX_COMMAND_CHARS:
        return [("opaque", f"a command of {len(command)} characters")]
    found: list[Destination] = []
    try:
        _command(command, 0, found)
    except _TooDeep:
        found.append(("opaque", f"a command nested more than {MAX_NESTING} levels deep"))
    return list(dict.fromkeys(found))


def _words(command: str) -> list[str]:
    lex = shlex.shlex(command, posix=True, punctuation_chars=_OPERATOR_CHARS)
    lex.whitespace = " \t\r"  # a newline separates commands, so it is punctuation here
    lex.whitespace_split = True
    lex.commenters = ""  # a comment's words then read as arguments: harmless, and lines stay apart
    try:
        return list(lex)
    except ValueError:
        # An unclosed quote or a trailing backslash (an apostrophe in a heredoc body, say): read the
        # text with its quotes as plain characters rather than not at all.
        return [w.strip("'\"") for w in _ROUGH_WORDS.findall(command)]


def _command(command: str, depth: int, out: list[Destination]) -> None:
    if depth > MAX_NESTING:
        raise _TooDeep
    for inner in _substitutions(command):  # `...` and $(...) run wherever they stand, even in "..."
        _command(inner, depth + 1, out)
    segment: list[str] = []
    words = _words(command)
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word and all(ch in _OPERATOR_CHARS for ch in word):
            if word.startswith("(") and segment and segment[-1].endswith("$"):
                # `$(...)` unquoted: its commands were read above; here it is one argument
                level, last = word.count("(") - word.count(")"), word
                while i < len(words) and level > 0:
                    last = words[i]
                    if all(ch in _OPERATOR_CHARS for ch in last):
                        level += last.count("(") - last.count(")")
                    i += 1
                segment[-1] += "(...)"
                if any(ch in ";|&\n" for ch in last):  # `$(x);` : the closing token also ends the command
                    _simple(segment, depth, out)
                    segment = []
            elif "(" in word or ")" in word or not ("<" in word or ">" in word):
                _simple(segment, depth, out)
                segment = []
            elif i < len(words):  # a redirection: its target is not an argument
                _scan_word(words[i], out)
                i += 1
            continue
        _scan_word(word, out)
        segment.append(word)
    _simple(segment, depth, out)


def _scan_word(word: str, out: list[Destination]) -> None:
    """What a word reveals wherever it stands: a /dev/tcp path, the daemon's socket."""
    for m in _DEV_NET.finditer(word):
        out.append(("send", m.group(1)))
    if _BOUNCER_SOCKET in word:
        out.append(("control", _BOUNCER_SOCKET))


def _substitutions(text: str) -> Iterator[str]:
    """The commands inside `$(...)` and backticks, outermost first (nested ones are found when these
    are read in turn)."""
    start = text.find("$(")
    while start >= 0:
        level, j = 0, start + 1
        while j < len(text):
            level += {"(": 1, ")": -1}.get(text[j], 0)
            if level == 0:
                break
            j += 1
        yield text[start + 2 : j]
        start = text.find("$(", j)
    if "`" in text:
        yield from text.split("`")[1::2]


def _simple(words: Sequence[str], depth: int, out: list[Destination]) -> None:
    """One simple command: assignments, wrappers, then the program and its arguments."""
    i = 0
    while i < len(words):
        if _ASSIGNMENT.match(words[i]):
            i += 1
            continue
        name = _program(words[i])
        wrapper = _WRAPPERS.get(name)
        if wrapper is None:
            break
        if name == "env":
            for j in range(i + 1, len(words) - 1):
                if words[j] in ("-S", "--split-string"):
                    _command(words[j + 1], depth + 1, out)
        i = _skip_options(words, i + 1, wrapper[0]) + wrapper[1]
    if i >= len(words):
        return
    name, args = _program(words[i]), list(words[i + 1 :])
    if words[i].startswith("-") or "$" in words[i] or "`" in words[i]:
        # The program is computed (`$C -d @f host`, the tail of a `$(...)`): whatever it is, treat
        # every URL and address it is given as a send.
        for arg in words[i:]:
            out.extend(("send", m.group(0)) for m in _URL.finditer(arg))
            out.extend(("send", m.group(0)) for m in _EMAIL.finditer(arg) if "://" not in arg)
        return
    if name in _SHELLS:
        _shell(args, depth, out)
    elif name == "eval":
        _command(" ".join(args), depth + 1, out)
    elif name in _TEXT_ONLY:
        return
    else:
        handler = _HANDLERS.get(name)
        if handler is not None:
            handler(args, out)
        elif _INTERPRETER.fullmatch(name):
            _interpreter(args, out)
        else:
            _unknown([words[i], *args], out)


def _program(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _skip_options(words: Sequence[str], i: int, with_value: str) -> int:
    """The index of the first word after the options of a wrapper (`--` ends them)."""
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        if words[i] == "--":
            return i + 1
        flag = words[i]
        i += 1
        if not flag.startswith("--") and flag[-1] in with_value:
            i += 1
    return i


def _options(
    args: Sequence[str], short_values: str, long_values: frozenset[str] = frozenset()
) -> tuple[list[tuple[str, str | None]], list[str]]:
    """(options with their values, positional arguments) of one command line, getopt style: short
    flags cluster (`-sSL`), a value may be attached (`-dx`, `--data=x`) or the next word."""
    opts: list[tuple[str, str | None]] = []
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            positional.extend(args[i:])
            break
        if arg.startswith("--") and len(arg) > 2:
            name, eq, value = arg[2:].partition("=")
            if not eq and name in long_values and i < len(args):
                value, eq = args[i], "="
                i += 1
            opts.append((name, value if eq else None))
        elif arg.startswith("-") and len(arg) > 1:
            for k, flag in enumerate(arg[1:], start=1):
                if flag in short_values:
                    value = arg[k + 1 :]
                    if not value and i < len(args):
                        value = args[i]
                        i += 1
                    opts.append((flag, value))
                    break
                opts.append((flag, None))
        else:
            positional.append(arg)
    return opts, positional


def _host_of(target: str) -> str:
    """`user@host:port`, `ssh://user@host:port/path`, `[::1]:22` → the host."""
    target = re.sub(r"^[a-z][a-z0-9+.-]*://", "", target, flags=re.I)
    target = target.split("/", 1)[0].rsplit("@", 1)[-1]
    if target.startswith("["):
        return target.split("]", 1)[0] + "]"
    return target.split(":", 1)[0]


# ---- per program ----------------------------------------------------------------------------------------


def _shell(args: Sequence[str], depth: int, out: list[Destination]) -> None:
    """`sh -c CMD` (also `bash -lc`, `bash -o pipefail -c`): CMD is read; a script file is not."""
    j = 0
    while j < len(args):
        arg = args[j]
        if arg in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            j += 2
            continue
        if not arg.startswith(("-", "+")) or arg == "-":
            break
        if not arg.startswith("--") and "c" in arg[1:]:
            if j + 1 < len(args):
                _command(args[j + 1], depth + 1, out)
            return
        j += 1
    _unknown(args, out)


def _curl(args: Sequence[str], out: list[Destination]) -> None:
    opts, positional = _options(args, _CURL_VALUE_SHORT, _CURL_VALUE_LONG)
    sends = any(name in _CURL_SEND_SHORT or name in _CURL_SEND_LONG for name, _ in opts)
    kind: Kind = "send" if sends else "fetch"
    urls = [v for name, v in opts if name in ("url", "x", "proxy") and v] + positional
    out.extend((kind, url) for url in urls)
    out.extend(("send", v) for name, v in opts if name == "mail-rcpt" and v)


def _wget(args: Sequence[str], out: list[Destination]) -> None:
    opts, positional = _options(args, _WGET_VALUE_SHORT, _WGET_VALUE_LONG)
    sends = any(name in _WGET_SEND_LONG or name == "U" for name, _ in opts)
    kind: Kind = "send" if sends else "fetch"
    out.extend((kind, url) for url in positional)


def _httpie(args: Sequence[str], out: list[Destination]) -> None:
    opts, positional = _options(args, "aAops", _HTTPIE_VALUE)
    if positional and positional[0].isupper() and positional[0].isalpha():
        method, positional = positional[0], positional[1:]
    else:
        method = ""
    if not positional or positional[0].startswith(":"):
        return  # `:3000/path` is localhost
    items = positional[1:]
    authenticated = any(n in ("a", "auth", "f", "form") for n, _ in opts)
    sends = bool(items) or method in _HTTP_WRITE_METHODS or authenticated
    out.append(("send" if sends else "fetch", positional[0]))


def _ssh(args: Sequence[str], out: list[Destination]) -> None:
    opts, positional = _options(args, _SSH_VALUE)
    for name, value in opts:
        if name == "J" and value:
            out.extend(("send", _host_of(hop)) for hop in value.split(","))
    if positional:
        out.append(("send", _host_of(positional[0])))


def _remote_paths(args: Sequence[str], value_opts: str, out: list[Destination]) -> None:
    """scp/rsync/sftp: every `[user@]host:path` or `scheme://host/...` argument is a remote end."""
    opts, positional = _options(args, value_opts)
    out.extend(("send", _host_of(v)) for name, v in opts if name == "J" and v)
    for arg in positional:
        if "://" in arg:
            out.append(("send", _host_of(arg)))
        else:
            m = _REMOTE_PATH.match(arg)
            if m is not None:
                out.append(("send", m.group(1)))


def _sftp(args: Sequence[str], out: list[Destination]) -> None:
    _, positional = _options(args, _SFTP_VALUE)
    if positional:
        out.append(("send", _host_of(positional[0])))


def _nc(args: Sequence[str], out: list[Destination]) -> None:
    opts, positional = _options(args, _NC_VALUE)
    flags = {name for name, _ in opts}
    if "U" in flags:
        return  # a Unix socket path (the daemon's own socket is caught by _scan_word)
    out.extend(("send", _host_of(v)) for name, v in opts if name == "x" and v)
    if positional and "l" not in flags:
        out.append(("send", _host_of(positional[0])))


def _socat(args: Sequence[str], out: list[Destination]) -> None:
    for arg in args:
        for m in _SOCAT_NET.finditer(arg):
            out.append(("send", m.group(1) or m.group(2)))


def _remote_shell(args: Sequence[str], out: list[Destination]) -> None:
    positional = [a for a in args if not a.startswith("-")]
    if positional:
        out.append(("send", _host_of(positional[0])))


def _resolver(args: Sequence[str], out: list[Destination]) -> None:
    """A name looked up or pinged reaches the name's DNS servers: data can ride in the query."""
    for arg in args:
        name = arg[1:] if arg.startswith("@") else arg
        if not arg.startswith(("-", "+")) and _HOST.fullmatch(name):
            out.append(("send", name.rstrip(".")))


def _mailer(args: Sequence[str], out: list[Destination]) -> None:
    for arg in args:
        out.extend(("send", m.group(0)) for m in _EMAIL.finditer(arg))


def _openssl(args: Sequence[str], out: list[Destination]) -> None:
    for j, arg in enumerate(args[:-1]):
        if arg in ("-connect", "-proxy"):
            out.append(("send", _host_of(args[j + 1])))


def _git(args: Sequence[str], out: list[Destination]) -> None:
    _, rest = _options(args, "Cc")
    if not rest:
        return
    sub = rest[0]
    kind: Kind
    if sub in _GIT_SEND:
        kind = "send"
    elif sub in _GIT_FETCH:
        kind = "fetch"
    else:
        return
    for arg in rest[1:]:
        if arg.startswith("-"):
            _, _, arg = arg.partition("=")
        if "://" in arg:
            out.append((kind, arg))
        elif _EMAIL.fullmatch(arg) and sub == "send-email":
            out.append(("send", arg))
        elif (m := _REMOTE_PATH.match(arg)) is not None and not arg.startswith(("/", ".")):
            out.append(("send" if kind == "send" else "fetch", m.group(1)))


def _bouncerctl(args: Sequence[str], out: list[Destination]) -> None:
    positional = [a for a in args if not a.startswith("-")]
    if not positional:
        return  # --help, --version
    sub = positional[0]
    if sub in _BOUNCERCTL_READ_ONLY or (sub == "pins" and positional[1:2] in ([], ["show"])):
        return
    out.append(("control", f"bouncerctl {sub}"))


def _interpreter(args: Sequence[str], out: list[Destination]) -> None:
    """Inline code can do anything with a URL it names: a tainted one is refused. `-m bouncerctl` is
    Bouncer's own CLI."""
    for j, arg in enumerate(args):
        if arg == "-m" and j + 1 < len(args):
            if args[j + 1] in ("bouncerctl", "bouncerd"):
                _bouncerctl(list(args[j + 2 :]), out)
            break
        if (arg in _CODE_FLAGS or _CODE_CLUSTER.fullmatch(arg)) and j + 1 < len(args):
            out.extend(("send", m.group(0)) for m in _URL.finditer(args[j + 1]))
            _unknown(args[j + 2 :], out)
            return
    _unknown(args, out)


def _unknown(args: Sequence[str], out: list[Destination]) -> None:
    """A program we do not know: URLs it is given are fetched at least; addresses it is given may be
    mailed to."""
    for arg in args:
        out.extend(("fetch", m.group(0)) for m in _URL.finditer(arg))
        if "://" not in arg:
            out.extend(("send", m.group(0)) for m in _EMAIL.finditer(arg))


_HANDLERS: Mapping[str, Callable[[Sequence[str], list[Destination]], None]] = {
    "curl": _curl,
    "wget": _wget,
    "wget2": _wget,
    "http": _httpie,
    "https": _httpie,
    "xh": _httpie,
    "xhs": _httpie,
    "ssh": _ssh,
    "autossh": _ssh,
    "mosh": _ssh,
    "scp": lambda a, o: _remote_paths(a, _SCP_VALUE, o),
    "rsync": lambda a, o: _remote_paths(a, _RSYNC_VALUE, o),
    "sftp": _sftp,
    "socat": _socat,
    "openssl": _openssl,
    "git": _git,
    "bouncerctl": _bouncerctl,
    **{name: _nc for name in _NC},
    **{name: _remote_shell for name in _REMOTE_SHELLS},
    **{name: _resolver for name in _RESOLVERS},
    **{name: _mailer for name in _MAILERS},
}
