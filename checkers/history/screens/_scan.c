/* The polars screen's compiled scans (checkers/history/screens/columnar.py): one pass in C over
 * Arrow columns, for the steps where a polars plan pays for a sort or a hash join it does not
 * need. Columns come in through the Arrow PyCapsule interface (`__arrow_c_stream__`, which
 * polars Series have) and go out the same way (`Column.__arrow_c_array__`, which
 * `polars.Series` accepts): no copy either way, no numpy or pyarrow import (importing this
 * module costs well under a millisecond).
 *
 * The Arrow C data interface's structs are in _arrow.h. Only
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

#include "_arrow.h"

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

/* Reads a call's arguments, exactly n objects with __arrow_c_stream__, into cols[0..n-1]
 * (names[i] for messages). Returns 0, or -1 with an exception set and nothing left to free. */
static int in_read_args(PyObject *args, int n, In *cols, const char *const *names) {
    if (!PyTuple_Check(args) || PyTuple_GET_SIZE(args) != n) {
        PyErr_Format(PyExc_TypeError, "expected %d columns", n);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (in_read(PyTuple_GET_ITEM(args, i), &cols[i], names[i]) < 0) {
            while (i-- > 0)
                in_free(&cols[i]);
            return -1;
        }
    return 0;
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
    .tp_name = "checkers.history.screens._scan.Column",
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
    uint64_t used;
    int64_t *keys;
    uint32_t *rows;             /* row + 1; 0 = empty slot */
} Table;

static inline uint64_t mix(int64_t k) {
    uint64_t x = (uint64_t)k * 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 29);
}

/* A table for `n` keys (it grows past that, in table_slot). Sized to the keys, not to the
 * rows scanned: a few thousand keys stay in cache. */
static int table_init(Table *t, int64_t n) {
    uint64_t size = 16;
    while (size < (uint64_t)n * 2)
        size <<= 1;
    t->mask = size - 1;
    t->used = 0;
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
    t->used++;
    return 0;
}

