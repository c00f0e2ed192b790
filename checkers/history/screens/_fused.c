/* The fused screen: one pass in C from a history's decoded columns (as the Parquet or JSON-lines
 * reader yields them, through the Arrow PyCapsule interface: polars frames, no numpy or pyarrow)
 * to one flag per partition. It pairs invokes with completions by id and updates every screen
 * of the polars screen (checkers/history/screens/columnar.py) as each operation completes, in
 * per-partition, per-(partition, process) and per-(partition, group) state:
 *   the reader's row rules and pairing rules, inconsistent offsets and duplicates, lost /
 *   unseen / undecided writes, lost reads (a final read missing what was read before it),
 *   poll order, send order, offset-witness linearizability, commit regression, fenced
 *   commits, delivery at least once and at most once.
 * It is a screen, as the polars screens are: a flag means "the pipeline must look", never an
 * anomaly by itself. Its one duty is to be conservative: every partition in which the oracle
 * (checkers/history/oracle) would report an anomaly is flagged, and anything it cannot follow
 * cheaply (events out of time order, sparse ids or offsets, a process in two groups, a reader
 * rule broken...) raises a history-wide flag with its reason. The caller
 * (checkers/history/pipeline/file.py) decides a history with nothing flagged from the counts
 * returned here, and hands any other to the polars screens and then the oracle.
 * tests/test_fused.py checks both ways against the polars screens and the oracle.
 *
 * The state is fed one slice of the events (in file order) at a time: memory is the state
 * (56 bytes per offset of the log, 16 per offset a group read, 4 per operation id, 8 per send,
 * the operations in flight), not the events; it grows with the log (BENCHMARKS.md, seventh
 * round: about 0.5 GiB at 10^7 operations). Rules that compare a completion with later invokes (regression, fencing) are
 * decided as the events come, which needs events in time order (checked; else history-wide);
 * the rest are decided per partition at the end from per-offset arrays.
 *
 * Every loop is bounded by the input's rows or the state's arrays; every allocation is checked
 * and raises MemoryError. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_arrow.h"

/* ------------------------------------------------------------------------------------------
 * Columns. The frame's columns, by name (traces/history.py FIELDS, those the kernel reads). */

enum { C_ID, C_TYPE, C_PROCESS, C_F, C_TOPIC, C_PARTITION, C_KEY, C_VALUE, C_OFFSET, C_OFFSETS,
       C_VALUES, C_GROUP, C_GENERATION, C_FINAL, C_DELIVERY, C_RETRIES, C_MIF, C_IDEMP, C_ACKS,
       C_MONO, NCOL };
static const char *const COLS[NCOL] = {
    "id", "type", "process", "f", "topic", "partition", "key", "value", "offset", "offsets",
    "values", "group", "generation", "final", "delivery", "retries", "max_in_flight",
    "idempotence", "acks", "mono_ns"};

enum { K_NULL, K_I64, K_I32, K_BOOL, K_STR, K_LSTR, K_VIEW, K_LIST, K_LLIST };

typedef struct {
    int kind;
    int64_t off;                /* physical index of logical row 0 */
    const uint8_t *bits;        /* validity, or NULL: none null */
    const void *b1;             /* values, offsets or views */
    const char *b2;             /* string bytes (K_STR, K_LSTR) */
    const char *const *vb;      /* a view's data buffers (K_VIEW) */
} Leaf;

typedef struct {
    Leaf v;
    Leaf child;                 /* a list's values */
} Col;

static int kind_of(const char *fmt) {
    if (!strcmp(fmt, "n")) return K_NULL;
    if (!strcmp(fmt, "l")) return K_I64;
    if (!strcmp(fmt, "i")) return K_I32;
    if (!strcmp(fmt, "b")) return K_BOOL;
    if (!strcmp(fmt, "u")) return K_STR;
    if (!strcmp(fmt, "U")) return K_LSTR;
    if (!strcmp(fmt, "vu")) return K_VIEW;
    if (!strcmp(fmt, "+l")) return K_LIST;
    if (!strcmp(fmt, "+L")) return K_LLIST;
    return -1;
}

static void leaf_set(Leaf *l, int kind, const struct ArrowArray *a, int64_t parent_off) {
    l->kind = kind;
    l->off = a->offset + parent_off;
    l->bits = (kind != K_NULL && a->null_count != 0 && a->n_buffers > 0) ? a->buffers[0] : NULL;
    l->b1 = a->n_buffers > 1 ? a->buffers[1] : NULL;
    l->b2 = (kind == K_STR || kind == K_LSTR) ? a->buffers[2] : NULL;
    l->vb = kind == K_VIEW ? (const char *const *)(a->buffers + 2) : NULL;
}

static inline int lvalid(const Leaf *l, int64_t i) {
    if (l->kind == K_NULL)
        return 0;
    if (!l->bits)
        return 1;
    int64_t b = l->off + i;
    return (l->bits[b >> 3] >> (b & 7)) & 1;
}

static inline int64_t lint(const Leaf *l, int64_t i) {
    if (l->kind == K_I64)
        return ((const int64_t *)l->b1)[l->off + i];
    return ((const int32_t *)l->b1)[l->off + i];
}

static inline int lbool(const Leaf *l, int64_t i) {
    int64_t b = l->off + i;
    return (((const uint8_t *)l->b1)[b >> 3] >> (b & 7)) & 1;
}

static inline void lstr(const Leaf *l, int64_t i, const uint8_t **p, int64_t *n) {
    int64_t j = l->off + i;
    if (l->kind == K_STR) {
        const int32_t *o = l->b1;
        *p = (const uint8_t *)l->b2 + o[j];
        *n = o[j + 1] - o[j];
    } else if (l->kind == K_LSTR) {
        const int64_t *o = l->b1;
        *p = (const uint8_t *)l->b2 + o[j];
        *n = o[j + 1] - o[j];
    } else {
        const uint8_t *v = (const uint8_t *)l->b1 + 16 * j;
        int32_t len;
        memcpy(&len, v, 4);
        if (len <= 12) {
            *p = v + 4;
        } else {
            int32_t bi, bo;
            memcpy(&bi, v + 8, 4);
            memcpy(&bo, v + 12, 4);
            *p = (const uint8_t *)l->vb[bi] + bo;
        }
        *n = len;
    }
}

/* A list's [start, end) in its child. */
static inline void lrange(const Leaf *l, int64_t i, int64_t *s, int64_t *e) {
    int64_t j = l->off + i;
    if (l->kind == K_LIST) {
        const int32_t *o = l->b1;
        *s = o[j];
        *e = o[j + 1];
    } else {
        const int64_t *o = l->b1;
        *s = o[j];
        *e = o[j + 1];
    }
}

/* A 64-bit hash of a string: compared only with hashes of the same history (a collision
 * merges two values, topics or groups: see columnar.py prepare for what that can do, about
 * 2^-64 per comparison). */
static inline uint64_t hbytes(const uint8_t *p, int64_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, (size_t)n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 29;
    h *= 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 32);
}

static inline int eq(const uint8_t *p, int64_t n, const char *s) {
    size_t k = strlen(s);
    return (size_t)n == k && memcmp(p, s, k) == 0;
}

/* ------------------------------------------------------------------------------------------
 * A map from 64-bit keys to uint32 values (open addressing, at most half full). */

typedef struct {
    uint64_t *keys;
    uint32_t *vals;             /* value + 1; 0 = empty */
    uint64_t mask, used;
} Map;

static inline uint64_t mix(uint64_t x) {
    x *= 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 29);
}

static int map_init(Map *m, uint64_t n) {
    uint64_t size = 16;
    while (size < n * 2)
        size <<= 1;
    m->keys = malloc(size * sizeof *m->keys);
    m->vals = calloc(size, sizeof *m->vals);
    m->mask = size - 1;
    m->used = 0;
    return m->keys && m->vals ? 0 : -1;
}

static void map_free(Map *m) {
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
}

static inline uint32_t map_get(const Map *m, uint64_t k) {
    uint64_t h = mix(k) & m->mask;
    while (m->vals[h]) {
        if (m->keys[h] == k)
            return m->vals[h];
        h = (h + 1) & m->mask;
    }
    return 0;
}

