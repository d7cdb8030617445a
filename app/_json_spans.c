/* Where a large JSON value can be cut so that orjson parses it in bounded pieces.
 *
 * parts(data, start, end, limit) reads the one JSON value of data[start:end] (whitespace
 * around it) without the GIL and says how to parse it in pieces of at most about `limit`
 * bytes, as (kind, spans, fail_at, reason, nesting), nesting being how deeply the value
 * nests where it was read (1 for [1], 2 for [[1]]; left out below):
 *
 *   (0, [a, c1, c2, ..., b], -1, None)  a string whose content is data[a:b], cut at
 *                                c1 < c2 < ...: never inside an escape, a UTF-8 character
 *                                or after the escape of a high surrogate;
 *   (1, [(a, b, -1, v), ...], -1, None) an array, its elements in order: v == -1 for a run
 *                                of small elements data[a:b] (commas between them), v == a
 *                                for one large element data[a:b];
 *   (2, [(a, b, k, v), ...], -1, None)  an object, its members in order: v == -1 for a run
 *                                of small members data[a:b], else one large member whose
 *                                key is data[a:k] and whose value is data[v:b];
 *   (kind, spans, fail_at, reason)  the value is not cut (kind -1 when it is neither a
 *                                string nor a container): `spans` are those of the items
 *                                read before the scan stopped (a string's content up to the
 *                                end of data; a member whose key was read and not its value
 *                                as (a, k, k, k)), and `reason` says why it stopped at
 *                                data[fail_at]: orjson's own message for what was found
 *                                there, "open" (the value starting there does not end: its
 *                                item, from there to `end`, is the last span) or "scalar"
 *                                (the value is a number or a literal).
 *
 * Only strings, brackets, commas and colons are read: the pieces are parsed by orjson, which
 * checks everything else.  Every piece of valid JSON is valid, and when every piece parses,
 * the glue checked here (brackets of the right kind, one comma between elements, a colon
 * after each key, nothing but whitespace outside) makes the whole value valid JSON too.
 *
 * too_deep(data, max_levels, outer_levels) is the offset of the first bracket (outside
 * strings) that opens level max_levels + 1, counting outer_levels already open; -1 if none. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* orjson's messages, for what the scan finds at the point where it stops. */
static const char END[] = "unexpected end of data";
static const char VALUE[] = "unexpected character, expected a JSON value";
static const char KEY[] = "unexpected character, expected a string key";
static const char COLON[] = "unexpected character, expected ':' after key";
static const char AFTER_ELEMENT[] = "unexpected character, expected ',' or ']'";
static const char AFTER_MEMBER[] = "unexpected character, expected ',' or '}'";
static const char TRAILING[] = "trailing comma is not allowed";
static const char CONTENT[] = "unexpected content after document";
static const char EMPTY[] = "input data is empty";
static const char OPEN[] = "open";
static const char SCALAR[] = "scalar";

typedef struct {
    Py_ssize_t *at;
    Py_ssize_t len, cap;
    int failed; /* out of memory */
    int kind; /* what is read: 0 a string (`at` holds its cuts), 1 an array, 2 an object */
    Py_ssize_t deepest; /* the items' deepest nesting */
    Py_ssize_t fail_at;
    const char *reason; /* why the scan stopped at fail_at; NULL if it did not */
} Found;

static void put(Found *f, Py_ssize_t value) {
    if (f->failed)
        return;
    if (f->len == f->cap) {
        Py_ssize_t cap = f->cap ? 2 * f->cap : 64;
        Py_ssize_t *grown = realloc(f->at, (size_t)cap * sizeof *grown);
        if (grown == NULL) {
            f->failed = 1;
            return;
        }
        f->at = grown, f->cap = cap;
    }
    f->at[f->len++] = value;
}

static int stop(Found *f, Py_ssize_t at, const char *reason) {
    f->fail_at = at, f->reason = reason;
    return -1;
}

static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static Py_ssize_t skip_space(const unsigned char *s, Py_ssize_t i, Py_ssize_t n) {
    while (i < n && is_space(s[i]))
        i++;
    return i;
}

