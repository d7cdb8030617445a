/* The native encoder's hot loop: decode UTF-8, look classes up, scan pieces, merge each.
 *
 * Encoder(family, classes, folds, kinds, nfc, probed, numeric, han, byte_ids, pair_keys,
 *         pair_ranks, pair_merged, width, ignore_merges, word_bytes, word_at, word_ids, dropped,
 *         lengths[, char_ids])
 * holds the class tables (gpu_kernels.char_classes.ClassTable: probed lazily in Python, read
 * here through the buffer protocol, so no second copy of the rules) and builds hash tables of
 * the merges (byte_bpe.MergeTable's sorted arrays) and of the whole words; dropped (256 flags)
 * are the bytes a trailing character-removing Split takes out of every piece, lengths the
 * bytes of each id; char_ids (int32 per code point), for character BPE with byte fallback
 * (Gemma), each character's id or -1, byte_ids then being the byte fallback tokens.
 * encode(data, span_begin, span_end, added_ids, check_nfc, moves) returns (ids, ends) as
 * int32 bytes, ends moved back by moves (nfc.Alignment as int64 triples) or an int where
 * there are none (0: bytes are dropped, ENDS_* of native.h); or, with nothing encoded, what
 * stands in the way: the list of class blocks not probed yet (the caller probes them and calls
 * again), with check_nfc the NFC windows (int64 pairs, payload.nfc_windows) or None where a
 * character is unknown to NFC.  All of it runs in one stretch without the GIL (survey.c), so
 * the chunks of a text encode on every core with nothing between them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"

enum { T_CLASSES, T_FOLDS, T_KINDS, T_NFC, T_PROBED, T_NUMERIC, T_HAN, N_TABLES };

typedef struct {
    PyObject_HEAD
    Py_buffer tables[N_TABLES];
    int held;
    int family;
    int drops, keeps_text; /* keeps_text: none of printable ASCII, tab, newline, CR dropped */
    uint8_t dropped[256];
    int32_t *lengths; /* the bytes of each id */
    uint8_t *short_lengths; /* the same, SHORT_LENGTH_MAX where they are not below it */
    size_t n_lengths;
    Py_buffer chars; /* character BPE: each code point's id (model.char_ids) */
    int has_chars;
    Model model;
} Encoder;

static atomic_uint next_owner = 1;

static void encoder_clear(Encoder *e) {
    for (int i = 0; i < e->held; i++) PyBuffer_Release(&e->tables[i]);
    e->held = 0;
    if (e->has_chars) PyBuffer_Release(&e->chars);
    e->has_chars = 0;
    PyMem_Free(e->model.pairs);
    PyMem_Free(e->model.word_slots);
    PyMem_Free(e->model.word_bytes);
    PyMem_Free(e->model.word_at);
    PyMem_Free(e->model.word_ids);
    PyMem_Free(e->lengths);
    PyMem_Free(e->short_lengths);
    e->lengths = NULL;
    e->short_lengths = NULL;
    memset(&e->model, 0, sizeof(e->model));
}

/* A copy of a C-contiguous buffer of n items of size bytes each; NULL with an error set. */
static void *copied(PyObject *obj, Py_ssize_t size, Py_ssize_t *n) {
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    void *out = NULL;
    if (view.len % size)
        PyErr_SetString(PyExc_ValueError, "array of the wrong item size");
    else if ((out = PyMem_Malloc(view.len ? view.len : 1)) == NULL)
        PyErr_NoMemory();
    else {
        memcpy(out, view.buf, view.len);
        *n = view.len / size;
    }
    PyBuffer_Release(&view);
    return out;
}

static int bits_for(Py_ssize_t n) { /* a table of 2^bits slots, at least twice n */
    int bits = 1;
    while (((Py_ssize_t)1 << bits) < 2 * n + 1) bits++;
    return bits;
}

/* The merges as an open-addressing table: keys hash as in byte_bpe.PairSlots. */
static int build_pairs(Model *m, PyObject *keys, PyObject *ranks, PyObject *merged) {
    Py_ssize_t n_keys = 0, n_ranks = 0, n_merged = 0;
    int64_t *k = copied(keys, 8, &n_keys);
    int64_t *r = k ? copied(ranks, 8, &n_ranks) : NULL;
    int32_t *g = r ? copied(merged, 4, &n_merged) : NULL;
    int ok = g != NULL;
    if (ok && (n_keys != n_ranks || n_keys != n_merged)) {
        PyErr_SetString(PyExc_ValueError, "inconsistent merge arrays");
        ok = 0;
    }
    int bits = bits_for(n_keys);
    if (ok && (m->pairs = PyMem_Malloc(((size_t)1 << bits) * sizeof(PairSlot))) == NULL) {
        PyErr_NoMemory();
        ok = 0;
    }
    if (ok) {
        m->pair_mask = ((uint64_t)1 << bits) - 1;
        m->pair_shift = 64 - bits;
        for (uint64_t s = 0; s <= m->pair_mask; s++) m->pairs[s] = (PairSlot){-1, 0, 0};
        for (Py_ssize_t i = 0; i < n_keys; i++) {
            uint64_t s = ((uint64_t)k[i] * 0x9E3779B97F4A7C15ull) >> m->pair_shift;
            while (m->pairs[s].key >= 0) s = (s + 1) & m->pair_mask;
            m->pairs[s] = (PairSlot){k[i], (int32_t)r[i], g[i]};
        }
    }
    PyMem_Free(k);
    PyMem_Free(r);
    PyMem_Free(g);
    return ok ? 0 : -1;
}