static int map_grow(Map *m) {
    uint64_t size = (m->mask + 1) * 2;
    uint64_t *keys = malloc(size * sizeof *keys);
    uint32_t *vals = calloc(size, sizeof *vals);
    if (!keys || !vals) {
        free(keys);
        free(vals);
        return -1;
    }
    for (uint64_t h = 0; h <= m->mask; h++) {
        if (!m->vals[h])
            continue;
        uint64_t g = mix(m->keys[h]) & (size - 1);
        while (vals[g])
            g = (g + 1) & (size - 1);
        keys[g] = m->keys[h];
        vals[g] = m->vals[h];
    }
    free(m->keys);
    free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->mask = size - 1;
    return 0;
}

/* The value of `k`, inserting `v` when absent (*fresh = 1). UINT32_MAX when out of memory. */
static inline uint32_t map_put(Map *m, uint64_t k, uint32_t v, int *fresh) {
    uint64_t h = mix(k) & m->mask;
    while (m->vals[h]) {
        if (m->keys[h] == k) {
            *fresh = 0;
            return m->vals[h] - 1;
        }
        h = (h + 1) & m->mask;
    }
    if ((m->used + 1) * 2 > m->mask + 1) {
        if (map_grow(m) < 0)
            return UINT32_MAX;
        h = mix(k) & m->mask;
        while (m->vals[h])
            h = (h + 1) & m->mask;
    }
    m->keys[h] = k;
    m->vals[h] = v + 1;
    m->used++;
    *fresh = 1;
    return v;
}

/* A growing array of fixed-size items. */
typedef struct {
    char *p;
    uint32_t n, cap;
    size_t size;
} Vec;

static void *vec_add(Vec *v) {
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? 2 * v->cap : 16;
        char *g = realloc(v->p, (size_t)cap * v->size);
        if (!g)
            return NULL;
        v->p = g;
        v->cap = cap;
    }
    void *x = v->p + (size_t)v->n * v->size;
    memset(x, 0, v->size);
    v->n++;
    return x;
}

#define AT(vec, T, i) (((T *)(vec).p)[i])

/* ------------------------------------------------------------------------------------------
 * State. */

enum { T_INVOKE, T_OK, T_FAIL, T_INFO };
enum { F_SEND, F_POLL, F_COMMIT, F_ASSIGN, F_SUBSCRIBE, F_CONFIG };
enum { SKIP, POLL, RESET, ACKED };      /* an operation's part in the order rules */
#define NONE UINT32_MAX
#define BIG INT64_MAX
/* Why a partition is flagged (bits of the result, for messages and tests). */
enum {
    R_DUP_ACK = 1 << 0, R_ODD = 1 << 1, R_PLACE = 1 << 2, R_GAP = 1 << 3, R_STEP = 1 << 4,
    R_POLL_ORDER = 1 << 5, R_SEND_ORDER = 1 << 6, R_LOST = 1 << 7, R_UNSEEN = 1 << 8,
    R_LOST_READ = 1 << 9, R_LIN = 1 << 10, R_REGRESS = 1 << 11, R_FENCE = 1 << 12,
    R_ALO = 1 << 13, R_AMO = 1 << 14,
};
/* Per-offset bits. */
enum { O_ACK = 1, O_READ = 2, O_FINAL = 4, O_PLACED = 8, O_TOP = 16, O_NF = 32 };

typedef struct {
    int64_t id, inv, off, gen, top_at_inv, newest_at_inv, first, last;
    uint64_t vh;
    uint32_t part, proc, sp, pg, group, next;
    uint8_t f, final, delivery, done, kind, has_off, has_gen;
} Op;

/* One offset of a partition. One struct per offset (not one array per field): a record
 * touches one cache line, and each partition is one stream for the prefetcher. */
typedef struct {
    uint64_t avh, rvh;          /* acknowledged value, first value read */
    int64_t ainv, acomp;        /* the acknowledged (or placed) send's invoke, completion */
    int64_t nfmin;              /* earliest completion of a non-final read */
    int64_t ptop;               /* earliest completion of a poll whose highest offset is here */
    uint8_t fl;
    uint32_t aproc;             /* the acknowledged (or placed) send's process slot */
} Off;

typedef struct {
    int64_t first;              /* earliest completion of a member's non-final read */
    uint32_t reader;            /* the poll (id + 1) that read it first; NONE: two polls */
} GOff;

typedef struct {
    char *topic;
    int64_t topic_len, partition;
    int64_t cap;                /* offsets [0, cap) allocated */
    Off *o;
    uint32_t why;
    int64_t max_read, first_final, last_final;
    int64_t n_log, n_undecided;     /* the log's offsets (acknowledged and placed), undecided writes */
    int has_final;
} Part;

typedef struct {
    uint32_t part, group;
    int64_t top;                /* highest offset of the completed ok commits */
    int64_t start;              /* least offset of the group's ok assigns */
    int64_t cap;
    GOff *o;
    int64_t *pre, from, hi;     /* at-least-once: prefix maxima of `first` over [from, hi] */
} PG;

typedef struct {
    uint32_t head, tail;        /* op slot + 1 */
    uint8_t has_poll, has_ack;
    int64_t poll_last, ack_last;
    uint32_t part;
    uint8_t walked;             /* send order over placed records: seen one of this producer */
    int64_t walk_inv;           /* ... and the invoke of its latest, in offset order */
} SP;

typedef struct {
    int mode;                   /* -1: none declared, 0 at-least-once, 1 at-most-once */
    int64_t newest;             /* highest generation of the completed ok assigns */
} Group;

typedef struct {
    uint32_t group;
    uint8_t read_alone;         /* read records before any group was known for it */
} Proc;

typedef struct {
    uint32_t pg;
    int64_t offset, inv;
} Commit;

typedef struct {
    int64_t inv, placed;
    uint32_t proc;
} Info;

typedef struct {
    const char *global;         /* the reason for a history-wide flag, or NULL */
    int64_t rows, horizon, last_t, last_inv, last_inv_id;
    int any_invoke;
    uint32_t *idslot;           /* per id: 0 never invoked, DONE completed, else op slot + 1 */
    int64_t idcap;
    Vec ops;                    /* Op */
    uint32_t free_op;           /* free list (slot + 1) */
    Map pmap, procmap, gmap, spmap, pgmap, infomap;
    Vec parts, procs, groups, sps, pgs, commits, infos;
    Vec sends;                  /* (partition, value) keys of every send: unique, at the end */
    int64_t n_ops, n_sends, n_polls, n_commits;
    int64_t n_evidence;         /* info sends with an offset, info/fail polls with records */
    uint32_t last_part;         /* part_of's cache */
    int64_t last_tn, last_partition;
    uint8_t last_topic[64];
    uint8_t *codes;             /* per row of the segment: type << 3 | f (0xff: unknown) */
    int bytewise;
    int finished;               /* the segment's result-field rule was tested 8 rows at a time */
    int64_t codes_cap;
} State;

#define DONE UINT32_MAX
/* Bounds on the dense layouts: beyond them, history-wide (the kernel handles any shape). */
#define DENSE_SLACK 8
#define DENSE_MARGIN (1 << 20)

static void state_free(State *s) {
    free(s->idslot);
    free(s->codes);
    free(s->ops.p);
    for (uint32_t i = 0; i < s->parts.n; i++) {
        Part *p = &AT(s->parts, Part, i);
        free(p->topic);
        free(p->o);
    }
    for (uint32_t i = 0; i < s->pgs.n; i++) {
        free(AT(s->pgs, PG, i).o);
        free(AT(s->pgs, PG, i).pre);
    }
    free(s->parts.p);
    free(s->procs.p);
    free(s->groups.p);
    free(s->sps.p);
    free(s->pgs.p);
    free(s->commits.p);
    free(s->infos.p);
    map_free(&s->pmap);
    map_free(&s->procmap);
    map_free(&s->gmap);
    map_free(&s->spmap);
    map_free(&s->pgmap);
    free(s->sends.p);
    map_free(&s->infomap);
    free(s);
}

