/* The device stages of a cold-start encode, one thread (or block) per item.  The constants
 * (class codes, contraction folds, tier sizes) come from cuda_source.py's prelude.  Nothing here
 * reads another thread's output within a launch except bpe_long, whose lanes meet at
 * __syncthreads: every other kernel computes, thread by thread, what the NumPy twin computes. */

__device__ __forceinline__ int at(const unsigned char* cls, long long i) {
    return i >= 0 ? cls[i] : C_SENT;
}
__device__ __forceinline__ bool punct(int c) { return c >= C_AP && c != C_SENT; }
/* cls[i] in a text of n characters; C_SENT outside it. */
__device__ __forceinline__ int within(const unsigned char* cls, long long i, long long n) {
    return i < n ? at(cls, i) : C_SENT;
}

/* Added tokens: the first byte of each span becomes the sentinel 0xFF (never in UTF-8), the
 * rest continuation bytes, so the span decodes as one character of class C_SENT. */
extern "C" __global__ void mark_spans(
    unsigned char* bytes, const long long* span_begin, const long long* span_end,
    const long long spans)
{
    long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= spans) return;
    bytes[span_begin[s]] = 0xFF;
    for (long long k = span_begin[s] + 1; k < span_end[s]; ++k) bytes[k] = 0x80;
}

