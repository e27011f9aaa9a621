/* Scores of float32 queries against reference rows stored as float16, float32
 * or uint8, converted while they are packed (retest.dedup._knn_gemm).
 *
 * The BLAS path first converts a reference chunk to float32 (a pass that writes
 * the whole chunk to memory), then the BLAS reads it back and packs it again,
 * transposed, for its micro-kernel. Here each panel of 16 reference rows is read
 * once from the source (the next panel's rows prefetched meanwhile), converted,
 * transposed into a small buffer, and multiplied at once against every query: no
 * float32 copy of the chunk exists. The GEMM is the usual register-blocked kind:
 * 6 queries x 16 references per micro-kernel, kc terms per block, the queries
 * packed once per block of queries.
 *
 * Arithmetic: g[i, j] = sum_k x[i, k] * y[j, k] in float32 with fused
 * multiply-adds, in blocks of kc terms whose float32 results are added in
 * order. That is one summation order of the float32 inner product, which is all
 * the kNN's error bound assumes. The conversions are exact. With `norms`, the
 * rows' float64 squared norms come out bit-equal to sq_norms_f32 of the
 * converted rows (the same four float64 lanes in the same order, no fused
 * multiply-add), from the values already in registers.
 *
 * Needs AVX2, FMA and F16C: rows_gemm_available() says whether this build has
 * them; without, the caller keeps the BLAS path.
 */
#include <stdint.h>
#include <string.h>

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define ROWS_GEMM 1
#include <immintrin.h>
#endif

#define MR 6    /* queries per micro-kernel (broadcast) */
#define NR 16   /* references per micro-kernel (two vectors) */
/* The terms per block, kc (a multiple of 8), is the caller's (block_terms in
 * _knn_gemm.py): the queries' block of nq x kc floats should stay in L2, and the
 * larger kc, the fewer passes over the scores. */

enum { KIND_F16 = 0, KIND_F32 = 1, KIND_U8 = 2 };

int rows_gemm_available(void)
{
#ifdef ROWS_GEMM
    return 1;
#else
    return 0;
#endif
}

/* floats of the packed queries for rows_gemm_pack_queries */
int64_t rows_gemm_packed_size(int64_t nq, int64_t d)
{
    return (nq + MR - 1) / MR * MR * d;
}

/* queries (nq x d, rows lda apart) into blocks of KC terms, each in panels of MR
 * queries interleaved term by term; rows past nq are zeros */
void rows_gemm_pack_queries(int64_t nq, int64_t d, int64_t KC, const float *x, int64_t lda,
                            float *out)
{
    const int64_t nqp = (nq + MR - 1) / MR * MR;
    for (int64_t pc = 0; pc < d; pc += KC) {
        const int64_t kc = d - pc < KC ? d - pc : KC;
        float *blk = out + pc * nqp;
        for (int64_t ir = 0; ir < nqp; ir += MR)
            for (int64_t k = 0; k < kc; k++)
                for (int r = 0; r < MR; r++)
                    blk[ir * kc + k * MR + r] = ir + r < nq ? x[(ir + r) * lda + pc + k] : 0.0f;
    }
}

#ifdef ROWS_GEMM

/* c[MR x NR] (+)= a (kc x MR) . b (kc x NR); c's rows ldc apart */
static inline void micro(int64_t kc, const float *restrict a, const float *restrict b,
                         float *restrict c, int64_t ldc, int first)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    /* the tile of c is read after the loop: both lines of each row (rows need
     * not be 64-byte aligned) are fetched now. Without this, the scores' reads
     * cost a fifth of the time. */
    for (int r = 0; r < MR; r++) {
        _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + r * ldc + NR - 1), _MM_HINT_T0);
    }
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++) {
        const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
        __m256 x;
        x = _mm256_broadcast_ss(a + 0); c00 = _mm256_fmadd_ps(x, b0, c00); c01 = _mm256_fmadd_ps(x, b1, c01);
        x = _mm256_broadcast_ss(a + 1); c10 = _mm256_fmadd_ps(x, b0, c10); c11 = _mm256_fmadd_ps(x, b1, c11);
        x = _mm256_broadcast_ss(a + 2); c20 = _mm256_fmadd_ps(x, b0, c20); c21 = _mm256_fmadd_ps(x, b1, c21);
        x = _mm256_broadcast_ss(a + 3); c30 = _mm256_fmadd_ps(x, b0, c30); c31 = _mm256_fmadd_ps(x, b1, c31);
        x = _mm256_broadcast_ss(a + 4); c40 = _mm256_fmadd_ps(x, b0, c40); c41 = _mm256_fmadd_ps(x, b1, c41);
        x = _mm256_broadcast_ss(a + 5); c50 = _mm256_fmadd_ps(x, b0, c50); c51 = _mm256_fmadd_ps(x, b1, c51);
        a += MR;
        b += NR;
    }
