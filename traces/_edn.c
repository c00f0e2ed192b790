/* The EDN subset of Jepsen's Kafka histories, one line to Python values: the compiled twin of
 * traces/history_jepsen.py's regular-expression reader (same values, same refusals), which
 * stays the reference and the fallback (tests/test_history_txn.py holds one to the other).
 *
 * Values: maps -> dict (vector keys -> tuples), vectors, lists and sets -> list, keywords ->
 * str with their leading ':', integers -> int, floats -> float, strings -> str, nil/true/false,
 * other symbols -> str, a tagged literal (#jepsen.history.Op{...}) -> its value. A string with
 * a \u escape raises Fallback (the Python reader handles it); malformed input raises
 * ValueError with the reason. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

static PyObject *Fallback;

typedef struct {
    const char *p, *end;
} P;

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ','; }

static int is_delim(char c) {
    return is_ws(c) || c == '[' || c == ']' || c == '{' || c == '}' || c == '(' || c == ')' ||
           c == '"' || c == '#' || c == ';' || c == '\f' || c == '\v';
}

static int is_tag_char(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-' || c == '/';
}

static void skip(P *s) {
    while (s->p < s->end && (is_ws(*s->p) || *s->p == '\f' || *s->p == '\v'))
        s->p++;
}

static PyObject *err(const char *msg) {
    PyErr_SetString(PyExc_ValueError, msg);
    return NULL;
}

static PyObject *value(P *s, int depth);

static PyObject *frozen(PyObject *x) {
    if (!PyList_Check(x)) {
        Py_INCREF(x);
        return x;
    }
    Py_ssize_t n = PyList_GET_SIZE(x);
    PyObject *t = PyTuple_New(n);
    if (!t)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *y = frozen(PyList_GET_ITEM(x, i));
        if (!y) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, y);
    }
    return t;
}

/* A sequence up to `close`; `open` names it for messages. */
static PyObject *seq(P *s, char close, int depth) {
    PyObject *out = PyList_New(0);
    if (!out)
        return NULL;
    for (;;) {
        skip(s);
        if (s->p >= s->end) {
            Py_DECREF(out);
            return err("unexpected end of line (an unclosed bracket)");
        }
        char c = *s->p;
        if (c == ']' || c == ')' || c == '}') {
            if (c != close) {
                Py_DECREF(out);
                return err("a bracket closed by another kind");
            }
            s->p++;
            return out;
        }
        PyObject *v = value(s, depth + 1);
        if (!v || PyList_Append(out, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(v);
    }
}

static PyObject *map(P *s, int depth) {
    PyObject *out = PyDict_New();
    if (!out)
        return NULL;
    for (;;) {
        skip(s);
        if (s->p >= s->end) {
            Py_DECREF(out);
            return err("unexpected end of line (an unclosed map)");
        }
        char c = *s->p;
        if (c == '}') {
            s->p++;
            return out;
        }
        if (c == ']' || c == ')') {
            Py_DECREF(out);
            return err("'{' closed by another kind of bracket");
        }
        PyObject *k = value(s, depth + 1);
        if (!k) {
            Py_DECREF(out);
            return NULL;
        }
        skip(s);
        if (s->p < s->end && *s->p == '}') {
            Py_DECREF(k);
            Py_DECREF(out);
            return err("a map with an odd number of forms");
        }
        PyObject *v = value(s, depth + 1);
        PyObject *fk = v ? frozen(k) : NULL;
        Py_DECREF(k);
        if (!fk || PyDict_SetItem(out, fk, v) < 0) {
            if (fk && PyErr_ExceptionMatches(PyExc_TypeError)) {
                PyErr_Clear();
                PyErr_SetString(PyExc_ValueError, "a map as a map key");
            }
            Py_XDECREF(fk);
            Py_XDECREF(v);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(fk);
        Py_DECREF(v);
    }
}

static PyObject *string(P *s) {
    const char *a = ++s->p;
    int esc = 0;
    while (s->p < s->end && *s->p != '"') {
        if (*s->p == '\\') {
            esc = 1;
            s->p++;
        }
        s->p++;
    }
    if (s->p >= s->end)
        return err("an unterminated string");
    const char *b = s->p++;
    if (!esc)
        return PyUnicode_DecodeUTF8(a, b - a, "strict");
    char *buf = malloc(b - a + 1);
    if (!buf)
        return PyErr_NoMemory();
    Py_ssize_t n = 0;
    for (const char *q = a; q < b; q++) {
        if (*q != '\\') {
            buf[n++] = *q;
            continue;
        }
        q++;
        switch (*q) {
        case '"': buf[n++] = '"'; break;
        case '\\': buf[n++] = '\\'; break;
        case '/': buf[n++] = '/'; break;
        case 'n': buf[n++] = '\n'; break;
        case 't': buf[n++] = '\t'; break;
        case 'r': buf[n++] = '\r'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        default:
            free(buf);
            PyErr_SetString(Fallback, "escape");
            return NULL;
        }
    }
    PyObject *out = PyUnicode_DecodeUTF8(buf, n, "strict");
    free(buf);
    return out;
}

static PyObject *atom(P *s) {
    const char *a = s->p;
    while (s->p < s->end && !is_delim(*s->p))
        s->p++;
    Py_ssize_t n = s->p - a;
    if (n == 0)
        return err("unexpected character");
    char c = a[0];
    if (c == ':')
        return PyUnicode_DecodeUTF8(a, n, "strict");
    if ((c >= '0' && c <= '9') || ((c == '-' || c == '+') && n > 1 && a[1] >= '0' && a[1] <= '9')) {
        Py_ssize_t m = n;
        while (m > 0 && (a[m - 1] == 'N' || a[m - 1] == 'M'))
            m--;
        char tmp[64];
        if (m <= 0 || m >= (Py_ssize_t)sizeof tmp)
            return err("bad number");
        memcpy(tmp, a, (size_t)m);
        tmp[m] = 0;
        char *e;
        long long v = strtoll(tmp, &e, 10);
        if (*e == 0 && m > 0) {
            if (v == LLONG_MAX || v == LLONG_MIN)
                return PyLong_FromString(tmp, NULL, 10);
            return PyLong_FromLongLong(v);
        }
        double d = strtod(tmp, &e);
        if (*e == 0 && m > 0)
            return PyFloat_FromDouble(d);
        return err("bad number");
    }
    if (n == 3 && memcmp(a, "nil", 3) == 0)
        Py_RETURN_NONE;
    if (n == 4 && memcmp(a, "true", 4) == 0)
        Py_RETURN_TRUE;
    if (n == 5 && memcmp(a, "false", 5) == 0)
        Py_RETURN_FALSE;
    return PyUnicode_DecodeUTF8(a, n, "strict");
}

static PyObject *value(P *s, int depth) {
    if (depth > 200)
        return err("nested too deeply");
    skip(s);
    if (s->p >= s->end)
        return err("unexpected end of line (an unclosed bracket)");
    char c = *s->p;
    switch (c) {
    case '[': s->p++; return seq(s, ']', depth);
    case '(': s->p++; return seq(s, ')', depth);
    case '{': s->p++; return map(s, depth);
    case '"': return string(s);
    case ']': case ')': case '}': return err("an unexpected closing bracket");
    case '#':
        s->p++;
        if (s->p < s->end && *s->p == '{') {
            s->p++;
            return seq(s, '}', depth);
        }
        if (s->p >= s->end || !((*s->p >= 'A' && *s->p <= 'Z') || (*s->p >= 'a' && *s->p <= 'z')))
            return err("a '#' that is neither a set nor a tag");
        while (s->p < s->end && is_tag_char(*s->p))     /* the tag: [A-Za-z][\w.\-/]* */
            s->p++;
        return value(s, depth + 1);           /* a tagged literal reads as its value */
    default:
        return atom(s);
    }
}

static PyObject *parse_line(PyObject *self, PyObject *arg) {
    Py_ssize_t n;
    const char *b = PyUnicode_AsUTF8AndSize(arg, &n);
    if (!b)
        return NULL;
    P s = {b, b + n};
    skip(&s);
    if (s.p >= s.end)
        return err("no value");
    PyObject *v = value(&s, 0);
    if (!v)
        return NULL;
    skip(&s);
    if (s.p < s.end) {
        Py_DECREF(v);
        return err("unexpected text after the value");
    }
    return v;
}

static PyMethodDef methods[] = {
    {"parse_line", parse_line, METH_O, "One EDN value from one line (Jepsen's kafka subset)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_edn", NULL, -1, methods};

PyMODINIT_FUNC PyInit__edn(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Fallback = PyErr_NewException("traces._edn.Fallback", NULL, NULL);
    if (!Fallback || PyModule_AddObject(m, "Fallback", Fallback) < 0)
        return NULL;
    Py_INCREF(Fallback);
    return m;
}
