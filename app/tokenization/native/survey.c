/* What the encoder checks of a text before and after its merges, without the GIL: the class
 * blocks it touches that are not probed yet, the byte windows where NFC may change it, and
 * each token's end moved back from the normalized text to the original. */
#include <stdlib.h>
#include <string.h>

#include "native.h"

/* Only a character of 3 or 4 bytes lies past block 0 (U+0000-U+0FFF), and its lead byte
 * (0xE0 and up, never a continuation byte) gives its block with the byte after it: the other
 * bytes are passed over 16 at a time. */
static inline void lead_block(const uint8_t *probed, const uint8_t *lead, uint8_t *missing,
                              int *any) {
    size_t block = lead[0] < 0xF0 ? (size_t)(lead[0] & 0x0F)
                                  : (size_t)(lead[0] & 0x07) << 6 | (lead[1] & 0x3F);
    if (!probed[block]) missing[block] = 1, *any = 1;
}

#ifdef WIDE_ASCII
#include <immintrin.h>
/* The blocks of data[0:n - n % 64], 64 bytes at a time: a lead of 3 bytes (block 0-15: its
 * low 4 bits) is looked up in a table of those not probed by one byte shuffle, so only leads
 * of 4 bytes (rare) and of blocks not probed (a text's first call) are read one by one, where
 * a CJK text went a lead at a time. */
__attribute__((target("avx512f,avx512bw"))) static size_t
wide_blocks(const uint8_t *probed, const uint8_t *data, size_t n, uint8_t *missing, int *any) {
    uint8_t unprobed[16];
    for (int b = 0; b < 16; b++) unprobed[b] = probed[b] ? 0 : 0xFF;
    const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)unprobed));
    const __m512i low4 = _mm512_set1_epi8(0x0F);
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512i v = _mm512_loadu_si512(data + i);
        uint64_t four = _mm512_cmpge_epu8_mask(v, _mm512_set1_epi8((char)0xF0));
        uint64_t three = _mm512_cmpge_epu8_mask(v, _mm512_set1_epi8((char)0xE0)) & ~four;
        __m512i flag = _mm512_shuffle_epi8(table, _mm512_and_si512(v, low4));
        uint64_t leads = four | (three & _mm512_test_epi8_mask(flag, flag));
        for (; leads; leads &= leads - 1)
            lead_block(probed, data + i + __builtin_ctzll(leads), missing, any);
    }
    return i;
}
#endif

int survey_blocks(const uint8_t *probed, const uint8_t *data, size_t n, uint8_t *missing) {
    int any = 0;
    memset(missing, 0, SURVEY_BLOCKS);
    if (n && !probed[0]) missing[0] = any = 1;
    size_t i = 0;
#ifdef WIDE_ASCII
    if (wide_ascii) i = wide_blocks(probed, data, n, missing, &any);
#endif
#if defined(__SSE2__)
    const __m128i below = _mm_set1_epi8((char)0xDF), zero = _mm_setzero_si128();
    for (; i + 16 <= n; i += 16) {
        __m128i over = _mm_subs_epu8(_mm_loadu_si128((const __m128i *)(data + i)), below);
        unsigned leads = ~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(over, zero)) & 0xFFFF;
        for (; leads; leads &= leads - 1)
            lead_block(probed, data + i + __builtin_ctz(leads), missing, &any);
    }
#endif
    for (; i < n; i++)
        if (data[i] >= 0xE0) lead_block(probed, data + i, missing, &any);
    return any;
}

static int push_window(NfcWindows *w, int64_t begin, int64_t end) {
    if (w->count == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        int64_t *grown = realloc(w->pairs, 2 * cap * sizeof(int64_t));
        if (grown == NULL) return -1;
        w->pairs = grown;
        w->cap = cap;
    }
    w->pairs[2 * w->count] = begin;
    w->pairs[2 * w->count++ + 1] = end;
    return 0;
}

/* Whether every ASCII character is an NFC boundary in nfc (it is: combining class 0, quick
 * check yes; checked, not assumed, since survey_nfc then passes over their runs). */
static int ascii_bounds(const uint8_t *nfc) {
    for (uint32_t c = 0; c < 0x80; c++)
        if (nfc[c] != NFC_BOUNDARY) return 0;
    return 1;
}

