/* The tokenizer's anchor and digit-run scans (bouncerd/core/tokens.py), the candidate scan of the
values a text says (bouncerd/core/said.py), and the making of one output's records from its keys
(`pairs_as`, for bouncerd/core/taint.py; both at the end of this file), in C.

Theory of operation
-------------------
`anchors(mask)` returns the sorted positions of the anchors in a token mask, exactly as the pure
`tokens._anchors` finds them with a byte scan and three regular expressions; `numeric_runs(mask)` the
matches of `numeric_tokens._NUMERIC` (digit runs shaped like phone numbers, and platform ids), as
`numeric_tokens._numeric_runs` lists them from `finditer`. The anchors are:

- `@` followed by a byte that is not a space (`_positions`, then the `mask[p + 1 : p + 2]` check);
- `.` followed by a byte other than a space or `.` (`_DOT_ANCHOR`, `\.[^ .]`);
- `#` followed by `a`, `0` or `w` (`_HASH_ANCHOR`, `#[a0w]`);
- `:` starting a match of `_COLON_ANCHOR`, `:(?://|:|[0a]{1,4}:[0a]{1,4}:[0a]{1,4}:)`, scanned as
  `finditer` does: a match consumes its text, so a `:` inside an earlier match is not an anchor.

The regular expressions scan the mask one byte at a time in the regex engine (about ten instructions a
byte, several times over); this is one table lookup a byte. It is optional: built with the mypyc
modules by scripts/native_build.py, loaded only when bouncerd/native.py trusts that build, and held to
the pure scans by tests/unit/test_scanner_rewrites.py. Without it `tokens._anchors` and
`numeric_tokens._numeric_runs` run.
*/

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* numeric_tokens.PLATFORM_ID_MIN_CHARS - 2 and numeric_tokens.PLATFORM_ID_MAX_CHARS - 2: the bytes of a platform id
   after its type letter and first digit. */
#define PLATFORM_ID_REST_MIN 7
#define PLATFORM_ID_REST_MAX 10
#define PHONE_MIN_DIGITS 8 /* shapes.PHONE_MIN_DIGITS: a phone-shaped run is at least this long */

/* The end of the `_COLON_ANCHOR` match at `i` (where s[i] is ':'), or -1 if there is none. The
   alternatives are tried in the pattern's order; `[0a]{1,4}` is greedy and cannot give back a byte to
   let the following ':' match (a ':' is not in [0a]), so no backtracking is needed. */
static Py_ssize_t
colon_match(const unsigned char *s, Py_ssize_t n, Py_ssize_t i)
{
    if (i + 2 < n && s[i + 1] == '/' && s[i + 2] == '/') {
        return i + 3;
    }
    if (i + 1 < n && s[i + 1] == ':') {
        return i + 2;
    }
    Py_ssize_t j = i + 1;
    for (int group = 0; group < 3; group++) {
        int k = 0;
        while (k < 4 && j < n && (s[j] == '0' || s[j] == 'a')) {
            j++;
            k++;
        }
        if (k == 0 || j >= n || s[j] != ':') {
            return -1;
        }
        j++;
    }
    return j;
}

/* The bytes that can be an anchor. */
static const unsigned char ANCHOR_BYTE[256] = {['@'] = 1, ['.'] = 1, ['#'] = 1, [':'] = 1};

