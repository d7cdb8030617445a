/* Shared between the pre-tokenizer scanners (scan.c) and the encoder (_native.c). */
#ifndef TOKSPLICE_NATIVE_H
#define TOKSPLICE_NATIVE_H
#include <stddef.h>
#include <stdint.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* gpu_kernels.char_classes: class codes, kind codes, fold codes. */
enum { C_NL, C_SP, C_WS, C_L, C_N, C_AP, C_P };
enum { K_NONE, K_UPPER, K_LOWER, K_OTHER_LETTER, K_MARK, K_SYMBOL };
enum { F_NONE, F_S, F_T, F_R, F_E, F_V, F_M, F_L, F_D };

/* Pre-tokenizer families, in the order of encoder.FAMILIES. */
enum {
    FAM_CL100K, FAM_QWEN2, FAM_GPT2, FAM_O200K, FAM_DEEPSEEK_V3, FAM_GPT2_DIGITS, FAM_TEKKEN,
    FAM_QWEN35, FAM_SPACES_REPLACED, FAM_KIMI, N_FAMILIES
};

/* One stretch of text (between added tokens) as the scanners read it: its code points and
 * their class codes (classes[cp]; cls readable RUN_PAD bytes past n, 64 at a time); folds,
 * kinds, numeric and han are looked up through the tables.  The cl100k family's and GPT-2's
 * scanners read classes alone but for the rare contraction, and o200k's, Tekken's, Kimi's,
 * SmolLM2's and DeepSeek-V3's read an ASCII block's bytes: cp is NULL for the first two
 * always and for the others where the stretch is all ASCII (not written: most of the decode's
 * stores), a code point then decoded from the stretch's bytes, character i at at[i] (at NULL:
 * at i).  Gemma's reads bytes alone (POINTS_BYTES). */
#define RUN_PAD 65
typedef struct {
    const uint32_t *cp;
    const uint8_t *cls;
    const uint8_t *folds;   /* per code point */
    const uint8_t *kinds;   /* per code point */
    const uint8_t *numeric; /* per code point: the Digits pre-tokenizer isolates it */
    const uint8_t *han;     /* per code point: \p{Han} (Kimi's first alternative) */
    size_t n;
    const uint8_t *bytes;
    const uint32_t *at;
} Stretch;

/* The BPE model: byte ids, merges as an open-addressing pair table (byte_bpe.PairSlots) and,
 * for ignore_merges vocabularies, the whole words (whole_words.WholeWords). */
typedef struct { int64_t key; int32_t rank, merged; } PairSlot;

typedef struct {
    int32_t byte_ids[256];
    PairSlot *pairs;
    uint64_t pair_mask;
    int pair_shift;
    int64_t width;
    int ignore_merges;
    int32_t *word_slots;
    uint64_t word_mask;
    uint8_t *word_bytes;
    int64_t *word_at;
    int32_t *word_ids;
    int64_t word_max;
    uint32_t owner; /* tells this model's entries in a thread's piece cache from others' */
    const int32_t *char_ids; /* character BPE (Gemma): each code point's id, -1 where its bytes
                              * fall back to byte_ids; NULL for byte-level BPE */
} Model;

/* Growable per-call buffers of the merge, and its work set's piece caches (NULL: none). */
typedef struct {
    void *cache;
    size_t cap;
    int32_t *rank, *merged, *prev, *next;
    uint64_t *heap;
} Scratch;

/* Ids of the pieces of a stretch, piece p being data[at[starts[p]]:at[starts[p + 1]]] (at
 * NULL: data[starts[p]:starts[p + 1]]), into out (room for an id per byte, and IDS_PAD more);
 * limit: the bytes readable from data; dropped: NULL, or the 256 flags of the bytes taken out
 * of every piece (the parts between them merged alone).  Their count, or -1 when out of
 * memory. */
#define IDS_PAD 15
long bpe_pieces(const Model *m, const uint8_t *data, size_t limit, const uint32_t *at,
                const uint32_t *starts, size_t pieces, const uint8_t *dropped, int32_t *out,
                Scratch *w);
void *caches_new(void);
void scratch_free(Scratch *w);

/* Writes the character index of each piece's start to starts (capacity s->n + STARTS_PAD)
 * and returns how many pieces there are. */
#define STARTS_PAD 32
size_t scan_pieces(int family, const Stretch *s, uint32_t *starts);

/* The added tokens as a radix trie (added.c); leads: the bytes a token can begin with. */
#define ADDED_SIMD_LEADS 8
typedef struct {
    const int32_t *edge_start; /* n_nodes + 1 */
    const uint8_t *edge_byte;
    const int32_t *edge_child;
    const int32_t *token;    /* per node: the id of the token ending there, or -1 */
    const int32_t *label_at; /* n_nodes + 1: node k's label is labels[label_at[k]:[k + 1]] */
    const uint8_t *labels;
    uint8_t is_lead[256];
    int n_leads;
#if defined(__SSE2__)
    __m128i lead16[ADDED_SIMD_LEADS]; /* the first leads, each in every byte */
#endif
} AddedTrie;

/* Growable arrays of the spans found: [begin, end) in bytes and the token's id. */
typedef struct {
    int64_t *begin, *end;
    int32_t *ids;
    size_t count, cap;
} AddedSpans;

/* Appends the leftmost-longest matches of the tokens in data[0:n] to out; -1 when out of
 * memory. */
int added_find(const AddedTrie *t, const uint8_t *data, size_t n, AddedSpans *out);

/* The survey of a text (survey.c), all of it without the GIL.  Class blocks are 4096 code
 * points; NFC codes as gpu_kernels.char_classes. */