/* Code point of each character (char_at: its first byte); touched marks its class block. */
extern "C" __global__ void decode_utf8(
    const unsigned char* bytes, const long long* char_at, const long long n,
    unsigned int* points, unsigned char* touched)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned char* p = bytes + char_at[i];
    unsigned int c = p[0];
    unsigned int cp;
    if (c == 0xFF) cp = SENTINEL_POINT;
    else if (c < 0x80) cp = c;
    else if (c < 0xE0) cp = ((c & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    else if (c < 0xF0) cp = ((c & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    else cp = ((c & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
    points[i] = cp;
    touched[cp >> BLOCK_BITS] = 1;
}

/* Class, fold, case and NFC codes (char_classes.ClassTable); with exact, a fold only where
 * the letter is the lowercase ASCII one. */
extern "C" __global__ void classify(
    const unsigned int* points, const long long n, const unsigned char* table_cls,
    const unsigned char* table_fold, const unsigned char* table_kind,
    const unsigned char* table_nfc, const int exact, unsigned char* cls, unsigned char* fold,
    unsigned char* kinds, unsigned char* nfc)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned int cp = points[i];
    nfc[i] = table_nfc[cp];
    kinds[i] = table_kind[cp];
    int f = table_fold[cp];
    if (exact && f != 0 && cp != (unsigned int)FOLD_LETTERS[f]) f = 0;
    cls[i] = table_cls[cp];
    fold[i] = (unsigned char)f;
}

/* ---- cl100k / Llama-3 / Qwen2 piece starts (piece_starts.cl100k_starts) ---- */

/* A punctuation run of length 1 ends at j - 1 and no U+0020 joined it: a prefix of j. */
__device__ __forceinline__ bool prefixed(const unsigned char* cls, long long j) {
    return punct(at(cls, j - 1)) && !punct(at(cls, j - 2)) && at(cls, j - 2) != C_SP;
}
/* j is the first letter of a run right after a ' that starts a piece. */
__device__ __forceinline__ bool opens(const unsigned char* cls, long long j) {
    return j >= 1 && cls[j] == C_L && cls[j - 1] == C_AP && prefixed(cls, j);
}
extern "C" __global__ void cl100k_local_starts(
    const unsigned char* cls, const unsigned char* fold, const long long* digit_offset,
    const int digits_per_piece, const long long n, bool* starts)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int c = cls[i];
    int p1 = at(cls, i - 1);
    bool start = c == C_SENT;
    if (c == C_N) {
        start = digit_offset[i] % digits_per_piece == 0;
    } else if (punct(c)) {
        start = !punct(p1) && p1 != C_SP;
    } else if (c == C_L && p1 != C_L) {
        start = !(p1 == C_SP || p1 == C_WS || prefixed(cls, i));
    }
    if (i >= 1 && opens(cls, i - 1) && is_one(fold[i - 1])) start = true;
    if (i >= 2 && opens(cls, i - 2) && is_two(fold[i - 2], fold[i - 1])) start = true;
    if (start) starts[i] = true;
}

/* ---- GPT-2 piece starts (piece_starts.gpt2_starts); fold holds exact (lowercase) folds ---- */

/* j is a ' that starts a piece: a punctuation run's first character, not after U+0020. */
__device__ __forceinline__ bool apostrophe_starts(const unsigned char* cls, long long j) {
    return cls[j] == C_AP && !punct(at(cls, j - 1)) && at(cls, j - 1) != C_SP;
}
__device__ __forceinline__ bool gpt2_opens(const unsigned char* cls, long long j) {
    return j >= 1 && cls[j] == C_L && apostrophe_starts(cls, j - 1);
}
extern "C" __global__ void gpt2_local_starts(
    const unsigned char* cls, const unsigned char* fold, const long long n, bool* starts)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int c = cls[i];
    int p1 = at(cls, i - 1);
    bool start = c == C_SENT;
    if (!start) {
        bool first = (c == C_L && p1 != C_L) || (c == C_N && p1 != C_N)
            || (punct(c) && !punct(p1));
        start = first && p1 != C_SP;
    }
    if (gpt2_opens(cls, i) && (is_one(fold[i]) || (i + 1 < n && is_two(fold[i], fold[i + 1]))))
        start = false;  /* the letter belongs to the contraction */
    if (i >= 1 && gpt2_opens(cls, i - 1) && is_one(fold[i - 1])) start = true;
    if (i >= 2 && gpt2_opens(cls, i - 2) && is_two(fold[i - 2], fold[i - 1])) start = true;
    if (start) starts[i] = true;
}

/* ---- o200k transfer functions (piece_starts.o200k_transfers; scanned by run_scans) ---- */

/* A letter or mark: in one of o200k's letter classes. */
__device__ __forceinline__ bool letter_kind(int k) { return k >= K_UPPER && k <= K_MARK; }
__device__ __forceinline__ bool upper_class(int k) {
    return k == K_UPPER || k == K_OTHER || k == K_MARK;
}
__device__ __forceinline__ bool lower_class(int k) {
    return k == K_LOWER || k == K_OTHER || k == K_MARK;
}
/* The letters of a contraction opening at j, a ' (0: none). */
__device__ __forceinline__ int apostrophe(
    const unsigned char* cls, const unsigned char* fold, long long j, long long n)
{
    if (j < 0 || j + 1 >= n || cls[j] != C_AP) return 0;
    if (j + 2 < n && is_two(fold[j + 1], fold[j + 2])) return 2;
    return is_one(fold[j + 1]) ? 1 : 0;
}
extern "C" __global__ void o200k_transfers(
    const unsigned char* cls, const unsigned char* fold, const unsigned char* kinds,
    const unsigned int* points, const long long* digit_offset, const bool* joins,
    const bool* last_other, const bool* newline_ahead, const long long n,
    unsigned char* transfers)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned char* row = transfers + i * STATES;
    int c = cls[i];
    if (c == C_SENT) {
        for (int s = 0; s < STATES; ++s) row[s] = S_NEW;
        return;
    }
    int ahead = within(cls, i + 1, n), after = within(cls, i + 2, n), behind = at(cls, i - 1);
    int k = kinds[i], k_ahead = i + 1 < n ? kinds[i + 1] : K_NONE;
    bool upper = upper_class(k), lower = lower_class(k);
    bool punct_here = c == C_AP || c == C_P, punct_ahead = ahead == C_AP || ahead == C_P;
    bool space = c <= C_WS;

    int letters_end = apostrophe(cls, fold, i + 1, n) > 0 ? S_CONTRACTION : S_NEW;
    int upper_next = upper_class(k_ahead)
        ? (joins[i] || !last_other[i] ? S_UPPER_PART : letters_end)
        : (k_ahead == K_LOWER ? S_LOWER_PART : letters_end);
    int lower_next = lower_class(k_ahead) ? S_LOWER_PART : letters_end;
    int contraction_next =
        (behind == C_AP && apostrophe(cls, fold, i - 1, n) == 1) || (c != C_AP && behind != C_AP)
        ? S_NEW : S_CONTRACTION;
    int digits_next = ahead == C_N && digit_offset[i + 1] % 3 != 0 ? S_DIGITS : S_NEW;
    int punct_next = punct_ahead ? S_PUNCT : (ahead == C_NL ? S_STRETCH : S_NEW);
    int stretch_next = ahead == C_NL || (i + 1 < n && points[i + 1] == SLASH)
        ? S_STRETCH : S_NEW;
    bool space_ends = newline_ahead[i]
        ? c == C_NL && !(i + 1 < n && newline_ahead[i + 1])
        : ahead > C_WS || (after > C_WS && after != C_SENT);
    int space_next = space_ends ? S_NEW : S_SPACE;

    int fresh;
    if (letter_kind(k)) fresh = upper ? upper_next : lower_next;
    else if ((space || punct_here) && c != C_NL && letter_kind(k_ahead))
        fresh = upper_class(k_ahead) ? S_UPPER_PART : S_LOWER_PART;
    else if (c == C_N) fresh = digits_next;
    else if (c == C_SP && punct_ahead) fresh = S_PUNCT;
    else if (punct_here) fresh = punct_next;
    else fresh = space_next;

    bool contraction_holds = c == C_AP || behind == C_AP || at(cls, i - 2) == C_AP;
    row[S_NEW] = fresh;
    row[S_DIGITS] = c == C_N ? digits_next : fresh;
    row[S_UPPER_PART] = upper ? upper_next : fresh;
    row[S_LOWER_PART] = lower ? lower_next : fresh;
    row[S_CONTRACTION] = contraction_holds ? contraction_next : fresh;
    row[S_PUNCT] = punct_here ? punct_next : fresh;
    row[S_STRETCH] = c == C_NL || points[i] == SLASH ? stretch_next : fresh;
    row[S_SPACE] = space ? space_next : fresh;
}

/* ---- byte-level BPE ---- */

/* Whole words (ignore_merges vocabularies) and the pieces that need no merge: an added token
 * (its id already in tokens) or one byte.  Sets counts and done for every piece. */
extern "C" __global__ void whole_words(
    const unsigned char* bytes, const long long* begin, const long long* end,
    const long long pieces, const int* slots, const long long mask,
    const unsigned char* vocab_bytes, const long long* vocab_at, const int* vocab_ids,
    const long long max_len, int* tokens, int* counts, unsigned char* done)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= pieces) return;
    long long b = begin[p];
    long long length = end[p] - b;
    if (bytes[b] == 0xFF || length == 1) {
        counts[p] = 1;
        done[p] = 1;
        return;
    }
    counts[p] = (int)length;
    done[p] = 0;
    if (length > max_len) return;
    unsigned long long h = FNV_OFFSET;
    for (long long k = 0; k < length; ++k) {
        h ^= bytes[b + k];
        h *= FNV_PRIME;
    }
    for (long long s = (long long)(h & (unsigned long long)mask);; s = (s + 1) & mask) {
        int e = slots[s];
        if (e < 0) return;
        long long v = vocab_at[e];
        if (vocab_at[e + 1] - v != length) continue;
        long long k = 0;
        while (k < length && vocab_bytes[v + k] == bytes[b + k]) ++k;
        if (k == length) {
            tokens[b] = vocab_ids[e];
            counts[p] = 1;
            done[p] = 1;
            return;
        }
    }
}

