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
    int64_t base;       /* last[] and mark[] hold positions base..n */
    int64_t cap;
    int32_t *last;
    uint32_t *mark;
    uint32_t stamp;
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
    uint32_t *mark = PyMem_Realloc(st->mark, (size_t)cap * sizeof(uint32_t));
    if (!mark) { PyErr_NoMemory(); return -1; }
    memset(mark + st->cap, 0, (size_t)(cap - st->cap) * sizeof(uint32_t));
    st->mark = mark;
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

/* Future tokenizations leave the text read so far at some position of [window_low, n]; the
 * chains from all of them meet at the latest position every one passes (their common
 * ancestor), and every token before it is final.  Scan down from n: a position is on some
 * chain when it is in the window or is the predecessor of one that is; the first such position
 * at or left of window_low that no chain jumps over is the meeting point. */
static int64_t meeting_point(State *st) {
    const Engine *e = st->engine;
    if (++st->stamp == 0) {
        memset(st->mark, 0, (size_t)st->cap * sizeof(uint32_t));
        st->stamp = 1;
    }
    int64_t low = st->window_low, jump = st->n + 1, p;
    for (p = st->n; p > low; p--) {
        int64_t q = p - e->token_len[LAST(st, p)];
        st->mark[q - st->base] = st->stamp;
        if (q < jump) jump = q;
    }
    for (p = low; p > st->done; p--) {
        if (p != low && st->mark[p - st->base] != st->stamp) continue;
        if (jump >= p) return p;
        int64_t q = p - e->token_len[LAST(st, p)];
        st->mark[q - st->base] = st->stamp;
        if (q < jump) jump = q;
    }
    return st->done;
}

static int compact(State *st) {
    int64_t keep = st->n - st->engine->max_len;
    if (st->done < keep) keep = st->done;
    if (keep - st->base < 4096 || keep - st->base < (st->n - st->base) / 2) return 0;
    int64_t count = st->n - keep + 1;
    memmove(st->last, st->last + (keep - st->base), (size_t)count * sizeof(int32_t));
    memset(st->mark, 0, (size_t)st->cap * sizeof(uint32_t));
    st->base = keep;
    return 0;
}

static PyObject *State_feed(State *st, PyObject *arg) {
    Py_buffer data;
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) return NULL;
    const Engine *e = st->engine;
    const uint8_t *bytes = (const uint8_t *)data.buf;
    PyObject *out = PyList_New(0);
    if (!out || reserve(st, st->n - st->base + data.len + 1) < 0) goto fail;
    for (Py_ssize_t i = 0; i < data.len; i++) {
        st->ac = ac_next(e, st->ac, bytes[i]);
        int64_t n = ++st->n;
        int32_t t = last_token(st, n, e->ac_entry[st->ac]);
        if (t < 0) {
            PyErr_SetString(PyExc_RuntimeError, "incremental BPE: no last token (bad tables)");
            goto fail;
        }
        LAST(st, n) = t;
        int64_t low = n - e->ac_depth[st->ac];
        if (st->eager && low > st->window_low) {
            st->window_low = low;
            int64_t meet = meeting_point(st);
            if (meet > st->done) {
                if (emit_chain(st, st->done, meet, out) < 0) goto fail;
                st->done = meet;
            }
        }
    }
    if (st->eager) compact(st);
    PyBuffer_Release(&data);
    return out;
fail:
    Py_XDECREF(out);
    PyBuffer_Release(&data);
    return NULL;
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
    st->n = st->done = st->window_low = st->base = st->cap = 0;
    st->last = NULL;
    st->mark = NULL;
    st->stamp = 0;
    if (reserve(st, 1024) < 0) { Py_DECREF(st); return NULL; }
    st->last[0] = e->sentinel;
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
    for (int64_t i = 0; i < count; i++)
        if (saved[i] < 0 || saved[i] > e->sentinel) goto bad;
    st = state_new(e, eager);
    if (!st || reserve(st, count) < 0) goto fail;
    memcpy(st->last, saved, (size_t)count * 4);
    st->n = n; st->done = done; st->window_low = low; st->base = keep; st->ac = (int32_t)ac;
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
    PyMem_Free(st->mark);
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
