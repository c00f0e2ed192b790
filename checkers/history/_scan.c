/* The columnar kernel's compiled scans (checkers/history/columnar.py): one pass in C over
 * Arrow columns, for the steps where a polars plan pays for a sort or a hash join it does not
 * need. Columns come in through the Arrow PyCapsule interface (`__arrow_c_stream__`, which
 * polars Series have) and go out the same way (`Column.__arrow_c_array__`, which
 * `polars.Series` accepts): no copy either way, no numpy or pyarrow import (importing this
 * module costs well under a millisecond).
 *
 * The structs below are the Arrow C data interface's, as its specification fixes them
 * (https://arrow.apache.org/docs/format/CDataInterface.html); that ABI is stable. Only
 * primitive columns are read: int64 ("l") and uint32 ("I"), with or without a validity
 * bitmap, in any number of chunks.
 *
 * Every loop here is bounded by the lengths of its input columns; every allocation is
 * checked and raises MemoryError. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

struct ArrowArrayStream {
    int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
    int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
    const char *(*get_last_error)(struct ArrowArrayStream *);
    void (*release)(struct ArrowArrayStream *);
    void *private_data;
};

/* ------------------------------------------------------------------------------------------
 * Input: a primitive column as one contiguous run of values plus a validity byte per value
 * (NULL when no value is null). One chunk is read in place; several are copied together. */

typedef struct {
    int64_t len;
    int width;                  /* 8 (int64) or 4 (uint32) */
    const void *data;           /* first value */
    const uint8_t *bits;        /* Arrow validity bitmap, or NULL */
    int64_t bit0;               /* bit offset of the first value in `bits` */
    void *own_data;             /* copies, when the column came in several chunks */
    uint8_t *own_bits;
    struct ArrowArray chunk;    /* the one chunk read in place (release when done) */
    PyObject *capsule;          /* keeps the stream alive while `chunk` is read */
} In;

static void in_free(In *c) {
    if (c->chunk.release)
        c->chunk.release(&c->chunk);
    c->chunk.release = NULL;
    free(c->own_data);
    free(c->own_bits);
    c->own_data = NULL;
    c->own_bits = NULL;
    Py_CLEAR(c->capsule);
}

static inline int in_valid(const In *c, int64_t i) {
    if (!c->bits)
        return 1;
    int64_t b = c->bit0 + i;
    return (c->bits[b >> 3] >> (b & 7)) & 1;
}

static inline int64_t in_get(const In *c, int64_t i) {
    if (c->width == 8)
        return ((const int64_t *)c->data)[i];
    return (int64_t)((const uint32_t *)c->data)[i];
}

/* Reads `obj` (anything with __arrow_c_stream__) into `c`. Returns 0, or -1 with an
 * exception set. `name` is for messages. */
static int in_read(PyObject *obj, In *c, const char *name) {
    memset(c, 0, sizeof *c);
    PyObject *cap = PyObject_CallMethod(obj, "__arrow_c_stream__", NULL);
    if (!cap)
        return -1;
    struct ArrowArrayStream *st = PyCapsule_GetPointer(cap, "arrow_array_stream");
    if (!st) {
        Py_DECREF(cap);
        return -1;
    }
    c->capsule = cap;
    struct ArrowSchema sc;
    memset(&sc, 0, sizeof sc);
    if (st->get_schema(st, &sc) != 0) {
        PyErr_Format(PyExc_ValueError, "%s: no Arrow schema", name);
        in_free(c);
        return -1;
    }
    if (strcmp(sc.format, "l") == 0)
        c->width = 8;
    else if (strcmp(sc.format, "I") == 0)
        c->width = 4;
    else {
        PyErr_Format(PyExc_TypeError, "%s: Arrow format '%s', expected int64 or uint32", name,
                     sc.format);
        sc.release(&sc);
        in_free(c);
        return -1;
    }
    sc.release(&sc);
    /* The chunks: the first is kept in place; a second one means copying all of them. */
    struct ArrowArray *chunks = NULL;
    int64_t n = 0, cap_n = 0, total = 0, nulls = 0;
    for (;;) {
        struct ArrowArray a;
        memset(&a, 0, sizeof a);
        if (st->get_next(st, &a) != 0) {
            PyErr_Format(PyExc_ValueError, "%s: Arrow stream error", name);
            goto fail;
        }
        if (!a.release)
            break;                                   /* end of the stream */
        if (a.length == 0) {
            a.release(&a);
            continue;
        }
        if (n == cap_n) {
            cap_n = cap_n ? 2 * cap_n : 4;
            struct ArrowArray *g = realloc(chunks, cap_n * sizeof *g);
            if (!g) {
                a.release(&a);
                PyErr_NoMemory();
                goto fail;
            }
            chunks = g;
        }
        chunks[n++] = a;
        total += a.length;
        nulls += a.null_count;
    }
    c->len = total;
    if (n == 0) {
        static const int64_t none = 0;
        c->data = &none;
    } else if (n == 1) {
        c->chunk = chunks[0];
        c->data = (const char *)c->chunk.buffers[1] + c->chunk.offset * c->width;
        c->bits = c->chunk.null_count ? c->chunk.buffers[0] : NULL;
        c->bit0 = c->chunk.offset;
    } else {
        c->own_data = malloc(total * c->width);
        c->own_bits = nulls ? calloc((total + 7) / 8, 1) : NULL;
        if (!c->own_data || (nulls && !c->own_bits)) {
            PyErr_NoMemory();
            goto fail;
        }
        int64_t at = 0;
        for (int64_t k = 0; k < n; k++) {
            struct ArrowArray *a = &chunks[k];
            memcpy((char *)c->own_data + at * c->width,
                   (const char *)a->buffers[1] + a->offset * c->width, a->length * c->width);
            if (nulls) {
                const uint8_t *b = a->buffers[0];
                for (int64_t i = 0; i < a->length; i++) {
                    int64_t s = a->offset + i;
                    if (!b || ((b[s >> 3] >> (s & 7)) & 1))
                        c->own_bits[(at + i) >> 3] |= (uint8_t)(1u << ((at + i) & 7));
                }
            }
            at += a->length;
        }
        for (int64_t k = 0; k < n; k++)
            chunks[k].release(&chunks[k]);
        c->data = c->own_data;
        c->bits = c->own_bits;
        c->bit0 = 0;
    }
    free(chunks);
    return 0;
fail:
    for (int64_t k = 0; k < n; k++)
        chunks[k].release(&chunks[k]);
    free(chunks);
    in_free(c);
    return -1;
}