/* Doubles the table (at half full). Returns -1 when out of memory (the table is unchanged). */
static int table_grow(Table *t) {
    uint64_t size = (t->mask + 1) * 2;
    int64_t *keys = malloc(size * sizeof *keys);
    uint32_t *rows = calloc(size, sizeof *rows);
    if (!keys || !rows) {
        free(keys);
        free(rows);
        return -1;
    }
    for (uint64_t h = 0; h <= t->mask; h++) {
        if (!t->rows[h])
            continue;
        uint64_t g = mix(t->keys[h]) & (size - 1);
        while (rows[g])
            g = (g + 1) & (size - 1);
        keys[g] = t->keys[h];
        rows[g] = t->rows[h];
    }
    free(t->keys);
    free(t->rows);
    t->keys = keys;
    t->rows = rows;
    t->mask = size - 1;
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

/* Slot numbers for keys: the first time a key is seen it gets the next slot (0, 1, ...).
 * The table grows to stay at most half full; UINT32_MAX when it cannot (out of memory). */
static inline uint32_t table_slot(Table *t, int64_t key, uint32_t *next) {
    uint64_t h = mix(key) & t->mask;
    while (t->rows[h]) {
        if (t->keys[h] == key)
            return t->rows[h] - 1;
        h = (h + 1) & t->mask;
    }
    if ((t->used + 1) * 2 > t->mask + 1) {
        if (table_grow(t) < 0)
            return UINT32_MAX;
        h = mix(key) & t->mask;
        while (t->rows[h])
            h = (h + 1) & t->mask;
    }
    t->keys[h] = key;
    t->rows[h] = ++*next;
    t->used++;
    return *next - 1;
}

/* A growing list of row numbers (the rows a scan flags), handed out as a uint32 Column. */
typedef struct {
    uint32_t *rows;
    int64_t n, cap;
} Rows;

static int rows_add(Rows *r, int64_t row) {
    if (r->n == r->cap) {
        int64_t cap = r->cap ? 2 * r->cap : 64;
        uint32_t *g = realloc(r->rows, cap * sizeof *g);
        if (!g)
            return -1;
        r->rows = g;
        r->cap = cap;
    }
    r->rows[r->n++] = (uint32_t)row;
    return 0;
}

static PyObject *rows_column(Rows *r) {
    Column *c = PyObject_New(Column, &ColumnType);
    if (!c) {
        free(r->rows);
        return NULL;
    }
    c->len = r->n;
    c->width = 4;
    c->bits = NULL;
    c->null_count = 0;
    c->data = r->rows ? (void *)r->rows : malloc(1);
    r->rows = NULL;
    if (!c->data) {
        Py_DECREF(c);
        return PyErr_NoMemory();
    }
    return (PyObject *)c;
}

/* Sets probe i's answer: row r - 1 when r (row + 1) is not 0, else null. Returns 1 for a null. */
static inline int put_row(uint32_t *pos, uint8_t *bits, int64_t i, uint32_t r) {
    if (r) {
        pos[i] = r - 1;
        bits[i >> 3] |= (uint8_t)(1u << (i & 7));
        return 0;
    }
    pos[i] = 0;
    return 1;
}

/* lookup(table, probe) -> Column | None
 * For each value of `probe`, the row of `table` holding the same value (uint32; null where
 * none, or where the probe value is null). `table`'s null values are never matched. None
 * when a value occurs twice in `table` (a many-to-one lookup is not a position: the caller
 * joins instead). One pass over each column: the join without a sort.
 * Values are read as (high 32 bits, low 32 bits): the kernel's packed keys (partition << 32 |
 * offset) have few distinct high parts, each with low parts in a narrow range. When the
 * ranges together span at most SPAN_SLACK times the table's rows (plus 4096), each high
 * part's range is laid out densely (4 bytes per offset: the probes of one partition, which
 * come in about offset order, read it in sequence); otherwise one hash table of the values. */
#define SPAN_SLACK 2
static PyObject *lookup(PyObject *mod, PyObject *args) {
    static const char *const names[2] = {"table", "probe"};
    In in[2];
    if (in_read_args(args, 2, in, names) < 0)
        return NULL;
    In tk = in[0], pk = in[1];
    PyObject *out = NULL;
    Column *col = NULL;
    Table parts = {0}, t = {0};
    int64_t *lo = NULL, *hi = NULL, *base = NULL;
    uint32_t *dense = NULL;
    int64_t cap = 1024;
    uint32_t np = 0;
    int dup = 0;
    if (tk.len >= (int64_t)UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "table: more rows than uint32 positions");
        goto done;
    }
    if (table_init(&parts, 64) < 0)
        goto done;
    lo = malloc(cap * sizeof *lo);
    hi = malloc(cap * sizeof *hi);
    if (!lo || !hi) {
        PyErr_NoMemory();
        goto done;
    }
    /* Pass 1: the high parts and each one's range of low parts. */
    int64_t span = 0;
    int use_dense = 1;
    for (int64_t i = 0; i < tk.len && use_dense; i++) {
        if (!in_valid(&tk, i))
            continue;
        int64_t v = in_get(&tk, i), h = v >> 32, l = v & 0xffffffffLL;
        uint32_t before = np;
        uint32_t s = table_slot(&parts, h, &np);
        if (s == UINT32_MAX) {
            PyErr_NoMemory();
            goto done;
        }
        if (np != before) {
            if (np > cap) {
                cap *= 2;
                int64_t *a = realloc(lo, cap * sizeof *lo), *b;
                if (a)
                    lo = a;
                b = realloc(hi, cap * sizeof *hi);
                if (b)
                    hi = b;
                if (!a || !b) {
                    PyErr_NoMemory();
                    goto done;
                }
            }
            lo[s] = hi[s] = l;
        } else if (l < lo[s]) {
            lo[s] = l;
        } else if (l > hi[s]) {
            hi[s] = l;
        }
        if (np > tk.len / 8 + 64)
            use_dense = 0;          /* many high parts: not the packed-key shape */
    }
    if (use_dense) {
        base = malloc((np ? np : 1) * sizeof *base);
        if (!base) {
            PyErr_NoMemory();
            goto done;
        }
        for (uint32_t s = 0; s < np; s++) {
            base[s] = span;
            span += hi[s] - lo[s] + 1;
        }
        use_dense = span <= SPAN_SLACK * tk.len + 4096;
    }
    col = column_new(pk.len, 4, 1);
    if (!col)
        goto done;
    uint32_t *pos = col->data;
    uint8_t *bits = col->bits;
    int64_t nulls = 0;
    if (use_dense) {
        dense = calloc(span ? span : 1, sizeof *dense);      /* row + 1; 0 = none */
        if (!dense) {
            PyErr_NoMemory();
            goto done;
        }
        Py_BEGIN_ALLOW_THREADS
        for (int64_t i = 0; i < tk.len; i++) {
            if (!in_valid(&tk, i))
                continue;
            int64_t v = in_get(&tk, i);
            uint32_t s = table_get(&parts, v >> 32) - 1;
            uint32_t *d = &dense[base[s] + (v & 0xffffffffLL) - lo[s]];
            if (*d) {
                dup = 1;
                break;
            }
            *d = (uint32_t)i + 1;
        }
        if (!dup) {
            uint32_t ls = UINT32_MAX;       /* the previous probe's high part, and its slot */
            int64_t lh = 0;
            for (int64_t i = 0; i < pk.len; i++) {
                uint32_t r = 0;
                if (in_valid(&pk, i)) {
                    int64_t v = in_get(&pk, i), h = v >> 32, l = v & 0xffffffffLL;
                    if (ls == UINT32_MAX || h != lh) {
                        ls = table_get(&parts, h);
                        ls = ls ? ls - 1 : UINT32_MAX - 1;
                        lh = h;
                    }
                    if (ls != UINT32_MAX - 1 && l >= lo[ls] && l <= hi[ls])
                        r = dense[base[ls] + l - lo[ls]];
                }
                nulls += put_row(pos, bits, i, r);
            }
        }
        Py_END_ALLOW_THREADS
    } else {
        if (table_init(&t, tk.len) < 0)
            goto done;
        Py_BEGIN_ALLOW_THREADS
        for (int64_t i = 0; i < tk.len; i++) {
            if (in_valid(&tk, i) && table_put(&t, in_get(&tk, i), (uint32_t)i)) {
                dup = 1;
                break;
            }
        }
        if (!dup) {
            for (int64_t i = 0; i < pk.len; i++) {
                uint32_t r = in_valid(&pk, i) ? table_get(&t, in_get(&pk, i)) : 0;
                nulls += put_row(pos, bits, i, r);
            }
        }
        Py_END_ALLOW_THREADS
    }
    if (dup) {
        out = Py_None;
        Py_INCREF(out);
        goto done;
    }
    col->null_count = nulls;
    out = (PyObject *)col;
    col = NULL;
done:
    Py_XDECREF(col);
    free(lo);
    free(hi);
    free(base);
    free(dense);
    table_free(&parts);
    table_free(&t);
    in_free(&tk);
    in_free(&pk);
    return out;
}

