/* The whole-text scans of a string's readings (bouncerd/core/decoders.py and fold.py), in C.

Theory of operation
-------------------
`fold.views` reads every untrusted string, and two of its steps scan the whole string before they
find (almost always) nothing: the base64 runs (`decoders.base64_runs`: an ASCII encode, a byte
translation to a mask, a 16-byte substring search, one search for each `=`) and the gate of the
assembled spellings (`fold._any_marker_gate`: a substring search for " dot " and seven more scans).
CPython's substring search is slow on these needles (" dot " and the mask's 16 `b`s end in a byte
that most positions hold), so here each is done in C, with the same answer:

- `base64_runs(text)` returns the list `decoders._base64_runs(text)` returns, in the same order, and
  `has_base64_run(text)` the answer of `decoders._has_base64_run(text)`. Each builds the same mask (`_B64_MASK` of the ASCII encoding: a base64-alphabet character is `b`, `=`,
  CR and LF are themselves, anything else, non-ASCII included, is a space) and follows the pure loop
  step by step: the long runs (`MIN_BASE64_RUN` `b`s, then `_B64_RUN_REST`), and between them each `=`
  that may close a short padded run (`_short_padded_run`).
- `marker_gate(text)` is `fold._any_marker_gate(text)`: whether " dot ", " @ ", "hxxp" or one of
  `[ ( { < *` occurs.
- `substrings_in(text, needles)` is `{n for n in needles if n in text}`: which gate words of the
  orders markers (`orders.GATES`) a lowercased text holds, in one pass instead of one per word.

Both read strings of one byte a character (`str` stores every text of Latin-1 characters so, ASCII
included) and return None for wider ones, which the pure functions then read. Neither tests each byte
in turn where it can skip: a run of 16 base64 characters holds a whole aligned 8-byte word of them,
so only such words are looked at (prose has almost none), and the gate's rare characters are found
with memchr (a vectorised byte search), " dot " through its `d`. Optional like `_scan`: built with
the mypyc modules by scripts/native_build.py, loaded only when bouncerd/native.py trusts that build,
and held to the pure functions by tests/unit/test_scanner_rewrites.py.
*/

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MIN_BASE64_RUN 16        /* decoders.MIN_BASE64_RUN */
#define MIN_PADDED_BASE64_RUN 8  /* decoders.MIN_PADDED_BASE64_RUN */

/* decoders._B64_MASK of a character below 256: what `encode("ascii", "replace")` then the mask make
   of it (a character past ASCII becomes "?", a space in the mask) */
static unsigned char B64[256];
#define ONES 0x0101010101010101ULL

static void
init_mask(void)
{
    for (int c = 0; c < 256; c++) {
        int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (alnum || c == '+' || c == '/' || c == '-' || c == '_') {
            B64[c] = 'b';
        }
        else if (c == '=' || c == '\r' || c == '\n') {
            B64[c] = (unsigned char)c;
        }
        else {
            B64[c] = ' ';
        }
    }
}

/* `mask.find(b"b" * MIN_BASE64_RUN, from)`: the first run of that many `b`s starting at or after
   `from`, or -1. Any 16 bytes in a row hold a whole word of the 8-byte grid, so the first such run
   holds the first grid word of `b`s at or after `from` that can be in one, or a later one: each such
   word is measured to the left (not past `from`) and to the right. */
static Py_ssize_t
find_long_run(const unsigned char *m, Py_ssize_t n, Py_ssize_t from)
{
    Py_ssize_t w = (from + 7) & ~(Py_ssize_t)7; /* the first grid word that starts at or after `from` */
    const uint64_t bs = ONES * 'b';
    for (; w + 8 <= n; w += 8) {
        uint64_t v;
        memcpy(&v, m + w, sizeof v);
        if (v != bs) {
            continue;
        }
        Py_ssize_t a = w, e = w + 8;
        while (a > from && m[a - 1] == 'b') {
            a--;
        }
        while (e < n && m[e] == 'b' && e - a < MIN_BASE64_RUN) {
            e++;
        }
        if (e - a >= MIN_BASE64_RUN) {
            return a;
        }
        w = e & ~(Py_ssize_t)7; /* the grid word holding the run's end is not all `b`: go on after it */
    }
    return -1;
}

