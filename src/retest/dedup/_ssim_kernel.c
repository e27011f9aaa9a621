/* Fused SSIM in float64; built and loaded by retest/_native.py.
 *
 * Every pair is computed from the two images' pixels: the filtered means
 * mu = F(x), variances varh = cov_norm (F(x^2) - mu^2) + C2/2 and the filtered
 * product G = F(x*y) feed the SSIM map (2 mu_x mu_y + C1)(k (G - mu_x mu_y) + C2)
 * / ((mu_x^2 + mu_y^2 + C1)(varh_x + varh_y)), k = 2 cov_norm, and its mean.
 * Recomputing an image's statistics (kept while consecutive pairs share the
 * image) is cheaper than storing and re-reading them: a 32x32x3 uint8 image is
 * 3 KB, its two float64 maps 32 KB. This is skimage's algebra (not centred) in
 * float64 like skimage: products of uint8 pixels are exact, and the cancellation
 * G - mu_x mu_y loses ~1e-16 of 255^2, far below C2. uint8 images under a uniform
 * window use exact int32 window sums. F has the same taps at every cropped output
 * position (offset `off`). Images are uint8 (kind 0) or float64 (kind 1), (H, W,
 * C), one image contiguous; maps are (Hp, Wp, C). Means are summed in a fixed
 * order (4 double lanes), so results do not depend on threads or batch sizes, and
 * the numpy kernels (retest/dedup/_ssim_kernels.py) give the same bits.
 */
#include <stdint.h>

static void load(const void *src, int32_t kind, int64_t at, int64_t n, double *dst)
{
    if (kind == 0) {
        const uint8_t *s = (const uint8_t *)src + at * n;
        for (int64_t e = 0; e < n; ++e) dst[e] = (double)s[e];
    } else {
        const double *s = (const double *)src + at * n;
        for (int64_t e = 0; e < n; ++e) dst[e] = s[e];
    }
}

/* Window taps are symmetric (uniform or gaussian, odd length L): each output is
 * taps[h] * centre + sum_{k<h} taps[k] * (s_k + s_{L-1-k}), h = L / 2, in that
 * order (the numpy kernel does the same), with half the multiplications. */

/* t (Hp x row) = taps applied down rows (i + off + k); row = W*C */
static void filter_h(const double *src, int32_t Hp, int32_t row, int32_t L,
                     int32_t off, const double *taps, double *t)
{
    const int32_t h = L / 2;
    for (int32_t i = 0; i < Hp; ++i) {
        double *o = t + (int64_t)i * row;
        const double *s0 = src + (int64_t)(i + off) * row;
        const double *c = s0 + (int64_t)h * row;
        for (int32_t e = 0; e < row; ++e) o[e] = taps[h] * c[e];
        for (int32_t k = 0; k < h; ++k) {
            const double wk = taps[k];
            const double *a = s0 + (int64_t)k * row, *b = s0 + (int64_t)(L - 1 - k) * row;
            for (int32_t e = 0; e < row; ++e) o[e] += wk * (a[e] + b[e]);
        }
    }
}

/* g (Hp x Wp*C) = taps applied along columns (j + off + k) */
static void filter_w(const double *t, int32_t Hp, int32_t W, int32_t Wp, int32_t C,
                     int32_t L, int32_t off, const double *taps, double *g)
{
    const int32_t rowi = W * C, rowo = Wp * C, h = L / 2;
    for (int32_t i = 0; i < Hp; ++i) {
        double *o = g + (int64_t)i * rowo;
        const double *s0 = t + (int64_t)i * rowi + (int64_t)off * C;
        const double *c = s0 + (int64_t)h * C;
        for (int32_t e = 0; e < rowo; ++e) o[e] = taps[h] * c[e];
        for (int32_t k = 0; k < h; ++k) {
            const double wk = taps[k];
            const double *a = s0 + (int64_t)k * C, *b = s0 + (int64_t)(L - 1 - k) * C;
            for (int32_t e = 0; e < rowo; ++e) o[e] += wk * (a[e] + b[e]);
        }
    }
}

/* Mean of the SSIM map, summed in 4 fixed lanes then the tail. */
static double map_mean(const double *G, const double *mx, const double *vx,
                       const double *my, const double *vy, int64_t map, double k,
                       double c1, double c2)
{
    double lane[4] = {0, 0, 0, 0};
    int64_t e = 0;
    for (; e + 4 <= map; e += 4)
        for (int t = 0; t < 4; ++t) {
            const double a = mx[e + t], b = my[e + t], ab = a * b;
            const double num = (2.0 * ab + c1) * (k * (G[e + t] - ab) + c2);
            const double den = (a * a + b * b + c1) * (vx[e + t] + vy[e + t]);
            lane[t] += num / den;
        }
    double acc = (lane[0] + lane[1]) + (lane[2] + lane[3]);
    for (; e < map; ++e) {
        const double a = mx[e], b = my[e], ab = a * b;
        acc += (2.0 * ab + c1) * (k * (G[e] - ab) + c2) /
               ((a * a + b * b + c1) * (vx[e] + vy[e]));
    }
    return acc / (double)map;
}