/* The whole words (word_bytes[at[e]:at[e + 1]] -> ids[e]) as an FNV-1a table (whole_words). */
static int build_words(Model *m, PyObject *bytes, PyObject *at, PyObject *ids) {
    Py_ssize_t n_bytes = 0, n_at = 0, n_ids = 0;
    m->word_bytes = copied(bytes, 1, &n_bytes);
    m->word_at = m->word_bytes ? copied(at, 8, &n_at) : NULL;
    m->word_ids = m->word_at ? copied(ids, 4, &n_ids) : NULL;
    if (m->word_ids == NULL) return -1;
    if (n_at < 1 || n_ids != n_at - 1 || m->word_at[n_at - 1] > n_bytes) {
        PyErr_SetString(PyExc_ValueError, "inconsistent whole-word arrays");
        return -1;
    }
    int bits = bits_for(n_ids);
    if ((m->word_slots = PyMem_Malloc(((size_t)1 << bits) * sizeof(int32_t))) == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    m->word_mask = ((uint64_t)1 << bits) - 1;
    for (uint64_t s = 0; s <= m->word_mask; s++) m->word_slots[s] = -1;
    m->word_max = 0;
    for (Py_ssize_t e = 0; e < n_ids; e++) {
        int64_t len = m->word_at[e + 1] - m->word_at[e];
        if (len > m->word_max) m->word_max = len;
        uint64_t h = 0xCBF29CE484222325ull;
        for (int64_t i = 0; i < len; i++) h = (h ^ m->word_bytes[m->word_at[e] + i]) * 0x100000001B3ull;
        uint64_t s = h & m->word_mask;
        while (m->word_slots[s] >= 0) s = (s + 1) & m->word_mask;
        m->word_slots[s] = (int32_t)e;
    }
    return 0;
}

static int Encoder_init(Encoder *e, PyObject *args, PyObject *kwds) {
    PyObject *t[N_TABLES], *byte_ids, *keys, *ranks, *merged, *wbytes, *wat, *wids, *lengths;
    PyObject *chars = Py_None;
    Py_buffer dropped;
    int ignore;
    long long width;
    if (!PyArg_ParseTuple(args, "iOOOOOOOOOOOLpOOOy*O|O", &e->family, &t[0], &t[1], &t[2], &t[3],
                          &t[4], &t[5], &t[6], &byte_ids, &keys, &ranks, &merged, &width, &ignore,
                          &wbytes, &wat, &wids, &dropped, &lengths, &chars))
        return -1;
    encoder_clear(e);
    if (chars != Py_None) {
        if (PyObject_GetBuffer(chars, &e->chars, PyBUF_C_CONTIGUOUS) < 0) {
            PyBuffer_Release(&dropped);
            return -1;
        }
        e->has_chars = 1;
        if (e->chars.len != 0x110001 * 4) {
            PyBuffer_Release(&dropped);
            PyErr_SetString(PyExc_ValueError, "character ids: one int32 per code point");
            return -1;
        }
    }
    Py_ssize_t n_lengths = 0;
    if ((e->lengths = copied(lengths, 4, &n_lengths)) == NULL) {
        PyBuffer_Release(&dropped);
        return -1;
    }
    e->n_lengths = (size_t)n_lengths;
    if ((e->short_lengths = PyMem_Malloc(e->n_lengths + 1)) == NULL) {
        PyBuffer_Release(&dropped);
        PyErr_NoMemory();
        return -1;
    }
    for (size_t k = 0; k < e->n_lengths; k++)
        e->short_lengths[k] = (uint32_t)e->lengths[k] < SHORT_LENGTH_MAX ? (uint8_t)e->lengths[k]
                                                                         : SHORT_LENGTH_MAX;
    int dropped_ok = dropped.len == 256;
    if (dropped_ok) memcpy(e->dropped, dropped.buf, 256);
    PyBuffer_Release(&dropped);
    if (!dropped_ok) {
        PyErr_SetString(PyExc_ValueError, "dropped bytes: 256 flags");
        return -1;
    }
    e->drops = 0;
    for (int b = 0; b < 256; b++) e->drops |= e->dropped[b] != 0;
    e->keeps_text = !e->dropped['\t'] && !e->dropped['\n'] && !e->dropped['\r'];
    for (int b = 0x20; b < 0x7F; b++) e->keeps_text &= !e->dropped[b];
    if (e->family < 0 || e->family >= N_FAMILIES) {
        PyErr_SetString(PyExc_ValueError, "unknown family");
        return -1;
    }
    for (int i = 0; i < N_TABLES; i++) {
        if (PyObject_GetBuffer(t[i], &e->tables[i], PyBUF_C_CONTIGUOUS) < 0) return -1;
        e->held++;
        if (e->tables[i].len != (i == T_PROBED ? SURVEY_BLOCKS : 0x110001)) {
            PyErr_SetString(PyExc_ValueError, "class table of the wrong size");
            return -1;
        }
    }
    Model *m = &e->model;
    Py_ssize_t n_bytes = 0;
    int32_t *ids = copied(byte_ids, 4, &n_bytes);
    if (ids == NULL) return -1;
    memcpy(m->byte_ids, ids, (n_bytes < 256 ? n_bytes : 256) * 4);
    PyMem_Free(ids);
    if (n_bytes != 256) {
        PyErr_SetString(PyExc_ValueError, "byte ids: 256 of them");
        return -1;
    }
    m->width = width;
    m->ignore_merges = ignore;
    m->char_ids = e->has_chars ? e->chars.buf : NULL;
    if (build_pairs(m, keys, ranks, merged) < 0 || build_words(m, wbytes, wat, wids) < 0)
        return -1;
    m->owner = atomic_fetch_add(&next_owner, 1);
    return 0;
}

static void Encoder_dealloc(Encoder *e) {
    encoder_clear(e);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

/* ---- the work sets: buffers and piece caches, one per core at most -------------------- */

/* Text bytes a work set's block arrays and scratch keep room for between its calls (~21 bytes
 * each: 2.7 MB); a longer text's are freed after its call.  Made and freed per call, they let
 * glibc hand a pool thread's freed arena top back to the OS now and then, and the next chunk
 * faulted it in again (measured: 1 in 30 cold starts of 1M characters on 2 threads took
 * ~1,700 page faults and twice the CPU; none since, past each thread's first).  A long
 * stretch is encoded in blocks (block_end); its ids and ends are written straight into the
 * result's bytes (Encoder_encode), so no array of the whole text's size is kept or copied. */
#define KEEP_BYTES ((size_t)128 << 10)

typedef struct Work {
    size_t cap; /* bytes of a block the arrays cp, at, starts, cls have room for, + 1 */
    uint32_t *cp, *at, *starts;
    uint8_t *cls;
    Scratch scratch;
    struct Work *next; /* in the list of free sets */
    int passing;       /* made for one encode, without caches, when every set was taken */
} Work;

/* An encode takes a work set for its length and gives it back: there are at most as many sets
 * as cores the process may run on (work_limit, TOKSPLICE_NATIVE_WORK_SETS where set), each
 * with 12.8 MB of piece caches, however many threads encode (the service encodes short texts
 * on whichever worker thread serves the request, up to 40: a set a thread would have been 510
 * MB).  An encode of WORK_WAIT_BYTES or more that finds every set taken waits up to
 * WORK_WAIT_NS for one (a chunk of a cold start holds one ~0.3-1 ms); a shorter one, or one
 * whose wait ran out (the sets held by long encodes: 'a' * 4_000_000 takes ~1 s), gets a set of
 * its own for the call, without caches, and merges each piece (a 60K-character text 4-12 times
 * slower, 2K characters ~0.01 ms more).  So the service's inline repairs, on the event loop
 * (up to 32 KiB of new text), never wait.  The set given back last is taken first: its caches
 * are the warmest. */
#define WORK_WAIT_NS 2000000L
#define WORK_WAIT_BYTES ((size_t)64 << 10)
static pthread_mutex_t work_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_freed; /* on the monotonic clock: work_cond_init */
static Work *work_free;
static size_t work_made, work_taken, work_waits, work_passing, work_limit = 1;

static int work_cond_init(void) {
    pthread_condattr_t attr;
    int failed = pthread_condattr_init(&attr) ||
                 pthread_condattr_setclock(&attr, CLOCK_MONOTONIC) ||
                 pthread_cond_init(&work_freed, &attr);
    pthread_condattr_destroy(&attr);
    return failed;
}

/* A fork happens with the lock held (so the list is whole), and the child, whose other
 * threads are gone with the sets they had taken, starts a new lock and condition and forgets
 * those sets. */
static void work_fork_prepare(void) { pthread_mutex_lock(&work_lock); }
static void work_fork_parent(void) { pthread_mutex_unlock(&work_lock); }
static void work_fork_child(void) {
    pthread_mutex_init(&work_lock, NULL);
    work_cond_init();
    work_made -= work_taken;
    work_taken = 0;
}

static void block_arrays_free(Work *w) {
    free(w->cp);
    free(w->at);
    free(w->starts);
    free(w->cls);
    w->cp = w->at = w->starts = NULL;
    w->cls = NULL;
    w->cap = 0;
}

/* A work set for an encode of n bytes: the one given back last, or a new one while fewer than
 * work_limit exist, or (n of WORK_WAIT_BYTES or more) one given back within WORK_WAIT_NS, else
 * one for this call alone, without caches; NULL when out of memory.  Called without the GIL. */
static Work *work_take(size_t n) {
    pthread_mutex_lock(&work_lock);
    if (work_free == NULL && work_made >= work_limit && work_limit > 0 && n >= WORK_WAIT_BYTES) {
        work_waits++;
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += WORK_WAIT_NS;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        while (work_free == NULL &&
               pthread_cond_timedwait(&work_freed, &work_lock, &until) == 0) {
        }
    }
    Work *w = work_free;
    int pooled = w != NULL || work_made < work_limit;
    if (w != NULL) {
        work_free = w->next;
    } else if (pooled && (w = calloc(1, sizeof(Work))) != NULL) {
        work_made++;
    }
    work_taken += w != NULL;
    work_passing += !pooled;
    pthread_mutex_unlock(&work_lock);
    if (!pooled) {
        if ((w = calloc(1, sizeof(Work))) != NULL) w->passing = 1;
    } else if (w != NULL && w->scratch.cache == NULL) { /* new, or its caches failed before */
        w->scratch.cache = caches_new();
    }
    return w;
}

/* After a call: what is over KEEP_BYTES goes back to the heap, the set to the free list (one
 * made for the call, all of it to the heap). */
static void work_give(Work *w) {
    if (w == NULL) return;
    if (w->passing || w->cap > KEEP_BYTES + 1) block_arrays_free(w);
    if (w->passing || w->scratch.cap > KEEP_BYTES) scratch_free(&w->scratch);
    if (w->passing) {
        free(w);
        return;
    }
    pthread_mutex_lock(&work_lock);
    w->next = work_free;
    work_free = w;
    work_taken--;
    pthread_mutex_unlock(&work_lock);
    pthread_cond_signal(&work_freed);
}

/* Room in w's block arrays for a block of n bytes; -1 when out of memory. */
static int block_room(Work *w, size_t n) {
    if (n + 1 <= w->cap) return 0;
    block_arrays_free(w);
    w->cp = malloc((n + 1) * 4);
    w->at = malloc((n + 1) * 4);
    w->starts = malloc((n + 1 + STARTS_PAD) * 4);
    w->cls = malloc(n + 1 + RUN_PAD);
    if (!w->cp || !w->at || !w->starts || !w->cls) {
        block_arrays_free(w);
        return -1;
    }
    w->cap = n + 1;
    return 0;
}

#ifdef WIDE_ASCII
#include <immintrin.h>
int wide_ascii;

/* The 64-byte blocks of the n bytes at p, while all of a block's are ASCII, as characters:
 * their classes by one byte permute over the table's first 128 entries, (cp, offsets not
 * NULL) their code points and byte offsets from offset widened; how many bytes they took (a
 * multiple of 64).  A per-byte table lookup took most of the decode of ASCII text. */
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) static size_t
ascii_blocks(const uint8_t *classes, const uint8_t *p, size_t n, uint8_t *cls, uint32_t *cp,
             uint32_t *offsets, uint32_t offset) {
    const __m512i low = _mm512_loadu_si512(classes), high = _mm512_loadu_si512(classes + 64);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512i v = _mm512_loadu_si512(p + i);
        if (_mm512_movepi8_mask(v)) break;
        _mm512_storeu_si512(cls + i, _mm512_permutex2var_epi8(low, v, high));
        for (size_t q = i; q < i + 64; q += 16) {
            if (cp != NULL)
                _mm512_storeu_si512(cp + q, _mm512_cvtepu8_epi32(
                                                _mm_loadu_si128((const __m128i *)(p + q))));
            if (offsets != NULL)
                _mm512_storeu_si512(offsets + q,
                                    _mm512_add_epi32(_mm512_set1_epi32((int)(offset + q)), iota));
        }
    }
    return i;
}

