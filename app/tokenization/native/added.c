/* The added-token search: leftmost-longest matches over a byte trie of the tokens.
 *
 * The trie comes built (added_tokens.py): node k's edges are edge_byte/edge_child
 * [edge_start[k], edge_start[k + 1]), sorted by byte; token[k] is the id of the token ending at
 * node k, or -1.  Node 0 is the root.  A match can begin only at a byte the root has an edge
 * for (a lead): with few leads they are found with memchr, with up to ADDED_SIMD_LEADS by a
 * compare per lead of 16 bytes at a time (Gemma's five: '<', newline, tab, '|' and U+2581's
 * first byte, which a byte at a time took a tenth of an encode of source code), else by a
 * table of them.
 */
#include <stdlib.h>
#include <string.h>

#include "native.h"

/* The child of node for byte b, or -1. */
static inline int32_t child_of(const AddedTrie *t, int32_t node, uint8_t b) {
    int32_t lo = t->edge_start[node], hi = t->edge_start[node + 1];
    while (lo < hi) { /* a node has few edges: a linear scan of sorted bytes */
        uint8_t e = t->edge_byte[lo];
        if (e == b) return t->edge_child[lo];
        if (e > b) break;
        lo++;
    }
    return -1;
}

/* The next position >= at where a lead byte stands, or n.  With few leads, memchr finds
 * each lead's next occurrence, kept in next_at (so each lead's bytes are scanned once). */
static size_t next_lead(const AddedTrie *t, const uint8_t *data, size_t at, size_t n,
                        size_t *next_at) {
    if (t->n_leads <= ADDED_MEMCHR_LEADS) {
        size_t best = n;
        for (int k = 0; k < t->n_leads; k++) {
            if (next_at[k] < at) {
                const uint8_t *hit = memchr(data + at, t->leads[k], n - at);
                next_at[k] = hit != NULL ? (size_t)(hit - data) : n;
            }
            if (next_at[k] < best) best = next_at[k];
        }
        return best;
    }
#if defined(__SSE2__)
    if (t->n_leads <= ADDED_SIMD_LEADS) {
        const __m128i *lead = t->lead16;
        for (; at + 16 <= n; at += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(data + at)), hit = _mm_setzero_si128();
            for (int k = 0; k < t->n_leads; k++)
                hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, lead[k]));
            int found = _mm_movemask_epi8(hit);
            if (found) return at + (size_t)__builtin_ctz((unsigned)found);
        }
    }
#endif
    while (at < n && !t->is_lead[data[at]]) at++;
    return at;
}

static int push(AddedSpans *s, int64_t begin, int64_t end, int32_t id) {
    if (s->count == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        int64_t *b = realloc(s->begin, cap * sizeof(int64_t));
        if (b == NULL) return -1;
        s->begin = b;
        int64_t *e = realloc(s->end, cap * sizeof(int64_t));
        if (e == NULL) return -1;
        s->end = e;
        int32_t *i = realloc(s->ids, cap * sizeof(int32_t));
        if (i == NULL) return -1;
        s->ids = i;
        s->cap = cap;
    }
    s->begin[s->count] = begin;
    s->end[s->count] = end;
    s->ids[s->count++] = id;
    return 0;
}

int added_find(const AddedTrie *t, const uint8_t *data, size_t n, AddedSpans *out) {
    size_t at = 0, next_at[ADDED_MEMCHR_LEADS];
    for (int k = 0; k < t->n_leads && k < ADDED_MEMCHR_LEADS; k++) {
        const uint8_t *hit = n ? memchr(data, t->leads[k], n) : NULL;
        next_at[k] = hit != NULL ? (size_t)(hit - data) : n;
    }
    while ((at = next_lead(t, data, at, n, next_at)) < n) {
        int32_t node = 0, id = -1;
        size_t stop = at;
        for (size_t i = at; i < n && (node = child_of(t, node, data[i])) >= 0; i++) {
            if (t->token[node] >= 0) {
                id = t->token[node];
                stop = i + 1;
            }
        }
        if (id < 0) {
            at++;
            continue;
        }
        if (push(out, (int64_t)at, (int64_t)stop, id) < 0) return -1;
        at = stop;
    }
    return 0;
}
