/* The split patterns of the covered families over one stretch: where each piece starts.
 *
 * Where a piece starts depends only on the classes around it and a few facts of its runs for
 * GPT-2, the cl100k family (Qwen3.5 in it: the decode classes its marks as letters) and
 * DeepSeek-V3: their starts are the GPU's predicates (gpu_kernels.piece_starts,
 * deepseek_starts) as bit masks, 64 characters at a time; so are o200k's, Tekken's and Kimi's
 * where the text is ASCII.  The other families' are sequential matchers: each tries the
 * pattern's alternatives at position i in order, with the regex engine's
 * greedy-then-backtrack choices spelled out, and returns where the match ends; the next
 * search starts there.  The character classes are those of gpu_kernels.char_classes (probed
 * from the reference's own regex engine), so both ask the same questions of the same table as
 * the GPU predicates, and the tests hold all of them to the reference.  Positions at or past
 * the stretch's end read as "no class": a stretch ends where the text or an added token does,
 * and the reference pre-tokenizes each alone.
 */
#include <string.h>

#include "native.h"

/* The code point of character i (< n): from cp, or decoded from the stretch's bytes where
 * the family's scanner keeps none (cp NULL). */
static inline uint32_t point_of(const Stretch *s, size_t i) {
    if (s->cp != NULL) return s->cp[i];
    int width;
    return utf8_decode_at(s->bytes, s->at ? s->at[i] : i, &width);
}

#define CLS(i) ((i) < s->n ? s->cls[i] : 255)
#define CP(i) ((i) < s->n ? point_of(s, i) : 0x110000u)

static inline int is_space(uint8_t c) { return c <= C_WS; }
static inline int is_punct(uint8_t c) { return c == C_AP || c == C_P; } /* [^\s\p{L}\p{N}] */

static size_t run_of(const Stretch *s, size_t i, uint8_t cls) {
    for (unsigned k = 16; k == 16 && i < s->n; i += k) k = same16(s->cls + i, cls);
    return i < s->n ? i : s->n;
}

static size_t punct_run(const Stretch *s, size_t i) {
    while (i < s->n && is_punct(s->cls[i])) i++;
    return i;
}

/* The fold of character i; none past the stretch's end. */
static inline uint8_t fold_of(const Stretch *s, size_t i) {
    return i < s->n ? s->folds[point_of(s, i)] : F_NONE;
}

/* Length of a case-insensitive contraction at i, an apostrophe ('s 't 're 've 'm 'll 'd), or 0. */
static size_t contraction_after(const Stretch *s, size_t i) {
    uint8_t a = fold_of(s, i + 1), b = fold_of(s, i + 2);
    if (a == F_S || a == F_T || a == F_M || a == F_D) return 2;
    if ((a == F_R && b == F_E) || (a == F_V && b == F_E) || (a == F_L && b == F_L)) return 3;
    return 0;
}

/* The same at any i (the test for the apostrophe inline: most pieces start otherwise). */
static inline size_t contraction(const Stretch *s, size_t i) {
    return CP(i) == '\'' ? contraction_after(s, i) : 0;
}

/* GPT-2's contractions are case-sensitive. */
static size_t exact_contraction(const Stretch *s, size_t i) {
    if (CP(i) != '\'') return 0;
    uint32_t a = CP(i + 1), b = CP(i + 2);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* \s*[\r\n]+ (with newlines) | \s+(?!\S) | \s+ at i, a whitespace character; the stretch
 * ends at n. */
static size_t whitespace(const Stretch *s, size_t i, size_t n, int newlines) {
    size_t b = i, last_nl = n;
    while (b < n && is_space(s->cls[b])) {
        if (newlines && s->cls[b] == C_NL) last_nl = b;
        b++;
    }
    if (last_nl < n) return last_nl + 1; /* \s* backs off to the last newline */
    if (b == n) return n;                /* (?!\S) holds at the end */
    if (b - 1 > i) return b - 1;         /* hands its last character to what follows */
    return b;
}

/* cl100k / Llama-3 (digits = 3) and Qwen2 (digits = 1), 64 characters at a time: whether a
 * character starts a piece depends only on the classes around it and a few facts of the runs
 * it is in (gpu_kernels.piece_starts.cl100k_starts, the GPU's predicates, as bit masks), so
 * the starts of a block are a few dozen mask operations and no branch per piece. */

/* Bit j of each mask: the class of character base + j (none past the stretch's end). */
typedef struct { uint64_t nl, sp, ws, l, n, ap, p; } Masks;

static inline uint64_t eq64(const uint8_t *c, uint8_t v) {
#if defined(__SSE2__)
    __m128i k = _mm_set1_epi8((char)v);
    uint64_t m = 0;
    for (int q = 0; q < 4; q++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(c + 16 * q));
        m |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, k)) << (16 * q);
    }
    return m;
#else
    uint64_t m = 0;
    for (int j = 0; j < 64; j++) m |= (uint64_t)(c[j] == v) << j;
    return m;
#endif
}

#ifdef WIDE_ASCII
#include <immintrin.h>

/* masks_at's with AVX-512: a compare per class of the 64 bytes in one register. */
__attribute__((target("avx512f,avx512bw"))) static Masks masks_wide(const uint8_t *cls) {
    __m512i c = _mm512_loadu_si512(cls);
#define EQ(v) ((uint64_t)_mm512_cmpeq_epi8_mask(c, _mm512_set1_epi8(v)))
    return (Masks){EQ(C_NL), EQ(C_SP), EQ(C_WS), EQ(C_L), EQ(C_N), EQ(C_AP), EQ(C_P)};
#undef EQ
}
#endif

static inline Masks masks_at(const uint8_t *cls) {
#ifdef WIDE_ASCII
    if (wide_ascii) return masks_wide(cls);
#endif
    return (Masks){eq64(cls, C_NL), eq64(cls, C_SP), eq64(cls, C_WS), eq64(cls, C_L),
                   eq64(cls, C_N),  eq64(cls, C_AP), eq64(cls, C_P)};
}

/* x at j - 1 and j - 2 (the previous block's bits shifted in). */
#define BACK1(x, prev) ((x) << 1 | (prev) >> 63)
#define BACK2(x, prev) ((x) << 2 | (prev) >> 62)