int wide_utf8; /* and AVX-512 VBMI2 (its byte compress); off with wide_ascii */

#define WIDE_UTF8_TARGET __attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vbmi2")))
/* At most this many characters of 2-4 bytes in 64 bytes are classed one by one (utf8_64). */
#define FEW_WIDE 4

/* The 16 bytes at p as 32-bit lanes. */
WIDE_UTF8_TARGET static inline __m512i widened16(const uint8_t *p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
}

/* The code points of 16 characters from their lead bytes and the 3 bytes after each (lanes
 * past a character's width are ignored). */
WIDE_UTF8_TARGET static inline __m512i code_points16(const uint8_t *lead, const uint8_t *second,
                                                     const uint8_t *third, const uint8_t *fourth) {
    const __m512i low6 = _mm512_set1_epi32(0x3F);
    __m512i b0 = widened16(lead), b1 = _mm512_and_si512(widened16(second), low6);
    __m512i b2 = _mm512_and_si512(widened16(third), low6);
    __m512i b3 = _mm512_and_si512(widened16(fourth), low6);
    __m512i two = _mm512_or_si512(
        _mm512_slli_epi32(_mm512_and_si512(b0, _mm512_set1_epi32(0x1F)), 6), b1);
    __m512i three = _mm512_or_si512(
        _mm512_slli_epi32(_mm512_and_si512(b0, _mm512_set1_epi32(0x0F)), 12),
        _mm512_or_si512(_mm512_slli_epi32(b1, 6), b2));
    __m512i four = _mm512_or_si512(
        _mm512_slli_epi32(_mm512_and_si512(b0, _mm512_set1_epi32(0x07)), 18),
        _mm512_or_si512(_mm512_slli_epi32(b1, 12), _mm512_or_si512(_mm512_slli_epi32(b2, 6), b3)));
    __mmask16 wide2 = _mm512_cmpge_epu32_mask(b0, _mm512_set1_epi32(0xC0));
    __mmask16 wide3 = _mm512_cmpge_epu32_mask(b0, _mm512_set1_epi32(0xE0));
    __mmask16 wide4 = _mm512_cmpge_epu32_mask(b0, _mm512_set1_epi32(0xF0));
    __m512i c = _mm512_mask_mov_epi32(_mm512_mask_mov_epi32(b0, wide2, two), wide3, three);
    return _mm512_mask_mov_epi32(c, wide4, four);
}