/* Kinds of row for order_scan (the caller's codes). */
enum { SKIP = 0, POLL = 1, RESET = 2, ACKED = 3 };

/* order_scan(key, kind, first, last) -> Column of flagged rows
 * One pass over a partition's operations in time order ((invoke time, id) order), each row
 * with its key (topic-partition and process: one consumer's or one producer's view of one
 * partition) and its kind:
 *   POLL  (an ok poll with records: `first`, `last` its first and last offsets): flagged when
 *         the key's previous poll since its last RESET did not end right before `first`;
 *   RESET (an assign or subscribe that did not fail): the key's next poll starts afresh;
 *   ACKED (an acknowledged send: `first` its offset): flagged when not above the key's
 *         previous acknowledged offset (each producer's offsets increase in send order).
 * A null offset compares as unknown: never flagged (as polars' comparison with null). */
static PyObject *order_scan(PyObject *mod, PyObject *args) {
    static const char *const names[4] = {"key", "kind", "first", "last"};
    In in[4];
    if (in_read_args(args, 4, in, names) < 0)
        return NULL;
    In key = in[0], kind = in[1], first = in[2], last = in[3];
    PyObject *out = NULL;
    Rows flagged = {0};
    Table t = {0};
    int64_t n = key.len;
    /* Per key slot: the previous poll's last offset (valid if has_poll) and the previous
     * acknowledged offset (valid if has_ack). */
    int64_t *poll_last = NULL, *ack_last = NULL;
    uint8_t *has_poll = NULL, *has_ack = NULL;
    if (kind.len != n || first.len != n || last.len != n) {
        PyErr_SetString(PyExc_ValueError, "order_scan: columns of different lengths");
        goto done;
    }
    if (n >= (int64_t)UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "order_scan: more rows than uint32 positions");
        goto done;
    }
    if (table_init(&t, 1024) < 0)
        goto done;
    poll_last = malloc((n ? n : 1) * sizeof *poll_last);
    ack_last = malloc((n ? n : 1) * sizeof *ack_last);
    has_poll = calloc(n ? n : 1, 1);
    has_ack = calloc(n ? n : 1, 1);
    if (!poll_last || !ack_last || !has_poll || !has_ack) {
        PyErr_NoMemory();
        goto done;
    }
    uint32_t next = 0;
    int oom = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < n && !oom; i++) {
        int64_t k = in_valid(&kind, i) ? in_get(&kind, i) : SKIP;
        if (k == SKIP || !in_valid(&key, i))
            continue;
        uint32_t s = table_slot(&t, in_get(&key, i), &next);
        if (s == UINT32_MAX) {
            oom = 1;
            break;
        }
        if (k == RESET) {
            has_poll[s] = 0;
        } else if (k == POLL) {
            /* has_poll: 1 = a previous poll with a known last offset, 2 = one with none */
            if (has_poll[s] == 1 && in_valid(&first, i) && in_get(&first, i) != poll_last[s] + 1)
                oom = rows_add(&flagged, i) < 0;
            if (in_valid(&last, i)) {
                has_poll[s] = 1;
                poll_last[s] = in_get(&last, i);
            } else {
                has_poll[s] = 2;
            }
        } else if (k == ACKED) {
            if (has_ack[s] == 1 && in_valid(&first, i) && in_get(&first, i) <= ack_last[s])
                oom = rows_add(&flagged, i) < 0;
            if (in_valid(&first, i)) {
                has_ack[s] = 1;
                ack_last[s] = in_get(&first, i);
            } else {
                has_ack[s] = 2;
            }
        }
    }
    Py_END_ALLOW_THREADS
    if (oom) {
        PyErr_NoMemory();
        goto done;
    }
    out = rows_column(&flagged);
    flagged.rows = NULL;