/* The bits of m smeared down through the runs of g (each bit of m set at every position of
 * g's run below it): a position whose run of g goes on to a bit of m. */
static inline uint64_t smear_down(uint64_t m, uint64_t g) {
    if (!m) return 0; /* mostly: a blank run before a newline is rare */
    for (int d = 1; d < 64; d *= 2) {
        m |= (m >> d) & g;
        g &= g >> d;
    }
    return m;
}

#ifdef WIDE_ASCII
/* emitted's with AVX-512 VBMI2: the positions compressed as bytes, then widened 16 at a time,
 * the first 32 whatever the count (a branch on it took turns; source code has ~15 pieces in
 * 64 bytes), the rest where there are more. */
__attribute__((target("avx512f,avx512bw,avx512vbmi2,popcnt"))) static size_t
emitted_bytes(uint32_t *starts, size_t k, size_t base, uint64_t found) {
    const __m512i iota = _mm512_set_epi8(
        63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42,
        41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20,
        19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i b = _mm512_set1_epi32((int)base);
    __m512i at = _mm512_maskz_compress_epi8(found, iota);
    size_t count = (size_t)__builtin_popcountll(found);
    for (size_t q = 0; q < 4 && (q < 2 || 16 * q < count); q++) {
        __m512i wide = _mm512_cvtepu8_epi32(_mm512_castsi512_si128(at));
        _mm512_storeu_si512(starts + k + 16 * q, _mm512_add_epi32(wide, b));
        at = _mm512_alignr_epi32(at, at, 4); /* the next 16 bytes down */
    }
    return k + count;
}
#endif

/* The set bits of found as positions base + j, appended at starts + k, four at a time with no
 * branch per bit (one per piece was the scanners' cost); up to 31 more past them are garbage
 * (starts has STARTS_PAD): the next block's overwrite them.  The new count. */
static inline size_t emitted(uint32_t *starts, size_t k, size_t base, uint64_t found) {
#ifdef WIDE_ASCII
    if (wide_utf8) return emitted_bytes(starts, k, base, found);
#endif
    size_t end = k + (size_t)__builtin_popcountll(found);
    for (; k < end; k += 4)
        for (int r = 0; r < 4; r++) {
            starts[k + r] = (uint32_t)(base + __builtin_ctzll(found | (uint64_t)1 << 63));
            found &= found - 1;
        }
    return end;
}

/* The starts of \p{N}{1,3} in a block: offsets 0, 3, 6... of each run of digits (last: the
 * last block's digits; *grouped: its starts, then this one's). */
static inline uint64_t digit_groups(uint64_t digits, uint64_t last, uint64_t *grouped) {
    uint64_t three = digits & BACK1(digits, last) & BACK2(digits, last);
    uint64_t got = digits & ~BACK1(digits, last), step;
    while ((step = ((got << 3 | *grouped >> 61) & three) & ~got)) got |= step;
    return *grouped = got;
}

/* The newlines opening a block's whitespace runs that punctuation before them absorbs
 * (after_punct: bit j where j - 1 is punctuation; last: the last block's). */
static inline uint64_t newlines_eaten(Masks m, Masks prev, uint64_t after_punct, uint64_t last) {
    uint64_t space = m.nl | m.sp | m.ws;
    uint64_t eaten = space & ~BACK1(space, prev.nl | prev.sp | prev.ws) & after_punct & m.nl;
    eaten |= (last >> 63) & m.nl & 1; /* newlines absorbed in the last block go on */
    return eaten | (((m.nl + eaten) ^ m.nl) & m.nl);
}

/* The starts in a block's whitespace runs [a, b) (run_scans.whitespace_starts): the newlines
 * eaten (those opening a run that what is before it absorbs; last_eaten: the last block's) do
 * not start; what is left starts at a', after the run's last newline t, and at b - 1 when
 * b - 1 > max(t + 1, a') and the text goes on at b (more: bit j where it goes on at j + 1),
 * \s+(?!\S) handing that one to what follows.  zrun_end (the end of the run of SP/WS the last
 * block ended in) carries from block to block. */
static inline uint64_t space_starts(const Stretch *s, size_t base, Masks m, Masks prev,
                                    uint64_t eaten, uint64_t last_eaten, uint64_t more,
                                    size_t *zrun_end) {
    const uint8_t *c = s->cls + base;
    uint64_t space = m.nl | m.sp | m.ws, blank = m.sp | m.ws; /* \s; \s but newlines */
    uint64_t opening = space & ~BACK1(space, prev.nl | prev.sp | prev.ws);
    uint64_t found = (opening & ~eaten) | (BACK1(eaten, last_eaten) & blank);
    uint64_t ahead_nl = m.nl >> 1 | (uint64_t)(c[64] == C_NL) << 63;
    /* \s goes on past the block: bit 63, a word already (a flag kept as a byte across the
     * smear and read back as a word made a load wait for its store to retire) */
    uint64_t ahead_space = (uint64_t)(c[64] <= C_WS) << 63;
    if ((blank >> 63) && c[64] != C_NL && ahead_space) { /* the run goes on: to what? */
        size_t e = *zrun_end;
        if (e <= base + 64) { /* else the run the last block found goes on here */
            uint64_t run; /* 64 at a time: what is past the stretch's end is not SP or WS */
            for (e = base + 64; !~(run = eq64(s->cls + e, C_SP) | eq64(s->cls + e, C_WS));)
                e += 64;
            e += (size_t)__builtin_ctzll(~run);
        }
        ahead_nl |= (uint64_t)(s->cls[e] == C_NL) << 63; /* cls[n]: no class */
        *zrun_end = e;
    }
    found |= blank & BACK1(m.nl, prev.nl) & ~smear_down(blank & ahead_nl, blank); /* t + 1 */
    uint64_t last = space & ~(space >> 1 | ahead_space);
    return found | (last & blank & BACK1(blank, prev.sp | prev.ws) & more);
}

#ifdef WIDE_ASCII
/* ascii_controls' of 64 bytes with AVX-512: two compares. */
__attribute__((target("avx512f,avx512bw"))) static uint64_t controls_wide(const uint8_t *p) {
    __m512i v = _mm512_loadu_si512(p);
    return _mm512_cmplt_epu8_mask(v, _mm512_set1_epi8(0x20)) |
           _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(0x7F));
}
#endif

