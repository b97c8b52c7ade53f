/*
 * event_json.c -- the JSON of an event's small Python trees (the nearest
 * entry of a recompile, where each guard came from), written in C.
 *
 * Why: a recording renders two of them per compile, and json's C encoder,
 * called through Python, took ~20,000 instructions for a 200-byte tree --
 * a fifth of what recording added to a recompile storm (docs/performance.md,
 * "SQLite recording").  The trees are made by the engine from dicts, lists,
 * tuples, str, int, float, bool and None only; anything else (or a tree
 * deeper than JSON_DEPTH_MAX) is left to json.dumps, so the output is always
 * what json.dumps would write for the tree, byte for byte: ASCII, ", " and
 * ": " separators, Infinity and NaN as it writes them.
 */
#include "capture_int.h"

#include <string.h>

#define JSON_DEPTH_MAX 32

typedef struct {
    char *p;
    size_t len, cap;
    bool failed;            /* out of memory, or a value left to json.dumps */
} JsonBuf;

static void put(JsonBuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->len + n)
            cap *= 2;
        char *p = PyMem_Realloc(b->p, cap);
        if (p == NULL) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void put_str(JsonBuf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* A str as json.dumps writes it with ensure_ascii. */
static void put_string(JsonBuf *b, PyObject *s)
{
    static const char hex[] = "0123456789abcdef";
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    put(b, "\"", 1);
    for (Py_ssize_t i = 0; i < n && !b->failed; i++) {
        if (kind == PyUnicode_1BYTE_KIND) {     /* a run that needs no escape, at once */
            const unsigned char *p = (const unsigned char *)data;
            Py_ssize_t j = i;
            while (j < n && p[j] >= 0x20 && p[j] < 0x7f && p[j] != '"' && p[j] != '\\')
                j++;
            if (j > i) {
                put(b, (const char *)p + i, (size_t)(j - i));
                i = j - 1;
                continue;
            }
        }
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        char esc[12];
        switch (c) {
        case '"': put(b, "\\\"", 2); continue;
        case '\\': put(b, "\\\\", 2); continue;
        case '\n': put(b, "\\n", 2); continue;
        case '\r': put(b, "\\r", 2); continue;
        case '\t': put(b, "\\t", 2); continue;
        case '\b': put(b, "\\b", 2); continue;
        case '\f': put(b, "\\f", 2); continue;
        default: break;
        }
        if (c >= 0x20 && c < 0x7f) {
            char ch = (char)c;
            put(b, &ch, 1);
            continue;
        }
        Py_UCS4 units[2] = {c, 0};
        int nunits = 1;
        if (c > 0xffff) {                       /* a surrogate pair */
            c -= 0x10000;
            units[0] = 0xd800 | (c >> 10);
            units[1] = 0xdc00 | (c & 0x3ff);
            nunits = 2;
        }
        for (int u = 0; u < nunits; u++) {
            esc[0] = '\\';
            esc[1] = 'u';
            for (int k = 0; k < 4; k++)
                esc[2 + k] = hex[(units[u] >> (12 - 4 * k)) & 0xf];
            put(b, esc, 6);
        }
    }
    put(b, "\"", 1);
}

static void put_value(JsonBuf *b, PyObject *v, int depth);

static void put_items(JsonBuf *b, PyObject *const *items, Py_ssize_t n, int depth)
{
    put(b, "[", 1);
    for (Py_ssize_t i = 0; i < n && !b->failed; i++) {
        if (i > 0)
            put(b, ", ", 2);
        put_value(b, items[i], depth + 1);
    }
    put(b, "]", 1);
}

static void put_dict(JsonBuf *b, PyObject *d, int depth)
{
    Py_ssize_t pos = 0;
    PyObject *k, *v;                                   /* borrowed */
    bool first = true;
    put(b, "{", 1);
    while (!b->failed && PyDict_Next(d, &pos, &k, &v)) {
        if (!PyUnicode_CheckExact(k)) {
            b->failed = true;                          /* json.dumps converts it */
            return;
        }
        if (!first)
            put(b, ", ", 2);
        first = false;
        put_string(b, k);
        put(b, ": ", 2);
        put_value(b, v, depth + 1);
    }
    put(b, "}", 1);
}

static void put_value(JsonBuf *b, PyObject *v, int depth)
{
    if (b->failed || depth > JSON_DEPTH_MAX) {
        b->failed = true;
        return;
    }
    if (v == Py_None)
        put_str(b, "null");
    else if (v == Py_True)
        put_str(b, "true");
    else if (v == Py_False)
        put_str(b, "false");
    else if (PyUnicode_CheckExact(v))
        put_string(b, v);
    else if (PyLong_CheckExact(v)) {
        int overflow;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            b->failed = true;
            return;
        }
        char num[24];
        int at = (int)sizeof num;
        unsigned long long u = x < 0 ? 0ull - (unsigned long long)x : (unsigned long long)x;
        do {
            num[--at] = (char)('0' + u % 10);
            u /= 10;
        } while (u > 0);
        if (x < 0)
            num[--at] = '-';
        put(b, num + at, sizeof num - (size_t)at);
    }
    else if (PyFloat_CheckExact(v)) {
        double x = PyFloat_AS_DOUBLE(v);
        if (Py_IS_NAN(x))
            put_str(b, "NaN");
        else if (Py_IS_INFINITY(x))
            put_str(b, x > 0 ? "Infinity" : "-Infinity");
        else {
            char *r = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
            if (r == NULL) {
                PyErr_Clear();
                b->failed = true;
                return;
            }
            put_str(b, r);
            PyMem_Free(r);
        }
    }
    else if (PyList_CheckExact(v))
        put_items(b, PySequence_Fast_ITEMS(v), PyList_GET_SIZE(v), depth);
    else if (PyTuple_CheckExact(v))
        put_items(b, PySequence_Fast_ITEMS(v), PyTuple_GET_SIZE(v), depth);
    else if (PyDict_CheckExact(v))
        put_dict(b, v, depth);
    else
        b->failed = true;
}

/* (contract: capture_int.h) */
PyObject *event_json(PyObject *tree)
{
    JsonBuf b = {NULL, 0, 0, false};
    put_value(&b, tree, 0);
    PyObject *s = b.failed ? NULL : PyUnicode_DecodeASCII(b.p ? b.p : "", (Py_ssize_t)b.len,
                                                          NULL);
    PyMem_Free(b.p);
    if (s == NULL)
        PyErr_Clear();
    return s;
}

/* _C._event_json(tree): event_json's text, or None where it leaves the
   tree to json.dumps (for tests: tests/test_record.py compares the two). */
static PyObject *py_event_json(PyObject *self, PyObject *tree)
{
    (void)self;
    PyObject *s = event_json(tree);
    return s != NULL ? s : Py_NewRef(Py_None);
}

static PyMethodDef methods[] = {
    {"_event_json", py_event_json, METH_O,
     "_event_json(tree) -> str or None: the JSON the recorder writes for tree."},
    {NULL, NULL, 0, NULL},
};

int event_json_init(PyObject *module)
{
    return PyModule_AddFunctions(module, methods);
}