done:
    free(flagged.rows);
    free(poll_last);
    free(ack_last);
    free(has_poll);
    free(has_ack);
    table_free(&t);
    in_free(&key);
    in_free(&kind);
    in_free(&first);
    in_free(&last);
    return out;
}

/* lin_scan(log_pk, log_offset, log_inv, log_comp, poll_pk, poll_top, poll_comp)
 *   -> (Column of flagged log rows, Column of flagged poll rows)
 * The offset-witness linearizability screen (linearizable.py) in one pass over the log (the
 * acknowledged and placed offsets, in any order) and one over the polls. A log row is
 * flagged when its append completed (`log_comp`, null for a placed offset) before the latest
 * invoke of an append at a lower offset of its partition; a poll (`poll_top` its highest
 * offset read) when no append is at that offset or the latest invoke of an append at or
 * below it came after the poll completed.
 * Each partition's offsets are laid out densely between their least and greatest (no sort).
 * A partition whose offsets are not dense and distinct gets every row of it flagged (log
 * rows and polls): gaps and repeats are flagged by other screens in any case, so that adds
 * nothing to the union, and the object checkers judge it. Nulls in `log_inv` do not count
 * towards the latest invoke (polars' cumulative maximum skips them). */
static PyObject *lin_scan(PyObject *mod, PyObject *args) {
    PyObject *o[7];
    if (!PyArg_ParseTuple(args, "OOOOOOO", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6]))
        return NULL;
    static const char *names[7] = {"log_pk", "log_offset", "log_inv", "log_comp",
                                   "poll_pk", "poll_top", "poll_comp"};
    In c[7];
    int got = 0;
    for (; got < 7; got++)
        if (in_read(o[got], &c[got], names[got]) < 0)
            break;
    PyObject *out = NULL;
    Rows fl = {0}, fp = {0};
    Table t = {0};
    int64_t *lo = NULL, *hi = NULL, *cnt = NULL, *base = NULL, *latest = NULL;
    uint8_t *bad = NULL, *present = NULL;
    int64_t *inv_at = NULL;
    if (got < 7)
        goto done;
    In *pk = &c[0], *off = &c[1], *inv = &c[2], *comp = &c[3];
    In *qpk = &c[4], *top = &c[5], *qcomp = &c[6];
    int64_t n = pk->len, m = qpk->len;
    if (off->len != n || inv->len != n || comp->len != n || top->len != m || qcomp->len != m) {
        PyErr_SetString(PyExc_ValueError, "lin_scan: columns of different lengths");
        goto done;
    }
    if (n >= (int64_t)UINT32_MAX || m >= (int64_t)UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "lin_scan: more rows than uint32 positions");
        goto done;
    }
    if (table_init(&t, 1024) < 0)
        goto done;
    int64_t k1 = n ? n : 1;
    lo = malloc(k1 * sizeof *lo);
    hi = malloc(k1 * sizeof *hi);
    cnt = calloc(k1, sizeof *cnt);
    base = malloc(k1 * sizeof *base);
    bad = calloc(k1, 1);
    if (!lo || !hi || !cnt || !base || !bad) {
        PyErr_NoMemory();
        goto done;
    }
    uint32_t parts = 0;
    int oom = 0;
    /* Pass 1: each partition's least and greatest offset and count. A row without a
     * partition or an offset makes its partition irregular (never expected: the reader's
     * rules require both). */
    for (int64_t i = 0; i < n; i++) {
        if (!in_valid(pk, i))
            continue;
        uint32_t s = table_slot(&t, in_get(pk, i), &parts);
        if (s == UINT32_MAX) {
            PyErr_NoMemory();
            goto done;
        }
        if (!in_valid(off, i)) {
            bad[s] = 1;
            continue;
        }
        int64_t v = in_get(off, i);
        if (cnt[s] == 0 || v < lo[s])
            lo[s] = v;
        if (cnt[s] == 0 || v > hi[s])
            hi[s] = v;
        cnt[s]++;
    }
    /* Dense layout: partition s holds [base[s], base[s] + cnt[s]). */
    int64_t total = 0;
    for (uint32_t s = 0; s < parts; s++) {
        if (cnt[s] == 0 || hi[s] - lo[s] + 1 != cnt[s])
            bad[s] = 1;
        base[s] = total;
        if (!bad[s])
            total += cnt[s];
    }
    inv_at = malloc((total ? total : 1) * sizeof *inv_at);
    latest = malloc((total ? total : 1) * sizeof *latest);
    present = calloc(total ? total : 1, 1);
    if (!inv_at || !latest || !present) {
        PyErr_NoMemory();
        goto done;
    }
    /* Pass 2: place each row; a repeated offset makes its partition irregular. present: 1 =
     * an append with an invoke time, 2 = one with none. */
    for (int64_t i = 0; i < n; i++) {
        if (!in_valid(pk, i) || !in_valid(off, i))
            continue;
        uint32_t s = table_get(&t, in_get(pk, i)) - 1;
        if (bad[s])
            continue;
        int64_t at = base[s] + in_get(off, i) - lo[s];
        if (present[at]) {
            bad[s] = 1;
            continue;
        }
        present[at] = in_valid(inv, i) ? 1 : 2;
        inv_at[at] = in_valid(inv, i) ? in_get(inv, i) : 0;
    }
    /* The latest invoke at or below each offset (a prefix maximum; INT64_MIN: none yet). */
    for (uint32_t s = 0; s < parts; s++) {
        if (bad[s])
            continue;
        int64_t run = INT64_MIN;
        for (int64_t j = base[s]; j < base[s] + cnt[s]; j++) {
            if (present[j] == 1 && inv_at[j] > run)
                run = inv_at[j];
            latest[j] = run;
        }
    }
    /* Pass 3: log rows. */
    for (int64_t i = 0; i < n && !oom; i++) {
        if (!in_valid(pk, i))
            continue;
        uint32_t s = table_get(&t, in_get(pk, i)) - 1;
        if (bad[s]) {
            oom = rows_add(&fl, i) < 0;
            continue;
        }
        if (!in_valid(comp, i))
            continue;
        int64_t at = base[s] + in_get(off, i) - lo[s];
        if (at > base[s] && latest[at - 1] != INT64_MIN && latest[at - 1] > in_get(comp, i))
            oom = rows_add(&fl, i) < 0;
    }
    /* Pass 4: polls. A poll whose partition has no log row, or whose highest offset is
     * outside it, has no append there: flagged. A null highest offset or completion compares
     * as unknown (polars: a null key finds no row, so the poll is flagged). */
    for (int64_t i = 0; i < m && !oom; i++) {
        uint32_t r = in_valid(qpk, i) ? table_get(&t, in_get(qpk, i)) : 0;
        if (!r || !in_valid(top, i)) {
            oom = rows_add(&fp, i) < 0;
            continue;
        }
        uint32_t s = r - 1;
        int64_t v = in_get(top, i);
        if (bad[s] || v < lo[s] || v > hi[s]) {
            oom = rows_add(&fp, i) < 0;
            continue;
        }
        int64_t l = latest[base[s] + v - lo[s]];
        if (l == INT64_MIN || (in_valid(qcomp, i) && l > in_get(qcomp, i)))
            oom = rows_add(&fp, i) < 0;
    }
    if (oom) {
        PyErr_NoMemory();
        goto done;
    }
    PyObject *a = rows_column(&fl);
    fl.rows = NULL;
    if (!a)
        goto done;
    PyObject *b = rows_column(&fp);
    fp.rows = NULL;
    if (!b) {
        Py_DECREF(a);
        goto done;
    }
    out = Py_BuildValue("(NN)", a, b);