/* Bits of the count (<= 64) ASCII bytes at p that are controls (below 0x20, or 0x7F). */
static inline uint64_t ascii_controls(const uint8_t *p, size_t count) {
#ifdef WIDE_ASCII
    if (wide_ascii && count == 64) return controls_wide(p);
#endif
    uint64_t control = 0;
#if defined(__SSE2__)
    if (count == 64) {
        const __m128i space = _mm_set1_epi8(0x20), del = _mm_set1_epi8(0x7F);
        for (int q = 0; q < 4; q++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(p + 16 * q));
            __m128i c = _mm_or_si128(_mm_cmplt_epi8(v, space), _mm_cmpeq_epi8(v, del));
            control |= (uint64_t)(uint16_t)_mm_movemask_epi8(c) << (16 * q);
        }
        return control;
    }
#endif
    for (size_t j = 0; j < count; j++) control |= (uint64_t)(p[j] < 0x20 || p[j] == 0x7F) << j;
    return control;
}

/* cl100k's starts, and (deepseek, a constant) DeepSeek-V3's where the stretch is all ASCII (cp
 * NULL): among ASCII characters its segments change nothing but that whitespace ends before a
 * digit (\s+(?!\S) holds there), and its third split is cl100k's pattern without contractions
 * but for the controls that are not whitespace (other: no class of it takes them), which are
 * not punctuation but a letter's prefix whatever precedes them, else a piece per run. */
static inline __attribute__((always_inline)) size_t
cl100k_scan(const Stretch *s, uint32_t *starts, size_t digits, int deepseek) {
    Masks prev = {0};
    uint64_t digit_starts = 0, absorbed = 0, pending = 0, p_other = 0;
    size_t k = 0, zrun_end = 0;
    for (size_t base = 0; base < s->n; base += 64) {
        const uint8_t *c = s->cls + base;
        size_t count = s->n - base < 64 ? s->n - base : 64;
        Masks m = masks_at(c);
        uint64_t punct = m.ap | m.p, pp = prev.ap | prev.p, other = 0;
        if (deepseek) {
            other = punct & ascii_controls(s->bytes + base, count);
            punct &= ~other, pp &= ~p_other;
        }
        uint64_t found = pending;
        pending = 0;
        if (base == 0) found |= 1;
        /* \p{N}{1,3} (Qwen2: \p{N}) */
        found |= digits == 1 ? m.n : digit_groups(m.n, prev.n, &digit_starts);
        /* Punctuation starts unless after punctuation or U+0020 (that space is its prefix). */
        found |= punct & ~BACK1(punct, pp) & ~BACK1(m.sp, prev.sp);
        /* A run of letters starts unless after \s other than a newline, or after one
         * punctuation character not after U+0020 (its prefix), or after other; after a lone
         * ', a contraction ends a piece inside the run. */
        uint64_t lone = BACK1(punct, pp) & ~BACK2(punct, pp);
        uint64_t prefixed = (lone & ~BACK2(m.sp, prev.sp)) | BACK1(other, p_other);
        uint64_t first = m.l & ~BACK1(m.l, prev.l);
        found |= first & ~(BACK1(m.sp, prev.sp) | BACK1(m.ws, prev.ws) | prefixed);
        for (uint64_t opens = deepseek ? 0 : first & BACK1(m.ap, prev.ap) & prefixed; opens;
             opens &= opens - 1) {
            size_t j = (size_t)__builtin_ctzll(opens), at = base + j;
            uint8_t a = fold_of(s, at), b = fold_of(s, at + 1);
            size_t cut = 0;
            if ((a == F_R && b == F_E) || (a == F_V && b == F_E) || (a == F_L && b == F_L))
                cut = j + 2;
            else if (a == F_S || a == F_T || a == F_M || a == F_D)
                cut = j + 1;
            if (cut >= 64) pending |= (uint64_t)1 << (cut - 64);
            else if (cut) found |= (uint64_t)1 << cut;
        }
        /* other: the first of a run starts, and the last before a letter (its prefix) */
        uint64_t letter_ahead = m.l >> 1 | (uint64_t)(c[64] == C_L) << 63;
        found |= other & (letter_ahead | ~BACK1(other, p_other));
        /* whitespace goes on to \S, but (DeepSeek-V3) not to a digit */
        uint64_t goes_on = m.nl | m.sp | m.ws | m.l | punct | other | (deepseek ? 0 : m.n);
        int next_goes_on = c[64] != 255 && !(deepseek && c[64] == C_N);
        uint64_t more = goes_on >> 1 | (uint64_t)next_goes_on << 63;
        uint64_t eaten = newlines_eaten(m, prev, BACK1(punct, pp), absorbed);
        found |= space_starts(s, base, m, prev, eaten, absorbed, more, &zrun_end);
        absorbed = eaten;
        prev = m, p_other = other;
        if (count < 64) found &= ((uint64_t)1 << count) - 1;
        k = emitted(starts, k, base, found);
    }
    return k;
}