static State *state_new(void) {
    State *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->ops.size = sizeof(Op);
    s->parts.size = sizeof(Part);
    s->procs.size = sizeof(Proc);
    s->groups.size = sizeof(Group);
    s->sps.size = sizeof(SP);
    s->pgs.size = sizeof(PG);
    s->commits.size = sizeof(Commit);
    s->infos.size = sizeof(Info);
    s->sends.size = sizeof(uint64_t);
    s->last_t = INT64_MIN;
    s->last_part = NONE;
    if (map_init(&s->pmap, 64) || map_init(&s->procmap, 256) || map_init(&s->gmap, 16) ||
        map_init(&s->spmap, 1024) || map_init(&s->pgmap, 64) || map_init(&s->infomap, 64)) {
        state_free(s);
        return NULL;
    }
    return s;
}

/* Out of memory inside the pass: remembered, raised as MemoryError by the caller. */
static const char OOM[] = "out of memory";

static inline void global(State *s, const char *why) {
    if (!s->global)
        s->global = why;
}

/* Part p's per-offset arrays cover offset o. */
static int part_reach(State *s, Part *p, int64_t o) {
    if (o < p->cap)
        return 0;
    if (o >= DENSE_SLACK * s->horizon + DENSE_MARGIN) {
        global(s, "offsets too sparse for the dense layout");
        return -1;
    }
    int64_t cap = p->cap ? p->cap : 1024;
    while (cap <= o)
        cap *= 2;
Off *g = realloc(p->o, cap * sizeof *g);
    if (!g) {
        global(s, OOM);
        return -1;
    }
    for (int64_t j = p->cap; j < cap; j++)
        g[j] = (Off){.nfmin = BIG, .ptop = BIG};
    p->o = g;
    p->cap = cap;
    return 0;
}

static int pg_reach(State *s, PG *g, int64_t o) {
    if (o < g->cap)
        return 0;
    int64_t cap = g->cap ? g->cap : 1024;
    while (cap <= o)
        cap *= 2;
    GOff *f = realloc(g->o, cap * sizeof *f);
    if (!f) {
        global(s, OOM);
        return -1;
    }
    for (int64_t j = g->cap; j < cap; j++)
        f[j] = (GOff){.first = BIG, .reader = 0};
    g->o = f;
    g->cap = cap;
    return 0;
}

static uint32_t part_of_map(State *s, const uint8_t *t, int64_t tn, int64_t partition);

static uint32_t part_of(State *s, const uint8_t *t, int64_t tn, int64_t partition) {
    /* The last (topic, partition) seen: invokes of one partition come in runs. */
    if (s->last_part != NONE && tn == s->last_tn && partition == s->last_partition &&
        memcmp(t, s->last_topic, (size_t)tn) == 0)
        return s->last_part;
    uint32_t v = part_of_map(s, t, tn, partition);
    if (v != NONE && tn <= (int64_t)sizeof s->last_topic) {
        memcpy(s->last_topic, t, (size_t)tn);
        s->last_tn = tn;
        s->last_partition = partition;
        s->last_part = v;
    }
    return v;
}

static uint32_t part_of_map(State *s, const uint8_t *t, int64_t tn, int64_t partition) {
    uint64_t th = hbytes(t, tn);
    uint64_t key = th ^ mix((uint64_t)partition + 0x51);
    int fresh;
    uint32_t v = map_put(&s->pmap, key, s->parts.n, &fresh);
    if (v == UINT32_MAX)
        return NONE;
    if (fresh) {
        Part *p = vec_add(&s->parts);
        if (!p)
            return NONE;
        p->topic = malloc(tn ? tn : 1);
        if (!p->topic)
            return NONE;
        memcpy(p->topic, t, tn);
        p->topic_len = tn;
        p->partition = partition;
        p->max_read = -1;
    }
    return v;
}

static uint32_t slot_of(State *s, Map *m, Vec *v, uint64_t key) {
    int fresh;
    uint32_t x = map_put(m, key, v->n, &fresh);
    if (x == UINT32_MAX)
        return NONE;
    if (fresh && !vec_add(v))
        return NONE;
    return x;
}

static uint32_t group_of(State *s, uint64_t gh) {
    uint32_t before = s->groups.n;
    uint32_t g = slot_of(s, &s->gmap, &s->groups, gh);
    if (g != NONE && g == before) {
        AT(s->groups, Group, g).mode = -1;
        AT(s->groups, Group, g).newest = INT64_MIN;
    }
    return g;
}

static uint32_t proc_of(State *s, int64_t process) {
    uint32_t before = s->procs.n;
    uint32_t x = slot_of(s, &s->procmap, &s->procs, (uint64_t)process);
    if (x != NONE && x == before)
        AT(s->procs, Proc, x).group = NONE;
    return x;
}

static uint32_t pg_of(State *s, uint32_t part, uint32_t group) {
    uint32_t before = s->pgs.n;
    uint32_t x = slot_of(s, &s->pgmap, &s->pgs, ((uint64_t)part << 32) | group);
    if (x != NONE && x == before) {
        PG *g = &AT(s->pgs, PG, x);
        g->part = part;
        g->group = group;
        g->top = INT64_MIN;
        g->start = BIG;
    }
    return x;
}

static inline void flag(State *s, uint32_t part, uint32_t why) {
    AT(s->parts, Part, part).why |= why;
}

/* The order rules (poll order, send order) for one operation, in (invoke, id) order within
 * its (partition, process): _scan.c order_scan's rules. */
static void order_rule(State *s, Op *op) {
    SP *q = &AT(s->sps, SP, op->sp);
    if (op->kind == RESET) {
        q->has_poll = 0;
    } else if (op->kind == POLL) {
        if (q->has_poll && op->first != q->poll_last + 1)
            flag(s, q->part, R_POLL_ORDER);
        q->has_poll = 1;
        q->poll_last = op->last;
    } else if (op->kind == ACKED) {
        if (q->has_ack && op->first <= q->ack_last)
            flag(s, q->part, R_SEND_ORDER);
        q->has_ack = 1;
        q->ack_last = op->first;
    }
}

static void op_free(State *s, uint32_t slot) {
    AT(s->ops, Op, slot).next = s->free_op;
    s->free_op = slot + 1;
}

/* Retires the done operations at the head of a (partition, process) queue, in invoke order. */
static void sp_drain(State *s, uint32_t sp) {
    SP *q = &AT(s->sps, SP, sp);
    while (q->head) {
        uint32_t slot = q->head - 1;
        Op *op = &AT(s->ops, Op, slot);
        if (!op->done)
            break;
        order_rule(s, op);
        q->head = op->next;
        if (!q->head)
            q->tail = 0;
        op_free(s, slot);
    }
}

/* A non-failed assign or subscribe: the process's group, the group's delivery mode. */
static void joined(State *s, Op *op) {
    if (op->group == NONE)
        return;
    Proc *pr = &AT(s->procs, Proc, op->proc);
    if (pr->group != NONE && pr->group != op->group)
        global(s, "a consumer in two groups");
    if (pr->group == NONE && pr->read_alone)
        global(s, "a consumer read before its group was known");
    pr->group = op->group;
    if (op->delivery != 0xff) {
        Group *g = &AT(s->groups, Group, op->group);
        if (g->mode >= 0 && g->mode != op->delivery)
            global(s, "a group with two delivery modes");
        g->mode = op->delivery;
    }
}

static void info_send(State *s, Op *op) {
    uint64_t key = op->vh ^ mix(((uint64_t)op->part << 1) | 1);
    int fresh;
    uint32_t x = map_put(&s->infomap, key, s->infos.n, &fresh);
    if (x == UINT32_MAX) {
        global(s, OOM);
        return;
    }
    if (fresh) {
        Info *in = vec_add(&s->infos);
        if (!in) {
            global(s, OOM);
            return;
        }
        in->inv = op->inv;
        in->placed = -1;
        in->proc = op->proc;
    }
}

/* ------------------------------------------------------------------------------------------
 * One event. */