/* Whether any byte of w is c (SWAR: a zero byte of w xor c). */
static int has_byte(uint64_t w, unsigned char c) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t x = w ^ (ones * c);
    return ((x - ones) & ~x & highs) != 0;
}

/* Whether any of the 8 bytes at p is a quote or a backslash. */
static int quote_or_backslash(const unsigned char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    return has_byte(w, '"') || has_byte(w, '\\');
}

/* The first offset from i where s may hold a quote or a bracket, 8 bytes at a time (a
 * bracket or'ed with 0x20 is a curly one). */
static Py_ssize_t skip_plain(const unsigned char *s, Py_ssize_t i, Py_ssize_t n) {
    const uint64_t spaces = 0x2020202020202020ULL;
    for (uint64_t w; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        if (has_byte(w, '"') || has_byte(w | spaces, '{') || has_byte(w | spaces, '}'))
            break;
    }
    return i;
}

/* Just past the closing quote of the string whose opening quote is s[i]; -1 if none. */
static Py_ssize_t string_end(const unsigned char *s, Py_ssize_t i, Py_ssize_t n) {
    i++;
    while (i < n) {
        while (i + 8 <= n && !quote_or_backslash(s + i))
            i += 8;
        if (i >= n)
            break;
        if (s[i] == '"')
            return i + 1;
        i += s[i] == '\\' ? 2 : 1;
    }
    return -1;
}

/* Just past the value starting at s[i] (brackets counted, strings skipped); -1 if it does
 * not end before n, or is an empty scalar.  *deepest: at least the value's nesting depth. */
static Py_ssize_t value_end(const unsigned char *s, Py_ssize_t i, Py_ssize_t n,
                            Py_ssize_t *deepest) {
    if (i >= n)
        return -1;
    if (s[i] == '"')
        return string_end(s, i, n);
    if (s[i] == '[' || s[i] == '{') {
        Py_ssize_t depth = 0;
        while ((i = skip_plain(s, i, n)) < n) {
            unsigned char c = s[i];
            if (c == '"') {
                i = string_end(s, i, n);
                if (i < 0)
                    return -1;
                continue;
            }
            if (c == '[' || c == '{') {
                if (++depth > *deepest)
                    *deepest = depth;
            } else if ((c == ']' || c == '}') && --depth == 0)
                return i + 1;
            i++;
        }
        return -1;
    }
    Py_ssize_t start = i;
    while (i < n && !is_space(s[i]) && s[i] != ',' && s[i] != ']' && s[i] != '}' &&
           s[i] != ':' && s[i] != '"' && s[i] != '[' && s[i] != '{')
        i++;
    return i > start ? i : -1;
}