/* cl100k / Llama-3 (digits = 3) and Qwen2 (digits = 1). */
static size_t cl100k_pieces(const Stretch *s, uint32_t *starts, size_t digits) {
    return cl100k_scan(s, starts, digits, 0);
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t gpt2_match(const Stretch *s, size_t i) {
    size_t m = exact_contraction(s, i);
    if (m) return i + m;
    size_t p = (s->cp[i] == ' ' && CLS(i + 1) != 255 && !is_space(s->cls[i + 1])) ? i + 1 : i;
    uint8_t c = s->cls[p];
    if (c == C_L || c == C_N) return run_of(s, p, c);
    if (is_punct(c)) return punct_run(s, p);
    return whitespace(s, i, s->n, 0);
}

/* GPT-2's starts as bit masks (gpu_kernels.piece_starts.gpt2_starts): a run of letters,
 * digits or punctuation starts unless U+0020 precedes it (its prefix); a ' that starts ends
 * its piece after a lower-case contraction, if one follows; a whitespace run [a, b) starts at
 * a and hands b - 1 to what follows when b - 1 > a and the text goes on at b.  digits (a
 * constant; SmolLM2 on an ASCII stretch, whose only \p{N} are 0-9): each digit is split off
 * first and the pattern runs on the segments between them, so a digit starts, a space is no
 * digit's prefix, and a segment ends at a digit (\s+(?!\S) holds there). */
static inline __attribute__((always_inline)) size_t
gpt2_scan(const Stretch *s, uint32_t *starts, int digits) {
    Masks prev = {0};
    uint64_t held = 0, pending = 0;
    size_t k = 0;
    for (size_t base = 0; base < s->n; base += 64) {
        const uint8_t *c = s->cls + base;
        Masks m = masks_at(c);
        uint64_t space = m.nl | m.sp | m.ws, p_space = prev.nl | prev.sp | prev.ws;
        uint64_t punct = m.ap | m.p, pp = prev.ap | prev.p;
        uint64_t runs = digits ? 0 : m.n; /* \p{N}+, or no digit in a segment */
        uint64_t first = (m.l & ~BACK1(m.l, prev.l)) | (runs & ~BACK1(runs, prev.n)) |
                         (punct & ~BACK1(punct, pp));
        uint64_t found = (first & ~BACK1(m.sp, prev.sp)) | pending | (base == 0);
        if (digits) found |= m.n; /* what follows one opens a run of its own: it starts */
        uint64_t taken = held; /* a contraction's first letter: not a start */
        held = pending = 0;
        for (uint64_t a = found & m.ap; a; a &= a - 1) {
            size_t j = (size_t)__builtin_ctzll(a), len = exact_contraction(s, base + j);
            if (!len) continue;
            if (j + 1 < 64) taken |= (uint64_t)1 << (j + 1);
            else held = 1;
            if (j + len < 64) found |= (uint64_t)1 << (j + len);
            else pending |= (uint64_t)1 << (j + len - 64);
        }
        found &= ~taken;
        uint64_t last = space & ~(space >> 1 | (uint64_t)(c[64] <= C_WS) << 63);
        int next_goes_on = c[64] != 255 && !(digits && c[64] == C_N);
        uint64_t more = (space | m.l | runs | punct) >> 1 | (uint64_t)next_goes_on << 63;
        found |= (space & ~BACK1(space, p_space)) | (last & BACK1(space, p_space) & more);
        prev = m;
        if (s->n - base < 64) found &= ((uint64_t)1 << (s->n - base)) - 1;
        k = emitted(starts, k, base, found);
    }
    return k;
}

static size_t gpt2_pieces(const Stretch *s, uint32_t *starts) { return gpt2_scan(s, starts, 0); }

/* o200k's letter classes at u (< n): U = Lu Lt Lm Lo M, W = Ll Lm Lo M; Kimi's (no_han)
 * without \p{Han}, looked up for Lm Lo M alone (char_classes checks no Han character is
 * cased). */
static inline int uncased_letter(const Stretch *s, size_t u, uint8_t k, int no_han) {
    return (k == K_OTHER_LETTER || k == K_MARK) && !(no_han && s->han[s->cp[u]]);
}
static inline int is_upper(const Stretch *s, size_t u, int no_han) {
    uint8_t k = s->kinds[s->cp[u]];
    return k == K_UPPER || uncased_letter(s, u, k, no_han);
}
static inline int is_lower(const Stretch *s, size_t u, int no_han) {
    uint8_t k = s->kinds[s->cp[u]];
    return k == K_LOWER || uncased_letter(s, u, k, no_han);
}

/* [U]*[W]+ at i: its end, or 0 when it does not match. */
static inline size_t o200k_lower_word(const Stretch *s, size_t i, int no_han) {
    size_t u = i;
    while (u < s->n && is_upper(s, u, no_han)) u++;
    if (u < s->n && is_lower(s, u, no_han)) {
        while (u < s->n && is_lower(s, u, no_han)) u++;
        return u;
    }
    for (size_t k = u; k > i; k--) /* [U]* backs off to its last character that is W */
        if (is_lower(s, k - 1, no_han)) return k;
    return 0;
}

/* [U]+[W]* at i: its end, or 0. */
static inline size_t o200k_upper_word(const Stretch *s, size_t i, int no_han) {
    size_t u = i;
    while (u < s->n && is_upper(s, u, no_han)) u++;
    if (u == i) return 0;
    while (u < s->n && is_lower(s, u, no_han)) u++;
    return u;
}

/* o200k (contractions, digits in threes), Tekken (neither: \p{N} alone) and, after its Han
 * runs, Kimi (kimi: letters without Han, cl100k's punctuation: ?[^\s\p{L}\p{N}]+[\r\n]*). */
static inline __attribute__((always_inline)) size_t
o200k_match(const Stretch *s, size_t i, int contractions, size_t digits, int kimi) {
    uint8_t c = s->cls[i];
    int prefix = c != C_NL && c != C_L && c != C_N; /* [^\r\n\p{L}\p{N}] */
    size_t e = 0;
    if (prefix) e = o200k_lower_word(s, i + 1, kimi);
    if (!e) e = o200k_lower_word(s, i, kimi);
    if (!e && prefix) e = o200k_upper_word(s, i + 1, kimi);
    if (!e) e = o200k_upper_word(s, i, kimi);
    if (e) return contractions ? e + contraction(s, e) : e;
    if (c == C_N) {
        e = i;
        while (e < s->n && s->cls[e] == C_N && e - i < digits) e++;
        return e;
    }
    size_t p = (s->cp[i] == ' ' && is_punct(CLS(i + 1))) ? i + 1 : i;
    if (is_punct(CLS(p))) {
        e = punct_run(s, p);
        while (e < s->n && (s->cls[e] == C_NL || (!kimi && s->cp[e] == '/'))) e++;
        return e;
    }
    return whitespace(s, i, s->n, 1);
}

/* Kimi K2: [\p{Han}]+ first (whatever the characters' classes), then o200k's words without
 * Han, \p{N}{1,3} and the rest (o200k_match). */
static size_t kimi_match(const Stretch *s, size_t i) {
    size_t e = i;
    while (e < s->n && s->han[s->cp[e]]) e++;
    return e > i ? e : o200k_match(s, i, 1, 3, 1);
}

/* o200k, Tekken and Kimi with bit masks where the letters are cased: a piece's end depends on
 * where it started (gpu_kernels.piece_starts.o200k_transfers: a mark is a letter or
 * punctuation, a `/` absorbed or not), but among characters that hold no mark and no Lm/Lo
 * (Kimi: no Han), so that each letter is upper- or lower-case, the starts are local like
 * cl100k's but for the stretch of newlines and slashes a punctuation run absorbs, a word's
 * [U]*[W]* split where an upper-case letter follows a lower-case one, and contractions ending
 * words.  A block is taken so when it and the three characters after it are such; elsewhere
 * o200k_match runs from the last start found, and the masks take up again at the start it
 * reaches, as if the stretch began there (the pattern has no look-behind, so what comes after
 * a start depends only on the text after).  Where they are ASCII the masks read the block's
 * bytes, case by bit 5 (a stretch all ASCII has no code points: cp NULL, see decoded in
 * _native.c); elsewhere the code points and their kinds (cased_masks). */

/* Whether the count characters from i are ASCII: as many bytes as characters. */
static inline int ascii_run(const Stretch *s, size_t i, size_t count) {
    return s->at == NULL || s->at[i + count] - s->at[i] == count;
}

/* Of the 64 ASCII bytes at b: the bits of those with bit 5 clear (upper-case letters among
 * letters) and of the slashes. */
static inline void ascii_masks(const uint8_t *b, uint64_t *no_bit5, uint64_t *slash) {
#if defined(__SSE2__)
    uint64_t bit5 = 0, sl = 0;
    for (int q = 0; q < 4; q++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(b + 16 * q));
        /* bit 5 of each byte moved to its bit 7 (the 16-bit shift carries nothing into it) */
        bit5 |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_slli_epi16(v, 2)) << (16 * q);
        __m128i slashes = _mm_cmpeq_epi8(v, _mm_set1_epi8('/'));
        sl |= (uint64_t)(uint16_t)_mm_movemask_epi8(slashes) << (16 * q);
    }
    *no_bit5 = ~bit5, *slash = sl;
