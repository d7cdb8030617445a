/* Where a large JSON value can be cut so that orjson parses it in bounded pieces.
 *
 * parts(data, start, end, limit) reads the one JSON value of data[start:end] (whitespace
 * around it) without the GIL and says how to parse it in pieces of at most about `limit`
 * bytes:
 *
 *   (0, [a, c1, c2, ..., b], 0)   a string whose content is data[a:b], cut at c1 < c2 < ...:
 *                                 never inside an escape, a UTF-8 character or after the
 *                                 escape of a high surrogate;
 *   (1, [(a, b, -1, v), ...], d)  an array, its elements in order: v == -1 for a run of
 *                                 small elements data[a:b] (commas between them), v == a for
 *                                 one large element data[a:b];
 *   (2, [(a, b, k, v), ...], d)   an object, its members in order: v == -1 for a run of
 *                                 small members data[a:b], else one large member whose key is
 *                                 data[a:k] and whose value is data[v:b];
 *   None                          anything else (a scalar, or a shape no valid JSON has);
 *
 * d is how deeply the value nests, at least (1 for [1], 2 for [[1]]).
 *
 * Only strings, brackets, commas and colons are read: the pieces are parsed by orjson, which
 * checks everything else.  Every piece of valid JSON is valid, and when every piece parses,
 * the glue checked here (brackets of the right kind, one comma between elements, a colon
 * after each key, nothing but whitespace outside) makes the whole value valid JSON too. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    Py_ssize_t *at;
    Py_ssize_t len, cap;
    int failed; /* out of memory */
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

static int is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static Py_ssize_t skip_space(const unsigned char *s, Py_ssize_t i, Py_ssize_t n) {
    while (i < n && is_space(s[i]))
        i++;
    return i;
}

/* Whether any of the 8 bytes at p is a quote or a backslash (SWAR: a zero byte of the
 * bytes xor the character). */
static int quote_or_backslash(const unsigned char *p) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t w;
    memcpy(&w, p, 8);
    uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
    return (((q - ones) & ~q) | ((b - ones) & ~b)) & highs ? 1 : 0;
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
 * not end before n or is empty.  *deepest: at least the value's nesting depth. */
static Py_ssize_t value_end(const unsigned char *s, Py_ssize_t i, Py_ssize_t n,
                            Py_ssize_t *deepest) {
    if (i >= n)
        return -1;
    if (s[i] == '"')
        return string_end(s, i, n);
    if (s[i] == '[' || s[i] == '{') {
        Py_ssize_t depth = 0;
        while (i < n) {
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

/* The string's content s[a:b] (quotes excluded) cut about every `limit` bytes. */
static void string_cuts(const unsigned char *s, Py_ssize_t a, Py_ssize_t b, Py_ssize_t limit,
                        Found *f) {
    put(f, a);
    Py_ssize_t last = a, t = a;
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
        if (t + 6 <= b && s[t + 1] == 'u') {
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
    put(f, b);
}

/* A container's elements (members), runs of small ones joined; the kind, or -1.  *deepest:
 * the elements' deepest nesting. */
static int container_parts(const unsigned char *s, Py_ssize_t i, Py_ssize_t n, Py_ssize_t limit,
                           Found *f, Py_ssize_t *deepest) {
    int object = s[i] == '{';
    unsigned char close = object ? '}' : ']';
    Py_ssize_t j = skip_space(s, i + 1, n);
    Py_ssize_t run_start = -1, run_end = -1, q;
    if (j < n && s[j] == close) {
        q = j + 1;
    } else {
        for (;;) {
            Py_ssize_t start = j, key_end = -1, value = j;
            if (object) {
                if (j >= n || s[j] != '"' || (key_end = string_end(s, j, n)) < 0)
                    return -1;
                Py_ssize_t colon = skip_space(s, key_end, n);
                if (colon >= n || s[colon] != ':')
                    return -1;
                value = skip_space(s, colon + 1, n);
            }
            Py_ssize_t end = value_end(s, value, n, deepest);
            if (end < 0)
                return -1;
            if (end - start > limit) {
                if (run_start >= 0) {
                    put(f, run_start), put(f, run_end), put(f, -1), put(f, -1);
                    run_start = -1;
                }
                put(f, start), put(f, end), put(f, key_end), put(f, value);
            } else {
                if (run_start >= 0 && end - run_start > limit) {
                    put(f, run_start), put(f, run_end), put(f, -1), put(f, -1);
                    run_start = -1;
                }
                if (run_start < 0)
                    run_start = start;
                run_end = end;
            }
            Py_ssize_t after = skip_space(s, end, n);
            if (after >= n)
                return -1;
            if (s[after] == close) {
                q = after + 1;
                break;
            }
            if (s[after] != ',')
                return -1;
            j = skip_space(s, after + 1, n); /* a trailing comma: no value there */
        }
        if (run_start >= 0)
            put(f, run_start), put(f, run_end), put(f, -1), put(f, -1);
    }
    return skip_space(s, q, n) == n ? 1 + object : -1;
}

static int scan(const unsigned char *s, Py_ssize_t start, Py_ssize_t end, Py_ssize_t limit,
                Found *f, Py_ssize_t *deepest) {
    Py_ssize_t i = skip_space(s, start, end);
    if (i >= end)
        return -1;
    if (s[i] == '"') {
        Py_ssize_t q = string_end(s, i, end);
        if (q < 0 || skip_space(s, q, end) != end)
            return -1;
        string_cuts(s, i + 1, q - 1, limit, f);
        return 0;
    }
    if (s[i] == '[' || s[i] == '{')
        return container_parts(s, i, end, limit, f, deepest);
    return -1;
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
    Found f = {NULL, 0, 0, 0};
    Py_ssize_t deepest = 0;
    int kind;
    Py_BEGIN_ALLOW_THREADS
    kind = scan((const unsigned char *)data.buf, start, end, limit, &f, &deepest);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    if (f.failed) {
        free(f.at);
        return PyErr_NoMemory();
    }
    if (kind < 0) {
        free(f.at);
        Py_RETURN_NONE;
    }
    PyObject *list = PyList_New(0);
    for (Py_ssize_t k = 0; list != NULL && k < f.len; k += kind == 0 ? 1 : 4) {
        PyObject *item = kind == 0 ? PyLong_FromSsize_t(f.at[k])
                                   : Py_BuildValue("(nnnn)", f.at[k], f.at[k + 1], f.at[k + 2],
                                                   f.at[k + 3]);
        if (item == NULL || PyList_Append(list, item) < 0)
            Py_CLEAR(list);
        Py_XDECREF(item);
    }
    free(f.at);
    return list == NULL ? NULL : Py_BuildValue("(iNn)", kind, list, deepest + (kind != 0));
}

static PyMethodDef methods[] = {
    {"parts", parts, METH_VARARGS,
     "parts(data, start, end, limit): how to parse the JSON value of data[start:end] in "
     "pieces of about limit bytes, or None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_json_spans", .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__json_spans(void) { return PyModule_Create(&module); }
