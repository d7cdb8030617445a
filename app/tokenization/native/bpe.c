/* Byte-level BPE of one piece, as the reference merges: the adjacent pair of lowest merge rank,
 * the leftmost among equals, until no pair has a rank (gpu_kernels.byte_bpe says why one pair
 * at a time).  Short pieces merge in arrays (a scan per merge); long ones through a heap of
 * (rank, position) with stale entries skipped, so a 10 MB piece costs O(n log n), not O(n^2).
 * Results are kept in per-thread caches keyed by the piece's bytes (no lock: each thread has
 * its own): a one-line entry per short piece, an arena for long pieces and those of many ids.
 */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS, madvise */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "native.h"

#define NO_RANK INT32_MAX
#define ARRAY_MAX 96 /* pieces up to this many bytes merge in arrays */
#define PAIR_HASH 0x9E3779B97F4A7C15ull
#define FNV_OFFSET 0xCBF29CE484222325ull
#define FNV_PRIME 0x100000001B3ull

/* ---- merge table ------------------------------------------------------------------------ */

static inline int32_t pair_rank(const Model *m, int32_t a, int32_t b, int32_t *merged) {
    int64_t key = (int64_t)a * m->width + b;
    uint64_t slot = ((uint64_t)key * PAIR_HASH) >> m->pair_shift;
    for (;; slot = (slot + 1) & m->pair_mask) {
        const PairSlot *p = &m->pairs[slot];
        if (p->key == key) {
            *merged = p->merged;
            return p->rank;
        }
        if (p->key < 0) return NO_RANK;
    }
}

static int32_t whole_word(const Model *m, const uint8_t *piece, size_t len) {
    if ((int64_t)len > m->word_max) return -1;
    uint64_t h = FNV_OFFSET;
    for (size_t i = 0; i < len; i++) h = (h ^ piece[i]) * FNV_PRIME;
    for (uint64_t slot = h & m->word_mask;; slot = (slot + 1) & m->word_mask) {
        int32_t e = m->word_slots[slot];
        if (e < 0) return -1;
        if (m->word_at[e + 1] - m->word_at[e] == (int64_t)len &&
            memcmp(m->word_bytes + m->word_at[e], piece, len) == 0)
            return m->word_ids[e];
    }
}

/* ---- piece caches -------------------------------------------------------------------------
 * Pieces of up to 16 bytes (most pieces of source code and prose) in a direct-mapped table of
 * half-line entries (2 MB: a text's 13K distinct pieces touch ~800 KB of it, which stays in
 * L2 with its hot lines in L1; at 1 MB, 1.8 times as many lookups missed: 5.1K of Llama-3's
 * 214K pieces of 1M characters of Python source), up to 3 ids in the entry and more in a
 * run of them beside it, the entries it put out in a smaller one looked up on its misses;
 * short pieces (up to 24 bytes, up to 8 ids) in a two-way table of one-line entries; all
 * keyed by the zero-padded bytes; longer ones, and short ones of more ids, in a table of
 * (hash, arena offset) whose arena holds the piece's bytes and ids, emptied whole when full.
 * Each is looked up by the piece's bytes and the model's owner tag, so a hit gives what the
 * merge gave for the same bytes. */

#define COMPACT_BITS 16
#define COMPACT_LEN 16
#define COMPACT_IDS 3
/* An entry's tag is owner << TAG_OWNER | len << TAG_LEN | count, so that owner and length
 * are compared in one go (a model whose owner does not fit skips the compact table), and it
 * follows the ids, so that a hit copies ids and tag by one 16-byte load and store.  A count
 * of 0 marks a piece of more ids (GPT-2's newline and indentation, 10% of its pieces): its
 * ids are in the thread's run of many ids, at ids[0], ids[1] of them, while ids[2] is the
 * run's round (Many). */
#define TAG_LEN 2
#define TAG_OWNER 7
#define COMPACT_OWNERS ((uint32_t)1 << (32 - TAG_OWNER))
typedef struct {
    uint64_t key[2];
    int32_t ids[COMPACT_IDS];
    uint32_t tag;
} Compact; /* 32 bytes */
#define COMPACT_COPY (sizeof(Compact) - offsetof(Compact, ids)) /* ids and tag */
_Static_assert(COMPACT_COPY == 16 && COMPACT_COPY <= 4 * (1 + IDS_PAD),
               "a hit's copy fits out's room past a piece of one byte");