#else
    *no_bit5 = *slash = 0;
    for (int j = 0; j < 64; j++) {
        *no_bit5 |= (uint64_t)!(b[j] & 0x20) << j;
        *slash |= (uint64_t)(b[j] == '/') << j;
    }
#endif
}

/* The bytes beyond one per character that a block of 64 and the three after it may have for
 * cased_masks to look at its characters: agent transcripts have an arrow, a curly quote or an
 * accented letter in a third of their blocks, a few of them; text in other scripts has wide
 * characters throughout, mostly uncased letters (the block's test would cost, then fail). */
#define CASED_EXTRA 24

#ifdef WIDE_ASCII
/* cased_masks' bits of 64 code points with AVX-512, 16 at a time; 64. */
__attribute__((target("avx512f"))) static size_t ascii_bits_wide(const uint32_t *cp,
                                                                 uint64_t *wide, uint64_t *up,
                                                                 uint64_t *sl) {
    const __m512i ascii = _mm512_set1_epi32(0x7F), a = _mm512_set1_epi32('A');
    const __m512i letters = _mm512_set1_epi32('Z' - 'A'), slashes = _mm512_set1_epi32('/');
    for (size_t j = 0; j < 64; j += 16) {
        __m512i v = _mm512_loadu_si512(cp + j);
        *wide |= (uint64_t)_mm512_cmpgt_epu32_mask(v, ascii) << j;
        *up |= (uint64_t)_mm512_cmple_epu32_mask(_mm512_sub_epi32(v, a), letters) << j;
        *sl |= (uint64_t)_mm512_cmpeq_epi32_mask(v, slashes) << j;
    }
    return 64;
}
#endif

/* Whether code point c is neither an uncased letter (Lm Lo) nor a mark (Kimi: nor Han). */
static inline int cased_kind(const Stretch *s, uint32_t c, int kimi) {
    uint8_t kind = s->kinds[c];
    return kind != K_OTHER_LETTER && kind != K_MARK && !(kimi && s->han[c]);
}

/* What ascii_masks gives the masks (the upper-case letters and the slashes) for the count
 * characters from base where they are not all ASCII, from their code points and kinds: 1 where
 * they and the ahead after them are few wide characters and hold no uncased letter (Lm Lo) and
 * no mark (Kimi: no Han either), so that every letter is upper- or lower-case (the class
 * table's probe checks that a letter's kind is one of the three) and the masks' rules hold as
 * among ASCII characters; else 0, the block left to o200k_match (in agent transcripts, a third
 * of the blocks went there: 1.3-1.4x on their encodes).  Out of line: the loop of the blocks
 * keeps its registers. */
static __attribute__((noinline)) int cased_masks(const Stretch *s, size_t base, size_t count,
                                                 size_t ahead, int kimi, uint64_t *upper,
                                                 uint64_t *slash) {
    size_t chars = count + ahead, j = 0;
    if (s->at[base + chars] - s->at[base] > chars + CASED_EXTRA) return 0;
    const uint32_t *cp = s->cp + base;
    uint64_t wide = 0, up = 0, sl = 0; /* the ASCII characters' bits first, four at a time */
#ifdef WIDE_ASCII
    if (wide_ascii && count == 64) j = ascii_bits_wide(cp, &wide, &up, &sl);
#endif
#if defined(__SSE2__)
    const __m128i ascii = _mm_set1_epi32(0x7F), before_a = _mm_set1_epi32('A' - 1);
    const __m128i after_z = _mm_set1_epi32('Z' + 1), slashes = _mm_set1_epi32('/');
#define BITS(v) ((uint64_t)_mm_movemask_ps(_mm_castsi128_ps(v)) << j)
    for (; j + 4 <= count; j += 4) {
        __m128i v = _mm_loadu_si128((const __m128i *)(cp + j));
        wide |= BITS(_mm_cmpgt_epi32(v, ascii));
        up |= BITS(_mm_and_si128(_mm_cmpgt_epi32(v, before_a), _mm_cmplt_epi32(v, after_z)));
        sl |= BITS(_mm_cmpeq_epi32(v, slashes));
    }
#undef BITS
#endif
    for (; j < count; j++) {
        wide |= (uint64_t)(cp[j] > 0x7F) << j;
        up |= (uint64_t)(cp[j] - 'A' <= 'Z' - 'A') << j;
        sl |= (uint64_t)(cp[j] == '/') << j;
    }
    for (; j < chars; j++) /* the ahead */
        if (cp[j] > 0x7F && !cased_kind(s, cp[j], kimi)) return 0;
    for (; wide; wide &= wide - 1) { /* each wide character's kind */
        size_t q = (size_t)__builtin_ctzll(wide);
        if (!cased_kind(s, cp[q], kimi)) return 0;
        up |= (uint64_t)(s->kinds[cp[q]] == K_UPPER) << q;
    }
    *upper = up, *slash = sl;
    return 1;
}

