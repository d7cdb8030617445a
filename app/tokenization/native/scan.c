/* The split patterns of the covered families as sequential matchers over one stretch.
 *
 * Each matcher tries the pattern's alternatives at position i in order, with the regex
 * engine's greedy-then-backtrack choices spelled out, and returns where the match ends; the
 * next search starts there.  The character classes are those of gpu_kernels.char_classes
 * (probed from the reference's own regex engine), so the matchers ask the same questions of
 * the same table as the GPU predicates (gpu_kernels.piece_starts), and the tests hold both to
 * the reference.  Positions at or past the stretch's end read as "no class": a stretch ends
 * where the text or an added token does, and the reference pre-tokenizes each alone.
 */
#include "native.h"

#define CLS(i) ((i) < s->n ? s->cls[i] : 255)
#define CP(i) ((i) < s->n ? s->cp[i] : 0x110000u)
#define FOLD(i) ((i) < s->n ? s->folds[s->cp[i]] : F_NONE)

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

/* Length of a case-insensitive contraction at i, an apostrophe ('s 't 're 've 'm 'll 'd), or 0. */
static size_t contraction_after(const Stretch *s, size_t i) {
    uint8_t a = FOLD(i + 1), b = FOLD(i + 2);
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

static inline Masks masks_at(const uint8_t *cls) {
    return (Masks){eq64(cls, C_NL), eq64(cls, C_SP), eq64(cls, C_WS), eq64(cls, C_L),
                   eq64(cls, C_N),  eq64(cls, C_AP), eq64(cls, C_P)};
}

/* x at j - 1 and j - 2 (the previous block's bits shifted in). */
#define BACK1(x, prev) ((x) << 1 | (prev) >> 63)
#define BACK2(x, prev) ((x) << 2 | (prev) >> 62)

/* The bits of m smeared down through the runs of g (each bit of m set at every position of
 * g's run below it): a position whose run of g goes on to a bit of m. */
static inline uint64_t smear_down(uint64_t m, uint64_t g) {
    for (int d = 1; d < 64; d *= 2) {
        m |= (m >> d) & g;
        g &= g >> d;
    }
    return m;
}

static size_t cl100k_pieces(const Stretch *s, uint32_t *starts, size_t digits) {
    Masks prev = {0};
    uint64_t digit_starts = 0, absorbed = 0, pending = 0;
    size_t k = 0, zrun_end = 0; /* the end of the run of SP/WS the last block ended in */
    for (size_t base = 0; base < s->n; base += 64) {
        const uint8_t *c = s->cls + base;
        Masks m = masks_at(c);
        uint64_t punct = m.ap | m.p, pp = prev.ap | prev.p;
        uint64_t space = m.nl | m.sp | m.ws, blank = m.sp | m.ws; /* \s; \s but newlines */
        uint64_t found = pending;
        pending = 0;
        if (base == 0) found |= 1;
        /* \p{N}{1,3}: at offsets 0, 3, 6... of a run of digits (Qwen2: every digit). */
        if (digits == 1) {
            found |= m.n;
        } else if (m.n) {
            uint64_t three = m.n & BACK1(m.n, prev.n) & BACK2(m.n, prev.n);
            uint64_t got = m.n & ~BACK1(m.n, prev.n), step;
            while ((step = ((got << 3 | digit_starts >> 61) & three) & ~got)) got |= step;
            digit_starts = got;
            found |= got;
        } else {
            digit_starts = 0;
        }
        /* Punctuation starts unless after punctuation or U+0020 (that space is its prefix). */
        found |= punct & ~BACK1(punct, pp) & ~BACK1(m.sp, prev.sp);
        /* A run of letters starts unless after \s other than a newline, or after one
         * punctuation character not after U+0020 (its prefix); after a lone ', a
         * contraction ends a piece inside the run. */
        uint64_t lone = BACK1(punct, pp) & ~BACK2(punct, pp);
        uint64_t prefixed = lone & ~BACK2(m.sp, prev.sp);
        uint64_t first = m.l & ~BACK1(m.l, prev.l);
        found |= first & ~(BACK1(m.sp, prev.sp) | BACK1(m.ws, prev.ws) | prefixed);
        for (uint64_t opens = first & BACK1(m.ap, prev.ap) & prefixed; opens; opens &= opens - 1) {
            size_t j = (size_t)__builtin_ctzll(opens), at = base + j;
            uint8_t a = FOLD(at), b = FOLD(at + 1);
            size_t cut = 0;
            if ((a == F_R && b == F_E) || (a == F_V && b == F_E) || (a == F_L && b == F_L))
                cut = j + 2;
            else if (a == F_S || a == F_T || a == F_M || a == F_D)
                cut = j + 1;
            if (cut >= 64) pending |= (uint64_t)1 << (cut - 64);
            else if (cut) found |= (uint64_t)1 << cut;
        }
        /* Whitespace runs [a, b): punctuation before a absorbs the newlines opening the run;
         * what is left starts at a', after the run's last newline t, and at b - 1 when b - 1 >
         * max(t + 1, a') and the stretch goes on at b (\s+(?!\S) hands it to what follows). */
        uint64_t opening = space & ~BACK1(m.nl | m.sp | m.ws, prev.nl | prev.sp | prev.ws);
        uint64_t eaten = opening & BACK1(punct, pp) & m.nl;
        eaten |= (absorbed >> 63) & m.nl & 1; /* newlines absorbed in the last block go on */
        eaten |= ((m.nl + eaten) ^ m.nl) & m.nl;
        found |= (opening & ~eaten) | (BACK1(eaten, absorbed) & blank);
        absorbed = eaten;
        uint64_t next_space = c[64] <= C_WS, next_any = c[64] != 255;
        uint64_t ahead_nl = m.nl >> 1 | (uint64_t)(c[64] == C_NL) << 63;
        if ((blank >> 63) && c[64] != C_NL && c[64] <= C_WS) { /* the run goes on: to what? */
            if (zrun_end <= base + 64) /* else the run the last block found goes on here */
                for (zrun_end = base + 64;
                     zrun_end < s->n && (s->cls[zrun_end] == C_SP || s->cls[zrun_end] == C_WS);)
                    zrun_end++;
            ahead_nl |= (uint64_t)(zrun_end < s->n && s->cls[zrun_end] == C_NL) << 63;
        }
        uint64_t before_nl = smear_down(blank & ahead_nl, blank); /* a newline follows */
        found |= blank & BACK1(m.nl, prev.nl) & ~before_nl;
        uint64_t last = space & ~(space >> 1 | next_space << 63);
        uint64_t more = (m.nl | m.sp | m.ws | m.l | m.n | punct) >> 1 | next_any << 63;
        found |= last & blank & BACK1(blank, prev.sp | prev.ws) & more;
        prev = m;
        if (s->n - base < 64) found &= ((uint64_t)1 << (s->n - base)) - 1;
        for (; found; found &= found - 1) starts[k++] = (uint32_t)(base + __builtin_ctzll(found));
    }
    return k;
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
static inline size_t o200k_match(const Stretch *s, size_t i, int contractions, size_t digits,
                                 int kimi) {
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

/* Qwen3.5: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}
 * | ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ : Qwen2's with marks joining letters
 * (a mark is class P with kind K_MARK).  A mark also fits the prefix class, but a prefix mark
 * followed by letters or marks ends where the run from the mark itself does. */
static inline int letter_or_mark(const Stretch *s, size_t i) {
    return i < s->n && (s->cls[i] == C_L || s->kinds[s->cp[i]] == K_MARK);
}
static inline int punct_not_mark(const Stretch *s, size_t i) {
    return i < s->n && is_punct(s->cls[i]) && s->kinds[s->cp[i]] != K_MARK;
}

static size_t qwen35_match(const Stretch *s, size_t i) {
    uint8_t c = s->cls[i];
    size_t e = contraction(s, i);
    if (e) return i + e;
    if (letter_or_mark(s, i) || (c != C_NL && c != C_N && letter_or_mark(s, i + 1))) {
        for (e = i + 1; letter_or_mark(s, e); e++) {}
        return e;
    }
    if (c == C_N) return i + 1;
    size_t p = (s->cp[i] == ' ' && punct_not_mark(s, i + 1)) ? i + 1 : i;
    if (punct_not_mark(s, p)) {
        for (e = p; punct_not_mark(s, e); e++) {}
        return run_of(s, e, C_NL);
    }
    return whitespace(s, i, s->n, 1);
}

/* DeepSeek-V3's third split, inside a segment ending at b; 0 where nothing matches. */
static inline int ascii_letter(uint32_t c) { return ((c | 0x20) >= 'a') && ((c | 0x20) <= 'z'); }
static inline int ascii_punct(uint32_t c) {
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
}
#define SEG_CP(i) ((i) < b ? s->cp[i] : 0x110000u)
#define LM(i) ((i) < b && (s->cls[i] == C_L || s->kinds[s->cp[i]] == K_MARK))
#define PS(i) ((i) < b && s->kinds[s->cp[i]] == K_SYMBOL)

/* The end of [\p{L}\p{M}]+ at i (one of them), in a segment ending at b. */
static size_t letters_or_marks(const Stretch *s, size_t i, size_t b) {
    size_t e = run_of(s, i, C_L);
    for (e = e < b ? e : b; LM(e); e++) {}
    return e;
}

static size_t deepseek_match(const Stretch *s, size_t i, size_t b) {
    uint32_t c = s->cp[i];
    uint8_t cls = s->cls[i];
    size_t e;
    if (ascii_punct(c) && ascii_letter(SEG_CP(i + 1))) {
        for (e = i + 1; e < b && ascii_letter(s->cp[e]); e++) {}
        return e;
    }
    if (cls != C_NL && cls != C_L && !PS(i) && LM(i + 1)) return letters_or_marks(s, i + 1, b);
    if (LM(i)) return letters_or_marks(s, i, b);
    size_t p = (c == ' ' && PS(i + 1)) ? i + 1 : i;
    if (PS(p)) {
        for (e = p; PS(e); e++) {}
        while (e < b && s->cls[e] == C_NL) e++;
        return e;
    }
    if (is_space(cls)) return whitespace(s, i, b, 1);
    return 0;
}

static inline int cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x309F) ||
           (c >= 0x30A0 && c <= 0x30FF);
}

/* The first character from i on that is a digit or at U+3040 or above (where CJK begins), 16
 * at a time: most of DeepSeek-V3's segments are text below it, read to its end first. */
static size_t below_cjk(const Stretch *s, size_t i) {
#if defined(__SSE2__)
    const __m128i top = _mm_set1_epi32(0x303F), digit = _mm_set1_epi8(C_N);
    for (; i + 16 <= s->n; i += 16) {
        const __m128i *cp = (const __m128i *)(s->cp + i);
        __m128i a = _mm_packs_epi32(_mm_cmpgt_epi32(_mm_loadu_si128(cp), top),
                                    _mm_cmpgt_epi32(_mm_loadu_si128(cp + 1), top));
        __m128i b = _mm_packs_epi32(_mm_cmpgt_epi32(_mm_loadu_si128(cp + 2), top),
                                    _mm_cmpgt_epi32(_mm_loadu_si128(cp + 3), top));
        __m128i digits = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(s->cls + i)), digit);
        unsigned stop = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_packs_epi16(a, b), digits));
        if (stop) return i + (size_t)__builtin_ctz(stop);
    }