_Static_assert(COMPACT_LEN < 1 << (TAG_OWNER - TAG_LEN), "a piece's length fits its field");
_Static_assert(COMPACT_IDS < 1 << TAG_LEN, "a piece's count fits its field");
/* Behind the compact table, at other bits of the hash, entries of the same kind: those its
 * misses put out (two pieces of one slot, 2-3% of the pieces of source code, take turns in
 * it), found here, in L2, not in the table of one-line entries (a cache miss on most
 * lookups). */
#define SPARE_BITS 14
/* The ids of the compact entries of more than COMPACT_IDS (up to COMPACT_LEN: a piece's bytes),
 * one after the other; when full, a new round begins at 0, and the entries of an earlier round
 * are misses. */
#define MANY_IDS ((size_t)1 << 14)
typedef struct {
    uint32_t used, round;
    int32_t ids[MANY_IDS + COMPACT_LEN]; /* an entry's ids are read as COMPACT_LEN */
} Many;
_Static_assert(COMPACT_LEN <= 1 + IDS_PAD, "a piece's COMPACT_LEN ids fit out's room past it");

/* 8 MB of one-line entries: Gemma's pieces (no pre-split) are mostly past the compact table's
 * 16 bytes and many differ, and at 4 MB enough of them took turns in a slot to be merged again
 * that its source encode ran 0.81-0.95x (the other families' pieces seldom come here). */
#define CACHE_BITS 17
#define CACHE_WORDS 3 /* pieces of up to 24 bytes, zero-padded */
#define CACHE_IDS 8
typedef struct {
    uint64_t key[CACHE_WORDS];
    uint32_t owner;
    uint8_t len, count, unused[2];
    int32_t ids[CACHE_IDS];
} Entry; /* 64 bytes: one cache line */
_Static_assert(CACHE_IDS <= 2 + IDS_PAD, "an entry's ids are copied whole (its piece: 2 bytes up)");

#define LONG_BITS 13
#define LONG_MAX_LEN 512 /* bytes of the longest piece kept */
#define LONG_ARENA ((size_t)2 << 20)
typedef struct {
    uint64_t hash;
    uint32_t at, owner; /* at: the piece's bytes in the arena, its ids after them (aligned) */
    uint32_t len, count;
} LongSlot;

typedef struct {
    Compact compact[(size_t)1 << COMPACT_BITS];
    Compact spares[(size_t)1 << SPARE_BITS];
    Many many;
    Entry entries[(size_t)1 << CACHE_BITS];
    LongSlot slots[(size_t)1 << LONG_BITS];
    size_t used, filled; /* arena bytes, slots taken */
    _Alignas(8) uint8_t arena[LONG_ARENA];
} Caches;

/* The run of many ids of the caches whose compact table is table. */
static inline const Many *many_of(const Compact *table) {
    return (const Many *)((const uint8_t *)table - offsetof(Caches, compact) +
                          offsetof(Caches, many));
}

/* The caches live in huge pages where the kernel gives them (THP on request): their lookups
 * land anywhere in their 12.8 MB, and after other work on the core the first lookup in each
 * 4 KiB page also missed the TLB (4-7% of a 1M-character encode between other engines'
 * encodes).
 * Zeroed as mapped; the rest of the last huge page unused. */
#define HUGE ((size_t)2 << 20)
#define CACHES_MAPPED ((sizeof(Caches) + HUGE - 1) / HUGE * HUGE + HUGE)

/* A new set of caches, or NULL when out of memory: kept for the process's life (one per work
 * set of _native.c, of which there are as many as cores at most). */