/* Bits set in m (within g) smeared up through the runs of g (each position of g's run above a
 * bit of m): adding m carries each run's lowest bit of m through the rest of the run, and
 * flips the run's other bits of m, which are put back. */
static inline uint64_t smear_up(uint64_t m, uint64_t g) {
    return (((g + m) ^ g) & g) | m;
}

static inline __attribute__((always_inline)) size_t
o200k_pieces(const Stretch *s, uint32_t *starts, int contractions, size_t digits, int kimi) {
    size_t n = s->n, k = 0, i = 0; /* i: the next start o200k_match has found */
    int masked = 0;                /* the last block was taken by the masks */
    Masks prev = {0};
    uint64_t p_lower = 0, p_absorbed = 0, p_eaten = 0, p_pstart = 0, digit_starts = 0;
    uint64_t pending = 0, held_next = 0;
    size_t zrun_end = 0, last_cut = 0;
    for (size_t base = 0; base < n; base += 64) {
        size_t count = n - base < 64 ? n - base : 64, ahead = n - base - count;
        int ascii = ascii_run(s, base, count) && ascii_run(s, base + count, ahead < 3 ? ahead : 3);
        uint64_t no_bit5 = 0, slash = 0; /* the upper-case letters among the letters */
        if (!ascii && !cased_masks(s, base, count, ahead < 3 ? ahead : 3, kimi, &no_bit5, &slash)) {
            if (masked) i = starts[--k], masked = 0, held_next = 0; /* from the last start */
            for (; i < base + 64 && i < n;
                 i = kimi ? kimi_match(s, i) : o200k_match(s, i, contractions, digits, 0))
                starts[k++] = (uint32_t)i;
            continue;
        }
        if (i >= base + 64) continue; /* a piece goes on through the block */
        uint64_t from = ~(uint64_t)0 >> (64 - count), found = pending;
        if (!masked) { /* the stretch as if it began at i */
            from &= ~(uint64_t)0 << (i - base);
            prev = (Masks){0}, p_lower = p_absorbed = p_eaten = p_pstart = digit_starts = 0;
            found = (uint64_t)1 << (i - base), zrun_end = 0, masked = 1;
        }
        pending = 0;
        const uint8_t *c = s->cls + base, *text = s->bytes + (s->at ? s->at[base] : base);
        uint8_t last[64]; /* the stretch's last block, not read past its end */
        if (count < 64 && ascii) text = memcpy(memset(last, 0, 64), text, count);
        Masks m = masks_at(c);
        m.nl &= from, m.sp &= from, m.ws &= from, m.l &= from, m.n &= from;
        m.ap &= from, m.p &= from;
        if (ascii) ascii_masks(text, &no_bit5, &slash);
        uint64_t punct = m.ap | m.p, pp = prev.ap | prev.p;
        uint64_t upper = m.l & no_bit5, lower = m.l & ~no_bit5;
        /* [^\s\p{L}\p{N}]+[\r\n/]*: the newlines after a punctuation run and the newlines and
         * slashes after them are absorbed (Kimi's [\r\n]*: the newlines) */
        uint64_t x = m.nl | (kimi ? 0 : slash & from);
        uint64_t absorbed = smear_up((m.nl & BACK1(punct, pp)) | ((p_absorbed >> 63) & x & 1), x);
        uint64_t runs = punct & ~absorbed, p_runs = pp & ~p_absorbed;
        /* a contraction after a word (not after another contraction): its letters go with
         * it, and a piece starts after it */
        uint64_t held = held_next;
        held_next = 0;
        if (contractions)
            for (uint64_t a = m.ap & BACK1(m.l, prev.l); a; a &= a - 1) {
                size_t j = (size_t)__builtin_ctzll(a), at = base + j;
                size_t len = at == last_cut ? 0 : contraction_after(s, at);
                if (!len) continue;
                last_cut = at + len;
                unsigned __int128 span = (unsigned __int128)(((uint64_t)1 << len) - 1) << j;
                held |= (uint64_t)span, held_next |= (uint64_t)(span >> 64);
                if (j + len >= 64) pending |= (uint64_t)1 << (j + len - 64);
                else found |= (uint64_t)1 << (j + len);
            }
        /* a punctuation run starts unless after U+0020 (its prefix) */
        uint64_t pstart = runs & ~BACK1(runs, p_runs) & ~BACK1(m.sp, prev.sp) & ~held;
        found |= pstart;
        /* a word starts unless after a prefix (\s but a newline, or punctuation that starts);
         * inside a run of letters, at an upper-case letter after a lower-case one */
        uint64_t first = m.l & ~BACK1(m.l, prev.l);
        uint64_t prefixed = BACK1(m.sp | m.ws, prev.sp | prev.ws) | BACK1(pstart, p_pstart);
        found |= (first & ~prefixed) | (upper & BACK1(lower, p_lower));
        found |= digits == 1 ? m.n : digit_groups(m.n, prev.n, &digit_starts);
        uint64_t more = (m.nl | m.sp | m.ws | m.l | m.n | punct) >> 1;
        more |= (uint64_t)(c[64] != 255) << 63;
        uint64_t eaten = absorbed & m.nl;
        found |= space_starts(s, base, m, prev, eaten, p_eaten, more, &zrun_end);
        found &= ~held;
        prev = m, p_lower = lower, p_absorbed = absorbed, p_eaten = eaten, p_pstart = pstart;
        k = emitted(starts, k, base, found & from);
    }
    return k;
}

/* o200k_pieces for each of its patterns, each compiled with its own constants (GCC had cloned
 * one of them; with the cased blocks none, and Tekken's and o200k's other text ran 0.91x). */