static PyObject *
anchors(PyObject *module, PyObject *arg)
{
    (void)module;
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "anchors() takes a bytes mask");
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    Py_ssize_t colon_resume = 0; /* where finditer would try `_COLON_ANCHOR` next */
    Py_ssize_t last = n - 1;     /* every anchor needs a byte after it */
    for (Py_ssize_t i = 0; i < last; i++) {
        while (i < last && !ANCHOR_BYTE[s[i]]) { /* the common case: a tight loop over plain bytes */
            i++;
        }
        if (i >= last) {
            break;
        }
        unsigned char c = s[i], next = s[i + 1];
        int hit;
        switch (c) {
        case '@':
            hit = next != ' ';
            break;
        case '.':
            hit = next != ' ' && next != '.';
            break;
        case '#':
            hit = next == 'a' || next == '0' || next == 'w';
            break;
        case ':':
            hit = 0;
            if (i >= colon_resume) {
                Py_ssize_t end = colon_match(s, n, i);
                if (end > 0) {
                    hit = 1;
                    colon_resume = end;
                }
            }
            break;
        default:
            continue;
        }
        if (hit) {
            PyObject *pos = PyLong_FromSsize_t(i);
            if (pos == NULL || PyList_Append(out, pos) < 0) {
                Py_XDECREF(pos);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(pos);
        }
    }
    return out;
}

static int
in_set(unsigned char c, const char *set)
{
    return c != 0 && strchr(set, c) != NULL;
}

/* One `_NUMERIC` match attempt at `p` (s[p] is '0', not after a '0'): its end, and in `*id_end` the
   end of group 1 (the platform-id branch) or -1 (the phone branch); -1 if there is no match.
   The phone branch `[0 .\-/]{6,}0` is greedy over the run of those bytes after `p`, then gives bytes
   back until a '0' ends it: it ends after the last '0' at least PHONE_MIN_DIGITS - 1 bytes on. The platform-id branch
   (a lookbehind, then a lookahead) matches "0" alone; its `[a0]{7,10}` can only give bytes back to
   leave an [a0] byte next, which the negative lookahead refuses, so only the whole run can pass. */
static Py_ssize_t
numeric_match(const unsigned char *s, Py_ssize_t n, Py_ssize_t p, Py_ssize_t *id_end)
{
    Py_ssize_t q = p + 1;
    while (q < n && in_set(s[q], "0 .-/")) {
        q++;
    }
    for (Py_ssize_t e = q - 1; e >= p + PHONE_MIN_DIGITS - 1; e--) {
        if (s[e] == '0') {
            *id_end = -1;
            return e + 1;
        }
    }
    if (p < 2 || s[p - 1] != 'a' || !in_set(s[p - 2], " @#:w")) {
        return -1;
    }
    Py_ssize_t k = p + 1;
    while (k < n && (s[k] == 'a' || s[k] == '0')) {
        k++;
    }
    Py_ssize_t run = k - (p + 1);
    if (run < PLATFORM_ID_REST_MIN || run > PLATFORM_ID_REST_MAX) {
        return -1;
    }
    if (k < n && in_set(s[k], "a0@+-")) {
        return -1;
    }
    if (k + 1 < n && (s[k] == '.' || s[k] == ':') && (s[k + 1] == 'a' || s[k + 1] == '0')) {
        return -1;
    }
    *id_end = k;
    return p + 1;
}

static PyObject *
numeric_runs(PyObject *module, PyObject *arg)
{
    (void)module;
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "numeric_runs() takes a bytes mask");
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    Py_ssize_t p = 0;
    while (p < n) {
        const unsigned char *hit = memchr(s + p, '0', (size_t)(n - p));
        if (hit == NULL) {
            break;
        }
        p = hit - s;
        Py_ssize_t id_end = -1, end = -1;
        if (p == 0 || s[p - 1] != '0') {
            end = numeric_match(s, n, p, &id_end);
        }
        if (end < 0) {
            p++;
            continue;
        }
        PyObject *row = Py_BuildValue("(nnn)", p, end, id_end);
        if (row == NULL || PyList_Append(out, row) < 0) {
            Py_XDECREF(row);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(row);
        p = end; /* finditer goes on after a match */
    }
    return out;
}


/* ---- said.candidates: the values a text says, for ASCII text ------------------------------------

`said_candidates(text)` returns what the pure `said.candidates(text)` returns, in the same order, for
a text of ASCII characters, and None for any other text (the caller then runs the pure scan: the
regular expressions' `\w`, `\b`, `str.lower` and `str.split` differ beyond ASCII). Each section below
follows one loop of the pure function and says why it finds the same matches as the pattern's
`finditer`: none of these patterns needs to backtrack, because each optional or repeated piece
consumes characters that the piece after it cannot start with. */