static void on_invoke(State *s, Col *c, int64_t i, int f, int64_t id, int64_t process, int64_t t) {
    if (s->any_invoke && t == s->last_inv && id < s->last_inv_id)
        global(s, "invokes at one time not in id order");
    s->any_invoke = 1;
    s->last_inv = t;
    s->last_inv_id = id;
    int has_topic = lvalid(&c[C_TOPIC].v, i), has_part = lvalid(&c[C_PARTITION].v, i);
    int has_value = lvalid(&c[C_VALUE].v, i), has_group = lvalid(&c[C_GROUP].v, i);
    int has_off = lvalid(&c[C_OFFSET].v, i);
    if (f != F_CONFIG && (!has_topic || !has_part))
        return global(s, "an invoke lacks topic or partition");
    if ((f == F_SEND && !has_value) || (f == F_COMMIT && (!has_group || !has_off)))
        return global(s, "an invoke lacks a needed field");
    if (id >= s->idcap) {
        if (id >= DENSE_SLACK * s->horizon + DENSE_MARGIN)
            return global(s, "ids too sparse for the dense layout");
        int64_t cap = s->idcap ? s->idcap : 1 << 16;
        while (cap <= id)
            cap *= 2;
        uint32_t *g = realloc(s->idslot, cap * sizeof *g);
        if (!g)
            return global(s, OOM);
        memset(g + s->idcap, 0, (cap - s->idcap) * sizeof *g);
        s->idslot = g;
        s->idcap = cap;
    }
    if (s->idslot[id])
        return global(s, "an id invoked twice");
    uint32_t slot;
    if (s->free_op) {
        slot = s->free_op - 1;
        s->free_op = AT(s->ops, Op, slot).next;
    } else {
        if (!vec_add(&s->ops))
            return global(s, OOM);
        slot = s->ops.n - 1;
    }
    s->idslot[id] = slot + 1;
    Op *op = &AT(s->ops, Op, slot);
    /* Every field set here (a memset of the struct cost more than the fields: rep stos). */
    op->id = id;
    op->inv = t;
    op->off = op->gen = op->top_at_inv = op->newest_at_inv = op->first = op->last = 0;
    op->vh = 0;
    op->f = (uint8_t)f;
    op->part = op->sp = op->pg = op->group = NONE;
    op->next = 0;
    op->delivery = 0xff;
    op->done = op->kind = 0;
    op->proc = proc_of(s, process);
    if (op->proc == NONE)
        return global(s, OOM);
    op->has_off = (uint8_t)has_off;
    if (has_off)
        op->off = lint(&c[C_OFFSET].v, i);
    op->has_gen = (uint8_t)lvalid(&c[C_GENERATION].v, i);
    if (op->has_gen)
        op->gen = lint(&c[C_GENERATION].v, i);
    op->final = lvalid(&c[C_FINAL].v, i) && lbool(&c[C_FINAL].v, i);
    if (lvalid(&c[C_DELIVERY].v, i)) {
        const uint8_t *p;
        int64_t n;
        lstr(&c[C_DELIVERY].v, i, &p, &n);
        op->delivery = eq(p, n, "at-least-once") ? 0 : 1;     /* known: checked by the row rules */
    }
    if (has_group) {
        const uint8_t *p;
        int64_t n;
        lstr(&c[C_GROUP].v, i, &p, &n);
        op->group = group_of(s, hbytes(p, n));
        if (op->group == NONE)
            return global(s, OOM);
    }
    s->n_ops++;
    if (f == F_CONFIG)
        return;
    const uint8_t *tp;
    int64_t tn;
    lstr(&c[C_TOPIC].v, i, &tp, &tn);
    int64_t partition = lint(&c[C_PARTITION].v, i);
    if (partition >= (1 << 24))
        return global(s, "a partition number too high for the dense layout");
    op->part = part_of(s, tp, tn, partition);
    if (op->part == NONE)
        return global(s, OOM);
    if (f == F_SEND) {
        s->n_sends++;
        const uint8_t *p;
        int64_t n;
        lstr(&c[C_VALUE].v, i, &p, &n);
        op->vh = hbytes(p, n);
        uint64_t *k = vec_add(&s->sends);
        if (!k)
            return global(s, OOM);
        *k = op->vh ^ mix(((uint64_t)op->part << 1) | 1);
    }
    if (f == F_COMMIT) {
        op->pg = pg_of(s, op->part, op->group);
        if (op->pg == NONE)
            return global(s, OOM);
        op->top_at_inv = AT(s->pgs, PG, op->pg).top;
        op->newest_at_inv = AT(s->groups, Group, op->group).newest;
        return;
    }
    /* send, poll, assign, subscribe: queued for the order rules. */
    uint32_t before = s->sps.n;
    op->sp = slot_of(s, &s->spmap, &s->sps, ((uint64_t)op->part << 32) | op->proc);
    if (op->sp == NONE)
        return global(s, OOM);
    SP *q = &AT(s->sps, SP, op->sp);
    if (op->sp == before)
        q->part = op->part;
    op->next = 0;
    if (q->tail)
        AT(s->ops, Op, q->tail - 1).next = slot + 1;
    else
        q->head = slot + 1;
    q->tail = slot + 1;
}