/* The classes of 16 code points, gathered 4 bytes at a time (kinds not NULL: marks as
 * letters). */
WIDE_UTF8_TARGET static inline __m128i classes16(const uint8_t *classes, const uint8_t *kinds,
                                                 __m512i c) {
    const __m512i low8 = _mm512_set1_epi32(0xFF);
    __m512i k = _mm512_and_si512(_mm512_i32gather_epi32(c, classes, 1), low8);
    if (kinds != NULL) {
        __m512i kind = _mm512_and_si512(_mm512_i32gather_epi32(c, kinds, 1), low8);
        k = _mm512_mask_mov_epi32(k, _mm512_cmpeq_epi32_mask(kind, _mm512_set1_epi32(K_MARK)),
                                  _mm512_set1_epi32(C_L));
    }
    return _mm512_cvtepi32_epi8(k);
}

/* The characters that begin in the 64 bytes at p and end in them, if none is past U+FFFFF
 * (its class, read 4 bytes at a time, would be read past the table's end): their classes
 * (kinds not NULL: marks as letters), (cp not NULL) code points and byte offsets from offset,
 * and their count in *chars; the bytes they take (0: nothing is written).  Each character's
 * bytes are compressed into a lane of their own by the masks of its lead and of the 3 bytes
 * after it, where a run of non-ASCII text went a branchy character at a time. */
WIDE_UTF8_TARGET static size_t utf8_64(const uint8_t *classes, const uint8_t *kinds,
                                       const uint8_t *p, uint8_t *cls, uint32_t *cp,
                                       uint32_t *offsets, uint32_t offset, size_t *chars) {
    static const uint8_t iota[64] = {
        0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
        22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
        44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63};
    __m512i v = _mm512_loadu_si512(p);
    if (_mm512_cmpge_epu8_mask(v, _mm512_set1_epi8((char)0xF4))) return 0;
    uint64_t leads = _mm512_cmpneq_epi8_mask(_mm512_and_si512(v, _mm512_set1_epi8((char)0xC0)),
                                             _mm512_set1_epi8((char)0x80));
    /* A character led before byte 61 ends in the 64; the next one starts at the first lead
     * from 61 on, or at 64 where there is none. */
    uint64_t whole = leads & ((1ull << 61) - 1), later = leads >> 61;
    uint64_t wide = whole & _mm512_cmpge_epu8_mask(v, _mm512_set1_epi8((char)0xC0));
    uint8_t at[64], b0[64], b1[64], b2[64], b3[64];
    _mm512_storeu_si512(at, _mm512_maskz_compress_epi8(whole, _mm512_loadu_si512(iota)));
    __m512i lead = _mm512_maskz_compress_epi8(whole, v);
    _mm512_storeu_si512(b0, lead);
    size_t count = (size_t)__builtin_popcountll(whole);
    for (size_t g = 0; g < count; g += 16)
        _mm512_storeu_si512(offsets + g,
                            _mm512_add_epi32(widened16(at + g), _mm512_set1_epi32((int)offset)));
    if (__builtin_popcountll(wide) <= FEW_WIDE) {
        /* ASCII but for a few characters (an agent's file reads: an arrow on every line):
         * the ASCII ones classed as ascii_blocks classes them, the others one by one (all 64
         * lanes written: n + 64 is within the block, as 64 of its bytes are left) */
        _mm512_storeu_si512(cls, _mm512_permutex2var_epi8(_mm512_loadu_si512(classes), lead,
                                                          _mm512_loadu_si512(classes + 64)));
        for (size_t g = 0; cp != NULL && g < count; g += 16)
            _mm512_storeu_si512(cp + g, widened16(b0 + g));
        for (; wide; wide &= wide - 1) {
            size_t lane = (size_t)__builtin_popcountll(whole & ((wide & -wide) - 1));
            int width;
            uint32_t c = utf8_decode_at(p, (size_t)__builtin_ctzll(wide), &width);
            cls[lane] = kinds != NULL && kinds[c] == K_MARK ? C_L : classes[c];
            if (cp != NULL) cp[lane] = c;
        }
    } else {
        _mm512_storeu_si512(b1, _mm512_maskz_compress_epi8(whole << 1, v));
        _mm512_storeu_si512(b2, _mm512_maskz_compress_epi8(whole << 2, v));
        _mm512_storeu_si512(b3, _mm512_maskz_compress_epi8(whole << 3, v));
        for (size_t g = 0; g < count; g += 16) {
            __m512i c = code_points16(b0 + g, b1 + g, b2 + g, b3 + g);
            _mm_storeu_si128((__m128i *)(cls + g), classes16(classes, kinds, c));
            if (cp != NULL) _mm512_storeu_si512(cp + g, c);
        }
    }
    *chars = count;
    return later ? 61 + (size_t)__builtin_ctzll(later) : 64;
}
#endif

/* Which code points a family's scanner reads (see Stretch); POINTS_BYTES: none, nor classes,
 * the stretch's bytes alone (its characters counted as bytes). */
enum { POINTS_NONE, POINTS_ALL, POINTS_UNLESS_ASCII, POINTS_BYTES };

static int points_of(int family) {
    switch (family) {
    case FAM_CL100K:
    case FAM_QWEN2:
    case FAM_QWEN35:
    case FAM_GPT2: return POINTS_NONE;
    case FAM_O200K:
    case FAM_TEKKEN:
    case FAM_KIMI:
    case FAM_GPT2_DIGITS:
    case FAM_DEEPSEEK_V3: return POINTS_UNLESS_ASCII;
    case FAM_SPACES_REPLACED: return POINTS_BYTES;
    default: return POINTS_ALL;
    }
}