#endif
    while (i < s->n && s->cp[i] < 0x3040 && s->cls[i] != C_N) i++;
    return i;
}

/* \p{N}{1,3} isolated, then CJK runs isolated, then the third split in every segment left
 * (digit groups included, which it leaves whole); what no alternative matches is one piece
 * per unmatched run. */
static size_t deepseek_pieces(const Stretch *s, uint32_t *starts) {
    size_t k = 0, i = 0, n = s->n;
    while (i < n) {
        size_t b;
        if (s->cls[i] == C_N) {
            for (b = i; b < n && s->cls[b] == C_N && b - i < 3; b++) {}
            starts[k++] = (uint32_t)i;
            i = b;
            continue;
        }
        int in_cjk = cjk(s->cp[i]);
        b = i;
        if (!in_cjk) b = below_cjk(s, b);
        for (; b < n && s->cls[b] != C_N && cjk(s->cp[b]) == in_cjk; b++) {}
        int gap = 0;
        while (i < b) {
            size_t e = deepseek_match(s, i, b);
            if (!e) {
                if (!gap) starts[k++] = (uint32_t)i;
                gap = 1;
                i++;
                continue;
            }
            gap = 0;
            starts[k++] = (uint32_t)i;
            i = e;
        }
    }
    return k;
}

