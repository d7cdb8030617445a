/* The per-byte loop of incremental BPE (see engine.py for the algorithm and the choice of C).
 *
 * Engine: read-only tables built in Python (tables.py), held through the buffer protocol.
 * State: automaton state, byte count, the last token of every prefix still needed, and the
 * count of bytes whose tokens are final.  last[p] (p = bytes read) is the last token of the
 * BPE of the first p bytes; BPE of a prefix is the BPE of the prefix before its last token,
 * plus that token, so the chain p -> p - len(last[p]) spells the whole tokenization.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

enum {
    A_TOKEN_LEN, A_SUCCESSOR_LEN, A_LOW, A_HIGH, A_ORDER,
    A_AC_FIRST, A_AC_LABEL, A_AC_TARGET, A_AC_FAIL, A_AC_ENTRY, A_AC_DEPTH, A_ROOT_NEXT,
    A_ST_ROOT, A_ST_TOKEN, A_ST_UP, A_ST_FIRST, A_ST_LOW, A_ST_HIGH, A_ST_NODE,
    A_OUT_FIRST, A_OUT_IDS, N_ARRAYS
};

typedef struct {
    PyObject_HEAD
    Py_buffer views[N_ARRAYS];
    int held;
    const int32_t *token_len, *successor_len, *low, *high, *order;
    const int32_t *ac_first, *ac_target, *ac_fail, *ac_entry, *ac_depth, *root_next;
    const uint8_t *ac_label;
    const int32_t *st_root, *st_token, *st_up, *st_first, *st_low, *st_high, *st_node;
    const int32_t *out_first, *out_ids;
    int32_t sentinel; /* the "token" ending the empty prefix: length 0, order -1 */
    int32_t max_len;
} Engine;

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
    int64_t base;       /* last[] and meet[] hold positions base..n */
    int64_t cap;
    int32_t *last;
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
#define I32(k) ((const int32_t *)e->views[k].buf)
    e->token_len = I32(A_TOKEN_LEN); e->successor_len = I32(A_SUCCESSOR_LEN);
    e->low = I32(A_LOW); e->high = I32(A_HIGH); e->order = I32(A_ORDER);
    e->ac_first = I32(A_AC_FIRST); e->ac_target = I32(A_AC_TARGET); e->ac_fail = I32(A_AC_FAIL);
    e->ac_entry = I32(A_AC_ENTRY); e->ac_depth = I32(A_AC_DEPTH); e->root_next = I32(A_ROOT_NEXT);
    e->ac_label = (const uint8_t *)e->views[A_AC_LABEL].buf;
    e->st_root = I32(A_ST_ROOT); e->st_token = I32(A_ST_TOKEN); e->st_up = I32(A_ST_UP);
    e->st_first = I32(A_ST_FIRST); e->st_low = I32(A_ST_LOW); e->st_high = I32(A_ST_HIGH);
    e->st_node = I32(A_ST_NODE); e->out_first = I32(A_OUT_FIRST); e->out_ids = I32(A_OUT_IDS);
#undef I32
    if (e->views[A_ROOT_NEXT].len != 256 * 4 || e->views[A_TOKEN_LEN].len < 4) {
        PyErr_SetString(PyExc_ValueError, "malformed tables");
        engine_release(e);
        return -1;
    }
    e->sentinel = (int32_t)(e->views[A_TOKEN_LEN].len / 4) - 1;
    e->max_len = 1;
    for (int32_t t = 0; t < e->sentinel; t++)
        if (e->token_len[t] > e->max_len) e->max_len = e->token_len[t];
    return 0;
}