static int hex_value(unsigned char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The string's content s[a:b] (quotes excluded) cut about every `limit` bytes.  `open`: the
 * string does not close, and its last escape, if cut short by the end of data or a high
 * surrogate's that a low one could follow, is left out: orjson reads to the end there. */
static void string_cuts(const unsigned char *s, Py_ssize_t a, Py_ssize_t b, Py_ssize_t limit,
                        int open, Found *f) {
    put(f, a);
    Py_ssize_t last = a, t = a, escape = -1;
    int after_high = 0; /* the token before t is the escape of a high surrogate */
    while (t < b) {
        if (t - last >= limit && !after_high && (s[t] & 0xC0) != 0x80) {
            put(f, t);
            last = t;
        }
        if (s[t] != '\\') {
            after_high = 0;
            t++;
            continue;
        }
        after_high = 0;
        escape = t;
        if (t + 1 < b && s[t + 1] == 'u') {
            if (t + 6 > b) { /* cut short: not a token to cut after */
                t = b;
                break;
            }
            int code = 0, ok = 1;
            for (int k = 2; k < 6; k++) {
                int h = hex_value(s[t + k]);
                ok &= h >= 0;
                code = code * 16 + (h < 0 ? 0 : h);
            }
            after_high = ok && code >= 0xD800 && code <= 0xDBFF;
            t += 6;
        } else {
            t += 2;
        }
    }
    if (open && escape >= 0 &&
        (t > b || after_high || (escape + 1 < b && s[escape + 1] == 'u' && escape + 6 > b)))
        b = escape;
    put(f, b);
}

static void run_done(Found *f, Py_ssize_t *run_start, Py_ssize_t run_end) {
    if (*run_start >= 0)
        put(f, *run_start), put(f, run_end), put(f, -1), put(f, -1);
    *run_start = -1;
}

/* A member whose key was read, and then not its value: the key, to be parsed before the
 * scan's error is believed (it comes first), as a member whose value is empty. */
static void key_only(Found *f, Py_ssize_t *run_start, Py_ssize_t run_end, Py_ssize_t key,
                     Py_ssize_t key_end) {
    run_done(f, run_start, run_end);
    put(f, key), put(f, key_end), put(f, key_end), put(f, key_end);
}

/* A container's elements (members), runs of small ones joined; the kind, or -1 with the
 * items read before the scan stopped. */
static int container_parts(const unsigned char *s, Py_ssize_t i, Py_ssize_t n, Py_ssize_t limit,
                           Found *f) {
    int object = s[i] == '{';
    unsigned char close = object ? '}' : ']';
    Py_ssize_t j = skip_space(s, i + 1, n);
    Py_ssize_t run_start = -1, run_end = -1, q, comma = -1;
    int kind = -1;
    if (j < n && s[j] == close) {
        q = j + 1;
    } else {
        for (;;) {
            Py_ssize_t start = j, key_end = -1, value = j;
            if (comma >= 0 && j < n && s[j] == close) {
                stop(f, comma, TRAILING);
                goto done;
            }
            if (object) {
                if (j >= n || s[j] != '"') {
                    stop(f, j < n ? j : n, j < n ? KEY : END);
                    goto done;
                }
                if ((key_end = string_end(s, j, n)) < 0) { /* an open key */
                    key_only(f, &run_start, run_end, j, n);
                    stop(f, j, OPEN);
                    goto done;
                }
                Py_ssize_t colon = skip_space(s, key_end, n);
                if (colon >= n || s[colon] != ':') {
                    key_only(f, &run_start, run_end, j, key_end);
                    stop(f, colon, colon < n ? COLON : END);
                    goto done;
                }
                value = skip_space(s, colon + 1, n);
            }
            Py_ssize_t end = value_end(s, value, n, &f->deepest);
            if (end < 0) {
                if (value < n && (s[value] == '"' || s[value] == '[' || s[value] == '{')) {
                    run_done(f, &run_start, run_end); /* the open item: from here to n */
                    put(f, start), put(f, n), put(f, key_end), put(f, value);
                    stop(f, value, OPEN);
                } else {
                    if (object)
                        key_only(f, &run_start, run_end, start, key_end);
                    stop(f, value < n ? value : n, value < n ? VALUE : END);
                }
                goto done;
            }
            if (end - start > limit) {
                run_done(f, &run_start, run_end);
                put(f, start), put(f, end), put(f, key_end), put(f, value);
            } else {
                if (run_start >= 0 && end - run_start > limit)
                    run_done(f, &run_start, run_end);
                if (run_start < 0)
                    run_start = start;
                run_end = end;
            }
            Py_ssize_t after = skip_space(s, end, n);
            if (after >= n) {
                stop(f, n, END);
                goto done;
            }
            if (s[after] == close) {
                q = after + 1;
                break;
            }
            if (s[after] != ',') {
                stop(f, after, object ? AFTER_MEMBER : AFTER_ELEMENT);
                goto done;
            }
            comma = after;
            j = skip_space(s, after + 1, n);
        }
    }
    kind = 1 + object;
    Py_ssize_t tail = skip_space(s, q, n);
    if (tail != n)
        kind = stop(f, tail, CONTENT);
done:
    run_done(f, &run_start, run_end);
    return kind;
}

static int scan(const unsigned char *s, Py_ssize_t start, Py_ssize_t end, Py_ssize_t limit,
                Found *f) {
    Py_ssize_t i = skip_space(s, start, end);
    if (i >= end)
        return stop(f, start, EMPTY);
    if (s[i] == '"') {
        Py_ssize_t q = string_end(s, i, end);
        f->kind = 0;
        string_cuts(s, i + 1, q < 0 ? end : q - 1, limit, q < 0, f);
        if (q < 0)
            return stop(f, end, END);
        Py_ssize_t tail = skip_space(s, q, end);
        return tail == end ? 0 : stop(f, tail, CONTENT);
    }
    if (s[i] == '[' || s[i] == '{') {
        f->kind = s[i] == '[' ? 1 : 2;
        return container_parts(s, i, end, limit, f);
    }
    int glue = s[i] == ',' || s[i] == ':' || s[i] == ']' || s[i] == '}';
    return stop(f, i, glue ? VALUE : SCALAR);
}

static PyObject *parts(PyObject *self, PyObject *args) {
    Py_buffer data;
    Py_ssize_t start, end, limit;
    if (!PyArg_ParseTuple(args, "y*nnn", &data, &start, &end, &limit))
        return NULL;
    if (start < 0 || end > data.len || start > end || limit < 1) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "need 0 <= start <= end <= len(data), limit >= 1");
        return NULL;
    }
    Found f = {NULL, 0, 0, 0, -1, 0, -1, NULL};
    Py_BEGIN_ALLOW_THREADS
    scan((const unsigned char *)data.buf, start, end, limit, &f);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    if (f.failed) {
        free(f.at);
        return PyErr_NoMemory();
    }
    int string = f.kind == 0;
    PyObject *list = PyList_New(0);
    for (Py_ssize_t k = 0; list != NULL && k < f.len; k += string ? 1 : 4) {
        PyObject *item = string ? PyLong_FromSsize_t(f.at[k])
                                : Py_BuildValue("(nnnn)", f.at[k], f.at[k + 1], f.at[k + 2],
                                                f.at[k + 3]);
        if (item == NULL || PyList_Append(list, item) < 0)
            Py_CLEAR(list);
        Py_XDECREF(item);
    }
    free(f.at);
    if (list == NULL)
        return NULL;
    Py_ssize_t nesting = f.deepest + (f.kind > 0);
    if (f.reason == NULL)
        return Py_BuildValue("(iNnOn)", f.kind, list, (Py_ssize_t)-1, Py_None, nesting);
    return Py_BuildValue("(iNnsn)", f.kind, list, f.fail_at, f.reason, nesting);
}