#define SAID_MAX_QUOTED 80   /* said._QUOTED's {1,80}: MAX_SAID_CHARS */
#define SAID_MAX_WORDS 4     /* said.MAX_SAID_WORDS */
#define SAID_ID_REST 39      /* said._ID_VALUE's [\w.-]{0,39} */
#define SAID_MIN_CODE 6      /* said.MIN_CODE_CHARS, and _CODE_WORD's {6,64} */
#define SAID_MAX_CODE 64
/* words of one capitalised run the C scan holds; a longer run goes to the pure scan */
#define SAID_MAX_RUN_WORDS 80

/* Character classes of ASCII, as Python's `str` methods and `re` (on str) see them, one table lookup
   each: filled in by `init_classes` when the module loads. */
enum {
    C_WORD = 1,   /* \w: letters, digits, `_` */
    C_ALPHA = 2,  /* str.isalpha */
    C_DIGIT = 4,  /* [0-9] */
    C_UPPER = 8,  /* [A-Z] */
    C_SPACE = 16, /* str.isspace / str.split(): \t \n \v \f \r, \x1c-\x1f and space */
    C_QUOTE = 32, /* ' " ` */
    C_NAME = 64,  /* `[A-Za-z0-9_'&-]` (said._CAPITAL_START) and `[\w'&-]` (_CAPITAL_RUN) */
    C_CODE = 128, /* [0-9_]: what a code-like word has beside letters and `-` */
};
static unsigned char CLASS[256];
static unsigned char LOWER[256];
static unsigned char ID_START[256]; /* i, n, I, N: the first letter of every id word, either case */