/* Mean of map values, summed in 4 fixed lanes, then the tail. */
static double lane_mean(const double *v, int64_t map)
{
    double lane[4] = {0, 0, 0, 0};
    int64_t e = 0;
    for (; e + 4 <= map; e += 4)
        for (int t = 0; t < 4; ++t) lane[t] += v[e + t];
    double acc = (lane[0] + lane[1]) + (lane[2] + lane[3]);
    for (; e < map; ++e) acc += v[e];
    return acc / (double)map;
}

/* Exact window sums of an int32 (H, W, C) array: running sums down the rows, then
 * L taps along each row. Integer sums are exact, so their order is free. */
static void box_sums(const int32_t *src, int32_t Hp, int32_t W, int32_t Wp, int32_t C,
                     int32_t L, int32_t *t, int32_t *out)
{
    const int32_t row = W * C, rowo = Wp * C;
    for (int32_t e = 0; e < row; ++e) t[e] = src[e];
    for (int32_t k = 1; k < L; ++k)
        for (int32_t e = 0; e < row; ++e) t[e] += src[(int64_t)k * row + e];
    for (int32_t i = 1; i < Hp; ++i) {
        int32_t *o = t + (int64_t)i * row;
        const int32_t *prev = o - row, *add = src + (int64_t)(i + L - 1) * row;
        const int32_t *sub = src + (int64_t)(i - 1) * row;
        for (int32_t e = 0; e < row; ++e) o[e] = prev[e] + add[e] - sub[e];
    }
    for (int32_t i = 0; i < Hp; ++i) {
        int32_t *o = out + (int64_t)i * rowo;
        const int32_t *s0 = t + (int64_t)i * row;
        for (int32_t e = 0; e < rowo; ++e) o[e] = s0[e];
        for (int32_t k = 1; k < L; ++k) {
            const int32_t *s = s0 + (int64_t)k * C;
            for (int32_t e = 0; e < rowo; ++e) o[e] += s[e];
        }
    }
}

/* Window sums of one uint8 image and of its squares. */
static void image_sums(const uint8_t *x, int64_t img, int32_t Hp, int32_t W,
                       int32_t Wp, int32_t C, int32_t L, int32_t *P, int32_t *T,
                       int32_t *S1, int32_t *S2)
{
    for (int64_t e = 0; e < img; ++e) P[e] = x[e];
    box_sums(P, Hp, W, Wp, C, L, T, S1);
    for (int64_t e = 0; e < img; ++e) P[e] = (int32_t)x[e] * (int32_t)x[e];
    box_sums(P, Hp, W, Wp, C, L, T, S2);
}

/* Pairs of uint8 images with a uniform L x L window (L*L*255^2 < 2^31): every
 * window sum (x, x^2, y, y^2, x*y) is an exact integer computed from the pixels,
 * so nothing per image is stored; a query's sums are reused while consecutive
 * pairs share it (shortlists), likewise a reference's. With s = 1 / L^2:
 * mu = S*s, varh = cov_norm (S2*s - mu^2) + C2/2, G = Sxy*s.
 * work: H*W*C + Hp*W*C + 5*Hp*Wp*C int32; V: Hp*Wp*C doubles */
void ssim_pairs_box_u8(int64_t npairs, const int64_t *qi, const int64_t *ri,
                       const uint8_t *qimg, const uint8_t *rimg, int32_t H, int32_t W,
                       int32_t C, int32_t Hp, int32_t Wp, int32_t L, double cov_norm,
                       double k, double c1, double c2, int32_t *work, double *V,
                       double *out)
{
    const int64_t img = (int64_t)H * W * C, map = (int64_t)Hp * Wp * C;
    const double s = 1.0 / ((double)L * (double)L), c2half = c2 / 2.0;
    int32_t *P = work, *T = P + img, *X1 = T + (int64_t)Hp * W * C, *X2 = X1 + map;
    int32_t *Y1 = X2 + map, *Y2 = Y1 + map, *XY = Y2 + map;
    int64_t last_q = -1, last_r = -1;
    for (int64_t p = 0; p < npairs; ++p) {
        const uint8_t *x = qimg + qi[p] * img, *y = rimg + ri[p] * img;
        if (qi[p] != last_q) {
            image_sums(x, img, Hp, W, Wp, C, L, P, T, X1, X2);
            last_q = qi[p];
        }
        if (ri[p] != last_r) {
            image_sums(y, img, Hp, W, Wp, C, L, P, T, Y1, Y2);
            last_r = ri[p];
        }
        for (int64_t e = 0; e < img; ++e) P[e] = (int32_t)x[e] * (int32_t)y[e];
        box_sums(P, Hp, W, Wp, C, L, T, XY);
        for (int64_t e = 0; e < map; ++e) {
            const double a = (double)X1[e] * s, b = (double)Y1[e] * s, ab = a * b;
            const double va = cov_norm * ((double)X2[e] * s - a * a) + c2half;
            const double vb = cov_norm * ((double)Y2[e] * s - b * b) + c2half;
            const double g = (double)XY[e] * s;
            V[e] = (2.0 * ab + c1) * (k * (g - ab) + c2) /
                   ((a * a + b * b + c1) * (va + vb));
        }
        out[p] = lane_mean(V, map);
    }
}