/* at holding the byte offsets of the n ASCII characters before a stretch's first non-ASCII
 * one, and for POINTS_UNLESS_ASCII cp their code points (writing: from then on all). */
static uint32_t *ascii_offsets(Work *w, const uint8_t *ascii, size_t n, int points,
                               int *writing) {
    for (size_t k = 0; k < n; k++) w->at[k] = (uint32_t)k;
    if (points == POINTS_UNLESS_ASCII) {
        for (size_t k = 0; k < n; k++) w->cp[k] = ascii[k];
        *writing = 1;
    }
    return w->at;
}

/* The code points of data[a:b] (as points says) and their classes into w, and each one's
 * byte offset in at unless every one is ASCII (then at is NULL: the offset is the index);
 * their count.  kinds (not NULL): marks are classed as letters (no ASCII character is one). */
static size_t decoded(const uint8_t *classes, const uint8_t *kinds, const uint8_t *data,
                      size_t a, size_t b, Work *w, int points, uint32_t **at) {
    uint32_t *offsets = NULL; /* until a character is not ASCII */
    int writing = points == POINTS_ALL; /* the code points */
    size_t n = 0;
    for (size_t i = a; i < b; n++) {
#ifdef WIDE_ASCII
        if (wide_ascii && i + 64 <= b) {
            size_t run = data[i] < 0x80 ? ascii_blocks(classes, data + i, b - i, w->cls + n,
                                                       writing ? w->cp + n : NULL,
                                                       offsets ? offsets + n : NULL,
                                                       (uint32_t)(i - a))
                                        : 0;
            if (run) { /* a run of 64-byte blocks in one call (one each: 1.5-2% of source) */
                n += run - 1;
                i += run;
                continue;
            }
            if (wide_utf8) { /* not all ASCII: up to 64 characters of any width */
                if (offsets == NULL) offsets = ascii_offsets(w, data + a, n, points, &writing);
                size_t chars, bytes = utf8_64(classes, kinds, data + i, w->cls + n,
                                              writing ? w->cp + n : NULL, offsets + n,
                                              (uint32_t)(i - a), &chars);
                if (bytes) {
                    n += chars - 1;
                    i += bytes;
                    continue;
                }
            }
        }
#endif
        if (data[i] < 0x80) { /* a run of ASCII: a character per byte */
            size_t run = 1;
            if (i + 16 <= b) { /* all 16 written, the first run of them kept (n <= i - a) */
                run = ascii16(data + i);
                if (writing) widen16(data + i, w->cp + n);
            } else if (writing) {
                w->cp[n] = data[i];
            }
            for (size_t k = 0; k < run; k++) w->cls[n + k] = classes[data[i + k]];
            if (offsets != NULL)
                for (size_t k = 0; k < run; k++) offsets[n + k] = (uint32_t)(i + k - a);
            n += run - 1;
            i += run;
            continue;
        }
        if (offsets == NULL) offsets = ascii_offsets(w, data + a, n, points, &writing);
        int width;
        uint32_t c = utf8_decode_at(data, i, &width);
        if (writing) w->cp[n] = c;
        w->cls[n] = kinds != NULL && kinds[c] == K_MARK ? C_L : classes[c];
        offsets[n] = (uint32_t)(i - a);
        i += width;
    }
    if (offsets != NULL) offsets[n] = (uint32_t)(b - a);
    *at = offsets;
    return n;
}

/* Ids of data[a:b], a block of a stretch without added tokens of the text data[0:total],
 * appended at out (dropped: the model's, or NULL where the text holds none); their count, -1,
 * or BLOCKED where survey is set and the block holds a character of a class block not probed
 * (survey_blocks of the block, which is in L2 now, where a pass over the whole text before
 * read it from L3: ASCII blocks need none, their class block being probed first). */
#define BLOCKED (-3)
static long encode_block(const Encoder *e, const uint8_t *data, size_t total, size_t a,
                         size_t b, const uint8_t *dropped, int survey, Work *w, int32_t *out) {
    if (block_room(w, b - a) < 0) return -1;
    uint32_t *at;
    int points = points_of(e->family);
    /* Qwen3.5's pattern is Qwen2's with \p{M} joining \p{L} (and leaving punctuation) */
    const uint8_t *marks = e->family == FAM_QWEN35 ? e->tables[T_KINDS].buf : NULL;
    size_t n = b - a;
    at = NULL;
    if (points != POINTS_BYTES) {
        n = decoded(e->tables[T_CLASSES].buf, marks, data, a, b, w, points, &at);
        uint8_t missing[SURVEY_BLOCKS];
        if (survey && at != NULL && survey_blocks(e->tables[T_PROBED].buf, data + a, b - a,
                                                  missing))
            return BLOCKED;
        memset(w->cls + n, 255, RUN_PAD); /* no class */
    }
    int read = points == POINTS_ALL || (points == POINTS_UNLESS_ASCII && at != NULL);
    Stretch s = {read ? w->cp : NULL, w->cls, e->tables[T_FOLDS].buf, e->tables[T_KINDS].buf,
                 e->tables[T_NUMERIC].buf, e->tables[T_HAN].buf, n, data + a, at};
    size_t pieces = scan_pieces(e->family, &s, w->starts);
    w->starts[pieces] = (uint32_t)n;
    return bpe_pieces(&e->model, data + a, total - a, at, w->starts, pieces, dropped, out,
                      &w->scratch);
}

/* Bytes of a block, at least: its arrays (~10 bytes a byte) stay in L2, where a whole 1M
 * character stretch's went through memory and, made fresh per call, faulted page by page.
 * TOKSPLICE_NATIVE_BLOCK (bytes, at least 1) sets it at import, so that the tests can cut
 * their short texts into many blocks. */
static size_t block_bytes = (size_t)32 << 10;

/* Where the block of data[a:b] that starts at a ends: b, or the first byte i past
 * block_bytes where data[i - 1:i + 2] is an ASCII character other than a space, a space and
 * an ASCII letter.  Every pattern but Gemma's (spaces replaced, no split) ends a piece there
 * and starts the next one there, whatever comes before and after (docs/design.md: "Blocks"),
 * so the blocks' pieces are the stretch's. */
static size_t block_end(const Encoder *e, const uint8_t *data, size_t a, size_t b) {
    if (e->family == FAM_SPACES_REPLACED || b - a <= 2 * block_bytes) return b;
    for (const uint8_t *p = data + a + block_bytes, *last = data + b - 1;
         p < last && (p = memchr(p, ' ', (size_t)(last - p))) != NULL; p++) {
        uint8_t before = p[-1], after = p[1] | 0x20; /* lower case where a letter */
        if (before > ' ' && before < 0x7F && after >= 'a' && after <= 'z')
            return (size_t)(p - data);
    }
    return b;
}

