/* Fused selection for the exact kNN engine (retest.build.knn).
 *
 * After each float32 GEMM block the numpy path needs ~5 whole-block passes (add
 * the norms, compare, count, nonzero, gather) and a sort-based merge. This loop
 * reads each score once: s = g[i, j] + rn32[j] (the same float32 addition numpy
 * does), and an entry strictly below the query's current k'-th value is inserted
 * into the query's sorted shortlist (value, then reference index). Rows with
 * nothing below their threshold cost one vector compare per 16 scores.
 *
 * Compiled on first use by retest._native; the numpy path is the fallback and
 * the tests check that both give the same shortlists.
 */
#include <stddef.h>
#include <stdint.h>
#ifdef __F16C__
#include <immintrin.h>
#endif

/* (v, i) sorts before (w, j): by value, then index; index -1 (padding) last */
static inline int before(double v, int64_t i, double w, int64_t j)
{
    if (v != w)
        return v < w;
    return (uint64_t)i < (uint64_t)j; /* -1 becomes the largest */
}

static inline void insert(double *v, int64_t *ix, double *b, int64_t kp,
                          double s, int64_t r, double bound)
{
    int64_t p = kp - 1;
    while (p > 0 && before(s, r, v[p - 1], ix[p - 1])) {
        v[p] = v[p - 1];
        ix[p] = ix[p - 1];
        b[p] = b[p - 1];
        p--;
    }
    v[p] = s;
    ix[p] = r;
    b[p] = bound;
}

#define BLOCK 16

/* g: (nq, n) row stride ld; rn32 may be NULL (scores already include the norms);
 * ex: per-query excluded global reference index or NULL; vals/idx/bnd: (nq, kp)
 * sorted shortlists updated in place; bnd gets c * (qn[i] + 2 rn64[j]). */
void knn_select_merge(int64_t nq, int64_t n, const float *g, int64_t ld,
                      const float *rn32, const double *rn64, int64_t r0,
                      const int64_t *ex, const double *qn, double c, int64_t kp,
                      double *vals, int64_t *idx, double *bnd)
{
    for (int64_t i = 0; i < nq; i++) {
        const float *row = g + i * ld;
        double *v = vals + i * kp;
        int64_t *ix = idx + i * kp;
        double *b = bnd + i * kp;
        float thr = (float)v[kp - 1]; /* exact: shortlist values are float32 or inf */
        int64_t skip = ex ? ex[i] - r0 : -1;
        int64_t j0 = 0;
        for (; j0 + BLOCK <= n; j0 += BLOCK) {
            int any = 0;
            if (rn32) {
                for (int t = 0; t < BLOCK; t++)
                    any |= (row[j0 + t] + rn32[j0 + t]) < thr;
            } else {
                for (int t = 0; t < BLOCK; t++)
                    any |= row[j0 + t] < thr;
            }
            if (!any)
                continue;
            for (int64_t j = j0; j < j0 + BLOCK; j++) {
                float s = rn32 ? row[j] + rn32[j] : row[j];
                if (s < thr && j != skip) {
                    insert(v, ix, b, kp, (double)s, r0 + j, c * (qn[i] + 2.0 * rn64[j]));
                    thr = (float)v[kp - 1];
                }
            }
        }
        for (int64_t j = j0; j < n; j++) {
            float s = rn32 ? row[j] + rn32[j] : row[j];
            if (s < thr && j != skip) {
                insert(v, ix, b, kp, (double)s, r0 + j, c * (qn[i] + 2.0 * rn64[j]));
                thr = (float)v[kp - 1];
            }
        }
    }
}