void *caches_new(void) {
    uint8_t *base = mmap(NULL, CACHES_MAPPED, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return NULL;
    uint8_t *at = (uint8_t *)(((uintptr_t)base + HUGE) & ~(uintptr_t)(HUGE - 1));
#ifdef MADV_HUGEPAGE
    madvise(at, CACHES_MAPPED - (size_t)(at - base), MADV_HUGEPAGE);
#endif
    return at;
}

/* Bytes piece[at:at + min(r, 8)] as a little-endian word, zero above them (r > 0), read by
 * loads that stay inside the piece: a word built in memory byte by byte and read back whole
 * stalls the load (no store forwarding from narrower stores). */
static inline uint64_t word_of(const uint8_t *p, size_t r) {
    uint64_t w = 0;
    uint32_t lo, hi;
    uint16_t pair;
    if (r >= 8) {
        memcpy(&w, p, 8);
    } else if (r >= 4) {
        memcpy(&lo, p, 4);
        memcpy(&hi, p + r - 4, 4); /* overlaps lo where r < 8: the same bytes */
        w = lo | ((uint64_t)hi << (8 * (r - 4)));
    } else if (r >= 2) {
        memcpy(&pair, p, 2);
        w = pair | ((uint64_t)p[r - 1] << (8 * (r - 1)));
    } else {
        w = p[0];
    }
    return w;
}

/* The piece's bytes zero-padded to CACHE_WORDS words (2 <= len <= 8 * CACHE_WORDS). */
static inline void short_key(uint64_t *key, const uint8_t *piece, size_t len) {
    key[0] = word_of(piece, len);
    key[1] = len > 8 ? word_of(piece + 8, len - 8) : 0;
    key[2] = len > 16 ? word_of(piece + 16, len - 16) : 0;
}

/* The entry of a slot's second way: the one its first way put out on a miss (two pieces of
 * one slot, ~1,500 of a 1M-character encode of source code for Gemma, took turns in it, each
 * merged again every time), looked up after it. */
static inline Entry *partner(Entry *cache, Entry *e) { return &cache[(e - cache) ^ 1]; }

static inline int entry_holds(const Entry *e, const Model *m, const uint64_t *key, size_t len) {
    return e->owner == m->owner && e->len == len && e->key[0] == key[0] && e->key[1] == key[1] &&
           e->key[2] == key[2];
}

static inline Entry *cache_slot(Entry *cache, const uint64_t *key, size_t len) {
    uint64_t h = (key[0] ^ (len << 56)) * 0x9E3779B97F4A7C15ull;
    h = (h ^ key[1] ^ (h >> 29)) * 0xFF51AFD7ED558CCDull;
    h = (h ^ key[2] ^ (h >> 31)) * 0xC4CEB9FE1A85EC53ull;
    return &cache[h >> (64 - CACHE_BITS)];
}

static uint64_t long_hash(const uint8_t *piece, size_t len) {
    uint64_t h = len * 0x9E3779B97F4A7C15ull, word;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        memcpy(&word, piece + i, 8);
        h = (h ^ word) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
    }
    for (; i < len; i++) h = (h ^ piece[i]) * 0x100000001B3ull;
    return (h ^ (h >> 29)) * 0xC4CEB9FE1A85EC53ull;
}

/* The slot of the piece in the long table, or the empty slot where it would go. */
static LongSlot *long_slot(Caches *c, const Model *m, const uint8_t *piece, size_t len,
                           uint64_t h) {
    uint64_t mask = ((uint64_t)1 << LONG_BITS) - 1;
    for (uint64_t i = h >> (64 - LONG_BITS);; i = (i + 1) & mask) {
        LongSlot *s = &c->slots[i];
        if (s->len == 0) return s;
        if (s->hash == h && s->owner == m->owner && s->len == len &&
            memcmp(c->arena + s->at, piece, len) == 0)
            return s;
    }
}

/* Keeps the ids of a piece in the long table, emptying it first when full. */
static void long_keep(Caches *c, const Model *m, const uint8_t *piece, size_t len, uint64_t h,
                      const int32_t *ids, size_t count) {
    size_t at = c->used, need = ((len + 3) & ~(size_t)3) + 4 * count;
    if (at + need > LONG_ARENA || 4 * (c->filled + 1) > 3 * ((size_t)1 << LONG_BITS)) {
        memset(c->slots, 0, sizeof(c->slots));
        c->used = c->filled = at = 0;
    }
    LongSlot *s = long_slot(c, m, piece, len, h);
    memcpy(c->arena + at, piece, len);
    memcpy(c->arena + at + ((len + 3) & ~(size_t)3), ids, 4 * count);
    *s = (LongSlot){h, (uint32_t)at, m->owner, (uint32_t)len, (uint32_t)count};
    c->used = at + need;
    c->filled++;
}

