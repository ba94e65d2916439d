/* The tokenizer's anchor and digit-run scans (bouncerd/core/tokens.py) in one pass of C each.

Theory of operation
-------------------
`anchors(mask)` returns the sorted positions of the anchors in a token mask, exactly as the pure
`tokens._anchors` finds them with a byte scan and three regular expressions; `numeric_runs(mask)` the
matches of `tokens._NUMERIC` (digit runs shaped like phone numbers, and platform ids), as
`tokens._numeric_runs` lists them from `finditer`. The anchors are:

- `@` followed by a byte that is not a space (`_positions`, then the `mask[p + 1 : p + 2]` check);
- `.` followed by a byte other than a space or `.` (`_DOT_ANCHOR`, `\.[^ .]`);
- `#` followed by `a`, `0` or `w` (`_HASH_ANCHOR`, `#[a0w]`);
- `:` starting a match of `_COLON_ANCHOR`, `:(?://|:|[0a]{1,4}:[0a]{1,4}:[0a]{1,4}:)`, scanned as
  `finditer` does: a match consumes its text, so a `:` inside an earlier match is not an anchor.

The regular expressions scan the mask one byte at a time in the regex engine (about ten instructions a
byte, several times over); this is one table lookup a byte. It is optional: built with the mypyc
modules by scripts/native_build.py, loaded only when bouncerd/native.py trusts that build, and held to
the pure scans by tests/unit/test_scanner_rewrites.py. Without it `tokens._anchors` and
`tokens._numeric_runs` run.
*/

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* tokens.PLATFORM_ID_MIN_CHARS - 2 and tokens.PLATFORM_ID_MAX_CHARS - 2: the bytes of a platform id
   after its type letter and first digit. */
#define PLATFORM_ID_REST_MIN 7
#define PLATFORM_ID_REST_MAX 10
#define PHONE_MIN_DIGITS 8 /* tokens.PHONE_MIN_DIGITS: a phone-shaped run is at least this long */

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

static PyMethodDef scan_methods[] = {
    {"anchors", anchors, METH_O, "Sorted anchor positions of a token mask (tokens._anchors)."},
    {"numeric_runs", numeric_runs, METH_O,
     "(start, end, platform id end or -1) of each `tokens._NUMERIC` match in a token mask."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef scan_module = {
    PyModuleDef_HEAD_INIT, "bouncerd.core._scan", "The tokenizer's anchor scan in C.", -1, scan_methods,
};

PyMODINIT_FUNC
PyInit__scan(void)
{
    return PyModule_Create(&scan_module);
}