/* A completion (or, at the end, an invoke never completed: type T_INFO, c NULL). */
static void on_complete(State *s, Col *c, int64_t i, uint32_t slot, int type, int64_t t) {
    Op *op = &AT(s->ops, Op, slot);
    Part *p = op->part != NONE ? &AT(s->parts, Part, op->part) : NULL;
    int64_t off = op->off;
    int has_off = op->has_off;
    if (c && lvalid(&c[C_OFFSET].v, i)) {
        off = lint(&c[C_OFFSET].v, i);
        has_off = 1;
    }
    op->kind = SKIP;
    if (op->f == F_SEND) {
        if (type == T_OK) {
            if (!has_off)
                return global(s, "an ok send without an offset");
            if (part_reach(s, p, off) < 0)
                return;
            if (p->o[off].fl & O_ACK)
                flag(s, op->part, R_DUP_ACK);
            p->o[off].fl |= O_ACK;
            p->o[off].avh = op->vh;
            p->o[off].ainv = op->inv;
            p->o[off].aproc = op->proc;
            p->o[off].acomp = t;
            op->kind = ACKED;
            op->first = off;
        } else if (type == T_INFO) {
            info_send(s, op);
            if (c && lvalid(&c[C_OFFSET].v, i))
                s->n_evidence++;        /* the oracle's to judge (pipeline/file_check.py) */
        } else if (c && lvalid(&c[C_OFFSET].v, i)) {
            s->n_evidence++;            /* a failed send with an offset: the reader refuses it */
        }
    } else if (op->f == F_POLL && type != T_OK) {
        if (c && lvalid(&c[C_OFFSETS].v, i))
            s->n_evidence++;            /* records of an info/fail poll: the oracle's */
    } else if (op->f == F_POLL && type == T_OK) {
        s->n_polls++;
        if (op->final) {
            if (!p->has_final || op->inv < p->first_final)
                p->first_final = op->inv;
            if (!p->has_final || op->inv > p->last_final)
                p->last_final = op->inv;
            p->has_final = 1;
        }
        Col *os = &c[C_OFFSETS], *vs = &c[C_VALUES];
        if (!lvalid(&os->v, i) || !lvalid(&vs->v, i))
            return global(s, "an ok poll without offsets or values");
        int64_t a, b, va, vb;
        lrange(&os->v, i, &a, &b);
        lrange(&vs->v, i, &va, &vb);
        if (b - a != vb - va)
            return global(s, "a poll's offsets and values differ in length");
        if (b == a)
            goto done;
        Proc *pr = &AT(s->procs, Proc, op->proc);
        PG *g = NULL;
        if (!op->final) {
            if (pr->group == NONE)
                pr->read_alone = 1;
            else {
                uint32_t x = pg_of(s, op->part, pr->group);
                if (x == NONE)
                    return global(s, OOM);
                g = &AT(s->pgs, PG, x);
            }
        }
        /* The offsets first (one stream of integers): nulls, range, steps, the highest; the
         * leaves are copied so that the stores below cannot alias them. */
        const Leaf oc = os->child, vc = vs->child;
        int64_t prev = 0, top = -1;
        for (int64_t j = a; j < b; j++) {
            if (!lvalid(&oc, j))
                return global(s, "a null inside a poll's records");
            int64_t o = lint(&oc, j);
            if (o < 0 || o >= ((int64_t)1 << 32))
                return global(s, "an offset out of range");
            if (j > a && o != prev + 1)
                flag(s, op->part, R_STEP);
            prev = o;
            if (o > top)
                top = o;
        }
        if (part_reach(s, p, top) < 0 || (g && pg_reach(s, g, top) < 0))
            return;
        Off *po = p->o;
        GOff *go = g ? g->o : NULL;
        uint32_t me = (uint32_t)op->id + 1;
        int final = op->final, odd = 0;
        for (int64_t j = a, k = va; j < b; j++, k++) {
            if (!lvalid(&vc, k))
                return global(s, "a null inside a poll's records");
            int64_t o = lint(&oc, j);
            const uint8_t *vp;
            int64_t vn;
            lstr(&vc, k, &vp, &vn);
            uint64_t vh = hbytes(vp, vn);
            Off *x = &po[o];
            uint8_t fl = x->fl;
            if (!(fl & O_READ)) {
                x->rvh = vh;
                fl |= O_READ;
            } else {
                odd |= x->rvh != vh;
            }
            if (final) {
                fl |= O_FINAL;
            } else {
                if (t < x->nfmin)
                    x->nfmin = t;
                if (go) {
                    if (t < go[o].first)
                        go[o].first = t;
                    if (go[o].reader == 0)
                        go[o].reader = me;
                    else if (go[o].reader != me)
                        go[o].reader = NONE;
                }
            }
            x->fl = fl;
        }
        if (odd)
            flag(s, op->part, R_ODD);
        if (top > p->max_read)
            p->max_read = top;
        p->o[top].fl |= O_TOP;
        if (t < p->o[top].ptop)
            p->o[top].ptop = t;
        op->kind = POLL;
        op->first = lint(&os->child, a);
        op->last = lint(&os->child, b - 1);
    } else if (op->f == F_POLL) {
        /* fail or info: skip */
    } else if (op->f == F_COMMIT && type == T_OK) {
        s->n_commits++;
        PG *g = &AT(s->pgs, PG, op->pg);
        if (op->top_at_inv != INT64_MIN && op->top_at_inv > off)
            flag(s, op->part, R_REGRESS);
        if (op->has_gen && op->newest_at_inv != INT64_MIN && op->newest_at_inv > op->gen)
            flag(s, op->part, R_FENCE);
        if (off > g->top)
            g->top = off;
        Commit *cm = vec_add(&s->commits);
        if (!cm)
            return global(s, OOM);
        cm->pg = op->pg;
        cm->offset = off;
        cm->inv = op->inv;
    } else if ((op->f == F_ASSIGN || op->f == F_SUBSCRIBE) && type != T_FAIL) {
        op->kind = RESET;
        joined(s, op);
        if (type == T_OK && op->group != NONE) {
            int64_t gen = op->gen;
            int has_gen = op->has_gen;
            if (c && lvalid(&c[C_GENERATION].v, i)) {
                gen = lint(&c[C_GENERATION].v, i);
                has_gen = 1;
            }
            Group *gr = &AT(s->groups, Group, op->group);
            if (has_gen && gen > gr->newest)
                gr->newest = gen;
            if (has_off) {
                uint32_t x = pg_of(s, op->part, op->group);
                if (x == NONE)
                    return global(s, OOM);
                PG *g = &AT(s->pgs, PG, x);
                if (off < g->start)
                    g->start = off;
            }
        }
    }
done:
    op->done = 1;
    if (op->sp != NONE)
        sp_drain(s, op->sp);
    else
        op_free(s, slot);
}

/* Fields a completion may carry beyond the ones every event has, by operation
 * (traces/history.py RESULT_FIELDS). */
static const uint32_t RESULTS[6] = {
    [F_SEND] = 1u << C_OFFSET,
    [F_POLL] = (1u << C_OFFSETS) | (1u << C_VALUES),
    [F_COMMIT] = 0,
    [F_ASSIGN] = (1u << C_GENERATION) | (1u << C_OFFSET),
    [F_SUBSCRIBE] = (1u << C_GENERATION) | (1u << C_OFFSET),
    [F_CONFIG] = 0,
};
static const int OWN_LESS[] = {C_TOPIC, C_PARTITION, C_KEY, C_VALUE, C_OFFSET, C_OFFSETS,
                               C_VALUES, C_GROUP, C_GENERATION, C_FINAL, C_DELIVERY, C_RETRIES,
                               C_MIF, C_IDEMP, C_ACKS};

/* type and f as codes: by length and first four bytes, then the whole name. */
static inline int type_code(const uint8_t *p, int64_t n) {
    switch (n) {
    case 6: return memcmp(p, "invoke", 6) == 0 ? T_INVOKE : -1;
    case 2: return memcmp(p, "ok", 2) == 0 ? T_OK : -1;
    case 4: return memcmp(p, "fail", 4) == 0 ? T_FAIL : memcmp(p, "info", 4) == 0 ? T_INFO : -1;
    default: return -1;
    }
}

static inline int f_code(const uint8_t *p, int64_t n) {
    switch (n) {
    case 4: return memcmp(p, "send", 4) == 0 ? F_SEND : memcmp(p, "poll", 4) == 0 ? F_POLL : -1;
    case 6: return memcmp(p, "commit", 6) == 0 ? F_COMMIT : memcmp(p, "assign", 6) == 0 ? F_ASSIGN : -1;
    case 9: return memcmp(p, "subscribe", 9) == 0 ? F_SUBSCRIBE : -1;
    case 15: return memcmp(p, "producer_config", 15) == 0 ? F_CONFIG : -1;
    default: return -1;
    }
}

/* Validity of rows r..r+7 of a column whose bits are byte-aligned there. */
static inline uint8_t vbyte(const Leaf *l, int64_t r) {
    if (l->kind == K_NULL)
        return 0;
    if (!l->bits)
        return 0xff;
    return l->bits[(l->off + r) >> 3];
}

/* The codes of a segment's n rows into s->codes, and the reader's rule that a completion
 * carries only its operation's result fields, tested 8 rows at a time on the validity bytes
 * (a test per row and field was a fifth of the pass). Returns -1 on no memory. */
static int segment_codes(State *s, Col *c, int64_t n) {
    if (n > s->codes_cap) {
        uint8_t *g = realloc(s->codes, n);
        if (!g)
            return -1;
        s->codes = g;
        s->codes_cap = n;
    }
    uint8_t *codes = s->codes;
    for (int64_t i = 0; i < n; i++) {
        if (!lvalid(&c[C_TYPE].v, i) || !lvalid(&c[C_F].v, i)) {
            codes[i] = 0xff;
            continue;
        }
        const uint8_t *p;
        int64_t len;
        lstr(&c[C_TYPE].v, i, &p, &len);
        int type = type_code(p, len);
        lstr(&c[C_F].v, i, &p, &len);
        int f = f_code(p, len);
        codes[i] = type < 0 || f < 0 ? 0xff : (uint8_t)(type << 3 | f);
    }
    int aligned = 1;
    for (size_t k = 0; k < sizeof OWN_LESS / sizeof *OWN_LESS; k++)
        aligned &= c[OWN_LESS[k]].v.bits == NULL || (c[OWN_LESS[k]].v.off & 7) == 0;
    if (!aligned) {
        s->bytewise = 0;
        return 0;
    }
    s->bytewise = 1;
    for (int64_t r = 0; r < n && !s->global; r += 8) {
        uint8_t comp = 0, a_off = 0, a_list = 0, a_gen = 0;
        for (int j = 0; j < 8 && r + j < n; j++) {
            uint8_t x = codes[r + j];
            if (x == 0xff || (x >> 3) == T_INVOKE)
                continue;
            uint8_t bit = (uint8_t)(1u << j), f = x & 7;
            comp |= bit;
            if (f == F_SEND || f == F_ASSIGN || f == F_SUBSCRIBE)
                a_off |= bit;
            if (f == F_POLL)
                a_list |= bit;
            if (f == F_ASSIGN || f == F_SUBSCRIBE)
                a_gen |= bit;
        }
        if (!comp)
            continue;
        uint8_t bad = 0;
        for (size_t k = 0; k < sizeof OWN_LESS / sizeof *OWN_LESS; k++) {
            int col = OWN_LESS[k];
            uint8_t allowed = col == C_OFFSET ? a_off : (col == C_OFFSETS || col == C_VALUES) ? a_list
                            : col == C_GENERATION ? a_gen : 0;
            bad |= vbyte(&c[col].v, r) & comp & (uint8_t)~allowed;
        }
        if (bad)
            global(s, "a completion restates a field");
    }
    return 0;
}