done:
    free(fl.rows);
    free(fp.rows);
    free(lo);
    free(hi);
    free(cnt);
    free(base);
    free(bad);
    free(present);
    free(inv_at);
    free(latest);
    table_free(&t);
    for (int k = 0; k < got; k++)
        in_free(&c[k]);
    return out;
}

/* steps(col) -> 2 if each value is the previous one plus 1, 1 if each is above the previous,
 * else 0 (also when a value is null). A column of at most one value counts as 2. One pass,
 * stopping at the first step that is neither. */
static PyObject *steps(PyObject *mod, PyObject *args) {
    PyObject *o;
    if (!PyArg_ParseTuple(args, "O", &o))
        return NULL;
    In c;
    if (in_read(o, &c, "col") < 0)
        return NULL;
    int res = 2;
    if (c.bits) {
        for (int64_t i = 0; i < c.len; i++)
            if (!in_valid(&c, i)) {
                res = 0;
                break;
            }
    }
    for (int64_t i = 1; i < c.len && res; i++) {
        int64_t d = in_get(&c, i) - in_get(&c, i - 1);
        if (d != 1)
            res = d > 0 ? 1 : 0;
    }
    in_free(&c);
    return PyLong_FromLong(res);
}

/* time_ordered(inv, id) -> whether the rows are in (inv, id) order with no (inv, id) twice
 * (no nulls). One pass, stopping at the first row out of order. */