#define UPDATE(r, v0, v1)                                                              \
    do {                                                                               \
        float *p = c + (r) * ldc;                                                      \
        if (first) {                                                                   \
            _mm256_storeu_ps(p, v0);                                                   \
            _mm256_storeu_ps(p + 8, v1);                                               \
        } else {                                                                       \
            _mm256_storeu_ps(p, _mm256_add_ps(_mm256_loadu_ps(p), v0));                \
            _mm256_storeu_ps(p + 8, _mm256_add_ps(_mm256_loadu_ps(p + 8), v1));        \
        }                                                                              \
    } while (0)
    UPDATE(0, c00, c01);
    UPDATE(1, c10, c11);
    UPDATE(2, c20, c21);
    UPDATE(3, c30, c31);
    UPDATE(4, c40, c41);
    UPDATE(5, c50, c51);
#undef UPDATE
}

static inline void transpose8(__m256 *r)
{
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
    r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
    r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
    r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
    r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
    r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
    r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
    r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

/* 8 consecutive values of a row as float32 (exact) */
static inline __m256 load8(const void *row, int64_t k, int kind)
{
    if (kind == KIND_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + k)));
    if (kind == KIND_F32)
        return _mm256_loadu_ps((const float *)row + k);
    return _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)((const uint8_t *)row + k))));
}

static inline float load1(const void *row, int64_t k, int kind)
{
    if (kind == KIND_F16)
        return _cvtsh_ss(((const uint16_t *)row)[k]);
    if (kind == KIND_F32)
        return ((const float *)row)[k];
    return (float)((const uint8_t *)row)[k];
}

/* Per-row state of the squared norm: sq_norms_f32's four lanes, then the terms
 * past the last multiple of 4 (at most 3), added after the lanes are combined. */
typedef struct {
    double lane[4];
    double rest[3];
    double pad;
} norm_acc;

/* Pack `rows` (<= NR) rows of the kc terms from term pc into p ([kc][NR], zeros
 * for missing rows), adding their squares to acc when it is not NULL. */
static void pack_panel(int64_t rows, int64_t pc, int64_t kc, int64_t d, const char *r,
                       int64_t row_bytes, int64_t isz, int kind, float *p, norm_acc *acc)
{
    const int64_t kc8 = kc & ~(int64_t)7, d4 = d & ~(int64_t)3;
    for (int h = 0; h < NR; h += 8) {
        const void *rp[8];
        int live = 0;
        for (int t = 0; t < 8; t++) {
            rp[t] = h + t < rows ? r + (h + t) * row_bytes + pc * isz : NULL;
            live += rp[t] != NULL;
        }
        for (int64_t k = 0; k < kc8; k += 8) {
            __m256 v[8];
            for (int t = 0; t < 8; t++)
                v[t] = rp[t] ? load8(rp[t], k, kind) : _mm256_setzero_ps();
            if (acc)
                for (int t = 0; t < live; t++) {
                    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v[t]));
                    const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v[t], 1));
                    __m256d s = _mm256_loadu_pd(acc[h + t].lane);
                    s = _mm256_add_pd(s, _mm256_mul_pd(lo, lo));
                    s = _mm256_add_pd(s, _mm256_mul_pd(hi, hi));
                    _mm256_storeu_pd(acc[h + t].lane, s);
                }
            transpose8(v);
            for (int t = 0; t < 8; t++)
                _mm256_store_ps(p + (k + t) * NR + h, v[t]);
        }
        for (int64_t k = kc8; k < kc; k++)
            for (int t = 0; t < 8; t++) {
                const float f = rp[t] ? load1(rp[t], k, kind) : 0.0f;
                p[k * NR + h + t] = f;
                if (acc && rp[t]) {
                    const int64_t j = pc + k;
                    const double sq = (double)f * (double)f;
                    if (j < d4)
                        acc[h + t].lane[j % 4] += sq;
                    else
                        acc[h + t].rest[j - d4] = sq;
                }
            }
    }
}