/* `mask.find(b"=", from, to)` */
static Py_ssize_t
find_padding(const unsigned char *m, Py_ssize_t from, Py_ssize_t to)
{
    if (from >= to) {
        return -1;
    }
    const unsigned char *hit = memchr(m + from, '=', (size_t)(to - from));
    return hit == NULL ? -1 : hit - m;
}

/* The end of `_B64_RUN_REST` (`b*=?=?(?:\r?\nb+=?=?)*`) matched at `p`. Every piece consumes only bytes
   the piece after it cannot start with, so the greedy reading is the match: no backtracking. */
static Py_ssize_t
run_rest(const unsigned char *m, Py_ssize_t n, Py_ssize_t p)
{
    while (p < n && m[p] == 'b') {
        p++;
    }
    for (int k = 0; k < 2 && p < n && m[p] == '='; k++) {
        p++;
    }
    for (;;) {
        Py_ssize_t q = p;
        if (q < n && m[q] == '\r') {
            q++;
        }
        if (!(q < n && m[q] == '\n')) {
            return p;
        }
        q++;
        if (!(q < n && m[q] == 'b')) {
            return p;
        }
        while (q < n && m[q] == 'b') {
            q++;
        }
        for (int k = 0; k < 2 && q < n && m[q] == '='; k++) {
            q++;
        }
        p = q;
    }
}

static int
append_run(PyObject *runs, PyObject *text, Py_ssize_t a, Py_ssize_t b)
{
    PyObject *run = PyUnicode_Substring(text, a, b);
    if (run == NULL) {
        return -1;
    }
    int rc = PyList_Append(runs, run);
    Py_DECREF(run);
    return rc;
}

/* `decoders._short_padded_run`: if the `=` at `p` closes a run shorter than MIN_BASE64_RUN to a
   multiple of four characters, append it; return where to look for the next `=` (-1 on an error). */
static Py_ssize_t
short_padded_run(PyObject *text, const unsigned char *m, Py_ssize_t n, Py_ssize_t p, PyObject *runs)
{
    Py_ssize_t end = p + 1 < n && m[p + 1] == '=' ? p + 2 : p + 1;
    if (p > 0 && m[p - 1] == 'b' && !(end < n && (m[end] == 'b' || m[end] == '='))) {
        Py_ssize_t lo = p - MIN_BASE64_RUN > 0 ? p - MIN_BASE64_RUN : 0;
        /* max(mask.rfind(c, lo, p) for c in " =\r\n") + 1: after the last byte in [lo, p) that is
           not a `b` (the mask holds no other bytes), else 0 (not `lo`: rfind's -1, plus one) */
        Py_ssize_t start = 0;
        for (Py_ssize_t k = p - 1; k >= lo; k--) {
            if (m[k] != 'b') {
                start = k + 1;
                break;
            }
        }
        if (p - start < MIN_BASE64_RUN && end - start >= MIN_PADDED_BASE64_RUN && (end - start) % 4 == 0 &&
            append_run(runs, text, start, end) < 0) {
            return -1;
        }
    }
    return end;
}

/* The mask of a one-byte string, into `m` (n bytes). */
static void
fill_mask(const unsigned char *s, Py_ssize_t n, unsigned char *m)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        m[i] = B64[s[i]];
    }
}