/* ---- merging ------------------------------------------------------------------------------ */

static int reserve(Scratch *w, size_t len) {
    if (len <= w->cap) return 0;
    size_t cap = len > 2 * w->cap ? len : 2 * w->cap;
    scratch_free(w);
    w->rank = malloc(cap * sizeof(int32_t));
    w->merged = malloc(cap * sizeof(int32_t));
    w->prev = malloc(cap * sizeof(int32_t));
    w->next = malloc(cap * sizeof(int32_t));
    w->heap = malloc(3 * cap * sizeof(uint64_t));
    if (!w->rank || !w->merged || !w->prev || !w->next || !w->heap) {
        scratch_free(w);
        return -1;
    }
    w->cap = cap;
    return 0;
}

void scratch_free(Scratch *w) {
    free(w->rank);
    free(w->merged);
    free(w->prev);
    free(w->next);
    free(w->heap);
    void *cache = w->cache;
    memset(w, 0, sizeof(*w));
    w->cache = cache;
}

static size_t merge_in_arrays(const Model *m, int32_t *tok, size_t n, Scratch *w) {
    int32_t *rank = w->rank, *merged = w->merged;
    for (size_t i = 0; i + 1 < n; i++) rank[i] = pair_rank(m, tok[i], tok[i + 1], &merged[i]);
    while (n > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < n; i++)
            if (rank[i] < rank[best]) best = i;
        if (rank[best] == NO_RANK) break;
        tok[best] = merged[best];
        size_t tail = n - best - 2;
        memmove(tok + best + 1, tok + best + 2, tail * sizeof(int32_t));
        memmove(rank + best + 1, rank + best + 2, (tail ? tail - 1 : 0) * sizeof(int32_t));
        memmove(merged + best + 1, merged + best + 2, (tail ? tail - 1 : 0) * sizeof(int32_t));
        n--;
        if (best > 0) rank[best - 1] = pair_rank(m, tok[best - 1], tok[best], &merged[best - 1]);
        if (best + 1 < n) rank[best] = pair_rank(m, tok[best], tok[best + 1], &merged[best]);
    }
    return n;
}

static void heap_push(uint64_t *heap, size_t *size, uint64_t v) {
    size_t i = (*size)++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (heap[up] <= v) break;
        heap[i] = heap[up];
        i = up;
    }
    heap[i] = v;
}

static uint64_t heap_pop(uint64_t *heap, size_t *size) {
    uint64_t top = heap[0], last = heap[--(*size)];
    size_t i = 0, n = *size;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap[c + 1] < heap[c]) c++;
        if (heap[c] >= last) break;
        heap[i] = heap[c];
        i = c;
    }
    if (n) heap[i] = last;
    return top;
}

#define END UINT32_MAX
static inline void push_pair(const Model *m, const int32_t *tok, Scratch *w, size_t *size,
                             uint32_t at) {
    int32_t merged;
    uint32_t nx = (uint32_t)w->next[at];
    if (nx == END) return;
    int32_t r = pair_rank(m, tok[at], tok[nx], &merged);
    if (r != NO_RANK) heap_push(w->heap, size, ((uint64_t)(uint32_t)r << 32) | at);
}

/* Same order of merges as merge_in_arrays: the heap's least (rank, position) first, the
 * positions being the pieces' first bytes, which keep their order. */