/* mu = F(x) and varh = cov_norm * (F(x*x) - mu^2) + C2/2 of one image.
 * work: 2*H*W*C + Hp*W*C doubles */
static void image_stats(const void *images, int32_t kind, int64_t at, int32_t H,
                        int32_t W, int32_t C, int32_t Hp, int32_t Wp, int32_t L,
                        int32_t off, const double *taps, double cov_norm, double c2half,
                        double *work, double *mu, double *varh)
{
    const int64_t img = (int64_t)H * W * C, map = (int64_t)Hp * Wp * C;
    const int32_t row = W * C;
    double *X = work, *X2 = X + img, *T = X2 + img;
    load(images, kind, at, img, X);
    for (int64_t e = 0; e < img; ++e) X2[e] = X[e] * X[e];
    filter_h(X, Hp, row, L, off, taps, T);
    filter_w(T, Hp, W, Wp, C, L, off, taps, mu);
    filter_h(X2, Hp, row, L, off, taps, T);
    filter_w(T, Hp, W, Wp, C, L, off, taps, varh);
    for (int64_t e = 0; e < map; ++e)
        varh[e] = cov_norm * (varh[e] - mu[e] * mu[e]) + c2half;
}

/* Pairs under any window whose taps every cropped output sees: each image's
 * statistics are computed from its pixels when the pair needs them (a query's
 * are kept while consecutive pairs share it, likewise a reference's), then the
 * filtered product G = F(x*y) and the map's mean. Nothing per image is stored.
 * work: 3*H*W*C + Hp*W*C + 5*Hp*Wp*C doubles */
void ssim_pairs_f64(int64_t npairs, const int64_t *qi, const int64_t *ri, int32_t kind,
                    const void *qimg, const void *rimg, int32_t H, int32_t W, int32_t C,
                    int32_t Hp, int32_t Wp, int32_t L, int32_t off, const double *taps,
                    double cov_norm, double k, double c1, double c2, double *work,
                    double *out)
{
    const int64_t img = (int64_t)H * W * C, map = (int64_t)Hp * Wp * C;
    const int32_t row = W * C;
    const double c2half = c2 / 2.0;
    double *S = work, *P = S + 2 * img, *T = P + img, *G = T + (int64_t)Hp * row;
    double *QM = G + map, *QV = QM + map, *RM = QV + map, *RV = RM + map;
    int64_t last_q = -1, last_r = -1;
    for (int64_t p = 0; p < npairs; ++p) {
        if (qi[p] != last_q) {
            image_stats(qimg, kind, qi[p], H, W, C, Hp, Wp, L, off, taps, cov_norm,
                        c2half, S, QM, QV);
            last_q = qi[p];
        }
        if (ri[p] != last_r) {
            image_stats(rimg, kind, ri[p], H, W, C, Hp, Wp, L, off, taps, cov_norm,
                        c2half, S, RM, RV);
            last_r = ri[p];
        }
        if (kind == 0) {
            const uint8_t *x = (const uint8_t *)qimg + qi[p] * img;
            const uint8_t *y = (const uint8_t *)rimg + ri[p] * img;
            for (int64_t e = 0; e < img; ++e) P[e] = (double)x[e] * (double)y[e];
        } else {
            const double *x = (const double *)qimg + qi[p] * img;
            const double *y = (const double *)rimg + ri[p] * img;
            for (int64_t e = 0; e < img; ++e) P[e] = x[e] * y[e];
        }
        filter_h(P, Hp, row, L, off, taps, T);
        filter_w(T, Hp, W, Wp, C, L, off, taps, G);
        out[p] = map_mean(G, QM, QV, RM, RV, map, k, c1, c2);
    }
}