static PyObject *
base64_runs(PyObject *module, PyObject *text)
{
    (void)module;
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "base64_runs() takes a str");
        return NULL;
    }
    if (PyUnicode_KIND(text) != PyUnicode_1BYTE_KIND) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    PyObject *runs = PyList_New(0);
    if (runs == NULL || n < MIN_PADDED_BASE64_RUN) {
        return runs;
    }
    const unsigned char *s = PyUnicode_1BYTE_DATA(text);
    unsigned char *m = PyMem_Malloc((size_t)n);
    if (m == NULL) {
        Py_DECREF(runs);
        return PyErr_NoMemory();
    }
    fill_mask(s, n, m);
    int padded = memchr(s, '=', (size_t)n) != NULL;
    Py_ssize_t pos = 0, start = find_long_run(m, n, 0);
    for (;;) {
        if (padded) { /* short padded runs between the long ones: one scan for "=" per gap */
            Py_ssize_t gap_end = start >= 0 ? start : n;
            Py_ssize_t q = find_padding(m, pos, gap_end);
            while (q >= 0) {
                q = short_padded_run(text, m, n, q, runs);
                if (q < 0) {
                    goto error;
                }
                q = find_padding(m, q, gap_end);
            }
        }
        if (start < 0) {
            break;
        }
        Py_ssize_t end = run_rest(m, n, start + MIN_BASE64_RUN);
        if (append_run(runs, text, start, end) < 0) {
            goto error;
        }
        pos = end;
        start = find_long_run(m, n, end);
    }
    PyMem_Free(m);
    return runs;
error:
    PyMem_Free(m);
    Py_DECREF(runs);
    return NULL;
}

#define SMALL_TEXT 512 /* a mask this long lives on the stack */

static PyObject *
has_base64_run(PyObject *module, PyObject *text)
{
    (void)module;
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "has_base64_run() takes a str");
        return NULL;
    }
    if (PyUnicode_KIND(text) != PyUnicode_1BYTE_KIND) {
        Py_RETURN_NONE;
    }
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    if (n < MIN_BASE64_RUN) {
        Py_RETURN_FALSE;
    }
    unsigned char small[SMALL_TEXT];
    unsigned char *m = n <= SMALL_TEXT ? small : PyMem_Malloc((size_t)n);
    if (m == NULL) {
        return PyErr_NoMemory();
    }
    fill_mask(PyUnicode_1BYTE_DATA(text), n, m);
    Py_ssize_t found = find_long_run(m, n, 0);
    if (m != small) {
        PyMem_Free(m);
    }
    return PyBool_FromLong(found >= 0);
}

/* Whether `s[i - before : i - before + len(needle)]` is `needle`, inside the text. */
static int
is_at(const unsigned char *s, Py_ssize_t n, Py_ssize_t i, Py_ssize_t before, const char *needle)
{
    Py_ssize_t len = (Py_ssize_t)strlen(needle);
    return i >= before && i - before + len <= n && memcmp(s + i - before, needle, (size_t)len) == 0;
}

/* Whether `needle` occurs, found through the occurrences of its character at `rare`. */
static int
has_through(const unsigned char *s, Py_ssize_t n, const char *needle, Py_ssize_t rare)
{
    const unsigned char *p = s, *end = s + n;
    while (p < end) {
        const unsigned char *hit = memchr(p, needle[rare], (size_t)(end - p));
        if (hit == NULL) {
            return 0;
        }
        if (is_at(s, n, hit - s, rare, needle)) {
            return 1;
        }
        p = hit + 1;
    }
    return 0;
}