static void on_row(State *s, Col *c, int64_t i) {
    if (!lvalid(&c[C_ID].v, i) || !lvalid(&c[C_TYPE].v, i) || !lvalid(&c[C_PROCESS].v, i) ||
        !lvalid(&c[C_F].v, i) || !lvalid(&c[C_MONO].v, i))
        return global(s, "a row lacks a required field");
    int64_t id = lint(&c[C_ID].v, i), process = lint(&c[C_PROCESS].v, i);
    int64_t t = lint(&c[C_MONO].v, i);
    if (id < 0 || id >= ((int64_t)1 << 32) || process < 0 || process >= ((int64_t)1 << 32))
        return global(s, "an id or process out of range");
    if (t < s->last_t)
        return global(s, "events not in time order");
    s->last_t = t;
    const uint8_t *p;
    int64_t n;
    uint8_t code = s->codes[i];
    if (code == 0xff)
        return global(s, "an unknown type or operation");
    int type = code >> 3, f = code & 7;
    if (lvalid(&c[C_DELIVERY].v, i)) {
        lstr(&c[C_DELIVERY].v, i, &p, &n);
        if (!eq(p, n, "at-least-once") && !eq(p, n, "at-most-once"))
            return global(s, "an unknown delivery mode");
    }
    if (lvalid(&c[C_OFFSET].v, i)) {
        int64_t o = lint(&c[C_OFFSET].v, i);
        if (o < 0 || o >= ((int64_t)1 << 32))
            return global(s, "an offset out of range");
    }
    if (lvalid(&c[C_PARTITION].v, i) && lint(&c[C_PARTITION].v, i) < 0)
        return global(s, "a negative partition");
    /* An ok poll's offsets are checked with its records (on_complete). */
    if (lvalid(&c[C_OFFSETS].v, i) && !(type == T_OK && f == F_POLL)) {
        int64_t a, b;
        lrange(&c[C_OFFSETS].v, i, &a, &b);
        for (int64_t j = a; j < b; j++)
            if (lvalid(&c[C_OFFSETS].child, j)) {
                int64_t o = lint(&c[C_OFFSETS].child, j);
                if (o < 0 || o >= ((int64_t)1 << 32))
                    return global(s, "an offset out of range");
            }
    }
    if (type == T_INVOKE)
        return on_invoke(s, c, i, f, id, process, t);
    if (!s->bytewise) {
        uint32_t allowed = RESULTS[f];
        for (size_t k = 0; k < sizeof OWN_LESS / sizeof *OWN_LESS; k++)
            if (!(allowed & (1u << OWN_LESS[k])) && lvalid(&c[OWN_LESS[k]].v, i))
                return global(s, "a completion restates a field");
    }
    if (id >= s->idcap || s->idslot[id] == 0 || s->idslot[id] == DONE)
        return global(s, "a completion without a pending invoke");
    uint32_t slot = s->idslot[id] - 1;
    Op *op = &AT(s->ops, Op, slot);
    if (op->f != f)
        return global(s, "a completion's operation differs from its invoke's");
    if (map_get(&s->procmap, (uint64_t)process) != op->proc + 1)
        return global(s, "a completion's process differs from its invoke's");
    if (t < op->inv)
        return global(s, "a completion before its invoke");
    s->idslot[id] = DONE;
    on_complete(s, c, i, slot, type, t);
}

/* ------------------------------------------------------------------------------------------
 * The end: invokes never completed, then each partition's rules over its offsets. */

/* Whether two of `n` keys are equal: an LSD radix sort (16-bit digits) and one look at
 * neighbours. Linear in n (a hash set of the sends was a cache miss per send). -1: no memory. */
static int any_twice(uint64_t *a, uint64_t n) {
    if (n < 2)
        return 0;
    uint64_t *tmp = malloc(n * sizeof *tmp);
    uint64_t *cnt = malloc(65536 * sizeof *cnt);
    if (!tmp || !cnt) {
        free(tmp);
        free(cnt);
        return -1;
    }
    uint64_t *from = a, *to = tmp;
    for (int shift = 0; shift < 64; shift += 16) {
        memset(cnt, 0, 65536 * sizeof *cnt);
        for (uint64_t i = 0; i < n; i++)
            cnt[(from[i] >> shift) & 0xffff]++;
        uint64_t sum = 0;
        for (int d = 0; d < 65536; d++) {
            uint64_t x = cnt[d];
            cnt[d] = sum;
            sum += x;
        }
        for (uint64_t i = 0; i < n; i++)
            to[cnt[(from[i] >> shift) & 0xffff]++] = from[i];
        uint64_t *t = from;
        from = to;
        to = t;
    }
    int twice = 0;
    for (uint64_t i = 1; i < n && !twice; i++)
        twice = from[i] == from[i - 1];
    free(tmp);
    free(cnt);
    return twice;
}

