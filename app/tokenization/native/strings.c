/* Common prefix and suffix of two str objects, read in place (no slices copied); byte
 * ranges gathered into one bytes object; and two texts compared line by line.
 *
 * A session's typed prompt is compared with its previous one every call: with slices, two
 * copies of a megabyte-sized string (up to four bytes a character) per call, ~1 ms at 1M
 * characters.  Strings of one kind are compared with memcmp a block at a time, strings of
 * different kinds a character at a time.  The GIL stays held: the comparison is on the
 * request path, and a thread that lets the GIL go for a fraction of a millisecond can wait
 * up to the switch interval (5 ms) to have it back from another thread running Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "native.h"

#define BLOCK 4096

/* Units equal from the start (forward) or from the end (backward) of two runs of n units. */
static Py_ssize_t same_kind(const char *a, const char *b, Py_ssize_t n, int kind, int forward) {
    size_t bytes = (size_t)n * (size_t)kind, done = 0;
    while (done < bytes) {
        size_t step = bytes - done < BLOCK ? bytes - done : BLOCK;
        const char *x = forward ? a + done : a + bytes - done - step;
        const char *y = forward ? b + done : b + bytes - done - step;
        if (memcmp(x, y, step) != 0) {
            size_t k = 0;
            if (forward) {
                while (x[k] == y[k]) k++;
            } else {
                while (x[step - 1 - k] == y[step - 1 - k]) k++;
            }
            return (Py_ssize_t)((done + k) / (size_t)kind);
        }
        done += step;
    }
    return n;
}

/* How many characters of a[i:], b[j:] (forward) or of a[:i], b[:j] (backward) agree, up to
 * n, reading from the start (from the end). */
static Py_ssize_t agree(PyObject *a, Py_ssize_t i, PyObject *b, Py_ssize_t j, Py_ssize_t n,
                        int forward) {
    int ka = PyUnicode_KIND(a), kb = PyUnicode_KIND(b);
    const char *da = PyUnicode_DATA(a), *db = PyUnicode_DATA(b);
    if (ka == kb) {
        const char *x = da + (forward ? i : i - n) * ka, *y = db + (forward ? j : j - n) * kb;
        return same_kind(x, y, n, ka, forward);
    }
    Py_ssize_t k = 0;
    if (forward) {
        while (k < n && PyUnicode_READ(ka, da, i + k) == PyUnicode_READ(kb, db, j + k)) k++;
    } else {
        while (k < n &&
               PyUnicode_READ(ka, da, i - 1 - k) == PyUnicode_READ(kb, db, j - 1 - k))
            k++;
    }
    return k;
}

PyObject *strings_common_prefix(PyObject *self, PyObject *args) {
    PyObject *a, *b;
    Py_ssize_t i = 0, j = 0;
    if (!PyArg_ParseTuple(args, "UU|nn", &a, &b, &i, &j)) return NULL;
    Py_ssize_t la = PyUnicode_GET_LENGTH(a), lb = PyUnicode_GET_LENGTH(b);
    if (i < 0 || j < 0) {
        PyErr_SetString(PyExc_ValueError, "offsets must not be negative");
        return NULL;
    }
    Py_ssize_t n = (i < la && j < lb) ? (la - i < lb - j ? la - i : lb - j) : 0;
    return PyLong_FromSsize_t(agree(a, i, b, j, n, 1));
}

PyObject *strings_common_suffix(PyObject *self, PyObject *args) {
    PyObject *a, *b;
    Py_ssize_t floor;
    if (!PyArg_ParseTuple(args, "UUn", &a, &b, &floor)) return NULL;
    Py_ssize_t la = PyUnicode_GET_LENGTH(a), lb = PyUnicode_GET_LENGTH(b);
    Py_ssize_t n = (la < lb ? la : lb) - (floor > 0 ? floor : 0);
    return PyLong_FromSsize_t(n > 0 ? agree(a, la, b, lb, n, 0) : 0);
}

/* source[s:s + n] for each (s, n) of two int64 buffers, concatenated: the NFC step splices a
 * text's changed windows in this way, tens of thousands of them in a decomposed text, where
 * a slice object per range or an index per byte cost more than the normalizing. */
PyObject *strings_gather(PyObject *self, PyObject *args) {
    Py_buffer source, starts, lengths;
    if (!PyArg_ParseTuple(args, "y*y*y*", &source, &starts, &lengths)) return NULL;
    PyObject *result = NULL;
    size_t ranges = (size_t)starts.len / sizeof(int64_t), total = 0;
    const int64_t *at = starts.buf, *len = lengths.buf;
    int ok = (size_t)lengths.len == ranges * sizeof(int64_t) &&
             starts.len % (Py_ssize_t)sizeof(int64_t) == 0;
    for (size_t k = 0; ok && k < ranges; k++) {
        ok = at[k] >= 0 && len[k] >= 0 && at[k] <= source.len && len[k] <= source.len - at[k];
        total += ok ? (size_t)len[k] : 0;
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "ranges outside the source, or of unequal counts");
    } else if ((result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total)) != NULL) {
        char *out = PyBytes_AS_STRING(result);
        for (size_t k = 0; k < ranges; out += len[k], k++)
            memcpy(out, (const char *)source.buf + at[k], (size_t)len[k]);
    }
    PyBuffer_Release(&source);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&lengths);
    return result;
}

/* Lines of two texts paired in order, split at every newline: (changed, begin, length), with
 * changed one byte per line (1 where the two differ) and begin/length int64 per line of the
 * second; None when the two have different numbers of lines.  The NFC step compares tens of
 * thousands of windows with their NFC this way, without a bytes object per window. */
PyObject *strings_compared_lines(PyObject *self, PyObject *args) {
    Py_buffer a, b;
    if (!PyArg_ParseTuple(args, "y*y*", &a, &b)) return NULL;
    const char *pa = a.buf, *pb = b.buf, *ea = pa + a.len, *eb = pb + b.len;
    size_t lines = 1;
    for (const char *q = pb; (q = memchr(q, '\n', (size_t)(eb - q))) != NULL; q++) lines++;
    PyObject *changed = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)lines);
    PyObject *begin = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(lines * sizeof(int64_t)));
    PyObject *length = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(lines * sizeof(int64_t)));
    int paired = changed && begin && length;
    for (size_t k = 0; paired && k < lines; k++) {
        const char *qa = memchr(pa, '\n', (size_t)(ea - pa));
        const char *qb = memchr(pb, '\n', (size_t)(eb - pb));
        qa = qa ? qa : ea;
        qb = qb ? qb : eb;
        paired = (qa == ea) == (k + 1 == lines); /* a has its last line where b has */
        int differ = qa - pa != qb - pb || memcmp(pa, pb, (size_t)(qa - pa)) != 0;
        PyBytes_AS_STRING(changed)[k] = (char)differ;
        ((int64_t *)PyBytes_AS_STRING(begin))[k] = pb - (const char *)b.buf;
        ((int64_t *)PyBytes_AS_STRING(length))[k] = qb - pb;
        pa = qa + 1;
        pb = qb + 1;
    }
    PyObject *result = NULL;
    if (changed && begin && length)
        result = paired ? PyTuple_Pack(3, changed, begin, length) : Py_NewRef(Py_None);
    Py_XDECREF(changed);
    Py_XDECREF(begin);
    Py_XDECREF(length);
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return result;
}