/* SmolLM2: Digits(individual_digits) isolates each numeric character first (Rust's
 * is_numeric, probed apart from \p{N}), then GPT-2's pattern runs on every segment left,
 * each alone (a stretch of its own: the lookahead ends where the segment does). */
static size_t gpt2_digits_pieces(const Stretch *s, uint32_t *starts) {
    size_t k = 0, i = 0;
    while (i < s->n) {
        size_t b = i;
        while (b < s->n && !s->numeric[s->cp[b]]) b++;
        Stretch seg = {s->cp + i, s->cls + i, s->folds, s->kinds, s->numeric, s->han, b - i};
        for (size_t j = 0; j < seg.n; j = gpt2_match(&seg, j)) starts[k++] = (uint32_t)(i + j);
        if (b < s->n) starts[k++] = (uint32_t)b++;
        i = b;
    }
    return k;
}

/* Gemma (character BPE, spaces replaced by U+2581, no pre-split): a piece starts before each
 * space that follows printable ASCII other than '>', where tokenizer_spec checked that no
 * token of the vocabulary joins the two, so no merge crosses there (boundaries.py). */
static size_t spaces_replaced_pieces(const Stretch *s, uint32_t *starts) {
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        uint32_t before = i ? s->cp[i - 1] : 0;
        if (i == 0 || (s->cp[i] == ' ' && before >= 0x21 && before <= 0x7E && before != '>'))
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
    case FAM_GPT2_DIGITS: return gpt2_digits_pieces(s, starts);
    case FAM_CL100K: return cl100k_pieces(s, starts, 3);
    case FAM_QWEN2: return cl100k_pieces(s, starts, 1);
    case FAM_GPT2: PIECES(gpt2_match(s, i));
    case FAM_TEKKEN: PIECES(o200k_match(s, i, 0, 1, 0));
    case FAM_QWEN35: PIECES(qwen35_match(s, i));
    case FAM_KIMI: PIECES(kimi_match(s, i));
    default: PIECES(o200k_match(s, i, 1, 3, 0));
    }
}