static void finish(State *s, int64_t *records, int64_t *undecided) {
    /* Values are unique per partition (the reader's rule; the checkers identify records by
     * value). */
    int twice = any_twice((uint64_t *)s->sends.p, s->sends.n);
    if (twice < 0)
        return global(s, OOM);
    if (twice)
        return global(s, "a value sent twice to one partition");
    /* Invokes never completed are info operations (an assign still counts as one). A queued
     * one is retired by its queue in invoke order (sp_drain stops at the first not done). */
    for (uint32_t slot = 0; slot < s->ops.n && !s->global; slot++) {
        Op *op = &AT(s->ops, Op, slot);
        if (op->done || op->id >= s->idcap || s->idslot[op->id] != slot + 1)
            continue;
        s->idslot[op->id] = DONE;
        on_complete(s, NULL, 0, slot, T_INFO, 0);
    }
    if (s->global)
        return;
    /* Group reads before their group was known (at the end, a never-completed assign). */
    for (uint32_t x = 0; x < s->procs.n; x++) {
        Proc *pr = &AT(s->procs, Proc, x);
        if (pr->read_alone && pr->group != NONE)
            return global(s, "a consumer read before its group was known");
    }
    for (uint32_t k = 0; k < s->parts.n; k++) {
        Part *p = &AT(s->parts, Part, k);
        int64_t lo = -1, hi = -1, n = 0;
        int placed_any = 0;
        /* Records at unacknowledged offsets: placed by an info send of the same value. */
        for (int64_t o = 0; o < p->cap; o++) {
            uint8_t fl = p->o[o].fl;
            if ((fl & O_READ) && (fl & O_ACK) && p->o[o].rvh != p->o[o].avh)
                p->why |= R_ODD;
            if ((fl & O_READ) && !(fl & O_ACK)) {
                uint32_t x = map_get(&s->infomap, p->o[o].rvh ^ mix(((uint64_t)k << 1) | 1));
                if (!x) {
                    p->why |= R_ODD;
                } else {
                    Info *in = &AT(s->infos, Info, x - 1);
                    if (in->placed >= 0 && in->placed != o)
                        p->why |= R_PLACE;
                    in->placed = o;
                    fl |= O_PLACED;
                    placed_any = 1;
                    p->o[o].fl = fl;
                    p->o[o].ainv = in->inv;
                    p->o[o].aproc = in->proc;
                    p->o[o].acomp = BIG;          /* a placed offset has no completion */
                }
            }
            if (fl & (O_ACK | O_PLACED)) {
                if (lo < 0)
                    lo = o;
                hi = o;
                n++;
            }
        }
        if (n && hi - lo + 1 != n)
            p->why |= R_GAP;
        /* Send order with the unacknowledged sends that were read (placed): per producer, the
         * invokes of its records must increase in offset order. */
        for (int64_t o = 0; placed_any && o < p->cap; o++) {
            if (!(p->o[o].fl & (O_ACK | O_PLACED)))
                continue;
            uint32_t x = map_get(&s->spmap, ((uint64_t)k << 32) | p->o[o].aproc);
            if (!x)
                continue;
            SP *q = &AT(s->sps, SP, x - 1);
            if (q->walked && q->walk_inv > p->o[o].ainv)
                p->why |= R_SEND_ORDER;
            q->walked = 1;
            q->walk_inv = p->o[o].ainv;
        }
        /* Writes, lost reads, linearizability. */
        int64_t latest = INT64_MIN;     /* latest invoke of an append at or below o */
        for (int64_t o = 0; o < p->cap; o++) {
            uint8_t fl = p->o[o].fl;
            int in_log = (fl & (O_ACK | O_PLACED)) != 0;
            if ((fl & O_ACK) && !(fl & O_READ)) {
                if (o < p->max_read)
                    p->why |= R_LOST;
                else if (p->has_final && p->last_final > p->o[o].acomp)
                    p->why |= R_UNSEEN;
                else
                    ++*undecided, ++p->n_undecided;
            }
            if (p->has_final && p->o[o].nfmin < p->first_final && !(fl & O_FINAL))
                p->why |= R_LOST_READ;
            if ((fl & O_ACK) && latest != INT64_MIN && latest > p->o[o].acomp)
                p->why |= R_LIN;
            if (in_log && p->o[o].ainv > latest)
                latest = p->o[o].ainv;
            if (fl & O_TOP) {
                if (!in_log || latest == INT64_MIN || latest > p->o[o].ptop)
                    p->why |= R_LIN;
            }
        }
        if (!p->why)
            *records += n;
        p->n_log = n;
    }
    /* Delivery at most once: no offset delivered to an at-most-once group by two polls. */
    for (uint32_t x = 0; x < s->pgs.n; x++) {
        PG *g = &AT(s->pgs, PG, x);
        if (AT(s->groups, Group, g->group).mode != 1)
            continue;
        for (int64_t o = 0; o < g->cap; o++)
            if (g->o[o].reader == NONE) {
                flag(s, g->part, R_AMO);
                break;
            }
    }
    /* Delivery at least once: every log offset from the group's start below a commit was read
     * by a member before the commit began (the prefix maximum of first reads, at the highest
     * log offset below the commit). Partitions already flagged are skipped (dense logs only
     * otherwise). */
    for (uint32_t x = 0; x < s->commits.n; x++) {
        Commit *cm = &AT(s->commits, Commit, x);
        PG *g = &AT(s->pgs, PG, cm->pg);
        Part *p = &AT(s->parts, Part, g->part);
        if (AT(s->groups, Group, g->group).mode != 0 || p->why)
            continue;
        if (!g->pre) {
            /* Once per (partition, group): the log's range (dense: the partition is not
             * flagged) and the prefix maxima of first reads from the group's start. */
            int64_t lo = -1, hi = -1;
            for (int64_t o = 0; o < p->cap; o++)
                if (p->o[o].fl & (O_ACK | O_PLACED)) {
                    if (lo < 0)
                        lo = o;
                    hi = o;
                }
            g->from = g->start == BIG ? 0 : g->start;
            if (g->from < lo)
                g->from = lo;
            g->hi = hi;
            g->pre = malloc((hi >= g->from ? hi - g->from + 1 : 1) * sizeof *g->pre);
            if (!g->pre)
                return global(s, OOM);
            int64_t worst = INT64_MIN;
            for (int64_t o = g->from; lo >= 0 && o <= hi; o++) {
                int64_t fr = o < g->cap ? g->o[o].first : BIG;
                if (fr > worst)
                    worst = fr;
                g->pre[o - g->from] = worst;
            }
        }
        int64_t at = cm->offset - 1 < g->hi ? cm->offset - 1 : g->hi;
        if (g->hi < 0 || at < g->from)
            continue;
        if (g->pre[at - g->from] > cm->inv)
            flag(s, g->part, R_ALO);
    }
}

/* ------------------------------------------------------------------------------------------
 * Python interface: new() -> state; feed(state, frame); finish(state) -> dict. */

static void capsule_free(PyObject *cap) {
    State *s = PyCapsule_GetPointer(cap, "kv_fused");
    if (s)
        state_free(s);
}

static PyObject *fused_new(PyObject *mod, PyObject *unused) {
    State *s = state_new();
    if (!s)
        return PyErr_NoMemory();
    PyObject *cap = PyCapsule_New(s, "kv_fused", capsule_free);
    if (!cap)
        state_free(s);
    return cap;
}

static State *state_arg(PyObject *cap) {
    State *s = PyCapsule_GetPointer(cap, "kv_fused");
    if (s && s->finished) {
        PyErr_SetString(PyExc_ValueError, "feed or finish after finish");
        return NULL;
    }
    return s;
}

/* One column's chunks, as its Arrow stream yields them (read in place, released at the end). */
typedef struct {
    PyObject *capsule;
    int kind, ckind;
    struct ArrowArray *chunks;
    int64_t n, cap, len;
} Chunks;

static void chunks_free(Chunks *c) {
    for (int64_t k = 0; k < c->n; k++)
        if (c->chunks[k].release)
            c->chunks[k].release(&c->chunks[k]);
    free(c->chunks);
    Py_CLEAR(c->capsule);
}

static int type_ok(int k, int kind, int ckind) {
    switch (k) {
    case C_ID: case C_PROCESS: case C_OFFSET: case C_GENERATION: case C_MONO:
        return kind == K_I64 || kind == K_NULL;
    case C_PARTITION: case C_RETRIES: case C_MIF:
        return kind == K_I32 || kind == K_I64 || kind == K_NULL;
    case C_FINAL: case C_IDEMP:
        return kind == K_BOOL || kind == K_NULL;
    case C_OFFSETS:
        return kind == K_NULL || ((kind == K_LIST || kind == K_LLIST) && ckind == K_I64);
    case C_VALUES:
        return kind == K_NULL || ((kind == K_LIST || kind == K_LLIST) &&
                                  (ckind == K_STR || ckind == K_LSTR || ckind == K_VIEW));
    default:
        return kind == K_STR || kind == K_LSTR || kind == K_VIEW || kind == K_NULL;
    }
}

/* Reads column k's stream into `c`. Returns 0, or -1 with an exception set. */
static int chunks_read(PyObject *obj, int k, Chunks *c) {
    memset(c, 0, sizeof *c);
    c->capsule = PyObject_CallMethod(obj, "__arrow_c_stream__", NULL);
    if (!c->capsule)
        return -1;
    struct ArrowArrayStream *st = PyCapsule_GetPointer(c->capsule, "arrow_array_stream");
    if (!st)
        return -1;
    struct ArrowSchema sc;
    memset(&sc, 0, sizeof sc);
    if (st->get_schema(st, &sc) != 0) {
        PyErr_Format(PyExc_ValueError, "feed: column %s has no Arrow schema", COLS[k]);
        return -1;
    }
    c->kind = kind_of(sc.format);
    c->ckind = -1;
    if ((c->kind == K_LIST || c->kind == K_LLIST) && sc.n_children == 1)
        c->ckind = kind_of(sc.children[0]->format);
    int ok = c->kind >= 0 && type_ok(k, c->kind, c->ckind);
    if (!ok)
        PyErr_Format(PyExc_TypeError, "feed: column %s of Arrow format '%s'", COLS[k], sc.format);
    sc.release(&sc);
    if (!ok)
        return -1;
    for (;;) {
        if (c->n == c->cap) {
            int64_t cap = c->cap ? 2 * c->cap : 8;
            struct ArrowArray *g = realloc(c->chunks, cap * sizeof *g);
            if (!g) {
                PyErr_NoMemory();
                return -1;
            }
            c->chunks = g;
            c->cap = cap;
        }
        struct ArrowArray *a = &c->chunks[c->n];
        memset(a, 0, sizeof *a);
        if (st->get_next(st, a) != 0) {
            PyErr_Format(PyExc_ValueError, "feed: column %s: Arrow stream error", COLS[k]);
            return -1;
        }
        if (!a->release)
            return 0;                               /* the end of the stream */
        c->len += a->length;
        c->n++;
    }
}

