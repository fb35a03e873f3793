/* Statistics of one activation in two passes over its memory: see stats.py.
 *
 * Built by stats.py with the machine's C compiler and flags that let it reorder float
 * sums (so that the loops vectorise) while keeping inf and NaN meaningful. */
#include <math.h>
#include <stdint.h>
#include <string.h>

/* The min and max of a row. Compiled as if no value were inf or NaN, which lets the loop
 * vectorise: with inf or NaN in the row its result is meaningless, and point_stats, which
 * checks for them without that assumption, then discards it. */
__attribute__((optimize("finite-math-only")))
static void bounds(const float *row, long width, float *lo_out, float *hi_out)
{
    float lo = row[0], hi = row[0];
    for (long j = 0; j < width; j++) {
        lo = row[j] < lo ? row[j] : lo;
        hi = row[j] > hi ? row[j] : hi;
    }
    *lo_out = lo;
    *hi_out = hi;
}

/* x (rows, width) -> out (6, rows): sum, sum of squared deviations from the row's mean, min,
 * max, sum of absolute values, count of non-zeros. Three passes over each row (in L1 by then),
 * each simple enough to vectorise. */
static void token_sums(const float *x, long rows, long width, float *out)
{
    for (long r = 0; r < rows; r++) {
        const float *row = x + r * width;
        float total = 0.0f, abs_total = 0.0f, nonzero = 0.0f;
        for (long j = 0; j < width; j++) {
            float v = row[j];
            total += v;
            abs_total += fabsf(v);
            nonzero += (v != 0.0f) ? 1.0f : 0.0f;
        }
        float mean = total / (float)width;
        float sq_dev = 0.0f;
        for (long j = 0; j < width; j++) {
            float d = row[j] - mean;
            sq_dev += d * d;
        }
        float lo, hi;
        bounds(row, width, &lo, &hi);
        out[r] = total;
        out[rows + r] = sq_dev;
        out[2 * rows + r] = lo;
        out[3 * rows + r] = hi;
        out[4 * rows + r] = abs_total;
        out[5 * rows + r] = nonzero;
    }
}

/* counts[b] += how many values of x have floor((v - lo) * scale) == b, clamped to 0 ...
 * slots - 1, in float arithmetic (a value within rounding of a bin edge may land on either
 * side). The bin numbers of a stretch of a row go to a byte buffer first (that loop
 * vectorises); four interleaved tallies keep the increments independent. */
static void histogram(const float *x, long rows, long width, float lo, float scale,
                      int64_t *counts, long slots)
{
    enum { STRETCH = 4096 };
    uint8_t bins[STRETCH];
    int64_t tally[4][256];
    memset(tally, 0, sizeof tally);
    const float top = (float)(slots - 1);
    for (long r = 0; r < rows; r++) {
        for (long start = 0; start < width; start += STRETCH) {
            const float *v = x + r * width + start;
            long n = width - start < STRETCH ? width - start : STRETCH;
            for (long j = 0; j < n; j++) {
                float t = (v[j] - lo) * scale;
                t = t > 0.0f ? t : 0.0f;
                t = t < top ? t : top;
                bins[j] = (uint8_t)t;
            }
            long j = 0;
            for (; j + 4 <= n; j += 4) {
                tally[0][bins[j]]++;
                tally[1][bins[j + 1]]++;
                tally[2][bins[j + 2]]++;
                tally[3][bins[j + 3]]++;
            }
            for (; j < n; j++)
                tally[0][bins[j]]++;
        }
    }
    for (long b = 0; b < slots; b++)
        counts[b] = tally[0][b] + tally[1][b] + tally[2][b] + tally[3][b];
}

/* A histogram's range hi - lo, widened where needed so that each of its bins spans at least
 * four float32 steps at these values (a constant tensor gets a small positive range). */
double hist_span(double lo, double hi, long bins)
{
    double span = hi - lo;
    double steps = fmax(fabs(lo), fabs(hi)) * ldexp(1.0, -23) * 4.0 * (double)bins;
    return fmax(fmax(span, steps), 1e-6);
}

/* Both passes over one activation x (rows, width): sums (6, rows) as token_sums, counts
 * (slots <= 256, the last for the maximum) over range = (lo, span). Returns 1, leaving counts
 * and range untouched, if x holds inf or NaN (then the sums are inf/NaN or meaningless). */
int point_stats(const float *x, long rows, long width, float *sums, int64_t *counts,
                long slots, double *range)
{
    token_sums(x, rows, width, sums);
    double lo = sums[2 * rows], hi = sums[3 * rows];
    for (long r = 0; r < rows; r++) {
        if (!isfinite(sums[4 * rows + r]))      /* the sum of |x| is finite iff every value is */
            return 1;
        lo = sums[2 * rows + r] < lo ? sums[2 * rows + r] : lo;
        hi = sums[3 * rows + r] > hi ? sums[3 * rows + r] : hi;
    }
    double span = hist_span(lo, hi, slots - 1);
    histogram(x, rows, width, (float)lo, (float)((double)(slots - 1) / span), counts, slots);
    range[0] = lo;
    range[1] = span;
    return 0;
}

/* point_stats for n activations in one call (one call per block from each thread, so that the
 * threads do not take turns with Python's lock between activations): failed[i] is its result. */
void many_point_stats(long n, const float *const *xs, const long *rows, const long *widths,
                      float *const *sums, int64_t *const *counts, long slots, double *ranges,
                      int *failed)
{
    for (long i = 0; i < n; i++)
        failed[i] = point_stats(xs[i], rows[i], widths[i], sums[i], counts[i], slots,
                                ranges + 2 * i);
}