/* Merge shortlist B into A row by row (both sorted, disjoint references). */
void knn_merge_lists(int64_t nq, int64_t kp, double *va, int64_t *ia, double *ba,
                     const double *vb, const int64_t *ib, const double *bb,
                     double *tv, int64_t *ti, double *tb)
{
    for (int64_t i = 0; i < nq; i++) {
        double *v = va + i * kp;
        int64_t *x = ia + i * kp;
        double *b = ba + i * kp;
        const double *w = vb + i * kp;
        const int64_t *y = ib + i * kp;
        const double *e = bb + i * kp;
        int64_t p = 0, q = 0;
        for (int64_t o = 0; o < kp; o++) {
            if (q >= kp || (p < kp && !before(w[q], y[q], v[p], x[p]))) {
                tv[o] = v[p]; ti[o] = x[p]; tb[o] = b[p]; p++;
            } else {
                tv[o] = w[q]; ti[o] = y[q]; tb[o] = e[q]; q++;
            }
        }
        for (int64_t o = 0; o < kp; o++) {
            v[o] = tv[o]; x[o] = ti[o]; b[o] = tb[o];
        }
    }
}

/* Exact squared L2 of uint8 row pairs (q[qi[p]], r[ri[p]]): integer sums, so the
 * value is exact and independent of the batch. Rows are `qs` / `rs` bytes apart. */
void sqdist_u8(int64_t npairs, const uint8_t *q, int64_t qs, const uint8_t *r,
               int64_t rs, const int64_t *qi, const int64_t *ri, int64_t d,
               double *out)
{
    for (int64_t p = 0; p < npairs; p++) {
        const uint8_t *x = q + qi[p] * qs;
        const uint8_t *y = r + ri[p] * rs;
        int64_t total = 0;
        for (int64_t s = 0; s < d; s += 16384) { /* 16384 · 255² < 2³¹ */
            int64_t e = s + 16384 < d ? s + 16384 : d;
            int32_t acc = 0;
            for (int64_t t = s; t < e; t++) {
                int32_t diff = (int32_t)x[t] - (int32_t)y[t];
                acc += diff * diff;
            }
            total += acc;
        }
        out[p] = (double)total;
    }
}

/* Squared row norms of a float32 block in float64 (4 fixed lanes, then the tail):
 * numpy's einsum with dtype=float64 casts through a buffer, ~5x slower. */
void sq_norms_f32(int64_t n, int64_t d, const float *x, int64_t ld, double *out)
{
    for (int64_t i = 0; i < n; i++) {
        const float *row = x + i * ld;
        double lane[4] = {0, 0, 0, 0};
        int64_t j = 0;
        for (; j + 4 <= d; j += 4)
            for (int t = 0; t < 4; t++) {
                const double v = (double)row[j + t];
                lane[t] += v * v;
            }
        double acc = (lane[0] + lane[1]) + (lane[2] + lane[3]);
        for (; j < d; j++)
            acc += (double)row[j] * (double)row[j];
        out[i] = acc;
    }
}

/* float16 bits -> float32, exact for every pattern (subnormals: m * 2^-24 is
 * exact in float32; inf and NaN keep sign and payload). */
static inline float half_to_float(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    union { uint32_t u; float f; } v;
    if (e == 0x1f)
        v.u = sign | 0x7f800000u | (m << 13);
    else if (e)
        v.u = sign | ((e + 112u) << 23) | (m << 13);
    else {
        v.f = (float)m * 5.9604644775390625e-8f; /* 2^-24 */
        v.u |= sign;
    }
    return v.f;
}

/* float16 -> float32 (exact). With F16C, 8 values per vcvtph2ps: GCC 12 compiles
 * a plain `(float)` of a _Float16 to one scalar conversion per value (~1.4 ns per
 * value, a quarter of a float16 kNN worker's time), so the vector loop is spelled
 * out; elsewhere the bits are assembled.
 *
 * `stream` (the caller's choice, see retest.dedup._knn_chunks.streams_into): store
 * with non-temporal writes, which need dst 32-byte aligned. A chunk of tens of MiB
 * is written once and read once by the GEMM; ordinary stores first read every
 * destination line from memory and evict what the GEMM is using, and a float16
 * kNN task ran 3.8 % faster without them (same bits either way). */
#ifdef __F16C__
#define STORE8(stream, p, v) \
    do { if (stream) _mm256_stream_ps((p), (v)); else _mm256_storeu_ps((p), (v)); } while (0)