static size_t merge_with_heap(const Model *m, int32_t *tok, size_t n, Scratch *w) {
    size_t size = 0;
    for (size_t i = 0; i < n; i++) {
        w->prev[i] = i ? (int32_t)(i - 1) : (int32_t)END;
        w->next[i] = i + 1 < n ? (int32_t)(i + 1) : (int32_t)END;
    }
    for (size_t i = 0; i + 1 < n; i++) push_pair(m, tok, w, &size, (uint32_t)i);
    while (size) {
        uint64_t top = heap_pop(w->heap, &size);
        uint32_t at = (uint32_t)top, nx = (uint32_t)w->next[at];
        int32_t merged = 0;
        if (tok[at] < 0 || nx == END) continue;
        if ((uint32_t)pair_rank(m, tok[at], tok[nx], &merged) != (uint32_t)(top >> 32)) continue;
        tok[at] = merged;
        tok[nx] = -1;
        w->next[at] = w->next[nx];
        if ((uint32_t)w->next[nx] != END) w->prev[w->next[nx]] = (int32_t)at;
        if ((uint32_t)w->prev[at] != END) push_pair(m, tok, w, &size, (uint32_t)w->prev[at]);
        push_pair(m, tok, w, &size, at);
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (tok[i] >= 0) tok[k++] = tok[i];
    return k;
}

/* The symbols a piece starts from: its bytes' ids, or for character BPE each character's id
 * (its bytes' fallback ids where it has none, as HF's byte_fallback); at most len of them. */
static size_t initial_symbols(const Model *m, const uint8_t *piece, size_t len, int32_t *out) {
    if (m->char_ids == NULL) {
        for (size_t i = 0; i < len; i++) out[i] = m->byte_ids[piece[i]];
        return len;
    }
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        int width;
        int32_t id = m->char_ids[utf8_decode_at(piece, i, &width)];
        if (id >= 0)
            out[n++] = id;
        else
            for (int k = 0; k < width; k++) out[n++] = m->byte_ids[piece[i + k]];
        i += (size_t)width;
    }
    return n;
}

/* Ids of one piece (len > 0 bytes) into out (room for len ids); their count, or -1 when out
 * of memory. */
static long bpe_piece(const Model *m, const uint8_t *piece, size_t len, int32_t *out,
                      Scratch *w) {
    if (len == 1) return (long)initial_symbols(m, piece, 1, out);
    uint64_t key[CACHE_WORDS];
    Caches *caches = w->cache;
    Entry *e = NULL;
    if (caches != NULL && len <= 8 * CACHE_WORDS) {
        short_key(key, piece, len);
        e = cache_slot(caches->entries, key, len);
        for (Entry *at = e; at != NULL; at = at == e ? partner(caches->entries, e) : NULL)
            if (entry_holds(at, m, key, len)) {
                memcpy(out, at->ids, sizeof(at->ids)); /* all of them, whatever the count: a
                                                         * copy of the count's length took a
                                                         * rep movs */
                return at->count;
            }
    }
    uint64_t h = 0;
    if (caches != NULL && len <= LONG_MAX_LEN) {
        h = long_hash(piece, len);
        LongSlot *s = long_slot(caches, m, piece, len, h);
        if (s->len) {
            memcpy(out, caches->arena + s->at + ((len + 3) & ~(size_t)3), 4 * s->count);
            return s->count;
        }
    }
    size_t n = 0;
    int32_t id = m->ignore_merges ? whole_word(m, piece, len) : -1;
    if (id >= 0) {
        out[n++] = id;
    } else {
        if (reserve(w, len) < 0) return -1;
        n = initial_symbols(m, piece, len, out);
        n = n <= ARRAY_MAX ? merge_in_arrays(m, out, n, w) : merge_with_heap(m, out, n, w);
    }
    if (e != NULL && n <= CACHE_IDS) {
        if (e->len) *partner(caches->entries, e) = *e; /* found there again */
        memcpy(e->key, key, sizeof(key));
        e->owner = m->owner;
        e->len = (uint8_t)len;
        e->count = (uint8_t)n;
        memcpy(e->ids, out, n * sizeof(int32_t));
    } else if (caches != NULL && len <= LONG_MAX_LEN) {
        long_keep(caches, m, piece, len, h, out, n);
    }
    return (long)n;
}

/* By the key alone (pieces that differ in length but not in key end in zero bytes: rare),
 * a multiply's high bits, which all of the bits of the first word and the second word turned
 * reach (pieces of up to 8 bytes, most of them, have no second word). */
static inline uint64_t compact_hash_by(uint64_t key0, uint64_t key1, uint64_t multiplier) {
    return (key0 ^ (key1 << 29 | key1 >> 35)) * multiplier;
}

#define HASH_MULTIPLIER 0x9E3779B97F4A7C15ull