#define SURVEY_BLOCK_BITS 12
#define SURVEY_BLOCKS ((0x110000 >> SURVEY_BLOCK_BITS) + 1)
enum { NFC_BOUNDARY, NFC_SUSPECT, NFC_UNKNOWN };
enum { ENDS_DO_NOT_ADD_UP = 1, ENDS_INSIDE_A_WINDOW = 2 };

/* The CPU has AVX-512 VBMI (set at import; TOKSPLICE_NATIVE_SCALAR=1 turns it off, so the
 * scalar paths can be checked on such a CPU): the decode's ASCII blocks and the scanners'
 * starts are taken 64 at a time. */
#if defined(__x86_64__) && defined(__GNUC__)
#define WIDE_ASCII 1
extern int wide_ascii;
extern int wide_utf8;
#endif

/* Sixteen bytes at a time where SSE2 is there (x86-64 always), else one at a time. */
#if defined(__SSE2__)
/* How many of the 16 bytes at p are ASCII before the first that is not (16: all). */
static inline unsigned ascii16(const uint8_t *p) {
    unsigned high = (unsigned)_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)p));
    return (unsigned)__builtin_ctz(high | 0x10000u);
}
/* How many of the 16 bytes at p equal c before the first that does not (16: all). */
static inline unsigned same16(const uint8_t *p, uint8_t c) {
    __m128i v = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p), _mm_set1_epi8((char)c));
    return (unsigned)__builtin_ctz(~(unsigned)_mm_movemask_epi8(v));
}
/* The 16 ASCII bytes at p as code points. */
static inline void widen16(const uint8_t *p, uint32_t *cp) {
    __m128i v = _mm_loadu_si128((const __m128i *)p), z = _mm_setzero_si128();
    __m128i lo = _mm_unpacklo_epi8(v, z), hi = _mm_unpackhi_epi8(v, z);
    _mm_storeu_si128((__m128i *)cp, _mm_unpacklo_epi16(lo, z));
    _mm_storeu_si128((__m128i *)(cp + 4), _mm_unpackhi_epi16(lo, z));
    _mm_storeu_si128((__m128i *)(cp + 8), _mm_unpacklo_epi16(hi, z));
    _mm_storeu_si128((__m128i *)(cp + 12), _mm_unpackhi_epi16(hi, z));
}
#else
static inline void widen16(const uint8_t *p, uint32_t *cp) {
    for (int k = 0; k < 16; k++) cp[k] = p[k];
}
static inline unsigned ascii16(const uint8_t *p) {
    unsigned k = 0;
    while (k < 16 && p[k] < 0x80) k++;
    return k;
}
static inline unsigned same16(const uint8_t *p, uint8_t c) {
    unsigned k = 0;
    while (k < 16 && p[k] == c) k++;
    return k;
}
#endif

/* Code point of the UTF-8 character at d[i] (valid UTF-8: it came from str.encode) and its
 * width. */
static inline uint32_t utf8_decode_at(const uint8_t *d, size_t i, int *width) {
    uint8_t b = d[i];
    if (b < 0x80) { *width = 1; return b; }
    if (b < 0xE0) { *width = 2; return ((uint32_t)(b & 0x1F) << 6) | (d[i + 1] & 0x3F); }
    if (b < 0xF0) {
        *width = 3;
        return ((uint32_t)(b & 0x0F) << 12) | ((uint32_t)(d[i + 1] & 0x3F) << 6) | (d[i + 2] & 0x3F);
    }
    *width = 4;
    return ((uint32_t)(b & 0x07) << 18) | ((uint32_t)(d[i + 1] & 0x3F) << 12) |
           ((uint32_t)(d[i + 2] & 0x3F) << 6) | (d[i + 3] & 0x3F);
}

/* Sets missing[b] (SURVEY_BLOCKS flags) for each block the text touches that probed[] does
 * not flag (block 0 whenever the text is not empty); whether there is one. */
int survey_blocks(const uint8_t *probed, const uint8_t *data, size_t n, uint8_t *missing);

/* Byte windows [begin, end) around each character NFC may join to the one before, from the
 * last NFC boundary before it to the first after (added-token spans count as one boundary
 * character each), appended to out as pairs; 1 when a character is NFC_UNKNOWN, -1 when out
 * of memory.  Its blocks must be probed. */
typedef struct {
    int64_t *pairs;
    size_t count, cap;
} NfcWindows;
int survey_nfc(const uint8_t *nfc, const uint8_t *data, size_t n, const int64_t *span_begin,
               const int64_t *span_end, size_t spans, NfcWindows *out);

/* Each token's end from the tokens' byte lengths, moved back by the windows NFC changed:
 * moves holds (begin, end, gained) per window in the normalized bytes, gained what NFC added
 * up to and including it (nfc.Alignment).  0, ENDS_DO_NOT_ADD_UP unless the lengths sum to
 * size, or ENDS_INSIDE_A_WINDOW when a token ends inside a changed window.  short_lengths:
 * the lengths as bytes, SHORT_LENGTH_MAX where a length is not below it (or is negative): a
 * quarter of the lengths' cache lines, which the ids look up in no order. */
#define SHORT_LENGTH_MAX 255
int survey_ends(const int32_t *ids, size_t count, const int32_t *lengths,
                const uint8_t *short_lengths, size_t n_lengths, size_t size,
                const int64_t *moves, size_t n_moves, int32_t *ends);

/* common_prefix(a, b, i=0, j=0) and common_suffix(a, b, floor) of two str (strings.c). */
#ifdef Py_PYTHON_H
PyObject *strings_common_prefix(PyObject *self, PyObject *args);
PyObject *strings_common_suffix(PyObject *self, PyObject *args);
PyObject *strings_gather(PyObject *self, PyObject *args);
PyObject *strings_compared_lines(PyObject *self, PyObject *args);
#endif

#endif
