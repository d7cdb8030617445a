/* What the encoder checks of a text before and after its merges, without the GIL: the class
 * blocks it touches that are not probed yet, the byte windows where NFC may change it, and
 * each token's end moved back from the normalized text to the original. */
#include <stdlib.h>

#include "native.h"

int survey_blocks(const uint8_t *probed, const uint8_t *data, size_t n, uint8_t *missing) {
    int any = 0;
    for (size_t b = 0; b < SURVEY_BLOCKS; b++) missing[b] = 0;
    if (n && !probed[0]) missing[0] = any = 1;
    for (size_t i = 0; i < n; i++) {
        if (data[i] < 0x80 && i + 16 <= n) i += ascii16(data + i) - 1; /* ASCII: block 0 */
        if (data[i] < 0xC0) continue;
        int width;
        uint32_t block = utf8_decode_at(data, i, &width) >> SURVEY_BLOCK_BITS;
        if (!probed[block]) missing[block] = any = 1;
    }
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

int survey_nfc(const uint8_t *nfc, const uint8_t *data, size_t n, const int64_t *span_begin,
               const int64_t *span_end, size_t spans, NfcWindows *out) {
    int64_t bound = 0, open = -1; /* the last boundary's byte offset; the open window's start */
    size_t k = 0;
    for (size_t i = 0; i <= n;) {
        int width = 1, code = NFC_BOUNDARY;
        size_t next;
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

int survey_ends(const int32_t *ids, size_t count, const int32_t *lengths, size_t n_lengths,
                size_t size, const int64_t *moves, size_t n_moves, int32_t *ends) {
    int64_t at = 0, shift = 0;
    size_t k = 0;
    for (size_t i = 0; i < count; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= n_lengths) return ENDS_DO_NOT_ADD_UP;
        at += lengths[ids[i]];
        while (k < n_moves && moves[3 * k + 1] <= at) shift = moves[3 * k++ + 2];
        if (k < n_moves && moves[3 * k] < at) return ENDS_INSIDE_A_WINDOW;
        ends[i] = (int32_t)(at - shift);
    }
    return (size_t)at == size ? 0 : ENDS_DO_NOT_ADD_UP;
}
