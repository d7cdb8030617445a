/* The per-byte loop of incremental BPE (see engine.py for the algorithm and the choice of C).
 *
 * Engine: read-only tables built in Python (tables.py), held through the buffer protocol.
 * State: automaton state, byte count, the last token of every prefix still needed, and the
 * count of bytes whose tokens are final.  last(p) (p = bytes read) is the last token of the
 * BPE of the first p bytes; BPE of a prefix is the BPE of the prefix before its last token,
 * plus that token, so the chain p -> p - len(last(p)) spells the whole tokenization.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Records are packed so that one visit touches one cache line (field order: tables.py). */
typedef struct { int32_t len, successor_len, low, high; } TokenInfo;
typedef struct { int32_t search_root, depth; } AcState;
typedef struct { int32_t token, up, first, end, len, successor_len, low, high; } SearchNode;
typedef struct { int32_t low, high, node, unused; } SearchChild;

enum { A_TOKENS, A_ORDER, A_AC_STATES, A_AC_BLOCK_OF, A_AC_BLOCKS, A_ST_NODES, A_ST_CHILDREN,
       A_OUT_FIRST, A_OUT_IDS, N_ARRAYS };

typedef struct {
    PyObject_HEAD
    Py_buffer views[N_ARRAYS];
    int held;
    const TokenInfo *tokens;
    const int32_t *order;
    const AcState *ac;
    const int32_t *block_of; /* per state, 16 block numbers: one per high nibble of the byte */
    const int32_t *blocks;   /* 16 next states per block, by the byte's low nibble */
    const SearchNode *nodes;
    const SearchChild *children;
    const int32_t *out_first, *out_ids;
    int32_t sentinel; /* the "token" ending the empty prefix: length 0, order -1 */
    int32_t states;
    int32_t max_len;
} Engine;

/* Per position p: the last token of the first p bytes, its preorder number and length. */
typedef struct { int32_t token, order, len; } Slot;

typedef struct {
    PyObject_HEAD
    Engine *engine;
    int eager;
    int32_t ac;
    int64_t n;          /* bytes read */
    int64_t done;       /* bytes whose tokens are final and returned */
    int64_t window_low; /* leftmost start of a token that could still cross position n */
    int64_t front_end;  /* meet[p] = meeting point of [p, front_end], for p in [window_low, front_end] */
    int64_t back_meet;  /* meeting point of (front_end, n]; -1 when empty */
    int64_t base;       /* slots[] and meet[] hold positions base..n */
    int64_t cap;
    Slot *slots;
    int64_t *meet;      /* eager states only */
} State;

static PyTypeObject EngineType;
static PyTypeObject StateType;

/* ---- engine ---------------------------------------------------------------------------- */

static void engine_release(Engine *e) {
    for (int i = 0; i < e->held; i++) PyBuffer_Release(&e->views[i]);
    e->held = 0;
}

static int Engine_init(Engine *e, PyObject *args, PyObject *kwds) {
    PyObject *arrays;
    if (!PyArg_ParseTuple(args, "O!", &PyTuple_Type, &arrays)) return -1;
    if (PyTuple_GET_SIZE(arrays) != N_ARRAYS) {
        PyErr_Format(PyExc_ValueError, "Engine takes %d arrays", N_ARRAYS);
        return -1;
    }
    engine_release(e);
    for (int i = 0; i < N_ARRAYS; i++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(arrays, i), &e->views[i], PyBUF_C_CONTIGUOUS) < 0) {
            engine_release(e);
            return -1;
        }
        e->held = i + 1;
    }
    e->tokens = (const TokenInfo *)e->views[A_TOKENS].buf;
    e->order = (const int32_t *)e->views[A_ORDER].buf;
    e->ac = (const AcState *)e->views[A_AC_STATES].buf;
    e->block_of = (const int32_t *)e->views[A_AC_BLOCK_OF].buf;
    e->blocks = (const int32_t *)e->views[A_AC_BLOCKS].buf;
    e->nodes = (const SearchNode *)e->views[A_ST_NODES].buf;
    e->children = (const SearchChild *)e->views[A_ST_CHILDREN].buf;
    e->out_first = (const int32_t *)e->views[A_OUT_FIRST].buf;
    e->out_ids = (const int32_t *)e->views[A_OUT_IDS].buf;
    e->sentinel = (int32_t)(e->views[A_ORDER].len / 4) - 1;
    e->states = (int32_t)(e->views[A_AC_STATES].len / sizeof(AcState));
    if (e->sentinel < 256 || e->states < 257 ||
        e->views[A_AC_BLOCK_OF].len != (Py_ssize_t)e->states * 16 * 4) {
        PyErr_SetString(PyExc_ValueError, "malformed tables");
        engine_release(e);
        return -1;
    }
    e->max_len = 1;
    for (int32_t t = 0; t < e->sentinel; t++)
        if (e->tokens[t].len > e->max_len) e->max_len = e->tokens[t].len;
    return 0;
}