static __attribute__((noinline)) size_t o200k_only_pieces(const Stretch *s, uint32_t *starts) {
    return o200k_pieces(s, starts, 1, 3, 0);
}
static __attribute__((noinline)) size_t tekken_pieces(const Stretch *s, uint32_t *starts) {
    return o200k_pieces(s, starts, 0, 1, 0);
}
static __attribute__((noinline)) size_t kimi_pieces(const Stretch *s, uint32_t *starts) {
    return o200k_pieces(s, starts, 1, 3, 1);
}

/* DeepSeek-V3 as bit masks too (gpu_kernels.deepseek_starts): \p{N}{1,3} and CJK runs are
 * segments of their own, and inside each the third split's starts are cl100k's with its
 * classes: ASCII letters, other letters and marks, ASCII punctuation, other \p{P}\p{S},
 * whitespace, and OTHER (what no class takes: a letter's prefix, else a piece per run). */

static inline int cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x309F) ||
           (c >= 0x30A0 && c <= 0x30FF);
}

/* Bits of the count (<= 64) code points at cp: above ASCII, ASCII controls, and CJK (its
 * ranges being U+4E00-U+9FA5 and U+3040-U+30FF). */
static inline void cp_masks(const uint32_t *cp, size_t count, uint64_t *wide, uint64_t *control,
                            uint64_t *in_cjk) {
    *wide = *control = *in_cjk = 0;
#if defined(__SSE2__)
    if (count == 64) {
        const __m128i del = _mm_set1_epi32(0x7F), space = _mm_set1_epi32(0x20);
        const __m128i kana = _mm_set1_epi32(0x303F), kana_end = _mm_set1_epi32(0x3100);
        const __m128i han = _mm_set1_epi32(0x4DFF), han_end = _mm_set1_epi32(0x9FA6);
        for (int q = 0; q < 16; q += 4) {
            __m128i w[4], c[4], h[4];
            for (int r = 0; r < 4; r++) {
                __m128i v = _mm_loadu_si128((const __m128i *)(cp + 4 * (q + r)));
                w[r] = _mm_cmpgt_epi32(v, del);
                c[r] = _mm_or_si128(_mm_cmplt_epi32(v, space), _mm_cmpeq_epi32(v, del));
                h[r] = _mm_or_si128(_mm_and_si128(_mm_cmpgt_epi32(v, kana), _mm_cmplt_epi32(v, kana_end)),
                                    _mm_and_si128(_mm_cmpgt_epi32(v, han), _mm_cmplt_epi32(v, han_end)));
            }
            __m128i ws = _mm_packs_epi16(_mm_packs_epi32(w[0], w[1]), _mm_packs_epi32(w[2], w[3]));
            __m128i cs = _mm_packs_epi16(_mm_packs_epi32(c[0], c[1]), _mm_packs_epi32(c[2], c[3]));
            __m128i hs = _mm_packs_epi16(_mm_packs_epi32(h[0], h[1]), _mm_packs_epi32(h[2], h[3]));
            *wide |= (uint64_t)(uint16_t)_mm_movemask_epi8(ws) << (4 * q);
            *control |= (uint64_t)(uint16_t)_mm_movemask_epi8(cs) << (4 * q);
            *in_cjk |= (uint64_t)(uint16_t)_mm_movemask_epi8(hs) << (4 * q);
        }
        return;
    }
#endif
    for (size_t j = 0; j < count; j++) {
        *wide |= (uint64_t)(cp[j] > 0x7F) << j;
        *control |= (uint64_t)(cp[j] < 0x20 || cp[j] == 0x7F) << j;
        *in_cjk |= (uint64_t)cjk(cp[j]) << j;
    }
}

/* DeepSeek-V3's starts where the stretch is not all ASCII (it has code points). */
static size_t deepseek_unicode_pieces(const Stretch *s, uint32_t *starts) {
    Masks prev = {0}; /* the last block's, and: */
    uint64_t p_cjk = 0, p_seg = 0, p_other = 0, p_ap = 0, p_punct = 0, p_letter = 0, p_taken = 0;
    uint64_t digit_starts = 0, absorbed = 0;
    size_t k = 0, n = s->n, zrun_end = 0;
    for (size_t base = 0; base < n; base += 64) {
        const uint8_t *c = s->cls + base;
        size_t count = n - base < 64 ? n - base : 64;
        Masks m = masks_at(c);
        uint64_t wide, control, in_cjk, sym = 0, mark = 0, punctish = m.ap | m.p;
        cp_masks(s->cp + base, count, &wide, &control, &in_cjk);
        for (uint64_t w = wide & punctish; w; w &= w - 1) { /* symbols and marks past ASCII */
            size_t j = (size_t)__builtin_ctzll(w);
            uint8_t kind = s->kinds[s->cp[base + j]];
            sym |= (uint64_t)(kind == K_SYMBOL) << j;
            mark |= (uint64_t)(kind == K_MARK) << j;
        }
        uint64_t al = m.l & ~wide, ap = punctish & ~wide & ~control, ps = sym;
        uint64_t lm = (m.l & wide) | (mark & ~sym), punct = ap | ps, letter = al | lm;
        uint64_t other = punctish & ~ap & ~ps & ~lm;
        uint64_t seg = m.n | BACK1(m.n, prev.n) | (in_cjk ^ BACK1(in_cjk, p_cjk));
        uint64_t seg1 = BACK1(seg, p_seg);
#define P1(x, p) (BACK1(x, p) & ~seg)         /* at j - 1, in the same segment */
#define P2(x, p) (BACK2(x, p) & ~seg & ~seg1) /* at j - 2 */
        uint64_t found = base == 0;
        found |= punct & ~P1(punct, p_punct) & ~P1(m.sp, prev.sp);
        uint64_t first = letter & ~P1(letter, p_letter);
        uint64_t takes = first & al & P1(ap, p_ap) & ~P2(punct | m.sp, p_punct | prev.sp);
        found |= first & ~(P1(m.sp, prev.sp) | P1(m.ws, prev.ws) | P1(other, p_other) | takes);
        /* [!-/:-@[-`{-~][A-Za-z]+ ends at the first other letter or mark */
        takes |= (p_taken >> 63) & al & 1;
        takes |= ((al + takes) ^ al) & al;
        found |= lm & P1(takes, p_taken);
        /* OTHER: a piece per run, but a letter's prefix starts one of its own */
        uint64_t next_letter = 0, next_goes_on = 0, next_segment = 1;
        if (count == 64 && base + 64 < n) {
            uint32_t cp = s->cp[base + 64];
            next_letter = c[64] == C_L || (s->kinds[cp] == K_MARK && s->kinds[cp] != K_SYMBOL);
            next_segment = c[64] == C_N || (m.n >> 63) || (uint64_t)cjk(cp) != in_cjk >> 63;
            next_goes_on = c[64] != C_N && !cjk(cp);
        }
        uint64_t seg_ahead = seg >> 1 | next_segment << 63;
        uint64_t letter_ahead = (letter >> 1 | next_letter << 63) & ~seg_ahead;
        found |= other & (letter_ahead | ~P1(other, p_other));
        found = (found & ~m.n) | digit_groups(m.n, prev.n, &digit_starts); /* \p{N}{1,3} */
        /* whitespace as cl100k's, a segment's end being the stretch's */
        uint64_t goes_on = (letter | punct | other | m.nl | m.sp | m.ws) & ~in_cjk;
        uint64_t more = goes_on >> 1 | next_goes_on << 63;
        uint64_t eaten = newlines_eaten(m, prev, P1(punct, p_punct), absorbed);
        found |= space_starts(s, base, m, prev, eaten, absorbed, more, &zrun_end);
        absorbed = eaten;
#undef P1
#undef P2
        prev = m, p_cjk = in_cjk, p_seg = seg, p_other = other, p_ap = ap, p_punct = punct;
        p_letter = letter, p_taken = takes;
        if (count < 64) found &= ((uint64_t)1 << count) - 1;
        k = emitted(starts, k, base, found);
    }
    return k;
}