#endif

void f16_to_f32(int64_t n, const uint16_t *src, float *dst, int stream)
{
    int64_t i = 0;
#ifdef __F16C__
    stream = stream && ((uintptr_t)dst % 32 == 0);
    for (; i + 8 <= n; i += 8)
        STORE8(stream, dst + i,
               _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    if (stream)
        _mm_sfence();
#else
    (void)stream;
#endif
    for (; i < n; i++)
        dst[i] = half_to_float(src[i]);
}

/* f16_to_f32 of n rows of d values (rows `ls` values apart in src, `ld` in dst)
 * and their squared norms, bit-equal to sq_norms_f32 of the converted rows (the
 * same 4 float64 lanes in the same order, no fused multiply-add): one pass over
 * a float16 reference chunk instead of two, while the values are in registers.
 * `stream` as in f16_to_f32 (every row must then start 32-byte aligned). */
void f16_to_f32_norms(int64_t n, int64_t d, const uint16_t *src, int64_t ls,
                      float *dst, int64_t ld, double *norms, int stream)
{
#ifdef __F16C__
    stream = stream && ((uintptr_t)dst % 32 == 0) && (ld % 8 == 0);
#else
    (void)stream;
#endif
    for (int64_t i = 0; i < n; i++) {
        const uint16_t *s = src + i * ls;
        float *o = dst + i * ld;
        double lane[4] = {0, 0, 0, 0};
        int64_t j = 0;
#ifdef __F16C__
        __m256d acc = _mm256_setzero_pd();
        for (; j + 8 <= d; j += 8) {
            const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + j)));
            STORE8(stream, o + j, f);
            const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(f));
            const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
            acc = _mm256_add_pd(acc, _mm256_mul_pd(lo, lo));
            acc = _mm256_add_pd(acc, _mm256_mul_pd(hi, hi));
        }
        _mm256_storeu_pd(lane, acc);
#endif
        for (; j + 4 <= d; j += 4)
            for (int t = 0; t < 4; t++) {
                const float f = half_to_float(s[j + t]);
                const double v = (double)f;
                o[j + t] = f;
                lane[t] += v * v;
            }
        double total = (lane[0] + lane[1]) + (lane[2] + lane[3]);
        for (; j < d; j++) {
            const float f = half_to_float(s[j]);
            o[j] = f;
            total += (double)f * (double)f;
        }
        norms[i] = total;
    }
#ifdef __F16C__
    if (stream)
        _mm_sfence();
#endif
}

/* Rows of float64 differences r[ri[p]] - q[qi[p]] of float16 row pairs (rows `rs`
 * / `qs` values apart) into out (n rows of d): float16 -> float32 -> float64 are
 * exact and the float64 subtraction is numpy's, so the rows equal numpy's
 * `r[ri].astype(f64) - q[qi].astype(f64)` bit for bit. The exact re-ranking
 * gathered, converted and subtracted in five passes over these rows. */
void f16_pair_diff(int64_t n, int64_t d, const uint16_t *q, int64_t qs,
                   const uint16_t *r, int64_t rs, const int64_t *qi,
                   const int64_t *ri, double *out)
{
    for (int64_t p = 0; p < n; p++) {
        const uint16_t *x = q + qi[p] * qs;
        const uint16_t *y = r + ri[p] * rs;
        double *o = out + p * d;
        int64_t j = 0;
#ifdef __F16C__
        for (; j + 8 <= d; j += 8) {
            const __m256 fx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + j)));
            const __m256 fy = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + j)));
            _mm256_storeu_pd(o + j, _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(fy)),
                                                  _mm256_cvtps_pd(_mm256_castps256_ps128(fx))));
            _mm256_storeu_pd(o + j + 4, _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(fy, 1)),
                                                      _mm256_cvtps_pd(_mm256_extractf128_ps(fx, 1))));
        }
#endif
        for (; j < d; j++)
            o[j] = (double)half_to_float(y[j]) - (double)half_to_float(x[j]);
    }
}