static PyObject *time_ordered(PyObject *mod, PyObject *args) {
    static const char *const names[2] = {"inv", "id"};
    In in[2];
    if (in_read_args(args, 2, in, names) < 0)
        return NULL;
    In inv = in[0], id = in[1];
    int ok = inv.len == id.len && !inv.bits && !id.bits;
    for (int64_t i = 1; i < inv.len && ok; i++) {
        int64_t x = in_get(&inv, i - 1), y = in_get(&inv, i);
        ok = y > x || (y == x && in_get(&id, i) > in_get(&id, i - 1));
    }
    in_free(&inv);
    in_free(&id);
    return PyBool_FromLong(ok);
}

/* acyclic(n, src, dst) -> whether the directed graph of nodes 0..n-1 and edges src[i] -> dst[i]
 * (two buffers of int64, e.g. array('q')) has no cycle: Kahn's algorithm, O(n + edges), on
 * a compressed adjacency built here. A self-loop is a cycle. ValueError for a node outside
 * 0..n-1 or buffers of different lengths. */
static PyObject *acyclic(PyObject *mod, PyObject *args) {
    Py_ssize_t n;
    Py_buffer bs, bd;
    if (!PyArg_ParseTuple(args, "ny*y*", &n, &bs, &bd))
        return NULL;
    PyObject *res = NULL;
    int64_t *start = NULL, *adj = NULL, *queue = NULL, *indeg = NULL;
    if (bs.len != bd.len || bs.len % 8 || n < 0) {
        PyErr_SetString(PyExc_ValueError, "acyclic: src and dst must be int64 buffers of one length");
        goto out;
    }
    int64_t m = bs.len / 8;
    const int64_t *src = bs.buf, *dst = bd.buf;
    for (int64_t i = 0; i < m; i++)
        if (src[i] < 0 || src[i] >= n || dst[i] < 0 || dst[i] >= n) {
            PyErr_SetString(PyExc_ValueError, "acyclic: an edge's node is outside 0..n-1");
            goto out;
        }
    start = calloc((size_t)n + 1, sizeof *start);
    adj = malloc(((size_t)m + 1) * sizeof *adj);
    queue = malloc(((size_t)n + 1) * sizeof *queue);
    indeg = calloc((size_t)n + 1, sizeof *indeg);
    if (!start || !adj || !queue || !indeg) {
        PyErr_NoMemory();
        goto out;
    }
    for (int64_t i = 0; i < m; i++) {
        start[src[i] + 1]++;
        indeg[dst[i]]++;
    }
    for (int64_t v = 0; v < n; v++)
        start[v + 1] += start[v];
    {
        int64_t *fill = queue;          /* borrowed as the fill cursor, reset below */
        memcpy(fill, start, (size_t)n * sizeof *fill);
        for (int64_t i = 0; i < m; i++)
            adj[fill[src[i]]++] = dst[i];
    }
    int64_t head = 0, tail = 0;
    for (int64_t v = 0; v < n; v++)
        if (indeg[v] == 0)
            queue[tail++] = v;
    while (head < tail) {
        int64_t u = queue[head++];
        for (int64_t j = start[u]; j < start[u + 1]; j++)
            if (--indeg[adj[j]] == 0)
                queue[tail++] = adj[j];
    }
    res = PyBool_FromLong(tail == n);
out:
    free(start);
    free(adj);
    free(queue);
    free(indeg);
    PyBuffer_Release(&bs);
    PyBuffer_Release(&bd);
    return res;
}

static PyMethodDef scan_methods[] = {
    {"acyclic", acyclic, METH_VARARGS,
     "acyclic(n, src, dst) -> whether the graph of n nodes and int64 edge buffers has no cycle."},
    {"steps", steps, METH_VARARGS,
     "steps(col) -> 2 if consecutive, 1 if increasing, else 0."},
    {"time_ordered", time_ordered, METH_VARARGS,
     "time_ordered(inv, id) -> whether the rows are in strictly increasing (inv, id) order."},
    {"order_scan", order_scan, METH_VARARGS,
     "order_scan(key, kind, first, last) -> Column: rows breaking poll order or send order."},
    {"lin_scan", lin_scan, METH_VARARGS,
     "lin_scan(log_pk, log_offset, log_inv, log_comp, poll_pk, poll_top, poll_comp) -> "
     "(Column, Column): log rows and poll rows the linearizability screen flags."},
    {"lookup", lookup, METH_VARARGS,
     "lookup(table, probe) -> Column | None: each probe value's row in table (null if absent); "
     "None if table repeats a value."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef scan_module = {
    PyModuleDef_HEAD_INIT, "checkers.history.screens._scan",
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