static void Engine_dealloc(Engine *e) {
    engine_release(e);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

/* ---- the per-byte update --------------------------------------------------------------- */

static inline int32_t ac_next(const Engine *e, int32_t s, uint8_t c) {
    return e->blocks[e->block_of[s * 16 + (c >> 4)] * 16 + (c & 15)];
}

#define SLOT(st, p) ((st)->slots[(p) - (st)->base])

static inline void set_slot(State *st, int64_t p, int32_t token) {
    const Engine *e = st->engine;
    Slot slot = {token, e->order[token], e->tokens[token].len};
    SLOT(st, p) = slot;
}

/* Last token of the first n bytes, starting at the search tree of the longest token ending
 * there.  A centroid failing the interval test sends the search towards the root; one
 * passing it is on the path, and its one child passing the test (if any) leads on. */
static inline int32_t last_token(const State *st, int64_t n, int32_t root) {
    const Engine *e = st->engine;
    int32_t node = root, best = -1;
    while (node >= 0) {
        const SearchNode *g = &e->nodes[node];
        if (g->successor_len > 0) {
            int32_t d = SLOT(st, n - g->successor_len).order;
            if (d < g->low || d >= g->high) {
                node = g->up;
                continue;
            }
        }
        best = g->token;
        int32_t lo = g->first, hi = g->end;
        if (lo == hi) break;
        int32_t d = SLOT(st, n - g->len).order;
        while (lo < hi) { /* first child whose interval starts after d */
            int32_t mid = (lo + hi) >> 1;
            if (e->children[mid].low <= d) lo = mid + 1;
            else hi = mid;
        }
        if (lo == g->first || d >= e->children[lo - 1].high) break;
        node = e->children[lo - 1].node;
    }
    return best;
}

static int reserve(State *st, int64_t positions) {
    if (positions <= st->cap) return 0;
    int64_t cap = st->cap ? st->cap : 1024;
    while (cap < positions) cap *= 2;
    Slot *slots = PyMem_Realloc(st->slots, (size_t)cap * sizeof(Slot));
    if (!slots) { PyErr_NoMemory(); return -1; }
    st->slots = slots;
    if (st->eager) {
        int64_t *meet = PyMem_Realloc(st->meet, (size_t)cap * sizeof(int64_t));
        if (!meet) { PyErr_NoMemory(); return -1; }
        st->meet = meet;
    }
    st->cap = cap;
    return 0;
}

/* Tokens collected during one call, turned into one list of ids at its end. */
typedef struct { int32_t *items; Py_ssize_t size, cap; } Tokens;

/* Append the tokens of the chain from `to` down to `from`, in text order. */
static int collect_chain(const State *st, int64_t from, int64_t to, Tokens *tokens) {
    Py_ssize_t start = tokens->size;
    for (int64_t p = to; p > from; p -= SLOT(st, p).len) {
        if (tokens->size == tokens->cap) {
            Py_ssize_t cap = tokens->cap ? 2 * tokens->cap : 256;
            int32_t *items = PyMem_Realloc(tokens->items, (size_t)cap * sizeof(int32_t));
            if (!items) { PyErr_NoMemory(); return -1; }
            tokens->items = items;
            tokens->cap = cap;
        }
        tokens->items[tokens->size++] = SLOT(st, p).token;
    }
    for (Py_ssize_t i = start, j = tokens->size - 1; i < j; i++, j--) {
        int32_t t = tokens->items[i];
        tokens->items[i] = tokens->items[j];
        tokens->items[j] = t;
    }
    return 0;
}

/* The output ids of the collected tokens; frees them. */
static PyObject *ids_of(const Engine *e, Tokens *tokens) {
    Py_ssize_t count = 0;
    for (Py_ssize_t i = 0; i < tokens->size; i++)
        count += e->out_first[tokens->items[i] + 1] - e->out_first[tokens->items[i]];
    PyObject *out = PyList_New(count);
    for (Py_ssize_t i = 0, k = 0; out && i < tokens->size; i++) {
        for (int32_t j = e->out_first[tokens->items[i]]; j < e->out_first[tokens->items[i] + 1]; j++) {
            PyObject *id = PyLong_FromLong(e->out_ids[j]);
            if (!id) { Py_CLEAR(out); break; }
            PyList_SET_ITEM(out, k++, id);
        }
    }
    PyMem_Free(tokens->items);
    return out;
}

/* Future tokenizations leave the text read so far at some position of the window
 * [window_low, n]; the chains p -> p - len(last(p)) from all of them meet at the latest position
 * every one passes, and every token before it is final.  That position is the lowest common
 * ancestor of the window's positions in the tree of chains; the window only slides right, so
 * it is kept as a two-stack queue: suffix meets of the front part, one meet of the back part.
 * Each position joins O(1) meets, each a walk down two chains until they touch. */
static inline int64_t meet2(const State *st, int64_t a, int64_t b) {
    while (a != b) {
        if (a > b) a -= SLOT(st, a).len;
        else b -= SLOT(st, b).len;
    }
    return a;
}

static void slide_window(State *st, int64_t low) {
    st->window_low = low;
    if (low > st->front_end) { /* front empty: the back becomes the front */
        int64_t p = st->n;
        st->meet[p - st->base] = p;
        for (p = st->n - 1; p >= low; p--)
            st->meet[p - st->base] = meet2(st, p, st->meet[p + 1 - st->base]);
        st->front_end = st->n;
        st->back_meet = -1;
    }
}

static inline int64_t window_meet(const State *st) {
    int64_t front = st->meet[st->window_low - st->base];
    return st->back_meet < 0 ? front : meet2(st, front, st->back_meet);
}

static void compact(State *st) {
    int64_t keep = st->n - st->engine->max_len;
    if (st->done < keep) keep = st->done;
    if (keep - st->base < 4096) return;
    int64_t count = st->n - keep + 1;
    memmove(st->slots, st->slots + (keep - st->base), (size_t)count * sizeof(Slot));
    memmove(st->meet, st->meet + (keep - st->base), (size_t)count * sizeof(int64_t));
    st->base = keep;
}

/* Read bytes [from, to); append the ids that became final to out. */
static int feed_block(State *st, const uint8_t *bytes, Py_ssize_t count, Tokens *out) {
    const Engine *e = st->engine;
    if (reserve(st, st->n - st->base + count + 1) < 0) return -1;
    for (Py_ssize_t i = 0; i < count; i++) {
        st->ac = ac_next(e, st->ac, bytes[i]);
        int64_t n = ++st->n;
        int32_t t = last_token(st, n, e->ac[st->ac].search_root);
        if (t < 0) {
            PyErr_SetString(PyExc_RuntimeError, "incremental BPE: no last token (bad tables)");
            return -1;
        }
        set_slot(st, n, t);
        if (!st->eager) continue;
        st->back_meet = st->back_meet < 0 ? n : meet2(st, st->back_meet, n);
        int64_t low = n - e->ac[st->ac].depth;
        if (low > st->window_low) {
            slide_window(st, low);
            int64_t meet = window_meet(st);
            if (meet > st->done) {
                if (collect_chain(st, st->done, meet, out) < 0) return -1;
                st->done = meet;
            }
        }
    }
    if (st->eager) compact(st);
    return 0;
}

static PyObject *State_feed(State *st, PyObject *arg) {
    Py_buffer data;
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *bytes = (const uint8_t *)data.buf;
    Tokens tokens = {NULL, 0, 0};
    int failed = 0;
    /* blocks keep an eager state's buffers at a few blocks, whatever the input's size */
    for (Py_ssize_t at = 0; !failed && at < data.len; at += 1 << 16) {
        Py_ssize_t count = data.len - at < (1 << 16) ? data.len - at : (1 << 16);
        failed = feed_block(st, bytes + at, count, &tokens) < 0;
    }
    PyBuffer_Release(&data);
    if (failed) {
        PyMem_Free(tokens.items);
        return NULL;
    }
    return ids_of(st->engine, &tokens);
}

static PyObject *State_pending(State *st, PyObject *unused) {
    Tokens tokens = {NULL, 0, 0};
    if (collect_chain(st, st->done, st->n, &tokens) < 0) {
        PyMem_Free(tokens.items);
        return NULL;
    }
    return ids_of(st->engine, &tokens);
}

/* ---- serialization: six int64 fields, then the last tokens of positions keep..n (int32) ---- */

#define DUMP_MAGIC 0x31455042494b5354LL /* "TSKIBPE1" */

static PyObject *State_dump(State *st, PyObject *unused) {
    int64_t keep = st->n - st->engine->max_len;
    if (st->done < keep) keep = st->done;
    if (keep < st->base) keep = st->base;
    int64_t count = st->n - keep + 1;
    int64_t head[6] = {DUMP_MAGIC, st->n, st->done, st->window_low, keep, st->ac};
    PyObject *blob = PyBytes_FromStringAndSize(NULL, sizeof head + count * 4);
    if (!blob) return NULL;
    char *buf = PyBytes_AS_STRING(blob);
    memcpy(buf, head, sizeof head);
    int32_t *tokens = (int32_t *)(buf + sizeof head);
    for (int64_t i = 0; i < count; i++) tokens[i] = SLOT(st, keep + i).token;
    return blob;
}

static State *state_new(Engine *e, int eager) {
    State *st = PyObject_New(State, &StateType);
    if (!st) return NULL;
    Py_INCREF(e);
    st->engine = e;
    st->eager = eager;
    st->ac = 0;
    st->n = st->done = st->window_low = st->front_end = st->base = st->cap = 0;
    st->back_meet = -1;
    st->slots = NULL;
    st->meet = NULL;
    if (reserve(st, 1024) < 0) { Py_DECREF(st); return NULL; }
    set_slot(st, 0, e->sentinel);
    if (eager) st->meet[0] = 0;
    return st;
}

static PyObject *Engine_start(Engine *e, PyObject *args) {
    int eager = 1;
    if (!PyArg_ParseTuple(args, "|p", &eager)) return NULL;
    return (PyObject *)state_new(e, eager);
}

static PyObject *Engine_restore(Engine *e, PyObject *args) {
    Py_buffer blob;
    int eager = 1;
    if (!PyArg_ParseTuple(args, "y*|p", &blob, &eager)) return NULL;
    int64_t head[6];
    State *st = NULL;
    if (blob.len < (Py_ssize_t)sizeof head) goto bad;
    memcpy(head, blob.buf, sizeof head);
    int64_t n = head[1], done = head[2], low = head[3], keep = head[4], ac = head[5];
    int64_t count = n - keep + 1;
    if (head[0] != DUMP_MAGIC || keep < 0 || count < 1 || done < keep || done > n || low > n ||
        ac < 0 || ac >= e->states ||
        blob.len != (Py_ssize_t)(sizeof head + count * 4))
        goto bad;
    const int32_t *saved = (const int32_t *)((const char *)blob.buf + sizeof head);
    if (low < keep || done > low) goto bad;
    for (int64_t i = 0; i < count; i++)
        if (saved[i] < 0 || saved[i] > e->sentinel) goto bad;
    for (int64_t start = low > done ? low : done; start <= n; start++) {
        int64_t p = start; /* the chains from the window must all reach `done` */
        while (p > done) {
            int64_t back = p - e->tokens[saved[p - keep]].len;
            if (back >= p) goto bad;
            p = back;
        }
        if (p != done) goto bad;
    }
    st = state_new(e, eager);
    if (!st || reserve(st, count) < 0) goto fail;
    st->base = keep;
    for (int64_t i = 0; i < count; i++) set_slot(st, keep + i, saved[i]);
    st->n = n; st->done = done; st->ac = (int32_t)ac;
    if (eager) {
        st->front_end = low - 1; /* rebuild the window's meets from the slots */
        slide_window(st, low);
    }
    PyBuffer_Release(&blob);
    return (PyObject *)st;
bad:
    PyErr_SetString(PyExc_ValueError, "not a dump of an incremental BPE state of these tables");
fail:
    Py_XDECREF(st);
    PyBuffer_Release(&blob);
    return NULL;
}

static void State_dealloc(State *st) {
    PyMem_Free(st->slots);
    PyMem_Free(st->meet);
    Py_XDECREF(st->engine);
    PyObject_Free(st);
}

static PyObject *State_get_consumed(State *st, void *closure) { return PyLong_FromLongLong(st->n); }
static PyObject *State_get_final(State *st, void *closure) { return PyLong_FromLongLong(st->done); }

static PyMethodDef State_methods[] = {
    {"feed", (PyCFunction)State_feed, METH_O, "Read bytes; return the ids that became final."},
    {"pending", (PyCFunction)State_pending, METH_NOARGS, "Ids after the final ones."},
    {"dump", (PyCFunction)State_dump, METH_NOARGS, "Serialize the resumable part."},
    {NULL}};

static PyGetSetDef State_getset[] = {
    {"consumed", (getter)State_get_consumed, NULL, "bytes read", NULL},
    {"final_bytes", (getter)State_get_final, NULL, "bytes covered by final ids", NULL},
    {NULL}};

static PyMethodDef Engine_methods[] = {
    {"start", (PyCFunction)Engine_start, METH_VARARGS, "A state at the empty text."},
    {"restore", (PyCFunction)Engine_restore, METH_VARARGS, "A state from State.dump()."},
    {NULL}};

static PyTypeObject EngineType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "app.tokenization.incremental_bpe._core.Engine",
    .tp_basicsize = sizeof(Engine),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Engine_init,
    .tp_dealloc = (destructor)Engine_dealloc,
    .tp_methods = Engine_methods,
};

static PyTypeObject StateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "app.tokenization.incremental_bpe._core.State",
    .tp_basicsize = sizeof(State),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)State_dealloc,
    .tp_methods = State_methods,
    .tp_getset = State_getset,
};

static struct PyModuleDef core_module = {PyModuleDef_HEAD_INIT, "_core", NULL, -1, NULL};

PyMODINIT_FUNC PyInit__core(void) {
    if (PyType_Ready(&EngineType) < 0 || PyType_Ready(&StateType) < 0) return NULL;
    PyObject *m = PyModule_Create(&core_module);
    if (!m) return NULL;
    Py_INCREF(&EngineType);
    Py_INCREF(&StateType);
    if (PyModule_AddObject(m, "Engine", (PyObject *)&EngineType) < 0 ||
        PyModule_AddObject(m, "State", (PyObject *)&StateType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