/* g (nq x n, rows ldc apart) = queries . rows^T, the queries packed by
 * rows_gemm_pack_queries with the same KC; the n rows start at r, row_bytes
 * apart, with d values of `kind` each. panel: KC * NR floats, 64-byte aligned.
 * norms: NULL, or n float64 squared norms (see the top), for which `scratch`
 * holds 8 n doubles. */
void rows_gemm(int64_t nq, int64_t n, int64_t d, int64_t KC, const float *ap, const void *r,
               int64_t row_bytes, int kind, float *g, int64_t ldc, float *panel,
               double *norms, double *scratch)
{
    const int64_t nqp = (nq + MR - 1) / MR * MR;
    const int64_t isz = kind == KIND_F16 ? 2 : (kind == KIND_F32 ? 4 : 1);
    const char *rows = (const char *)r;
    float tile[MR * NR] __attribute__((aligned(64)));
    norm_acc *acc = norms ? (norm_acc *)scratch : NULL;
    if (acc)
        memset(acc, 0, (size_t)n * sizeof(norm_acc));
    for (int64_t pc = 0; pc < d; pc += KC) {
        const int64_t kc = d - pc < KC ? d - pc : KC;
        const float *ablk = ap + pc * nqp;
        const int64_t lines = (kc * isz + 63) / 64 + 1; /* of the next panel, per row */
        for (int64_t jr = 0; jr < n; jr += NR) {
            const int64_t cols = n - jr < NR ? n - jr : NR;
            pack_panel(cols, pc, kc, d, rows + jr * row_bytes, row_bytes, isz, kind, panel,
                       acc ? acc + jr : NULL);
            /* the next panel's rows are fetched while this one is multiplied */
            int64_t next = n - jr - NR;
            next = next > NR ? NR : (next < 0 ? 0 : next);
            const char *nb = rows + (jr + NR) * row_bytes + pc * isz;
            int64_t pf = 0;
            const int64_t npf = next * lines;
            for (int64_t ir = 0; ir < nqp; ir += MR) {
                for (int u = 0; u < 3 && pf < npf; u++, pf++)
                    _mm_prefetch(nb + (pf / lines) * row_bytes + (pf % lines) * 64, _MM_HINT_T0);
                float *c = g + ir * ldc + jr;
                if (ir + MR <= nq && cols == NR) {
                    micro(kc, ablk + ir * kc, panel, c, ldc, pc == 0);
                    continue;
                }
                const int64_t qr = nq - ir < MR ? nq - ir : MR;
                for (int64_t a = 0; a < MR * NR; a++)
                    tile[a] = 0.0f;
                if (pc)
                    for (int64_t a = 0; a < qr; a++)
                        for (int64_t b = 0; b < cols; b++)
                            tile[a * NR + b] = c[a * ldc + b];
                micro(kc, ablk + ir * kc, panel, tile, NR, 0);
                for (int64_t a = 0; a < qr; a++)
                    for (int64_t b = 0; b < cols; b++)
                        c[a * ldc + b] = tile[a * NR + b];
            }
            for (; pf < npf; pf++)
                _mm_prefetch(nb + (pf / lines) * row_bytes + (pf % lines) * 64, _MM_HINT_T0);
        }
    }
    if (acc) {
        const int64_t nrest = d - (d & ~(int64_t)3);
        for (int64_t j = 0; j < n; j++) {
            const double *l = acc[j].lane;
            double total = (l[0] + l[1]) + (l[2] + l[3]);
            for (int64_t t = 0; t < nrest; t++)
                total += acc[j].rest[t];
            norms[j] = total;
        }
    }
}

#else

void rows_gemm(int64_t nq, int64_t n, int64_t d, int64_t KC, const float *ap, const void *r,
               int64_t row_bytes, int kind, float *g, int64_t ldc, float *panel,
               double *norms, double *scratch)
{
    (void)nq; (void)n; (void)d; (void)KC; (void)ap; (void)r; (void)row_bytes; (void)kind;
    (void)g; (void)ldc; (void)panel; (void)norms; (void)scratch;
}

#endif