/* Rank of the merge (a, b) and its merged id; NO_RANK when the pair has none.  The merges are
 * an open-addressing table (byte_bpe.PairSlots): one or two loads, where a binary search over
 * the sorted keys was ~18 dependent ones on the merge loop's critical path.  Kernels take
 * the table as the six parameters of PAIRS (spelled out: the host build reads signatures). */
#define PAIRS const long long* slot_keys, const int* slot_ranks, const int* slot_merged, \
    const long long shift, const long long mask, const long long width
#define PAIR_ARGS slot_keys, slot_ranks, slot_merged, shift, mask, width
__device__ __forceinline__ int pair_rank(PAIRS, int a, int b, int* out)
{
    long long key = (long long)a * width + b;
    for (long long s = (long long)(((unsigned long long)key * PAIR_HASH) >> shift);;
         s = (s + 1) & mask) {
        long long k = slot_keys[s];
        if (k == key) {
            *out = slot_merged[s];
            return slot_ranks[s];
        }
        if (k < 0) return NO_RANK;
    }
}

/* Thread tier: one thread per piece of 2..SHORT_MAX bytes, in registers / local memory.
 * HF's order: merge the lowest-rank pair (leftmost among equals), update its neighbours. */
extern "C" __global__ void bpe_short(
    int* tokens, const long long* begin, const long long* end, const long long pieces,
    const unsigned char* done, const long long* slot_keys, const int* slot_ranks,
    const int* slot_merged, const long long shift, const long long mask, const long long width,
    int* counts)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= pieces || done[p]) return;
    long long b = begin[p];
    int n = (int)(end[p] - b);
    if (n > SHORT_MAX) return;
    int t[SHORT_MAX], r[SHORT_MAX], m[SHORT_MAX];
    for (int k = 0; k < n; ++k) t[k] = tokens[b + k];
    for (int k = 0; k + 1 < n; ++k) r[k] = pair_rank(PAIR_ARGS, t[k], t[k + 1], &m[k]);
    while (n > 1) {
        int best = NO_RANK, j = -1;
        for (int k = 0; k + 1 < n; ++k) {
            if (r[k] < best) { best = r[k]; j = k; }
        }
        if (j < 0) break;
        t[j] = m[j];
        for (int k = j + 1; k + 1 < n; ++k) { t[k] = t[k + 1]; r[k] = r[k + 1]; m[k] = m[k + 1]; }
        --n;
        if (j + 1 < n) r[j] = pair_rank(PAIR_ARGS, t[j], t[j + 1], &m[j]);
        if (j > 0) r[j - 1] = pair_rank(PAIR_ARGS, t[j - 1], t[j], &m[j - 1]);
    }
    for (int k = 0; k < n; ++k) tokens[b + k] = t[k];
    counts[p] = n;
}