static inline uint64_t compact_hash(const uint64_t *key) {
    return compact_hash_by(key[0], key[1], HASH_MULTIPLIER);
}

static inline Compact *compact_slot(Compact *table, const uint64_t *key) {
    return &table[compact_hash(key) >> (64 - COMPACT_BITS)];
}

/* Other bits than the compact slot's, from all of the key's. */
static inline Compact *spare_slot(Compact *spares, const uint64_t *key) {
    uint64_t h = compact_hash(key);
    h = (h ^ (h >> 29)) * 0xC4CEB9FE1A85EC53ull;
    return &spares[h >> (64 - SPARE_BITS)];
}

/* A piece's bytes (1 to 8) as a word, zero above them; limit: the bytes readable from it. */
static inline uint64_t loaded_word(const uint8_t *piece, size_t len, size_t limit) {
    if (limit < 8) return word_of(piece, len);
    uint64_t w;
    memcpy(&w, piece, 8);
    return len == 8 ? w : w & (((uint64_t)1 << (8 * len)) - 1);
}

/* The masks of a piece's first and second words by its length, so that its key is read
 * without a branch on the length where 16 bytes are readable: two rows, each indexed by the
 * length scaled by 8 from one base (no multiply and one register in the loop of hits). */
#define LOW(n) ((n) >= 8 ? ~0ull : ((1ull << (8 * (n))) - 1))
#define HIGH(n) ((n) <= 8 ? 0ull : LOW((n) - 8))
#define BY_LENGTH(F)                                                                           \
    {F(0), F(1), F(2),  F(3),  F(4),  F(5),  F(6),  F(7), F(8),                                  \
     F(9), F(10), F(11), F(12), F(13), F(14), F(15), F(16)}
static const uint64_t key_masks[2][COMPACT_LEN + 1] = {BY_LENGTH(LOW), BY_LENGTH(HIGH)};

/* The key of a piece of up to COMPACT_LEN bytes: its bytes zero-padded to two words; limit:
 * the bytes readable from it, at least 16 (no branch on the length) in the loop of hits. */
static inline void compact_key(uint64_t *key, const uint8_t *piece, size_t len, size_t limit) {
    if (limit >= 16) {
        memcpy(key, piece, 16);
        key[0] &= key_masks[0][len];
        key[1] &= key_masks[1][len];
    } else {
        key[0] = loaded_word(piece, len < 8 ? len : 8, limit);
        key[1] = len > 8 ? loaded_word(piece + 8, len - 8, limit - 8) : 0;
    }
}

/* Whether entry e, of tag tag, holds the piece whose tag without its count is want: one
 * branch on key and tag (a branch each cost slots and registers in the loop of hits). */
static inline int compact_holds(const Compact *e, uint32_t tag, const uint64_t *key,
                                uint32_t want) {
    return ((e->key[0] ^ key[0]) | (e->key[1] ^ key[1]) | ((tag >> TAG_LEN) ^ want)) == 0;
}

/* The ids of e, an entry of many ids, into out, COMPACT_LEN of them whatever the count (no
 * branch on it: GPT-2's counts, 4 to 16, took turns; out has room for them); their count, or 0
 * where e is of an earlier round. */
static inline uint32_t many_ids(const Many *many, const Compact *e, int32_t *out) {
    if ((uint32_t)e->ids[2] != many->round) return 0;
    memcpy(out, many->ids + (uint32_t)e->ids[0], COMPACT_LEN * sizeof(int32_t));
    return (uint32_t)e->ids[1];
}

/* e as the entry of a piece of count ids (more than COMPACT_IDS), kept in the run of many. */
static void many_keep(Many *many, Compact *e, uint64_t key0, uint64_t key1, uint32_t want,
                      const int32_t *ids, long count) {
    if (many->used + (size_t)count > MANY_IDS) {
        many->used = 0;
        many->round++;
    }
    memcpy(many->ids + many->used, ids, (size_t)count * sizeof(int32_t));
    *e = (Compact){{key0, key1}, {(int32_t)many->used, (int32_t)count, (int32_t)many->round},
                   want << TAG_LEN};
    many->used += (uint32_t)count;
}