static void
init_classes(void)
{
    for (int c = 0; c < 256; c++) {
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'), digit = c >= '0' && c <= '9';
        int word = alpha || digit || c == '_';
        CLASS[c] = (unsigned char)((word ? C_WORD : 0) | (alpha ? C_ALPHA : 0) | (digit ? C_DIGIT : 0) |
                                   (c >= 'A' && c <= 'Z' ? C_UPPER : 0) |
                                   ((c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) ? C_SPACE : 0) |
                                   (c == '\'' || c == '"' || c == '`' ? C_QUOTE : 0) |
                                   (word || c == '\'' || c == '&' || c == '-' ? C_NAME : 0) |
                                   (digit || c == '_' ? C_CODE : 0));
        LOWER[c] = (unsigned char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        ID_START[c] = (unsigned char)(LOWER[c] == 'i' || LOWER[c] == 'n');
    }
}

#define is_word(c) (CLASS[(unsigned char)(c)] & C_WORD)
#define is_alpha(c) (CLASS[(unsigned char)(c)] & C_ALPHA)
#define is_alnum(c) (CLASS[(unsigned char)(c)] & (C_ALPHA | C_DIGIT))
#define is_digit(c) (CLASS[(unsigned char)(c)] & C_DIGIT)
#define is_upper(c) (CLASS[(unsigned char)(c)] & C_UPPER)
#define is_space(c) (CLASS[(unsigned char)(c)] & C_SPACE)
#define is_quote(c) (CLASS[(unsigned char)(c)] & C_QUOTE)
#define is_name_char(c) (CLASS[(unsigned char)(c)] & C_NAME)

/* Eight bytes at a time (the text is ASCII: every byte is below 128): whether a word of eight holds a
   byte a pass looks for, so the passes skip the words that hold none instead of testing each byte.
   Each test is exact for the word (no byte's arithmetic carries or borrows into its neighbour). */
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

static inline uint64_t
load8(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline int
has_byte(uint64_t v, unsigned char c)
{
    uint64_t x = v ^ (ONES * c);
    return ((x - ONES) & ~x & HIGHS) != 0;
}

/* a byte strictly between m and n (0 <= m <= 127, n <= 128), for bytes below 128 */
static inline int
has_between(uint64_t x, uint64_t m, uint64_t n)
{
    return (((ONES * (127 + n) - (x & ONES * 127)) & ~x & ((x & ONES * 127) + ONES * (127 - m))) & HIGHS) != 0;
}

#define HAS_UPPER(v) has_between((v), 'A' - 1, 'Z' + 1)
#define HAS_CODE(v) (has_between((v), '0' - 1, '9' + 1) || has_byte((v), '_'))

/* Whether an id word ("id", "no" or "nu", either case) starts in the eight bytes at `p` (the text
   holds p + 9 bytes): `| 0x20` makes each capital letter its lower-case twin, and no byte other
   than a letter becomes one. A byte is zero in `(x ^ first) | (y ^ second)` exactly where the pair
   starts. */
static inline int
has_id_start(const unsigned char *p)
{
    uint64_t x = load8(p) | ONES * 0x20, y = load8(p + 1) | ONES * 0x20;
    uint64_t i = x ^ (ONES * 'i'), n = x ^ (ONES * 'n');
    uint64_t id = i | (y ^ (ONES * 'd')), no = n | (y ^ (ONES * 'o')), nu = n | (y ^ (ONES * 'u'));
    return (((id - ONES) & ~id) | ((no - ONES) & ~no) | ((nu - ONES) & ~nu)) & HIGHS ? 1 : 0;
}

static int
append_str(PyObject *out, const char *s, Py_ssize_t n)
{
    PyObject *item = PyUnicode_FromStringAndSize(s, n); /* ASCII: one byte a character */
    if (item == NULL) {
        return -1;
    }
    int rc = PyList_Append(out, item);
    Py_DECREF(item);
    return rc;
}

/* `_QUOTED`: an opening quote, 1 to 80 characters that are not a quote or a line break (lazily: the
   first such character ends the span), a closing quote, and no word character or `'` after it. A
   match is consumed even when it is then skipped (a quote after a letter is an apostrophe). */
static int
said_quoted(const unsigned char *s, Py_ssize_t n, PyObject *out)
{
    Py_ssize_t a = 0;
    while (a < n) {
        if (!is_quote(s[a])) {
            a++;
            continue;
        }
        Py_ssize_t j = a + 1;
        while (j < n && !is_quote(s[j]) && s[j] != '\n') {
            j++;
        }
        Py_ssize_t len = j - a - 1;
        if (len < 1 || len > SAID_MAX_QUOTED || j >= n || !is_quote(s[j]) ||
            (j + 1 < n && (is_word(s[j + 1]) || s[j + 1] == '\''))) {
            a++;
            continue;
        }
        if (!(a > 0 && (is_alnum(s[a - 1]) || s[a - 1] == '_' || s[a - 1] == '\''))) {
            Py_ssize_t b = a + 1, e = j; /* span.strip() */
            while (b < e && is_space(s[b])) {
                b++;
            }
            while (e > b && is_space(s[e - 1])) {
                e--;
            }
            int words = 0;
            for (Py_ssize_t k = b; k < e; k++) {
                if (!is_space(s[k]) && (k == b || is_space(s[k - 1]))) {
                    words++;
                }
            }
            if (e > b && words <= SAID_MAX_WORDS && append_str(out, (const char *)s + b, e - b) < 0) {
                return -1;
            }
        }
        a = j + 1;
    }
    return 0;
}

/* `_ID_VALUE` from `p` in the lower-cased text: `[ \t]*[:=#]?[ \t]*['"`]?` then the value
   `[a-z0-9][\w.-]{0,39}`. Greedy consumption is the only way to a match: every piece consumes only
   characters the value cannot start with. Returns the value's end (its start in *start), or -1.
   It reads the text as written: lower-casing changes only the letters A-Z, which each test here
   takes as their lower-case twins (`[a-z]` of the lower-cased text is a letter of either case). */
static Py_ssize_t
id_value(const unsigned char *s, Py_ssize_t n, Py_ssize_t p, Py_ssize_t *start)
{
    while (p < n && (s[p] == ' ' || s[p] == '\t')) {
        p++;
    }
    if (p < n && (s[p] == ':' || s[p] == '=' || s[p] == '#')) {
        p++;
    }
    while (p < n && (s[p] == ' ' || s[p] == '\t')) {
        p++;
    }
    if (p < n && is_quote(s[p])) {
        p++;
    }
    if (p >= n || !(is_alpha(s[p]) || is_digit(s[p]))) {
        return -1;
    }
    *start = p++;
    for (int k = 0; k < SAID_ID_REST && p < n; k++, p++) {
        if (!(is_word(s[p]) || s[p] == '.' || s[p] == '-')) {
            break;
        }
    }
    return p;
}

/* The value, lower-cased (the pure scan reads it from the lower-cased text) and `.rstrip(".-")`,
   appended (possibly empty, as the pure scan appends it). */
static int
append_id(PyObject *out, const unsigned char *s, Py_ssize_t a, Py_ssize_t b)
{
    char low[SAID_ID_REST + 1];
    while (b > a && (s[b - 1] == '.' || s[b - 1] == '-')) {
        b--;
    }
    for (Py_ssize_t k = a; k < b; k++) {
        low[k - a] = (char)LOWER[s[k]];
    }
    return append_str(out, low, b - a);
}

/* `_ID_REF`: `(?:ids|id|number|num|no)\b\.?` then `_ID_VALUE`. The word boundary after the id word
   (a letter) holds where no word character follows, so of the alternatives at most one can match:
   `ids` and `id`, `number` and `num` exclude each other. */
static const char *const ID_WORDS[] = {"ids", "id", "number", "num", "no"};

/* Whether the text at `a` is `word` (lower-case letters) in either case. */
static int
is_word_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t a, const char *word)
{
    for (; *word; word++, a++) {
        if (a >= n || LOWER[s[a]] != (unsigned char)*word) {
            return 0;
        }
    }
    return 1;
}

static int
said_ids(const unsigned char *s, Py_ssize_t n, PyObject *out)
{
    Py_ssize_t a = 0;
    while (a < n) {
        /* every id word starts "id", "no" or "nu", in either case: most bytes are skipped on one
           table lookup, most of the rest on the next byte */
        while (a + 9 <= n && !has_id_start(s + a)) {
            a += 8;
        }
        while (a < n && !ID_START[s[a]]) {
            a++;
        }
        if (a >= n) {
            break;
        }
        unsigned char c = LOWER[s[a]], next = a + 1 < n ? LOWER[s[a + 1]] : 0;
        if (!((c == 'i' && next == 'd') || (c == 'n' && (next == 'o' || next == 'u')))) {
            a++;
            continue;
        }
        Py_ssize_t end = -1, start = 0;
        for (size_t w = 0; w < sizeof ID_WORDS / sizeof ID_WORDS[0]; w++) {
            if (!is_word_at(s, n, a, ID_WORDS[w])) {
                continue;
            }
            Py_ssize_t p = a + (Py_ssize_t)strlen(ID_WORDS[w]);
            if (p < n && is_word(s[p])) {
                continue; /* no word boundary after it */
            }
            if (p < n && s[p] == '.') {
                p++;
            }
            end = id_value(s, n, p, &start);
            if (end >= 0) {
                break;
            }
        }
        if (end < 0) {
            a++;
            continue;
        }
        if (!(a > 0 && is_word(s[a - 1])) && append_id(out, s, start, end) < 0) {
            return -1;
        }
        a = end;
    }
    return 0;
}

/* `_HASH_REF`: `#` then `_ID_VALUE`. */
static int
said_hashes(const unsigned char *s, Py_ssize_t n, PyObject *out)
{
    Py_ssize_t a = 0;
    while (a < n) {
        const unsigned char *hit = memchr(s + a, '#', (size_t)(n - a));
        if (hit == NULL) {
            break;
        }
        a = hit - s;
        Py_ssize_t start = 0, end = id_value(s, n, a + 1, &start);
        if (end < 0) {
            a++;
            continue;
        }
        if (append_id(out, s, start, end) < 0) {
            return -1;
        }
        a = end;
    }
    return 0;
}

static Py_ssize_t
name_end(const unsigned char *s, Py_ssize_t n, Py_ssize_t p)
{
    while (p < n && is_name_char(s[p])) {
        p++;
    }
    return p;
}

/* The end of the next `[ \t]+[A-Z]` name after a name ending at `e`, or -1. */
static Py_ssize_t
next_name(const unsigned char *s, Py_ssize_t n, Py_ssize_t e)
{
    Py_ssize_t q = e;
    while (q < n && (s[q] == ' ' || s[q] == '\t')) {
        q++;
    }
    if (q == e || q >= n || !is_upper(s[q])) {
        return -1;
    }
    return name_end(s, n, q + 1);
}

/* said._whole_line: the line holds only list marks before the run and punctuation after it. */
static int
whole_line(const unsigned char *s, Py_ssize_t n, Py_ssize_t a, Py_ssize_t b)
{
    for (Py_ssize_t i = a; i > 0 && s[i - 1] != '\n'; i--) {
        if (!in_set(s[i - 1], " \t-*>#0123456789.):")) {
            return 0;
        }
    }
    for (Py_ssize_t i = b; i < n && s[i] != '\n'; i++) {
        if (!in_set(s[i], " \t.,;:!?")) {
            return 0;
        }
    }
    return 1;
}

/* Every run of 2 to 4 consecutive words of a capitalised run, shorter runs first, each joined with
   one space (the words of `m.group(0).split()`: the run holds no whitespace but spaces and tabs). */
static int
append_ngrams(const unsigned char *s, Py_ssize_t a, Py_ssize_t b, PyObject *out)
{
    Py_ssize_t starts[SAID_MAX_RUN_WORDS], ends[SAID_MAX_RUN_WORDS];
    Py_ssize_t count = 0, i = a;
    while (i < b) {
        while (i < b && (s[i] == ' ' || s[i] == '\t')) {
            i++;
        }
        if (i >= b) {
            break;
        }
        if (count == SAID_MAX_RUN_WORDS) {
            return 1; /* more words than fit: the caller runs the pure scan */
        }
        starts[count] = i;
        while (i < b && s[i] != ' ' && s[i] != '\t') {
            i++;
        }
        ends[count++] = i;
    }
    char buf[4 * 256];
    int most = count < SAID_MAX_WORDS ? (int)count : SAID_MAX_WORDS;
    for (int k = 2; k <= most; k++) {
        for (Py_ssize_t w = 0; w + k <= count; w++) {
            PyObject *item;
            Py_ssize_t len = 0;
            for (int j = 0; j < k; j++) {
                len += ends[w + j] - starts[w + j] + (j > 0);
            }
            char *dst = len <= (Py_ssize_t)sizeof buf ? buf : PyMem_Malloc((size_t)len);
            if (dst == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            Py_ssize_t at = 0;
            for (int j = 0; j < k; j++) {
                if (j > 0) {
                    dst[at++] = ' ';
                }
                memcpy(dst + at, s + starts[w + j], (size_t)(ends[w + j] - starts[w + j]));
                at += ends[w + j] - starts[w + j];
            }
            item = PyUnicode_FromStringAndSize(dst, len);
            if (dst != buf) {
                PyMem_Free(dst);
            }
            if (item == NULL || PyList_Append(out, item) < 0) {
                Py_XDECREF(item);
                return -1;
            }
            Py_DECREF(item);
        }
    }
    return 0;
}

/* `_CAPITAL_START` (with the word boundary before it), then `_CAPITAL_RUN` from there: a capital,
   name characters, then one or more of (spaces or tabs, a capital, name characters). Name characters
   are not spaces, so the repetition ends at the first gap that no capital follows; an attempt that
   fails fails at every capital inside the same name too (they share its end), which is skipped. */
static int
said_capitals(const unsigned char *s, Py_ssize_t n, PyObject *out, int *too_long)
{
    Py_ssize_t p = 0;
    for (;; p++) {
        while (p + 8 <= n && !HAS_UPPER(load8(s + p))) {
            p += 8;
        }
        if (p >= n) {
            return 0;
        }
        if (!is_upper(s[p]) || (p > 0 && is_word(s[p - 1]))) {
            continue; /* the common case: not a capital after a word boundary */
        }
        if (next_name(s, n, name_end(s, n, p + 1)) >= 0) {
            break;
        }
    }
    while (p < n) {
        while (p + 8 <= n && !HAS_UPPER(load8(s + p))) {
            p += 8;
        }
        if (p >= n) {
            break;
        }
        if (!is_upper(s[p])) {
            p++;
            continue;
        }
        Py_ssize_t e = name_end(s, n, p + 1), more;
        int groups = 0;
        while ((more = next_name(s, n, e)) >= 0) {
            e = more;
            groups++;
        }
        if (groups == 0) {
            p = e;
            continue;
        }
        if (!whole_line(s, n, p, e)) {
            int rc = append_ngrams(s, p, e, out);
            if (rc < 0) {
                return -1;
            }
            if (rc > 0) {
                *too_long = 1;
                return 0;
            }
        }
        p = e;
    }
    return 0;
}

/* For each whitespace-separated chunk of 6 or more characters that are not all letters (only a
   chunk with a digit or `_` can match, so only those are read), `_CODE_CANDIDATE` (re.ASCII): at a word boundary, `[A-Za-z-]*[0-9_][\w-]*`. Letters and `-` cannot
   be the `[0-9_]`, so a start matches exactly when the first character after its letters and hyphens
   is a digit or `_`, and the match runs to the end of the `[\w-]` run; a failed start fails at every
   position up to that character too. Then `_CODE_WORD` and the neighbours, as the pure loop. */
static int
said_codes(const unsigned char *s, Py_ssize_t n, PyObject *out)
{
    Py_ssize_t i = 0;
    while (i < n) {
        /* Only a chunk with a digit or `_` can hold a match (and is not all letters): find the next
           such character, then its chunk; chunks are still visited in order, each once. */
        while (i + 8 <= n && !HAS_CODE(load8(s + i))) {
            i += 8;
        }
        while (i < n && !(CLASS[s[i]] & C_CODE)) {
            i++;
        }
        if (i >= n) {
            break;
        }
        Py_ssize_t cs = i, ce = i;
        while (cs > 0 && !is_space(s[cs - 1])) {
            cs--;
        }
        while (ce < n && !is_space(s[ce])) {
            ce++;
        }
        i = ce;
        if (ce - cs < SAID_MIN_CODE) {
            continue;
        }
        Py_ssize_t p = cs;
        while (p < ce) {
            int left = p > cs && is_word(s[p - 1]);
            if (left == (is_word(s[p]) != 0)) { /* no word boundary at p */
                p++;
                continue;
            }
            Py_ssize_t q = p;
            while (q < ce && (is_alpha(s[q]) || s[q] == '-')) {
                q++;
            }
            if (q >= ce || !(is_digit(s[q]) || s[q] == '_')) {
                p = q + 1;
                continue;
            }
            Py_ssize_t e = q + 1;
            while (e < ce && (is_word(s[e]) || s[e] == '-')) {
                e++;
            }
            Py_ssize_t len = e - p;
            int letter = 0;
            for (Py_ssize_t k = p; k < e && !letter; k++) {
                letter = is_alpha(s[k]);
            }
            if (len >= SAID_MIN_CODE && len <= SAID_MAX_CODE && letter &&
                !(p > cs && in_set(s[p - 1], "@./:-")) && !(e < ce && in_set(s[e], "@/-")) &&
                !(e + 1 < ce && s[e] == '.' && is_alnum(s[e + 1])) &&
                append_str(out, (const char *)s + p, len) < 0) {
                return -1;
            }
            p = e;
        }
    }
    return 0;
}

static PyObject *
said_candidates(PyObject *module, PyObject *arg)
{
    (void)module;
    if (!PyUnicode_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "said_candidates() takes a str");
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(arg)) {
        Py_RETURN_NONE;
    }
    const unsigned char *s = PyUnicode_1BYTE_DATA(arg);
    Py_ssize_t n = PyUnicode_GET_LENGTH(arg);
    PyObject *out = PyList_New(0);
    if (out == NULL) {
        return NULL;
    }
    int too_long = 0, rc = 0;
    /* a quote is rare: three byte scans (memchr) skip the quoted pass in most texts */
    if (memchr(s, '\'', (size_t)n) != NULL || memchr(s, '"', (size_t)n) != NULL ||
        memchr(s, '`', (size_t)n) != NULL) {
        rc = said_quoted(s, n, out);
    }
    if (rc == 0) {
        rc = said_ids(s, n, out);
    }
    if (rc == 0 && memchr(s, '#', (size_t)n) != NULL) {
        rc = said_hashes(s, n, out);
    }
    if (rc == 0) {
        rc = said_capitals(s, n, out, &too_long);
    }
    if (rc == 0 && !too_long) {
        rc = said_codes(s, n, out);
    }
    if (rc < 0) {
        Py_DECREF(out);
        return NULL;
    }
    if (too_long) { /* a capitalised run of more words than the C buffers hold: the pure scan */
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

/* `[cls(k, v) for k, v in mapping.items()]` for a tuple subclass `cls` of two fields (taint's
   `TokenRecord`), in the dict's order: what `list(map(partial(tuple.__new__, cls), mapping.items()))`
   makes (taint's fallback), without a call through `tuple.__new__` for each pair. */
static PyObject *
pairs_as(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyType_Check(args[0]) || !PyDict_CheckExact(args[1]) ||
        !PyType_IsSubtype((PyTypeObject *)args[0], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "pairs_as() takes a tuple subclass and a dict");
        return NULL;
    }
    PyTypeObject *cls = (PyTypeObject *)args[0];
    PyObject *mapping = args[1];
    Py_ssize_t n = PyDict_GET_SIZE(mapping), pos = 0, i = 0;
    PyObject *out = PyList_New(n);
    if (out == NULL) {
        return NULL;
    }
    PyObject *key, *value;
    while (PyDict_Next(mapping, &pos, &key, &value)) {
        if (i >= n) {
            break; /* (the dict grew while the pairs were made: caught below) */
        }
        Py_INCREF(key);
        Py_INCREF(value);
        PyObject *pair = cls->tp_alloc(cls, 2);
        if (pair == NULL) {
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(pair, 0, key);
        PyTuple_SET_ITEM(pair, 1, value);
        PyList_SET_ITEM(out, i++, pair);
    }
    if (i != n || PyDict_GET_SIZE(mapping) != n) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_RuntimeError, "pairs_as(): the dict changed size while it was read");
        return NULL;
    }
    return out;
}

static PyMethodDef scan_methods[] = {
    {"anchors", anchors, METH_O, "Sorted anchor positions of a token mask (tokens._anchors)."},
    {"numeric_runs", numeric_runs, METH_O,
     "(start, end, platform id end or -1) of each `numeric_tokens._NUMERIC` match in a token mask."},
    {"said_candidates", said_candidates, METH_O,
     "said.candidates(text) for an ASCII text, else None."},
    {"pairs_as", (PyCFunction)(void (*)(void))pairs_as, METH_FASTCALL,
     "[cls(k, v) for k, v in mapping.items()] for a tuple subclass cls (taint's TokenRecord)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef scan_module = {
    PyModuleDef_HEAD_INIT, "bouncerd.core._scan", "The tokenizer's anchor scan in C.", -1, scan_methods,
};

PyMODINIT_FUNC
PyInit__scan(void)
{
    init_classes();
    return PyModule_Create(&scan_module);
}