/* Ids of data[a:b], a stretch without added tokens of the text data[0:total], block by block,
 * appended at out; their count, or encode_block's code where it has one. */
static long encode_stretch(const Encoder *e, const uint8_t *data, size_t total, size_t a,
                           size_t b, const uint8_t *dropped, int survey, Work *w,
                           int32_t *out) {
    long count = 0;
    for (size_t stop; a < b; a = stop) {
        stop = block_end(e, data, a, b);
        long got = encode_block(e, data, total, a, stop, dropped, survey, w, out + count);
        if (got < 0) return got;
        count += got;
    }
    return count;
}

/* The list of blocks missing flags; NULL with an error set. */
static PyObject *block_list(const uint8_t *missing) {
    PyObject *list = PyList_New(0);
    for (int b = 0; list != NULL && b < SURVEY_BLOCKS; b++) {
        if (!missing[b]) continue;
        PyObject *v = PyLong_FromLong(b);
        if (v == NULL || PyList_Append(list, v) < 0) Py_CLEAR(list);
        Py_XDECREF(v);
    }
    return list;
}

/* What one encode found, GIL-free, for the Python objects built after it. */
typedef struct {
    uint8_t missing[SURVEY_BLOCKS];
    int blocked, nfc; /* nfc: 1 a character NFC_UNKNOWN, -1 out of memory */
    int drops;        /* the text holds a byte the model drops */
    NfcWindows windows;
    Work *work;
    int32_t *ids, *ends; /* in the result's bytes (Encoder_encode) */
    long count; /* -1 out of memory, -2 spans out of order, BLOCKED */
    int ends_code;
    int survey; /* the class blocks are surveyed block by block (encode_block) */
} Encoded;

/* Ids of data[0:n] with its added tokens (sb, se, ids: spans sorted) into r->ids (room for an
 * id per byte and IDS_PAD more). */
static void encode_spans(const Encoder *e, const uint8_t *data, size_t n, const int64_t *sb,
                         const int64_t *se, const int32_t *ids, size_t spans, Work *w,
                         Encoded *r) {
    const uint8_t *dropped = r->drops ? e->dropped : NULL;
    long count = 0;
    size_t at = 0;
    for (size_t k = 0; k <= spans; k++) {
        size_t stop = k < spans ? (size_t)sb[k] : n;
        if (stop < at || stop > n || (k < spans && ((size_t)se[k] <= stop || (size_t)se[k] > n))) {
            count = -2;
            break;
        }
        long got = stop > at ? encode_stretch(e, data, n, at, stop, dropped, r->survey, w,
                                              r->ids + count)
                             : 0;
        if (got < 0) {
            count = got;
            break;
        }
        count += got;
        if (k < spans) {
            r->ids[count++] = ids[k];
            at = (size_t)se[k];
        }
    }
    r->count = count;
}

/* Whether data[0:n] holds a byte the model drops (SmolLM2: six controls and lead bytes that
 * are rare or never UTF-8): where it holds none, its pieces go through the piece caches and
 * its ends are summed here, as for a model that drops nothing.  16 at a time where all are
 * printable ASCII, tab, newline or CR and the model keeps those. */
static int any_dropped(const Encoder *e, const uint8_t *data, size_t n) {
    size_t i = 0;
#if defined(__SSE2__)
    const __m128i low = _mm_set1_epi8(0x1F), del = _mm_set1_epi8(0x7F);
    const __m128i tab = _mm_set1_epi8('\t'), nl = _mm_set1_epi8('\n'), cr = _mm_set1_epi8('\r');
    for (; e->keeps_text && i + 16 <= n; i += 16) { /* signed: bytes over 0x7F are below 0x1F */
        __m128i v = _mm_loadu_si128((const __m128i *)(data + i));
        __m128i kept = _mm_and_si128(_mm_cmpgt_epi8(v, low), _mm_cmplt_epi8(v, del));
        kept = _mm_or_si128(kept, _mm_or_si128(_mm_cmpeq_epi8(v, tab),
                                               _mm_or_si128(_mm_cmpeq_epi8(v, nl),
                                                            _mm_cmpeq_epi8(v, cr))));
        if (_mm_movemask_epi8(kept) != 0xFFFF)
            for (size_t k = i; k < i + 16; k++)
                if (e->dropped[data[k]]) return 1;
    }
#endif
    for (; i < n; i++)
        if (e->dropped[data[i]]) return 1;
    return 0;
}

/* The survey, the merges and the ends of one text, without the GIL. */
static void encode_text(const Encoder *e, const uint8_t *data, size_t n, const int64_t *sb,
                        const int64_t *se, const int32_t *ids, size_t spans, int check_nfc,
                        const int64_t *moves, size_t n_moves, Encoded *r) {
    const uint8_t *probed = e->tables[T_PROBED].buf;
    if (points_of(e->family) != POINTS_BYTES) { /* those read no classes */
        /* NFC's survey reads the classes first; and block 0 holds ASCII (probed first) */
        r->survey = !check_nfc && probed[0];
        if (!r->survey && (r->blocked = survey_blocks(probed, data, n, r->missing))) return;
    }
    if (check_nfc) {
        r->nfc = survey_nfc(e->tables[T_NFC].buf, data, n, sb, se, spans, &r->windows);
        if (r->nfc || r->windows.count) return;
    }
    Work *w = r->work = work_take(n);
    if (w == NULL) {
        r->count = -1;
        return;
    }
    r->drops = e->drops && any_dropped(e, data, n);
    encode_spans(e, data, n, sb, se, ids, spans, w, r);
    /* a block stopped the encode: the whole text's blocks not probed, to be probed at once
     * (an empty list where another thread probed them meanwhile: Python encodes again) */
    if (r->count == BLOCKED) {
        survey_blocks(probed, data, n, r->missing);
        r->blocked = 1;
    }
    if (r->count < 0 || r->drops) return;
    r->ends_code = survey_ends(r->ids, (size_t)r->count, e->lengths, e->short_lengths,
                               e->n_lengths, n, moves, n_moves, r->ends);
}

/* What stands in the way of encode_text's ids, as Python answers it (see Encoder_encode):
 * NULL with no error set when nothing does. */