static PyObject *too_deep(PyObject *self, PyObject *args) {
    Py_buffer data;
    Py_ssize_t max_levels, level, at = -1;
    if (!PyArg_ParseTuple(args, "y*nn", &data, &max_levels, &level))
        return NULL;
    const unsigned char *s = data.buf;
    Py_ssize_t n = data.len;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; (i = skip_plain(s, i, n)) < n; i++) {
        unsigned char c = s[i];
        if (c == '"') {
            i = string_end(s, i, n) - 1;
            if (i < 0)
                break;
        } else if (c == '[' || c == '{') {
            if (++level > max_levels) {
                at = i;
                break;
            }
        } else if (c == ']' || c == '}') {
            level--;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    return PyLong_FromSsize_t(at);
}

static PyObject *position(PyObject *self, PyObject *args) {
    Py_buffer data;
    Py_ssize_t at, chars = 0, lines = 0, line_start = -1; /* the last newline's char index */
    if (!PyArg_ParseTuple(args, "y*n", &data, &at))
        return NULL;
    if (at < 0 || at > data.len) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "need 0 <= at <= len(data)");
        return NULL;
    }
    const unsigned char *s = data.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < at; i++) {
        if (s[i] == '\n')
            lines++, line_start = chars;
        chars += (s[i] & 0xC0) != 0x80;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    return Py_BuildValue("(nnn)", chars, lines + 1, chars - line_start);
}

static PyMethodDef methods[] = {
    {"parts", parts, METH_VARARGS,
     "parts(data, start, end, limit): how to parse the JSON value of data[start:end] in "
     "pieces of about limit bytes: (kind, spans, fail_at, reason)."},
    {"too_deep", too_deep, METH_VARARGS,
     "too_deep(data, max_levels, outer_levels): the offset of the first bracket opening "
     "level max_levels + 1, or -1."},
    {"position", position, METH_VARARGS,
     "position(data, at): (character index, line, column) of data[at], as json counts them."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_json_spans", .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__json_spans(void) { return PyModule_Create(&module); }