/* ------------------------------------------------------------------------------------------
 * Output: Column, a uint32 or int64 column built here, handed to polars once through
 * __arrow_c_array__ (the buffers move into the exported array; polars frees them). */

typedef struct {
    PyObject_HEAD
    int64_t len;
    int width;
    void *data;
    uint8_t *bits;              /* validity, or NULL: no nulls */
    int64_t null_count;
} Column;

static void column_dealloc(Column *self) {
    free(self->data);
    free(self->bits);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static void schema_release(struct ArrowSchema *s) {
    s->release = NULL;
}

static void array_release(struct ArrowArray *a) {
    free((void *)a->buffers[0]);
    free((void *)a->buffers[1]);
    free(a->buffers);
    a->release = NULL;
}

static void schema_capsule_free(PyObject *cap) {
    struct ArrowSchema *s = PyCapsule_GetPointer(cap, "arrow_schema");
    if (s) {
        if (s->release)
            s->release(s);
        free(s);
    }
}

static void array_capsule_free(PyObject *cap) {
    struct ArrowArray *a = PyCapsule_GetPointer(cap, "arrow_array");
    if (a) {
        if (a->release)
            a->release(a);
        free(a);
    }
}

static PyObject *column_export(Column *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"requested_schema", NULL};
    PyObject *requested = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O", names, &requested))
        return NULL;
    if (!self->data) {
        PyErr_SetString(PyExc_ValueError, "Column already exported");
        return NULL;
    }
    struct ArrowSchema *s = calloc(1, sizeof *s);
    struct ArrowArray *a = calloc(1, sizeof *a);
    const void **bufs = calloc(2, sizeof *bufs);
    if (!s || !a || !bufs) {
        free(s);
        free(a);
        free(bufs);
        return PyErr_NoMemory();
    }
    s->format = self->width == 8 ? "l" : "I";
    s->name = "";
    s->flags = 2;               /* ARROW_FLAG_NULLABLE */
    s->release = schema_release;
    bufs[0] = self->bits;
    bufs[1] = self->data;
    a->length = self->len;
    a->null_count = self->bits ? self->null_count : 0;
    a->n_buffers = 2;
    a->buffers = bufs;
    a->release = array_release;
    self->data = NULL;          /* moved: the exported array owns the buffers now */
    self->bits = NULL;
    PyObject *sc = PyCapsule_New(s, "arrow_schema", schema_capsule_free);
    if (!sc) {
        free(s);
        array_release(a);
        free(a);
        return NULL;
    }
    PyObject *ac = PyCapsule_New(a, "arrow_array", array_capsule_free);
    if (!ac) {
        Py_DECREF(sc);
        array_release(a);
        free(a);
        return NULL;
    }
    return Py_BuildValue("(NN)", sc, ac);
}

static PyObject *column_len(Column *self, PyObject *unused) {
    return PyLong_FromLongLong(self->len);
}