/* The ids of a piece that missed the compact table (from the spares, or merged, or from the
 * other caches), kept in its entry e (what e held put out to the spares, unless of many ids:
 * they are found again in the other caches); their count, or -1 when out of memory.  Out of
 * line, its key passed by value: the loop of hits keeps its values in registers. */
static __attribute__((noinline)) long compact_miss(const Model *m, Compact *e, uint64_t key0,
                                                   uint64_t key1, const uint8_t *piece,
                                                   size_t len, int32_t *out, Scratch *w) {
    Caches *caches = w->cache;
    uint64_t key[2] = {key0, key1};
    uint32_t want = m->owner << (TAG_OWNER - TAG_LEN) | (uint32_t)len;
    Compact *v = spare_slot(caches->spares, key);
    uint32_t tag = v->tag;
    long got;
    if (compact_holds(v, tag, key, want)) { /* the spares hold no entry of many ids */
        got = tag & ((1u << TAG_LEN) - 1);
        memcpy(out, v->ids, sizeof(v->ids));
    } else {
        got = bpe_piece(m, piece, len, out, w);
        if (got < 1 || got > COMPACT_LEN) return got;
    }
    if (e->tag & ((1u << TAG_LEN) - 1)) *spare_slot(caches->spares, e->key) = *e;
    if (got > COMPACT_IDS) {
        many_keep(&caches->many, e, key0, key1, want, out, got);
    } else {
        *e = (Compact){{key0, key1}, {0}, want << TAG_LEN | (uint32_t)got};
        memcpy(e->ids, out, (size_t)got * sizeof(int32_t));
    }
    return got;
}

/* How many of the pieces (begun at starts[p], through at where not NULL) begin 16 bytes or
 * more before limit: a binary search, the starts being in order. */