static PyObject *encode_obstacle(const Encoded *r) {
    if (r->blocked) return block_list(r->missing);
    if (r->nfc < 0 || r->count == -1) return PyErr_NoMemory();
    if (r->nfc > 0) return Py_NewRef(Py_None);
    if (r->windows.count)
        return PyBytes_FromStringAndSize((const char *)r->windows.pairs,
                                         r->windows.count * 2 * sizeof(int64_t));
    if (r->count == -2) PyErr_SetString(PyExc_ValueError, "added-token spans out of order");
    return NULL;
}

/* The Python answer to what encode_text found, taking ids and ends, the bytes it wrote into:
 * they are cut to the ids' count, or ends is replaced by the code of why there are none. */
static PyObject *encoded_result(const Encoder *e, const Encoded *r, PyObject *ids,
                                PyObject *ends) {
    PyObject *result = encode_obstacle(r);
    if (result == NULL && !PyErr_Occurred()) {
        if (r->drops || r->ends_code)
            Py_XSETREF(ends, PyLong_FromLong(r->drops ? 0 : r->ends_code));
        else
            _PyBytes_Resize(&ends, r->count * 4); /* NULL when it fails */
        if (ends != NULL && _PyBytes_Resize(&ids, r->count * 4) == 0)
            result = PyTuple_Pack(2, ids, ends);
    }
    Py_XDECREF(ids);
    Py_XDECREF(ends);
    return result;
}

/* The result's bytes are made before the GIL is let go, with room for an id and an end per
 * byte (ids IDS_PAD more), and written into directly: pages past the ids' count are never
 * touched, and no array of the text's size is kept per thread or copied. */
static PyObject *Encoder_encode(Encoder *e, PyObject *args) {
    Py_buffer text, begin, end, added, moves;
    int check_nfc;
    if (!PyArg_ParseTuple(args, "y*y*y*y*py*", &text, &begin, &end, &added, &check_nfc, &moves))
        return NULL;
    PyObject *result = NULL, *ids = NULL, *ends = NULL;
    size_t n = (size_t)text.len, spans = (size_t)begin.len / 8, n_moves = (size_t)moves.len / 24;
    if ((size_t)end.len != 8 * spans || (size_t)added.len != 4 * spans ||
        (size_t)moves.len != 24 * n_moves || n >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "spans, ids, moves or text of the wrong size");
    } else if ((ids = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((n + 1 + IDS_PAD) * 4))) &&
               (ends = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n + 1) * 4))) {
        Encoded r = {.ids = (int32_t *)PyBytes_AS_STRING(ids),
                     .ends = (int32_t *)PyBytes_AS_STRING(ends)};
        Py_BEGIN_ALLOW_THREADS
        encode_text(e, text.buf, n, begin.buf, end.buf, added.buf, spans, check_nfc, moves.buf,
                    n_moves, &r);
        work_give(r.work);
        Py_END_ALLOW_THREADS
        result = encoded_result(e, &r, ids, ends);
        ids = ends = NULL;
        free(r.windows.pairs);
    }
    Py_XDECREF(ids);
    Py_XDECREF(ends);
    PyBuffer_Release(&text);
    PyBuffer_Release(&begin);
    PyBuffer_Release(&end);
    PyBuffer_Release(&added);
    PyBuffer_Release(&moves);
    return result;
}

static PyObject *Encoder_missing_blocks(Encoder *e, PyObject *arg) {
    Py_buffer text;
    if (PyObject_GetBuffer(arg, &text, PyBUF_SIMPLE) < 0) return NULL;
    uint8_t missing[SURVEY_BLOCKS] = {0};
    if (points_of(e->family) != POINTS_BYTES)
        survey_blocks(e->tables[T_PROBED].buf, text.buf, (size_t)text.len, missing);
    PyBuffer_Release(&text);
    return block_list(missing);
}

static PyMethodDef Encoder_methods[] = {
    {"missing_blocks", (PyCFunction)Encoder_missing_blocks, METH_O,
     "The class blocks the UTF-8 text touches that are not probed yet."},
    {"encode", (PyCFunction)Encoder_encode, METH_VARARGS,
     "(ids, ends) of (data, span_begin, span_end, added_ids, check_nfc, moves), or what "
     "stands in the way: the unprobed blocks, the NFC windows, None."},
    {NULL}};

static PyTypeObject EncoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "app.tokenization.native._native.Encoder",
    .tp_basicsize = sizeof(Encoder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Encoder_init,
    .tp_dealloc = (destructor)Encoder_dealloc,
    .tp_methods = Encoder_methods,
};

/* AddedTokens(edge_start, edge_byte, edge_child, token, label_at, labels): the radix trie of
 * added_tokens.py; find(data) -> (begin, end, ids) as int64, int64 and int32 bytes (added.c). */
typedef struct {
    PyObject_HEAD
    AddedTrie trie;
    int32_t *edge_start, *edge_child, *token, *label_at;
    uint8_t *edge_byte, *labels;
} AddedTokens;

static void added_clear(AddedTokens *a) {
    PyMem_Free(a->edge_start);
    PyMem_Free(a->edge_child);
    PyMem_Free(a->token);
    PyMem_Free(a->label_at);
    PyMem_Free(a->edge_byte);
    PyMem_Free(a->labels);
    a->edge_start = a->edge_child = a->token = a->label_at = NULL;
    a->edge_byte = a->labels = NULL;
}

static int AddedTokens_init(AddedTokens *a, PyObject *args, PyObject *kwds) {
    PyObject *starts, *bytes, *children, *tokens, *label_at, *labels;
    if (!PyArg_ParseTuple(args, "OOOOOO", &starts, &bytes, &children, &tokens, &label_at,
                          &labels))
        return -1;
    added_clear(a);
    Py_ssize_t n_starts = 0, n_bytes = 0, n_children = 0, n_tokens = 0; /* n_tokens: nodes */
    Py_ssize_t n_label_at = 0, n_labels = 0;
    a->edge_start = copied(starts, 4, &n_starts);
    a->edge_byte = a->edge_start ? copied(bytes, 1, &n_bytes) : NULL;
    a->edge_child = a->edge_byte ? copied(children, 4, &n_children) : NULL;
    a->token = a->edge_child ? copied(tokens, 4, &n_tokens) : NULL;
    a->label_at = a->token ? copied(label_at, 4, &n_label_at) : NULL;
    a->labels = a->label_at ? copied(labels, 1, &n_labels) : NULL;
    if (a->labels == NULL) return -1;
    int ok = n_starts == n_tokens + 1 && n_tokens > 0 && n_bytes == n_children &&
             a->edge_start[0] == 0 && a->edge_start[n_tokens] == n_bytes &&
             n_label_at == n_tokens + 1 && a->label_at[0] == 0 &&
             a->label_at[n_tokens] == n_labels;
    for (Py_ssize_t k = 0; ok && k < n_tokens; k++)
        ok = a->edge_start[k] <= a->edge_start[k + 1] && a->label_at[k] <= a->label_at[k + 1];
    for (Py_ssize_t k = 0; ok && k < n_children; k++)
        ok = a->edge_child[k] > 0 && a->edge_child[k] < n_tokens;
    for (Py_ssize_t k = 0; ok && k < n_tokens; k++) /* each node's edges by byte */
        for (int32_t e = a->edge_start[k] + 1; ok && e < a->edge_start[k + 1]; e++)
            ok = a->edge_byte[e] > a->edge_byte[e - 1];
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "inconsistent trie arrays");
        return -1;
    }
    AddedTrie *t = &a->trie;
    memset(t, 0, sizeof(*t));
    t->edge_start = a->edge_start;
    t->edge_byte = a->edge_byte;
    t->edge_child = a->edge_child;
    t->token = a->token;
    t->label_at = a->label_at;
    t->labels = a->labels;
    for (int32_t e = a->edge_start[0]; e < a->edge_start[1]; e++) {
#if defined(__SSE2__)
        if (t->n_leads < ADDED_SIMD_LEADS)
            t->lead16[t->n_leads] = _mm_set1_epi8((char)a->edge_byte[e]);
#endif
        t->n_leads++;
        t->is_lead[a->edge_byte[e]] = 1;
    }
    return 0;
}