static size_t deepseek_pieces(const Stretch *s, uint32_t *starts) {
    return s->cp != NULL ? deepseek_unicode_pieces(s, starts) : cl100k_scan(s, starts, 3, 1);
}

/* SmolLM2: Digits(individual_digits) isolates each numeric character first (Rust's
 * is_numeric, probed apart from \p{N}), then GPT-2's pattern runs on every segment left,
 * each alone (a stretch of its own: the lookahead ends where the segment does). */
static size_t gpt2_digits_pieces(const Stretch *s, uint32_t *starts) {
    size_t k = 0, i = 0;
    while (i < s->n) {
        size_t b = i;
        while (b < s->n && !s->numeric[s->cp[b]]) b++;
        Stretch seg = {s->cp + i, s->cls + i, s->folds, s->kinds, s->numeric, s->han, b - i,
                       NULL, NULL}; /* GPT-2's matcher reads cp */
        for (size_t j = 0; j < seg.n; j = gpt2_match(&seg, j)) starts[k++] = (uint32_t)(i + j);
        if (b < s->n) starts[k++] = (uint32_t)b++;
        i = b;
    }
    return k;
}

/* Gemma (character BPE, spaces replaced by U+2581, no pre-split): a piece starts before each
 * space that follows printable ASCII other than '>', where tokenizer_spec checked that no
 * token of the vocabulary joins the two, so no merge crosses there (boundaries.py).  Read on
 * the bytes, the stretch's characters counted as bytes (POINTS_BYTES): a byte in 0x21-0x7E
 * is that ASCII character, no byte of a longer one; 16 at a time. */
#if defined(__SSE2__)
/* Bit j: a piece starts at p + j (p[-1] readable).  Signed compares: bytes over 0x7F are
 * below the space. */
static inline unsigned spaces_replaced16(const uint8_t *p) {
    const __m128i space = _mm_set1_epi8(' '), del = _mm_set1_epi8(0x7F), gt = _mm_set1_epi8('>');
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m128i before = _mm_loadu_si128((const __m128i *)(p - 1));
    __m128i printable = _mm_and_si128(_mm_cmpgt_epi8(before, space), _mm_cmplt_epi8(before, del));
    __m128i at = _mm_andnot_si128(_mm_cmpeq_epi8(before, gt),
                                  _mm_and_si128(_mm_cmpeq_epi8(v, space), printable));
    return (unsigned)_mm_movemask_epi8(at);
}
#endif

static size_t spaces_replaced_pieces(const Stretch *s, uint32_t *starts) {
    const uint8_t *p = s->bytes;
    size_t k = 0, i = 1;
    if (s->n) starts[k++] = 0;
#if defined(__SSE2__)
    for (; i < s->n && s->n > 16; i += 16) {
        size_t at = i + 16 <= s->n ? i : s->n - 16; /* the last 16: those before i left out */
        unsigned bits = spaces_replaced16(p + at) & (0xFFFFu << (i - at));
        for (; bits; bits &= bits - 1) starts[k++] = (uint32_t)(at + (size_t)__builtin_ctz(bits));
    }
#endif
    for (; i < s->n; i++) {
        uint8_t before = p[i - 1];
        if (p[i] == ' ' && before > ' ' && before < 0x7F && before != '>')
            starts[k++] = (uint32_t)i;
    }
    return k;
}

/* Each family's matcher in a loop of its own (the family is not asked again per piece). */
#define PIECES(match)                                                                          \
    do {                                                                                       \
        size_t k = 0;                                                                          \
        for (size_t i = 0; i < s->n; i = (match)) starts[k++] = (uint32_t)i;                   \
        return k;                                                                              \
    } while (0)

size_t scan_pieces(int family, const Stretch *s, uint32_t *starts) {
    switch (family) {
    case FAM_DEEPSEEK_V3: return deepseek_pieces(s, starts);
    case FAM_SPACES_REPLACED: return spaces_replaced_pieces(s, starts);
    case FAM_GPT2_DIGITS: /* the masks where the stretch is ASCII (no code points kept) */
        return s->cp == NULL ? gpt2_scan(s, starts, 1) : gpt2_digits_pieces(s, starts);
    case FAM_CL100K: return cl100k_pieces(s, starts, 3);
    case FAM_QWEN2:
    case FAM_QWEN35: return cl100k_pieces(s, starts, 1); /* its marks classed as letters */
    case FAM_GPT2: return gpt2_pieces(s, starts);
    case FAM_TEKKEN: return tekken_pieces(s, starts);
    case FAM_KIMI: return kimi_pieces(s, starts);
    default: return o200k_only_pieces(s, starts);
    }
}