/* (rank, at) is below (other_rank, other_at) in HF's order: lower rank, then leftmost. */
__device__ __forceinline__ bool before(int rank, int at_, int other_rank, int other_at) {
    return rank < other_rank || (rank == other_rank && at_ < other_at);
}

/* Warp and block tiers: one block per listed piece (32 lanes: warp tier; more: block tier).
 * The piece is a linked list in scratch (next, prev, rank and merged id of the pair starting
 * at each byte); each step the lanes find the lowest (rank, position) by a warp-shuffle then
 * shared-memory reduction, and lane 0 merges it and re-ranks its two neighbours. */
extern "C" __global__ void bpe_long(
    int* tokens, const long long* begin, const long long* end, const long long* listed,
    const long long* scratch_at, const long long count, int* next, int* prev, int* rank,
    int* merged_at, const long long* slot_keys, const int* slot_ranks,
    const int* slot_merged, const long long shift, const long long mask, const long long width,
    int* counts)
{
    __shared__ int warp_rank[32];
    __shared__ int warp_at[32];
    __shared__ int best_rank;
    __shared__ int best_at;
    long long q = blockIdx.x;
    if (q >= count) return;
    long long p = listed[q];
    int* t = tokens + begin[p];
    int n = (int)(end[p] - begin[p]);
    long long s = scratch_at[q];
    int* nx = next + s;
    int* pv = prev + s;
    int* rk = rank + s;
    int* mg = merged_at + s;
    int lane = threadIdx.x, lanes = blockDim.x;
    for (int k = lane; k < n; k += lanes) {
        nx[k] = k + 1;
        pv[k] = k - 1;
        rk[k] = k + 1 < n ? pair_rank(PAIR_ARGS, t[k], t[k + 1], &mg[k]) : NO_RANK;
    }
    __syncthreads();
    int width_of_warp = lanes < 32 ? lanes : 32;
    for (;;) {
        int r = NO_RANK, j = n;
        for (int k = lane; k < n; k += lanes) {
            if (rk[k] < r) { r = rk[k]; j = k; }
        }
        for (int offset = width_of_warp / 2; offset > 0; offset /= 2) {
            int other_r = __shfl_down_sync(0xffffffffu, r, offset);
            int other_j = __shfl_down_sync(0xffffffffu, j, offset);
            if (before(other_r, other_j, r, j)) { r = other_r; j = other_j; }
        }
        if (lane % 32 == 0) { warp_rank[lane / 32] = r; warp_at[lane / 32] = j; }
        __syncthreads();
        if (lane == 0) {
            for (int w = 1; w < (lanes + 31) / 32; ++w) {
                if (before(warp_rank[w], warp_at[w], r, j)) { r = warp_rank[w]; j = warp_at[w]; }
            }
            best_rank = r;
            best_at = j;
        }
        __syncthreads();
        if (best_rank == NO_RANK) break;
        if (lane == 0) {
            j = best_at;
            int gone = nx[j];
            t[j] = mg[j];
            rk[gone] = NO_RANK;
            int after = nx[gone];
            nx[j] = after;
            if (after < n) pv[after] = j;
            rk[j] = after < n ? pair_rank(PAIR_ARGS, t[j], t[after], &mg[j]) : NO_RANK;
            int before_j = pv[j];
            if (before_j >= 0) rk[before_j] = pair_rank(PAIR_ARGS, t[before_j], t[j], &mg[before_j]);
        }
        __syncthreads();
    }
    if (lane == 0) {
        int c = 0;
        for (int k = 0; k < n; k = nx[k]) t[c++] = t[k];
        counts[p] = c;
    }
}

/* The ids in text order: piece p's counts[p] ids go to out[out_at[p]...]. */
extern "C" __global__ void gather_ids(
    const int* tokens, const long long* begin, const int* counts, const long long* out_at,
    const long long pieces, int* out)
{
    long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= pieces) return;
    for (int k = 0; k < counts[p]; ++k) out[out_at[p] + k] = tokens[begin[p] + k];
}