static void AddedTokens_dealloc(AddedTokens *a) {
    added_clear(a);
    Py_TYPE(a)->tp_free((PyObject *)a);
}

static PyObject *AddedTokens_find(AddedTokens *a, PyObject *arg) {
    if (a->token == NULL) {
        PyErr_SetString(PyExc_ValueError, "AddedTokens not initialized");
        return NULL;
    }
    Py_buffer text;
    if (PyObject_GetBuffer(arg, &text, PyBUF_SIMPLE) < 0) return NULL;
    AddedSpans spans = {0};
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = added_find(&a->trie, text.buf, (size_t)text.len, &spans);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&text);
    PyObject *result = NULL;
    if (failed)
        PyErr_NoMemory();
    else
        result = Py_BuildValue( /* (y# of a NULL pointer is None: none found gives "") */
            "(y#y#y#)", spans.count ? (const char *)spans.begin : "",
            (Py_ssize_t)(spans.count * sizeof(int64_t)),
            spans.count ? (const char *)spans.end : "", (Py_ssize_t)(spans.count * sizeof(int64_t)),
            spans.count ? (const char *)spans.ids : "", (Py_ssize_t)(spans.count * sizeof(int32_t)));
    free(spans.begin);
    free(spans.end);
    free(spans.ids);
    return result;
}

static PyMethodDef AddedTokens_methods[] = {
    {"find", (PyCFunction)AddedTokens_find, METH_O,
     "(begin, end, ids) of the leftmost-longest matches: int64, int64, int32 bytes."},
    {NULL}};

static PyTypeObject AddedTokensType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "app.tokenization.native._native.AddedTokens",
    .tp_basicsize = sizeof(AddedTokens),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)AddedTokens_init,
    .tp_dealloc = (destructor)AddedTokens_dealloc,
    .tp_methods = AddedTokens_methods,
};

/* Cores the process may run on (its CPU affinity), at least 1. */
static size_t usable_cores(void) {
    cpu_set_t set;
    long n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set)
                                                          : sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (size_t)n : 1;
}

static PyObject *work_sets(PyObject *module, PyObject *unused) {
    (void)module, (void)unused;
    pthread_mutex_lock(&work_lock);
    size_t made = work_made, taken = work_taken, waits = work_waits, passing = work_passing;
    pthread_mutex_unlock(&work_lock);
    return Py_BuildValue("nnnn", (Py_ssize_t)made, (Py_ssize_t)taken, (Py_ssize_t)waits,
                         (Py_ssize_t)passing);
}

static PyMethodDef native_functions[] = {
    {"work_sets", work_sets, METH_NOARGS,
     "(made, taken, waits, passing): work sets made so far (WORK_SETS at most), taken now, "
     "the encodes that waited for one, and those that merged without caches."},
    {"common_prefix", strings_common_prefix, METH_VARARGS,
     "Length of the common prefix of a[i:] and b[j:] (two str)."},
    {"common_suffix", strings_common_suffix, METH_VARARGS,
     "Length of the common suffix of two str, not reaching below floor in either."},
    {"gather", strings_gather, METH_VARARGS,
     "source[s:s + n] for each start s and length n (int64 buffers), concatenated."},
    {"compared_lines", strings_compared_lines, METH_VARARGS,
     "(changed, begin, length) of the lines of a and b paired, or None (unequal counts)."},
    {NULL}};

static struct PyModuleDef native_module = {
    PyModuleDef_HEAD_INIT, "_native", NULL, -1, native_functions, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) {
#ifdef WIDE_ASCII
    __builtin_cpu_init();
    const char *scalar = getenv("TOKSPLICE_NATIVE_SCALAR");
    wide_ascii = !(scalar && strcmp(scalar, "1") == 0) && __builtin_cpu_supports("avx512vbmi") &&
                 __builtin_cpu_supports("avx512bw");
    wide_utf8 = wide_ascii && __builtin_cpu_supports("avx512vbmi2");
#endif
    const char *block = getenv("TOKSPLICE_NATIVE_BLOCK");
    if (block && strtoul(block, NULL, 10) > 0) block_bytes = strtoul(block, NULL, 10);
    const char *sets = getenv("TOKSPLICE_NATIVE_WORK_SETS");
    work_limit = sets && *sets ? strtoul(sets, NULL, 10) : usable_cores();
    if (work_cond_init() != 0 ||
        pthread_atfork(work_fork_prepare, work_fork_parent, work_fork_child) != 0)
        return PyErr_NoMemory();
    if (PyType_Ready(&EncoderType) < 0 || PyType_Ready(&AddedTokensType) < 0) return NULL;
    PyObject *m = PyModule_Create(&native_module);
    if (!m) return NULL;
#ifdef WIDE_ASCII
    const long wide = wide_ascii;
#else
    const long wide = 0;
#endif
    if (PyModule_AddIntConstant(m, "WIDE_ASCII", wide) < 0 ||
        PyModule_AddIntConstant(m, "BLOCK_BYTES", (long)block_bytes) < 0 ||
        PyModule_AddIntConstant(m, "WORK_SETS", (long)work_limit) < 0 ||
        PyModule_AddObjectRef(m, "Encoder", (PyObject *)&EncoderType) < 0 ||
        PyModule_AddObjectRef(m, "AddedTokens", (PyObject *)&AddedTokensType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