static PyMethodDef column_methods[] = {
    {"__arrow_c_array__", (PyCFunction)(void (*)(void))column_export, METH_VARARGS | METH_KEYWORDS,
     "The column as an Arrow C array (schema and array capsules); once only."},
    {"length", (PyCFunction)column_len, METH_NOARGS, "Number of values."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ColumnType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "checkers.history._scan.Column",
    .tp_basicsize = sizeof(Column),
    .tp_dealloc = (destructor)column_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A column computed by a scan, for polars.Series(name, column).",
    .tp_methods = column_methods,
};

static Column *column_new(int64_t len, int width, int nullable) {
    Column *c = PyObject_New(Column, &ColumnType);
    if (!c)
        return NULL;
    c->len = len;
    c->width = width;
    c->null_count = 0;
    c->data = malloc(len ? len * width : 1);
    c->bits = nullable ? calloc(len ? (len + 7) / 8 : 1, 1) : NULL;
    if (!c->data || (nullable && !c->bits)) {
        Py_DECREF(c);
        PyErr_NoMemory();
        return NULL;
    }
    return c;
}

/* ------------------------------------------------------------------------------------------
 * A hash table from int64 keys to row numbers (open addressing, linear probing, at most half
 * full). Keys are mixed by a multiplicative hash: packed keys (partition << 32 | offset)
 * differ mostly in their low bits. */

typedef struct {
    uint64_t mask;
    int64_t *keys;
    uint32_t *rows;             /* row + 1; 0 = empty slot */
} Table;

static inline uint64_t mix(int64_t k) {
    uint64_t x = (uint64_t)k * 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 29);
}

static int table_init(Table *t, int64_t n) {
    uint64_t size = 16;
    while (size < (uint64_t)n * 2)
        size <<= 1;
    t->mask = size - 1;
    t->keys = malloc(size * sizeof *t->keys);
    t->rows = calloc(size, sizeof *t->rows);
    if (!t->keys || !t->rows) {
        free(t->keys);
        free(t->rows);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void table_free(Table *t) {
    free(t->keys);
    free(t->rows);
}

/* Inserts key -> row; returns 1 if the key was there already (the table keeps the first). */
static inline int table_put(Table *t, int64_t key, uint32_t row) {
    uint64_t h = mix(key) & t->mask;
    while (t->rows[h]) {
        if (t->keys[h] == key)
            return 1;
        h = (h + 1) & t->mask;
    }
    t->keys[h] = key;
    t->rows[h] = row + 1;
    return 0;
}

static inline uint32_t table_get(const Table *t, int64_t key) {
    uint64_t h = mix(key) & t->mask;
    while (t->rows[h]) {
        if (t->keys[h] == key)
            return t->rows[h];
        h = (h + 1) & t->mask;
    }
    return 0;
}

/* lookup(table, probe) -> Column | None
 * For each value of `probe`, the row of `table` holding the same value (uint32; null where
 * none, or where the probe value is null). `table`'s null values are never matched. None
 * when a value occurs twice in `table` (a many-to-one lookup is not a position: the caller
 * joins instead). One pass over each column: the hash join without the sort. */
static PyObject *lookup(PyObject *mod, PyObject *args) {
    PyObject *tobj, *pobj;
    if (!PyArg_ParseTuple(args, "OO", &tobj, &pobj))
        return NULL;
    In tk, pk;
    if (in_read(tobj, &tk, "table") < 0)
        return NULL;
    if (in_read(pobj, &pk, "probe") < 0) {
        in_free(&tk);
        return NULL;
    }
    PyObject *out = NULL;
    Table t = {0};
    if (tk.len >= (int64_t)UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "table: more rows than uint32 positions");
        goto done;
    }
    if (table_init(&t, tk.len) < 0)
        goto done;
    int dup = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < tk.len; i++) {
        if (in_valid(&tk, i) && table_put(&t, in_get(&tk, i), (uint32_t)i)) {
            dup = 1;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    if (dup) {
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    Column *col = column_new(pk.len, 4, 1);
    if (!col)
        goto done;
    uint32_t *pos = col->data;
    uint8_t *bits = col->bits;
    int64_t nulls = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < pk.len; i++) {
        uint32_t r = in_valid(&pk, i) ? table_get(&t, in_get(&pk, i)) : 0;
        if (r) {
            pos[i] = r - 1;
            bits[i >> 3] |= (uint8_t)(1u << (i & 7));
        } else {
            pos[i] = 0;
            nulls++;
        }
    }
    Py_END_ALLOW_THREADS
    col->null_count = nulls;
    out = (PyObject *)col;
done:
    table_free(&t);
    in_free(&tk);
    in_free(&pk);
    return out;
}

static PyMethodDef scan_methods[] = {
    {"lookup", lookup, METH_VARARGS,
     "lookup(table, probe) -> Column | None: each probe value's row in table (null if absent); "
     "None if table repeats a value."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef scan_module = {
    PyModuleDef_HEAD_INIT, "checkers.history._scan",
    "Compiled one-pass scans over Arrow columns for the columnar history kernel.", -1,
    scan_methods,
};

PyMODINIT_FUNC PyInit__scan(void) {
    if (PyType_Ready(&ColumnType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&scan_module);
    if (!m)
        return NULL;
    Py_INCREF(&ColumnType);
    if (PyModule_AddObject(m, "Column", (PyObject *)&ColumnType) < 0) {
        Py_DECREF(&ColumnType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