/* feed(state, columns): the next events of the history, in file order: a sequence of the
 * COLS columns (anything with __arrow_c_stream__: polars Series), of one length, each in any
 * number of chunks, read in place (a frame's own stream would copy them into one). */
static PyObject *fused_feed(PyObject *mod, PyObject *args) {
    PyObject *cap, *seq;
    if (!PyArg_ParseTuple(args, "OO", &cap, &seq))
        return NULL;
    State *s = state_arg(cap);
    if (!s)
        return NULL;
    PyObject *fast = PySequence_Fast(seq, "feed: columns must be a sequence");
    if (!fast)
        return NULL;
    if (PySequence_Fast_GET_SIZE(fast) != NCOL) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "feed: expected %d columns", NCOL);
        return NULL;
    }
    Chunks ch[NCOL];
    memset(ch, 0, sizeof ch);
    PyObject *out = NULL;
    for (int k = 0; k < NCOL; k++)
        if (chunks_read(PySequence_Fast_GET_ITEM(fast, k), k, &ch[k]) < 0)
            goto done;
    for (int k = 1; k < NCOL; k++)
        if (ch[k].len != ch[0].len) {
            PyErr_SetString(PyExc_ValueError, "feed: columns of different lengths");
            goto done;
        }
    /* Segments between chunk boundaries: every column in one chunk, its Col set once. */
    int64_t at[NCOL], base[NCOL];          /* each column's chunk and its first row */
    memset(at, 0, sizeof at);
    memset(base, 0, sizeof base);
    Col c[NCOL];
    int64_t row = 0, total = ch[0].len;
    s->horizon = s->rows + total;
    while (row < total && !s->global) {
        int64_t end = total;
        for (int k = 0; k < NCOL; k++) {
            while (at[k] < ch[k].n && base[k] + ch[k].chunks[at[k]].length <= row) {
                base[k] += ch[k].chunks[at[k]].length;
                at[k]++;
            }
            struct ArrowArray *a = &ch[k].chunks[at[k]];
            if (base[k] + a->length < end)
                end = base[k] + a->length;
            leaf_set(&c[k].v, ch[k].kind, a, row - base[k]);
            if (ch[k].ckind >= 0)
                leaf_set(&c[k].child, ch[k].ckind, a->children[0], 0);
        }
        int64_t n = end - row;
        if (segment_codes(s, c, n) < 0)
            global(s, OOM);
        Py_BEGIN_ALLOW_THREADS
        for (int64_t i = 0; i < n && !s->global; i++)
            on_row(s, c, i);
        Py_END_ALLOW_THREADS
        row = end;
    }
    s->rows += total;
    if (s->global == OOM) {
        PyErr_NoMemory();
        goto done;
    }
    out = Py_None;
    Py_INCREF(out);
done:
    for (int k = 0; k < NCOL; k++)
        chunks_free(&ch[k]);
    Py_DECREF(fast);
    return out;
}

static const char *const WHY[] = {"duplicate-ack", "odd-record", "placed-twice", "log-gap",
                                  "poll-step", "poll-order", "send-order", "lost-write",
                                  "unseen-write", "lost-read", "linearizable",
                                  "commit-regression", "fenced-commit", "at-least-once",
                                  "at-most-once"};

/* finish(state) -> dict: global (reason or None), flagged [(topic, partition, [rules])],
 * parts [(topic, partition, log offsets, undecided writes)], pool (operation slots used),
 * ops, sends, polls, records (of unflagged partitions), undecided, consumer_examined. */
static PyObject *fused_finish(PyObject *mod, PyObject *cap) {
    State *s = state_arg(cap);
    if (!s)
        return NULL;
    int64_t records = 0, undecided = 0;
    s->finished = 1;            /* finish changes the per-offset state: once only */
    if (!s->global)
        finish(s, &records, &undecided);
    if (s->global == OOM)
        return PyErr_NoMemory();
    int64_t amo = 0;
    for (uint32_t g = 0; g < s->groups.n; g++)
        amo += AT(s->groups, Group, g).mode == 1;
    PyObject *flagged = PyList_New(0);
    if (!flagged)
        return NULL;
    for (uint32_t k = 0; k < s->parts.n && !s->global; k++) {
        Part *p = &AT(s->parts, Part, k);
        if (!p->why)
            continue;
        PyObject *why = PyList_New(0);
        for (int b = 0; why && b < (int)(sizeof WHY / sizeof *WHY); b++)
            if (p->why & (1u << b)) {
                PyObject *w = PyUnicode_FromString(WHY[b]);
                if (!w || PyList_Append(why, w) < 0) {
                    Py_XDECREF(w);
                    Py_CLEAR(why);
                    break;
                }
                Py_DECREF(w);
            }
        PyObject *item = why ? Py_BuildValue("(s#LN)", p->topic, (Py_ssize_t)p->topic_len,
                                             (long long)p->partition, why) : NULL;
        if (!item || PyList_Append(flagged, item) < 0) {
            Py_XDECREF(item);
            Py_DECREF(flagged);
            return NULL;
        }
        Py_DECREF(item);
    }
    /* Every partition's own counts (the caller merges them with the kernel's for the flagged
     * ones): (topic, partition, log offsets, undecided writes). */
    PyObject *parts = PyList_New(0);
    for (uint32_t k = 0; parts && k < s->parts.n && !s->global; k++) {
        Part *p = &AT(s->parts, Part, k);
        PyObject *item = Py_BuildValue("(s#LLL)", p->topic, (Py_ssize_t)p->topic_len,
                                       (long long)p->partition, (long long)p->n_log,
                                       (long long)p->n_undecided);
        if (!item || PyList_Append(parts, item) < 0)
            Py_CLEAR(parts);
        Py_XDECREF(item);
    }
    if (!parts) {
        Py_DECREF(flagged);
        return NULL;
    }
    PyObject *g = s->global ? PyUnicode_FromString(s->global) : (Py_INCREF(Py_None), Py_None);
    if (!g) {
        Py_DECREF(flagged);
        Py_DECREF(parts);
        return NULL;
    }
    return Py_BuildValue("{sNsNsNsLsLsLsLsLsLsLsL}", "global", g, "flagged", flagged, "parts", parts,
                         "evidence", (long long)s->n_evidence,
                         "pool", (long long)s->ops.n,
                         "ops", (long long)s->n_ops, "sends", (long long)s->n_sends,
                         "polls", (long long)s->n_polls, "records", (long long)records,
                         "undecided", (long long)undecided,
                         "consumer_examined", (long long)(s->n_commits + amo * s->n_polls));
}

static PyMethodDef fused_methods[] = {
    {"new", fused_new, METH_NOARGS, "new() -> a fresh screen state (a capsule)."},
    {"feed", fused_feed, METH_VARARGS,
     "feed(state, frame): the next events of the history, in file order."},
    {"finish", fused_finish, METH_O,
     "finish(state) -> dict: history-wide reason or None, flagged partitions and the counts."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef fused_module = {
    PyModuleDef_HEAD_INIT, "checkers.history.screens._fused",
    "The fused screen: decoded history columns to per-partition flags in one C pass.", -1,
    fused_methods,
};

PyMODINIT_FUNC PyInit__fused(void) {
    PyObject *m = PyModule_Create(&fused_module);
    if (!m)
        return NULL;
    PyObject *names = PyTuple_New(NCOL);
    for (int k = 0; names && k < NCOL; k++) {
        PyObject *n = PyUnicode_FromString(COLS[k]);
        if (!n) {
            Py_CLEAR(names);
            break;
        }
        PyTuple_SET_ITEM(names, k, n);
    }
    if (!names || PyModule_AddObject(m, "COLUMNS", names) < 0) {
        Py_XDECREF(names);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
