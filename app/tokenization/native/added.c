/* The added-token search: leftmost-longest matches over a radix trie of the tokens.
 *
 * The trie comes built (added_tokens.py): node k's edges are edge_byte/edge_child
 * [edge_start[k], edge_start[k + 1]), sorted by byte; its label, the bytes after its edge's
 * byte that lead to it (no token ends inside a label), is labels[label_at[k]:label_at[k + 1]];
 * token[k] is the id of the token ending at node k, or -1.  Node 0 is the root.  A match can
 * begin only at a byte the root has an edge for (a lead): the leads of 64 bytes at a time are
 * found as a mask (leads64), with up to ADDED_SIMD_LEADS by a compare per lead (Gemma's five:
 * '<', newline, tab, '|' and U+2581's first byte, which a byte at a time took a tenth of an
 * encode of source code), else by a table of them.
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

#ifdef WIDE_ASCII
#include <immintrin.h>

/* leads64's compares with AVX-512 (inlined in find_spans_wide alone). */
__attribute__((target("avx512f,avx512bw"))) static inline uint64_t
leads_wide(const AddedTrie *t, const uint8_t *p) {
    __m512i v = _mm512_loadu_si512(p);
    uint64_t found = 0;
    for (int k = 0; k < t->n_leads; k++)
        found |= _mm512_cmpeq_epi8_mask(v, _mm512_broadcast_i32x4(t->lead16[k]));
    return found;
}
#endif

/* Bit j for each byte data[at + j] (j < 64, at + j < n) that a token can begin with: with up
 * to ADDED_SIMD_LEADS leads, a compare per lead of 64 bytes (wide: AVX-512) or 16 at a time,
 * else by the table of them.  A mask, not a search per lead: Tekken's '[' and '<' stand every
 * ~500 bytes of source code, and a memchr from each one to the next was 3% of its encode. */
static inline __attribute__((always_inline)) uint64_t
leads64(const AddedTrie *t, const uint8_t *data, size_t at, size_t n, int wide) {
    uint64_t found = 0;
    if (t->n_leads <= ADDED_SIMD_LEADS && at + 64 <= n) {
#ifdef WIDE_ASCII
        if (wide) return leads_wide(t, data + at);
#else
        (void)wide;
#endif
#if defined(__SSE2__)
        for (int q = 0; q < 4; q++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(data + at + 16 * q));
            __m128i hit = _mm_setzero_si128();
            for (int k = 0; k < t->n_leads; k++)
                hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, t->lead16[k]));
            found |= (uint64_t)(uint16_t)_mm_movemask_epi8(hit) << (16 * q);
        }
        return found;
#endif
    }
    size_t stop = at + 64 < n ? at + 64 : n;
    for (size_t i = at; i < stop; i++) found |= (uint64_t)t->is_lead[data[i]] << (i - at);
    return found;
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

/* added_find, inlined once with wide set (in a function built for AVX-512) and once not. */
static inline __attribute__((always_inline)) int
find_spans(const AddedTrie *t, const uint8_t *data, size_t n, AddedSpans *out, int wide) {
    size_t base = 0; /* the leads of data[base:base + 64] not yet looked at are in found */
    uint64_t found = n ? leads64(t, data, 0, n, wide) : 0;
    while (base < n) {
        if (!found) {
            base += 64;
            found = base < n ? leads64(t, data, base, n, wide) : 0;
            continue;
        }
        size_t at = base + (size_t)__builtin_ctzll(found);
        int32_t node = 0, id = -1;
        size_t stop = at;
        for (size_t i = at; i < n && (node = child_of(t, node, data[i])) >= 0;) {
            size_t label = (size_t)t->label_at[node], len = (size_t)t->label_at[node + 1] - label;
            if (len >= n - i || memcmp(data + i + 1, t->labels + label, len) != 0) break;
            i += 1 + len;
            if (t->token[node] >= 0) {
                id = t->token[node];
                stop = i;
            }
        }
        if (id < 0) {
            found &= found - 1;
            continue;
        }
        if (push(out, (int64_t)at, (int64_t)stop, id) < 0) return -1;
        base = stop; /* the next match begins past this one */
        found = base < n ? leads64(t, data, base, n, wide) : 0;
    }
    return 0;
}

#ifdef WIDE_ASCII
__attribute__((target("avx512f,avx512bw"), noinline)) static int
find_spans_wide(const AddedTrie *t, const uint8_t *data, size_t n, AddedSpans *out) {
    return find_spans(t, data, n, out, 1);
}
#endif

int added_find(const AddedTrie *t, const uint8_t *data, size_t n, AddedSpans *out) {
#ifdef WIDE_ASCII
    if (wide_ascii) return find_spans_wide(t, data, n, out);
#endif
    return find_spans(t, data, n, out, 0);
}