static inline size_t keys_read_whole(const uint32_t *at, const uint32_t *starts, size_t pieces,
                                     size_t limit) {
    size_t lo = 0, hi = pieces;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((at ? at[starts[mid]] : starts[mid]) + 16 <= limit)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Where a loop of hits stopped: at the piece that ends at *s (and begins at s[-1]), which
 * is not a hit of ids in its entry, or past the last piece it was to look at; o: where its
 * ids go. */
typedef struct {
    const uint32_t *s;
    int32_t *o;
} Hits;

/* The hits of the compact table of ids in the entry, from the piece that ends at h->s on,
 * up to the one that ends at stop (all of which begin 16 bytes or more before the text's end:
 * their keys are read in two words).  Run out of line (ascii_hits, offset_hits), with nothing
 * else in the function and nothing carried out of the loop but s and o, so that its values
 * stay in registers (spilled, they were reloaded on every piece); inlined once with at NULL,
 * so that an ASCII stretch's offsets are read without the indirection. */
static inline __attribute__((always_inline)) void
compact_hits(Compact *table, const uint8_t *data, const uint32_t *at, const uint32_t *stop,
             uint32_t owner, Hits *h) {
    const uint32_t *s = h->s;
    int32_t *o = h->o;
    uint64_t multiplier = HASH_MULTIPLIER;
    __asm__("" : "+r"(multiplier)); /* kept in a register, not loaded again on every piece */
    for (; s <= stop; s++) {
        uint32_t begin = at ? at[s[-1]] : s[-1]; /* read again: a register less to carry */
        uint32_t len = (at ? at[*s] : *s) - begin;
        if (len > COMPACT_LEN) break;
        uint32_t want = owner + (len << TAG_LEN); /* the tag less its count */
        uint64_t key[2];
        compact_key(key, data + begin, len, 16);
        Compact *e = &table[compact_hash_by(key[0], key[1], multiplier) >> (64 - COMPACT_BITS)];
        /* the count less one, where owner and length are the piece's and the count is not 0
         * (many ids): the tag less want is 1 to COMPACT_IDS only then */
        uint32_t more = e->tag - want - 1;
        if (((e->key[0] ^ key[0]) | (e->key[1] ^ key[1])) != 0) break;
        if (__builtin_expect(more > COMPACT_IDS - 1, 0)) {
            /* the piece's, of many ids (GPT-2's newline and indentation: a tenth of its
             * pieces, a third of its ids): from the run of them, which follows the tables */
            uint32_t count;
            if (e->tag != want || !(count = many_ids(many_of(table), e, o))) break;
            o += count;
            continue;
        }
        /* all three ids and the tag, whatever the count */
        memcpy(o, (const uint8_t *)e + offsetof(Compact, ids), COMPACT_COPY);
        o += more + 1;
    }
    *h = (Hits){s, o};
}

static __attribute__((noinline)) void ascii_hits(Compact *table, const uint8_t *data,
                                                 const uint32_t *stop, uint32_t owner, Hits *h) {
    compact_hits(table, data, NULL, stop, owner, h);
}

static __attribute__((noinline)) void offset_hits(Compact *table, const uint8_t *data,
                                                  const uint32_t *at, const uint32_t *stop,
                                                  uint32_t owner, Hits *h) {
    compact_hits(table, data, at, stop, owner, h);
}

/* bpe_pieces where nothing is dropped, the thread has caches and the model's owner fits a
 * tag: pieces of up to COMPACT_LEN bytes through the compact table (out has room for IDS_PAD
 * ids more than the piece has bytes), the others through bpe_piece. */
static long cached_pieces(const Model *m, const uint8_t *data, size_t limit, const uint32_t *at,
                          const uint32_t *starts, size_t pieces, int32_t *out, Scratch *w) {
    Caches *caches = w->cache;
    const uint32_t owner = m->owner << (TAG_OWNER - TAG_LEN);
    const uint32_t *last = starts + pieces;
    /* The pieces that end at s <= whole begin 16 bytes or more before the end: their keys
     * are read in two words (the others' byte by byte, here). */
    const uint32_t *whole = starts + keys_read_whole(at, starts, pieces, limit);
    if (whole > last) whole = last;
    Hits h = {starts + 1, out};
    for (;; h.s++) {
        if (at)
            offset_hits(caches->compact, data, at, whole, owner << TAG_LEN, &h);
        else
            ascii_hits(caches->compact, data, whole, owner << TAG_LEN, &h);
        if (h.s > last) break;
        size_t begin = at ? at[h.s[-1]] : h.s[-1];
        size_t len = (at ? at[*h.s] : *h.s) - begin;
        const uint8_t *piece = data + begin;
        long got;
        if (len <= COMPACT_LEN) {
            uint64_t key[2];
            compact_key(key, piece, len, limit - begin);
            Compact *e = compact_slot(caches->compact, key);
            uint32_t tag = e->tag, count = tag & ((1u << TAG_LEN) - 1);
            got = 0;
            if (compact_holds(e, tag, key, owner | (uint32_t)len)) { /* past whole, or many */
                if (count)
                    memcpy(h.o, e->ids, count * sizeof(int32_t));
                got = count ? count : many_ids(&caches->many, e, h.o); /* 0: an earlier round */
            }
            if (!got) got = compact_miss(m, e, key[0], key[1], piece, len, h.o, w);
        } else {
            got = bpe_piece(m, piece, len, h.o, w);
        }
        if (got < 0) return -1;
        h.o += got;
    }
    return h.o - out;
}

long bpe_pieces(const Model *m, const uint8_t *data, size_t limit, const uint32_t *at,
                const uint32_t *starts, size_t pieces, const uint8_t *dropped, int32_t *out,
                Scratch *w) {
    if (dropped == NULL && w->cache != NULL && m->owner < COMPACT_OWNERS)
        return cached_pieces(m, data, limit, at, starts, pieces, out, w);
    long count = 0;
    for (size_t p = 0; p < pieces; p++) {
        size_t begin = at ? at[starts[p]] : starts[p];
        size_t len = (at ? at[starts[p + 1]] : starts[p + 1]) - begin;
        const uint8_t *piece = data + begin;
        while (len) { /* the parts between dropped bytes, each merged alone */
            size_t part = 0;
            while (part < len && !(dropped != NULL && dropped[piece[part]])) part++;
            long got = part ? bpe_piece(m, piece, part, out + count, w) : 0;
            if (got < 0) return -1;
            count += got;
            if (part < len) part++;
            piece += part;
            len -= part;
        }
    }
    return count;
}