int survey_nfc(const uint8_t *nfc, const uint8_t *data, size_t n, const int64_t *span_begin,
               const int64_t *span_end, size_t spans, NfcWindows *out) {
    int64_t bound = 0, open = -1; /* the last boundary's byte offset; the open window's start */
    size_t k = 0;
    const int skip_ascii = ascii_bounds(nfc);
    for (size_t i = 0; i <= n;) {
        int width = 1, code = NFC_BOUNDARY;
        size_t next;
        if (skip_ascii && open < 0 && i < n && data[i] < 0x80) {
            /* a run of ASCII, each a boundary, up to the next added token: 16 bytes at a time
             * (most of an agent transcript), its last character the last boundary */
            size_t stop = k < spans ? (size_t)span_begin[k] : n;
            if (stop > i) {
                size_t j = i + 1;
                while (j + 16 <= stop && ascii16(data + j) == 16) j += 16;
                while (j < stop && data[j] < 0x80) j++;
                bound = (int64_t)(j - 1);
                i = j;
                continue;
            }
        }
        if (i == n) {
            next = n + 1;
        } else if (k < spans && (size_t)span_begin[k] == i) {
            next = (size_t)span_end[k++];
        } else {
            code = nfc[utf8_decode_at(data, i, &width)];
            next = i + width;
        }
        if (code == NFC_UNKNOWN) return 1;
        if (code == NFC_BOUNDARY) {
            if (open >= 0 && push_window(out, open, (int64_t)(i < n ? i : n)) < 0) return -1;
            if (open >= 0) open = -1;
            bound = (int64_t)i;
        } else if (open < 0) {
            open = bound;
        }
        i = next;
    }
    return 0;
}

/* survey_ends' loop, inlined twice: with the windows' moves, and with none (n_moves 0); at:
 * the bytes of the tokens before ids[0]. */
static inline __attribute__((always_inline)) int
moved_ends(const int32_t *ids, size_t count, const int32_t *lengths, const uint8_t *short_lengths,
           size_t n_lengths, size_t size, int64_t at, const int64_t *moves, size_t n_moves,
           int32_t *ends) {
    int64_t shift = 0;
    size_t k = 0;
    for (size_t i = 0; i < count; i++) {
        uint32_t id = (uint32_t)ids[i];
        if (id >= n_lengths) return ENDS_DO_NOT_ADD_UP;
        int64_t length = short_lengths[id];
        at += length < SHORT_LENGTH_MAX ? length : lengths[id];
        while (k < n_moves && moves[3 * k + 1] <= at) shift = moves[3 * k++ + 2];
        if (k < n_moves && moves[3 * k] < at) return ENDS_INSIDE_A_WINDOW;
        ends[i] = (int32_t)(at - shift);
    }
    return (size_t)at == size ? 0 : ENDS_DO_NOT_ADD_UP;
}

#ifdef WIDE_ASCII
/* moved_ends without moves up to the first 16 ids that hold one out of range, 16 at a time:
 * their range checked by one compare, so that an id costs two loads, an add, a store and the
 * branch to a long token's length (the loop of one at a time: 1.02-1.07x on source code).
 * How many ids it ended; *sum: their bytes. */
__attribute__((target("avx512f"))) static size_t
plain_ends(const int32_t *ids, size_t count, const int32_t *lengths,
           const uint8_t *short_lengths, size_t n_lengths, int64_t *sum, int32_t *ends) {
    const __m512i limit = _mm512_set1_epi32(n_lengths < INT32_MAX ? (int)n_lengths : INT32_MAX);
    int64_t at = 0;
    size_t i = 0;
    for (; i + 16 <= count; i += 16) {
        if (_mm512_cmpge_epu32_mask(_mm512_loadu_si512(ids + i), limit)) break;
        for (size_t j = i; j < i + 16; j++) {
            uint32_t id = (uint32_t)ids[j];
            int64_t length = short_lengths[id];
            at += __builtin_expect(length < SHORT_LENGTH_MAX, 1) ? length : lengths[id];
            ends[j] = (int32_t)at;
        }
    }
    *sum = at;
    return i;
}
#endif

/* Inlined once for no moves (most texts: NFC changed nothing), its loop then without theirs. */
int survey_ends(const int32_t *ids, size_t count, const int32_t *lengths,
                const uint8_t *short_lengths, size_t n_lengths, size_t size,
                const int64_t *moves, size_t n_moves, int32_t *ends) {
    if (n_moves)
        return moved_ends(ids, count, lengths, short_lengths, n_lengths, size, 0, moves, n_moves,
                          ends);
#ifdef WIDE_ASCII
    if (wide_ascii) {
        int64_t at;
        size_t done = plain_ends(ids, count, lengths, short_lengths, n_lengths, &at, ends);
        return moved_ends(ids + done, count - done, lengths, short_lengths, n_lengths, size, at,
                          NULL, 0, ends + done);
    }
#endif
    return moved_ends(ids, count, lengths, short_lengths, n_lengths, size, 0, NULL, 0, ends);
}
