/* The tokenizer's anchor scan (bouncerd/core/tokens.py, `_anchors`) in one pass of C.

Theory of operation
-------------------
`anchors(mask)` returns the sorted positions of the anchors in a token mask, exactly as the pure
`tokens._anchors` finds them with a byte scan and three regular expressions:

- `@` followed by a byte that is not a space (`_positions`, then the `mask[p + 1 : p + 2]` check);
- `.` followed by a byte other than a space or `.` (`_DOT_ANCHOR`, `\.[^ .]`);
- `#` followed by `a`, `0` or `w` (`_HASH_ANCHOR`, `#[a0w]`);
- `:` starting a match of `_COLON_ANCHOR`, `:(?://|:|[0a]{1,4}:[0a]{1,4}:[0a]{1,4}:)`, scanned as
  `finditer` does: a match consumes its text, so a `:` inside an earlier match is not an anchor.

The regular expressions scan the mask one byte at a time in the regex engine (about ten instructions a
byte, several times over); this is one table lookup a byte. It is optional: built with the mypyc
modules by scripts/native_build.py, loaded only when bouncerd/native.py trusts that build, and held to
the pure scan by tests/unit/test_scanner_rewrites.py. Without it `tokens._anchors` runs.
*/

#define PY_SSIZE_T_CLEAN
#include <Python.h>

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

static PyMethodDef scan_methods[] = {
    {"anchors", anchors, METH_O, "Sorted anchor positions of a token mask (tokens._anchors)."},
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