static PyObject *
marker_gate(PyObject *module, PyObject *text)
{
    (void)module;
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "marker_gate() takes a str");
        return NULL;
    }
    if (PyUnicode_KIND(text) != PyUnicode_1BYTE_KIND) {
        Py_RETURN_NONE;
    }
    const unsigned char *s = PyUnicode_1BYTE_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    const char *single = "[({<*";
    for (const char *c = single; *c; c++) {
        if (memchr(s, *c, (size_t)n) != NULL) {
            Py_RETURN_TRUE;
        }
    }
    if (has_through(s, n, " @ ", 1) || has_through(s, n, "hxxp", 1) || has_through(s, n, " dot ", 1)) {
        Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

/* `substrings_in(text, needles)`: `{n for n in needles if n in text}` (the gate words of
   orders.markers_in) for a one-byte string and a tuple of at most MAX_NEEDLES one-byte needles of two
   characters or more, else None (the caller then runs the pure test). CPython's substring search makes
   one pass over the text for each needle; this makes one for all of them: a position is compared with
   the needles that start there only when its two bytes open one of them (a bitmap of the needles'
   first pairs, in the L1 cache), and the pass stops once every needle is found. The tables are built
   for the last tuple of needles seen, which the caller passes unchanged on every call. */
#define MAX_NEEDLES 32

static PyObject *needles_seen = NULL; /* the tuple the tables below were built for (a strong reference) */
static unsigned char opening_pairs[65536 / 8];
static uint32_t opened_by[256]; /* the needles whose first byte this is, one bit each */
static const unsigned char *needle_bytes[MAX_NEEDLES];
static Py_ssize_t needle_len[MAX_NEEDLES];
static Py_ssize_t needle_count = 0;

/* Build the tables for `needles`; 0 if they are not what the one-pass scan reads (the caller declines). */
static int
learn_needles(PyObject *needles)
{
    if (needles == needles_seen) {
        return 1;
    }
    if (!PyTuple_Check(needles) || PyTuple_GET_SIZE(needles) > MAX_NEEDLES) {
        return 0;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(needles);
    for (Py_ssize_t j = 0; j < count; j++) {
        PyObject *needle = PyTuple_GET_ITEM(needles, j);
        if (!PyUnicode_Check(needle) || PyUnicode_KIND(needle) != PyUnicode_1BYTE_KIND ||
            PyUnicode_GET_LENGTH(needle) < 2) {
            return 0;
        }
    }
    Py_INCREF(needles);
    Py_XSETREF(needles_seen, needles);
    memset(opening_pairs, 0, sizeof opening_pairs);
    memset(opened_by, 0, sizeof opened_by);
    for (Py_ssize_t j = 0; j < count; j++) {
        PyObject *needle = PyTuple_GET_ITEM(needles, j);
        const unsigned char *b = PyUnicode_1BYTE_DATA(needle);
        unsigned pair = (unsigned)b[0] | ((unsigned)b[1] << 8);
        opening_pairs[pair >> 3] |= (unsigned char)(1u << (pair & 7));
        opened_by[b[0]] |= 1u << j;
        needle_bytes[j] = b;
        needle_len[j] = PyUnicode_GET_LENGTH(needle);
    }
    needle_count = count;
    return 1;
}

static PyObject *
substrings_in(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "substrings_in() takes a str and a tuple of str");
        return NULL;
    }
    PyObject *text = args[0];
    if (PyUnicode_KIND(text) != PyUnicode_1BYTE_KIND || !learn_needles(args[1])) {
        Py_RETURN_NONE;
    }
    const unsigned char *s = PyUnicode_1BYTE_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    uint32_t all = needle_count == 32 ? 0xFFFFFFFFu : (1u << needle_count) - 1;
    uint32_t found = 0;
    for (Py_ssize_t i = 0; i + 1 < n && found != all; i++) {
        unsigned pair = (unsigned)s[i] | ((unsigned)s[i + 1] << 8);
        if (!(opening_pairs[pair >> 3] & (1u << (pair & 7)))) {
            continue;
        }
        uint32_t open = opened_by[s[i]] & ~found;
        for (Py_ssize_t j = 0; open; j++, open >>= 1) {
            if ((open & 1) && i + needle_len[j] <= n &&
                memcmp(s + i, needle_bytes[j], (size_t)needle_len[j]) == 0) {
                found |= 1u << j;
            }
        }
    }
    PyObject *out = PySet_New(NULL);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t j = 0; j < needle_count; j++) {
        if ((found >> j) & 1 && PySet_Add(out, PyTuple_GET_ITEM(needles_seen, j)) < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    return out;
}

static PyMethodDef readings_methods[] = {
    {"base64_runs", base64_runs, METH_O, "decoders._base64_runs(text) of a one-byte string, else None."},
    {"has_base64_run", has_base64_run, METH_O,
     "decoders._has_base64_run(text) of a one-byte string, else None."},
    {"marker_gate", marker_gate, METH_O, "fold._any_marker_gate(text) of a one-byte string, else None."},
    {"substrings_in", (PyCFunction)(void (*)(void))substrings_in, METH_FASTCALL,
     "The needles (a tuple) that occur in a one-byte string, as a set, else None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef readings_module = {
    PyModuleDef_HEAD_INIT, "bouncerd.core._readings", "The whole-text scans of a string's readings in C.",
    -1, readings_methods,
};

PyMODINIT_FUNC
PyInit__readings(void)
{
    init_mask();
    return PyModule_Create(&readings_module);
}
