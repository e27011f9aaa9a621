/* Fused SSIM over many (query, reference) pairs; built and loaded by retest/_native.py.
 *
 * Per pair, in one pass through cache-resident buffers: the filtered cross term
 * G = F(xs * y') + C2 (xs = 2*cov_norm*x', y' = y - channel mean, F = separable
 * window with the same taps at every cropped output position), then the SSIM map
 * (2 mu_x mu_y + C1)(G - qm*mc_y) / ((mu_x^2 + mu_y^2 + C1)(v_x + v_y + C2)) and its
 * mean. All per-image arrays are (H, W, C) or (H', W', C), images contiguous. The
 * mean is summed in a fixed order (8 float lanes, then double), so results do not
 * depend on threads or batch sizes. See retest/build/ssim.py for the derivation.
 */
#include <stdint.h>

void ssim_pairs_f32(
    int64_t npairs, const int64_t *qi, const int64_t *ri,
    int32_t H, int32_t W, int32_t C, int32_t Hp, int32_t Wp, int32_t L, int32_t off,
    const float *taps,
    const float *xs, const float *qm, const float *q2mu, const float *qmu2,
    const float *qvar,
    const float *rc, const float *rmc, const float *rcbar, const float *rvar,
    double c1, double c2, float *work, double *out)
{
    const int64_t img = (int64_t)H * W * C, map = (int64_t)Hp * Wp * C;
    const int32_t rowi = W * C, rowo = Wp * C;
    float *P = work;                      /* H  x W  x C */
    float *T = P + img;                   /* Hp x W  x C */
    float *G = T + (int64_t)Hp * rowi;    /* Hp x Wp x C */
    float *cb = G + map;                  /* Wp x C: the reference's channel means */
    const float fc1 = (float)c1, fc2 = (float)c2;
    for (int64_t p = 0; p < npairs; ++p) {
        const float *x = xs + qi[p] * img, *y = rc + ri[p] * img;
        for (int64_t e = 0; e < img; ++e) P[e] = x[e] * y[e];
        for (int32_t i = 0; i < Hp; ++i) {           /* filter along H */
            float *t = T + (int64_t)i * rowi;
            const float *src = P + (int64_t)(i + off) * rowi;
            for (int32_t e = 0; e < rowi; ++e) t[e] = taps[0] * src[e];
            for (int32_t k = 1; k < L; ++k) {
                const float wk = taps[k];
                const float *s = src + (int64_t)k * rowi;
                for (int32_t e = 0; e < rowi; ++e) t[e] += wk * s[e];
            }
        }
        for (int32_t i = 0; i < Hp; ++i) {           /* filter along W, add C2 */
            float *g = G + (int64_t)i * rowo;
            const float *t = T + (int64_t)i * rowi + (int64_t)off * C;
            for (int32_t e = 0; e < rowo; ++e) g[e] = taps[0] * t[e];
            for (int32_t k = 1; k < L; ++k) {
                const float wk = taps[k];
                const float *s = t + (int64_t)k * C;
                for (int32_t e = 0; e < rowo; ++e) g[e] += wk * s[e];
            }
            for (int32_t e = 0; e < rowo; ++e) g[e] += fc2;
        }
        const float *cbar = rcbar + ri[p] * C;
        for (int32_t e = 0; e < rowo; ++e) cb[e] = cbar[e % C];
        const int64_t qo = qi[p] * map, ro = ri[p] * map;
        const float *a_m = qm + qo, *a_2mu = q2mu + qo, *a_mu2 = qmu2 + qo;
        const float *a_v = qvar + qo, *b_m = rmc + ro, *b_v = rvar + ro;
        for (int32_t i = 0; i < Hp; ++i) {           /* SSIM map, in place */
            const int64_t o = (int64_t)i * rowo;
            for (int32_t e = 0; e < rowo; ++e) {
                const float mc = b_m[o + e], mu = mc + cb[e];
                const float cov2 = G[o + e] - a_m[o + e] * mc;
                const float num = (a_2mu[o + e] * mu + fc1) * cov2;
                const float den = (mu * mu + a_mu2[o + e]) * (b_v[o + e] + a_v[o + e]);
                G[o + e] = num / den;
            }
        }
        float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t e = 0;
        for (; e + 8 <= map; e += 8)
            for (int k = 0; k < 8; ++k) lane[k] += G[e + k];
        double acc = 0.0;
        for (int k = 0; k < 8; ++k) acc += lane[k];
        for (; e < map; ++e) acc += G[e];
        out[p] = acc / (double)map;
    }
}