static void Engine_dealloc(Engine *e) {
    engine_release(e);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

/* ---- the per-byte update --------------------------------------------------------------- */

static inline int32_t ac_next(const Engine *e, int32_t s, uint8_t c) {
    while (s) {
        int32_t lo = e->ac_first[s], hi = e->ac_first[s + 1];
        while (lo < hi) {
            int32_t mid = (lo + hi) >> 1;
            uint8_t b = e->ac_label[mid];
            if (b < c) lo = mid + 1;
            else if (b > c) hi = mid;
            else return e->ac_target[mid];
        }
        s = e->ac_fail[s];
    }
    return e->root_next[c];
}

#define LAST(st, p) ((st)->last[(p) - (st)->base])

/* Last token of the first n bytes, given tau, the longest token ending there. */
static inline int32_t last_token(const State *st, int64_t n, int32_t tau) {
    const Engine *e = st->engine;
    int32_t node = e->st_root[tau], best = -1;
    while (node >= 0) {
        int32_t g = e->st_token[node];
        if (e->successor_len[g] > 0) {
            int32_t d = e->order[LAST(st, n - e->successor_len[g])];
            if (d < e->low[g] || d >= e->high[g]) {
                node = e->st_up[node];
                continue;
            }
        }
        best = g;
        int32_t lo = e->st_first[node], hi = e->st_first[node + 1];
        if (lo == hi) break;
        int32_t d = e->order[LAST(st, n - e->token_len[g])];
        while (lo < hi) { /* first child whose interval starts after d */
            int32_t mid = (lo + hi) >> 1;
            if (e->st_low[mid] <= d) lo = mid + 1;
            else hi = mid;
        }
        if (lo == e->st_first[node] || d >= e->st_high[lo - 1]) break;
        node = e->st_node[lo - 1];
    }
    return best;
}

static int reserve(State *st, int64_t positions) {
    if (positions <= st->cap) return 0;
    int64_t cap = st->cap ? st->cap : 1024;
    while (cap < positions) cap *= 2;
    int32_t *last = PyMem_Realloc(st->last, (size_t)cap * sizeof(int32_t));
    if (!last) { PyErr_NoMemory(); return -1; }
    st->last = last;
    if (st->eager) {
        int64_t *meet = PyMem_Realloc(st->meet, (size_t)cap * sizeof(int64_t));
        if (!meet) { PyErr_NoMemory(); return -1; }
        st->meet = meet;
    }
    st->cap = cap;
    return 0;
}

/* Append the output ids of the tokens of the chain from `to` down to `from`, in text order. */
static int emit_chain(const State *st, int64_t from, int64_t to, PyObject *out) {
    const Engine *e = st->engine;
    Py_ssize_t start = PyList_GET_SIZE(out);
    for (int64_t p = to; p > from; p -= e->token_len[LAST(st, p)]) {
        int32_t t = LAST(st, p);
        for (int32_t i = e->out_first[t + 1] - 1; i >= e->out_first[t]; i--) {
            PyObject *id = PyLong_FromLong(e->out_ids[i]);
            if (!id || PyList_Append(out, id) < 0) { Py_XDECREF(id); return -1; }
            Py_DECREF(id);
        }
    }
    Py_ssize_t end = PyList_GET_SIZE(out);
    for (Py_ssize_t i = start, j = end - 1; i < j; i++, j--) {
        PyObject *tmp = PyList_GET_ITEM(out, i);
        PyList_SET_ITEM(out, i, PyList_GET_ITEM(out, j));
        PyList_SET_ITEM(out, j, tmp);
    }
    return 0;
}

/* Future tokenizations leave the text read so far at some position of the window
 * [window_low, n]; the chains p -> p - len(last[p]) from all of them meet at the latest position
 * every one passes, and every token before it is final.  That position is the lowest common
 * ancestor of the window's positions in the tree of chains; the window only slides right, so
 * it is kept as a two-stack queue: suffix meets of the front part, one meet of the back part.
 * Each position joins O(1) meets, each a walk down two chains until they touch. */
static inline int64_t meet2(const State *st, int64_t a, int64_t b) {
    const int32_t *len = st->engine->token_len;
    while (a != b) {
        if (a > b) a -= len[LAST(st, a)];
        else b -= len[LAST(st, b)];
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
    memmove(st->last, st->last + (keep - st->base), (size_t)count * sizeof(int32_t));
    memmove(st->meet, st->meet + (keep - st->base), (size_t)count * sizeof(int64_t));
    st->base = keep;
}

/* Read bytes [from, to); append the ids that became final to out. */
static int feed_block(State *st, const uint8_t *bytes, Py_ssize_t count, PyObject *out) {
    const Engine *e = st->engine;
    if (reserve(st, st->n - st->base + count + 1) < 0) return -1;
    for (Py_ssize_t i = 0; i < count; i++) {
        st->ac = ac_next(e, st->ac, bytes[i]);
        int64_t n = ++st->n;
        int32_t t = last_token(st, n, e->ac_entry[st->ac]);
        if (t < 0) {
            PyErr_SetString(PyExc_RuntimeError, "incremental BPE: no last token (bad tables)");
            return -1;
        }
        LAST(st, n) = t;
        if (!st->eager) continue;
        st->back_meet = st->back_meet < 0 ? n : meet2(st, st->back_meet, n);
        int64_t low = n - e->ac_depth[st->ac];
        if (low > st->window_low) {
            slide_window(st, low);
            int64_t meet = window_meet(st);
            if (meet > st->done) {
                if (emit_chain(st, st->done, meet, out) < 0) return -1;
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
    PyObject *out = PyList_New(0);
    /* blocks keep an eager state's buffers at a few blocks, whatever the input's size */
    for (Py_ssize_t at = 0; out && at < data.len; at += 1 << 16) {
        Py_ssize_t count = data.len - at < (1 << 16) ? data.len - at : (1 << 16);
        if (feed_block(st, bytes + at, count, out) < 0) Py_CLEAR(out);
    }
    PyBuffer_Release(&data);
    return out;
}

static PyObject *State_pending(State *st, PyObject *unused) {
    PyObject *out = PyList_New(0);
    if (out && emit_chain(st, st->done, st->n, out) < 0) Py_CLEAR(out);
    return out;
}

/* ---- serialization: eight int64 fields, then last[base..n] as int32 --------------------- */

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
    memcpy(buf + sizeof head, st->last + (keep - st->base), (size_t)count * 4);
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
    st->last = NULL;
    st->meet = NULL;
    if (reserve(st, 1024) < 0) { Py_DECREF(st); return NULL; }
    st->last[0] = e->sentinel;
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
        ac < 0 || ac >= (int64_t)(e->views[A_AC_DEPTH].len / 4) ||
        blob.len != (Py_ssize_t)(sizeof head + count * 4))
        goto bad;
    const int32_t *saved = (const int32_t *)((const char *)blob.buf + sizeof head);
    if (low < keep || done > low) goto bad;
    for (int64_t i = 0; i < count; i++)
        if (saved[i] < 0 || saved[i] > e->sentinel) goto bad;
    for (int64_t p = done + 1; p <= n; p++) { /* every chain must reach `done` */
        int64_t back = p - e->token_len[saved[p - keep]];
        if (back < done || back >= p) goto bad;
    }
    st = state_new(e, eager);
    if (!st || reserve(st, count) < 0) goto fail;
    memcpy(st->last, saved, (size_t)count * 4);
    st->n = n; st->done = done; st->base = keep; st->ac = (int32_t)ac;
    if (eager) {
        st->front_end = low - 1; /* rebuild the window's meets from last[] */
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
    PyMem_Free(st->last);
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
