/* One generated token of the chapter-4 GPT on the CPU: the whole step (model_step) in one call,
 * its products (y = W x + b, W stored [out, in] as nn.Linear keeps it) and its attention over
 * the cached keys and values on two cores without ever waiting for the second one, and the
 * next-token summary (top-k, probabilities, entropy) in two passes over the logits.
 *
 * Generating a token reads every weight once, so decoding runs at the speed memory is read.
 * One core reads ~18 GB/s on the machines we measured, two ~32 GB/s. OpenMP's threads have to
 * meet at the end of every product: if they spin between products they steal a shared
 * machine's CPU, and if they sleep, waking them costs what the second core saves.
 *
 * Here a helper thread takes chunks of rows from the end while the calling thread takes them
 * from the front. The caller never waits for the helper to start, and if the helper is slow
 * (descheduled on a busy machine) the caller takes its chunk back and computes it itself: the
 * helper commits a finished chunk only if it still owns it. Each row is computed by the same
 * code whoever computes it, so results do not depend on the timing. The helper spins for a
 * short while after each product (the next one follows within microseconds), then sleeps.
 */
#define _POSIX_C_SOURCE 200809L  /* clock_gettime, nanosleep */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CHUNKS 8192
#define MAX_CHUNK_ROWS 512       /* also the largest head size */
#define MAX_KEYS 16384            /* the most cached tokens one query may attend to */
#define HELPER_SPIN_NS 300000L   /* spin this long after a product before sleeping */
#define STEAL_AFTER_NS 20000L    /* wait this long for the helper's last chunk, then take it */
#define MIN_SHARED_BYTES 262144L /* smaller products and attentions: faster alone (no wake-up,
                                    and a tiny model's decoding leaves the second core free) */

enum { FREE = 0, CALLER = 1, HELPER = 2, COMMITTING = 3, DONE = 4, TAKEN_BACK = 5 };
enum { PRODUCT = 0, ATTENTION = 1 };

/* A chunk's state is tagged with the job number so that a late helper can never commit into
 * a later job. */
static _Atomic uint64_t chunk_state[MAX_CHUNKS];
static inline uint64_t tag(uint64_t job, int state) { return (job << 3) | (uint64_t)state; }

struct job {
    int kind;
    const float *W, *x, *b;   /* PRODUCT: y = W x + b, chunks of chunk_rows rows */
    float *y;
    long in, out, chunk_rows, chunks;
    const float *K, *V;       /* ATTENTION: x = the queries (heads, head_dim), one head a chunk */
    long keys, head_dim, head_stride;
    float scale;
};
/* Two descriptors: the caller fills job n + 1's while a late helper may still copy job n's. */
static struct job jobs[2];
static _Atomic uint64_t job_number;     /* the job the helper may work on; 0 = none yet */
static _Atomic long next_from_end;      /* the helper's next chunk, counting down */
static _Atomic uint64_t last_left;      /* the last job the helper has left */
static _Atomic int helper_sleeping;
static pthread_mutex_t wake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t job_lock = PTHREAD_MUTEX_INITIALIZER;  /* one shared job at a time */
static int helper_started;
static _Atomic long helper_delay_ns;    /* tests only: a slow helper, to exercise taking back */
static _Atomic long chunks_by_helper, chunks_taken_back;      /* counts, for tests and benches */

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* y[i] = W[i] . x + b[i] for the n rows of W: four rows at a time, so four streams of weights
 * are in flight; the inner loops vectorise. */
static void rows(const float *W, const float *x, const float *b, float *y, long in, long n) {
    long r = 0;
    for (; r + 4 <= n; r += 4) {
        const float *w0 = W + r * in, *w1 = w0 + in, *w2 = w1 + in, *w3 = w2 + in;
        float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
        for (long k = 0; k < in; k++) {
            s0 += w0[k] * x[k];
            s1 += w1[k] * x[k];
            s2 += w2[k] * x[k];
            s3 += w3[k] * x[k];
        }
        y[r] = s0 + (b ? b[r] : 0.f);
        y[r + 1] = s1 + (b ? b[r + 1] : 0.f);
        y[r + 2] = s2 + (b ? b[r + 2] : 0.f);
        y[r + 3] = s3 + (b ? b[r + 3] : 0.f);
    }
    for (; r < n; r++) {
        const float *w = W + r * in;
        float s = 0.f;
        for (long k = 0; k < in; k++) s += w[k] * x[k];
        y[r] = s + (b ? b[r] : 0.f);
    }
}

/* e^x for x <= 0 (x - max over logits), to ~1e-7 relative: the classic range reduction
 * x = n ln2 + r and a degree-7 polynomial for e^r, written so that the loops that call it
 * vectorise (the C library's expf does not without -ffast-math). Below e^-87 it returns
 * ~1e-38 instead of 0, which no figure shown can tell apart. */
static inline float exp_of_nonpositive(float x) {
    x = x >= -87.0f ? x : -87.0f;   /* NaN too (callers discard its result): a NaN reaching the
                                      int conversion and shift below would be undefined */
    float n = floorf(x * 1.44269504088896341f + 0.5f);
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union { int32_t i; float f; } scale = {.i = ((int32_t)n + 127) << 23};
    return p * scale.f;
}

/* One head of one query: softmax(q K^T * scale) V over the cached keys, into y (head_dim). */
static void attend_head(const struct job *j, long head, float *y) {
    float weights[MAX_KEYS];
    long d = j->head_dim;
    const float *q = j->x + head * d;
    const float *K = j->K + head * j->head_stride, *V = j->V + head * j->head_stride;
    float top = -INFINITY, total = 0.f;
    for (long t = 0; t < j->keys; t++) {
        float s = 0.f;
        for (long i = 0; i < d; i++) s += q[i] * K[t * d + i];
        weights[t] = s * j->scale;
        top = weights[t] > top ? weights[t] : top;
    }
    for (long t = 0; t < j->keys; t++) {
        weights[t] = exp_of_nonpositive(weights[t] - top);
        total += weights[t];
    }
    for (long i = 0; i < d; i++) y[i] = 0.f;
    for (long t = 0; t < j->keys; t++)
        for (long i = 0; i < d; i++) y[i] += weights[t] * V[t * d + i];
    for (long i = 0; i < d; i++) y[i] /= total;
}

/* Where chunk c's results go in y, and how many there are. */
static long chunk_first(const struct job *j, long c) {
    return j->kind == PRODUCT ? c * j->chunk_rows : c * j->head_dim;
}

static long chunk_size(const struct job *j, long c) {
    if (j->kind == ATTENTION) return j->head_dim;
    long r0 = c * j->chunk_rows;
    return r0 + j->chunk_rows < j->out ? j->chunk_rows : j->out - r0;
}

/* Chunk c of the job into y (which points at the chunk's first result). */
static void chunk(const struct job *j, long c, float *y) {
    if (j->kind == ATTENTION) {
        attend_head(j, c, y);
        return;
    }
    long r0 = c * j->chunk_rows;
    rows(j->W + r0 * j->in, j->x, j->b ? j->b + r0 : NULL, y, j->in, chunk_size(j, c));
}

/* The helper's part of job `number`: chunks from the end until it meets the caller. */
static void help(uint64_t number) {
    float out[MAX_CHUNK_ROWS];
    struct job j = jobs[number & 1];
    atomic_thread_fence(memory_order_seq_cst);        /* the copy above happens before ... */
    if (atomic_load(&job_number) != number) return;   /* ... this check: a later job began,
                                                         so j may be torn */
    for (;;) {
        long c = atomic_fetch_sub(&next_from_end, 1);
        if (c < 0) return;
        uint64_t expected = tag(number, FREE);
        if (!atomic_compare_exchange_strong(&chunk_state[c], &expected, tag(number, HELPER)))
            return;                                   /* the caller got here first */
        chunk(&j, c, out);
        long delay = atomic_load_explicit(&helper_delay_ns, memory_order_relaxed);
        if (delay) {
            struct timespec pause = {delay / 1000000000L, delay % 1000000000L};
            nanosleep(&pause, NULL);
        }
        expected = tag(number, HELPER);
        if (!atomic_compare_exchange_strong(&chunk_state[c], &expected, tag(number, COMMITTING)))
            return;                                   /* taken back: the caller did it */
        memcpy(j.y + chunk_first(&j, c), out, (size_t)chunk_size(&j, c) * sizeof(float));
        atomic_store_explicit(&chunk_state[c], tag(number, DONE), memory_order_release);
        atomic_fetch_add_explicit(&chunks_by_helper, 1, memory_order_relaxed);
    }
}

static void *helper_main(void *unused) {
    (void)unused;
    uint64_t seen = 0;
    for (;;) {
        long since = now_ns();
        uint64_t number;
        while ((number = atomic_load(&job_number)) == seen) {
            if (now_ns() - since > HELPER_SPIN_NS) {
                pthread_mutex_lock(&wake_lock);
                atomic_store(&helper_sleeping, 1);
                while ((number = atomic_load(&job_number)) == seen)
                    pthread_cond_wait(&wake, &wake_lock);
                atomic_store(&helper_sleeping, 0);
                pthread_mutex_unlock(&wake_lock);
                break;
            }
        }
        seen = number;
        help(number);
        atomic_store(&last_left, number);
    }
    return NULL;
}

static int start_helper(void) {
    if (!helper_started) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        helper_started = pthread_create(&thread, &attr, helper_main, NULL) == 0;
        pthread_attr_destroy(&attr);
    }
    return helper_started;
}

/* Runs `spec`, shared with the helper when `share` allows and nobody else is sharing. Returns
 * the job number if the caller took back a chunk the helper was computing (the helper may then
 * read the inputs for a moment more: the caller must keep them alive until helper_left()
 * reaches that number), else 0. Every other chunk the helper claimed is done when this returns,
 * and no chunk is left for it to claim. */
static uint64_t run(const struct job *spec, int share) {
    if (!share || spec->chunks < 2 || pthread_mutex_trylock(&job_lock) != 0) {
        for (long c = 0; c < spec->chunks; c++) chunk(spec, c, spec->y + chunk_first(spec, c));
        return 0;
    }
    if (!start_helper()) {
        pthread_mutex_unlock(&job_lock);
        return run(spec, 0);
    }
    int took_back = 0;
    uint64_t number = atomic_load(&job_number) + 1;
    struct job *j = &jobs[number & 1];
    *j = *spec;
    for (long c = 0; c < j->chunks; c++)
        atomic_store_explicit(&chunk_state[c], tag(number, FREE), memory_order_relaxed);
    atomic_store(&next_from_end, j->chunks - 1);
    atomic_store(&job_number, number);       /* publishes the job (seq_cst) */
    if (atomic_load(&helper_sleeping)) {
        pthread_mutex_lock(&wake_lock);
        pthread_cond_signal(&wake);
        pthread_mutex_unlock(&wake_lock);
    }
    long first_helper = -1;                  /* the first chunk the helper had claimed */
    for (long c = 0; c < j->chunks; c++) {
        uint64_t expected = tag(number, FREE);
        if (!atomic_compare_exchange_strong(&chunk_state[c], &expected, tag(number, CALLER))) {
            first_helper = c;
            break;
        }
        chunk(j, c, j->y + chunk_first(j, c));
    }
    if (first_helper >= 0) {
        long waited_since = now_ns();
        for (long c = first_helper; c < j->chunks; c++) {
            for (;;) {
                uint64_t state = atomic_load_explicit(&chunk_state[c], memory_order_acquire);
                if (state == tag(number, DONE)) break;
                if (state == tag(number, COMMITTING)) continue;          /* a short copy */
                if (state == tag(number, HELPER) && now_ns() - waited_since < STEAL_AFTER_NS)
                    continue;
                uint64_t expected = state;       /* FREE, or the helper is too slow */
                if (atomic_compare_exchange_strong(&chunk_state[c], &expected,
                                                   tag(number, TAKEN_BACK))) {
                    chunk(j, c, j->y + chunk_first(j, c));
                    if (state == tag(number, HELPER)) {
                        took_back = 1;
                        atomic_fetch_add_explicit(&chunks_taken_back, 1, memory_order_relaxed);
                    }
                    break;
                }
            }
        }
    }
    pthread_mutex_unlock(&job_lock);
    return took_back ? number : 0;
}

static long rows_per_chunk(long in, long out) {
    /* ~32 KB of weights per chunk: small enough to balance, large enough to stream. */
    long n = (32768 / (in * 4) + 3) / 4 * 4;
    if (n < 4) n = 4;
    if (n > MAX_CHUNK_ROWS) n = MAX_CHUNK_ROWS;
    while ((out + n - 1) / n > MAX_CHUNKS) n *= 2;
    return n;
}

/* y = W x + b (b may be NULL); W is (out, in), row-major. */
uint64_t gemv(const float *W, const float *x, const float *b, float *y, long in, long out,
              int share) {
    struct job spec = {.kind = PRODUCT, .W = W, .x = x, .b = b, .y = y, .in = in, .out = out};
    spec.chunk_rows = rows_per_chunk(in, out);
    spec.chunks = (out + spec.chunk_rows - 1) / spec.chunk_rows;
    return run(&spec, share && in * out * (long)sizeof(float) >= MIN_SHARED_BYTES
                      && spec.chunk_rows <= MAX_CHUNK_ROWS);   /* the helper's buffer */
}

/* One new token's attention: q (heads, head_dim); K and V hold `keys` cached rows of head_dim
 * per head, heads `head_stride` floats apart; y (heads, head_dim). Returns as gemv does, or -1
 * for sizes it does not take. */
int64_t attend(const float *q, const float *K, const float *V, float *y, long heads,
               long keys, long head_dim, long head_stride, float scale, int share) {
    if (keys < 1 || keys > MAX_KEYS || head_dim > MAX_CHUNK_ROWS || heads > MAX_CHUNKS)
        return -1;
    struct job spec = {.kind = ATTENTION, .x = q, .K = K, .V = V, .y = y, .chunks = heads,
                       .keys = keys, .head_dim = head_dim, .head_stride = head_stride,
                       .scale = scale};
    return (int64_t)run(&spec, share && 2 * heads * keys * head_dim * (long)sizeof(float)
                                         >= MIN_SHARED_BYTES);
}

/* The next-token distribution softmax(logits) summarised in two passes over the n logits,
 * without writing the probabilities anywhere: the k most likely tokens (most likely first; of
 * equal logits the lower id first, as argmax), their probabilities, and the entropy in bits.
 * Returns 0, or -1 if a logit is inf or NaN or k is out of range (the caller uses PyTorch). */
/* The largest of n values, assuming none is inf or NaN (so that the loop vectorises; the caller
 * checks for them without that assumption). */
__attribute__((optimize("finite-math-only")))
static float largest(const float *x, long n) {
    float top = x[0];
    for (long i = 1; i < n; i++) top = x[i] > top ? x[i] : top;
    return top;
}

#define SUMMARY_BLOCK 64

int next_token_summary(const float *logits, long n, long k, int64_t *top_ids, float *top_probs,
                       double *entropy_bits) {
    if (k < 1 || k > 64 || k > n) return -1;
    float best[64] = {0.f};
    long count = 0;
    /* Pass 1, the k best: a block of logits is looked at one by one only if its largest beats
     * the k-th best so far (after the first few blocks, hardly ever). */
    for (long b = 0; b < n; b += SUMMARY_BLOCK) {
        long end = b + SUMMARY_BLOCK < n ? b + SUMMARY_BLOCK : n;
        if (count == k && !(largest(logits + b, end - b) > best[k - 1])) continue;
        for (long i = b; i < end; i++) {
            float v = logits[i];
            if (count == k && !(v > best[k - 1])) continue;
            long at = count < k ? count++ : k - 1;      /* insert v, keeping best[] sorted */
            while (at > 0 && v > best[at - 1]) {
                best[at] = best[at - 1];
                top_ids[at] = top_ids[at - 1];
                at--;
            }
            best[at] = v;
            top_ids[at] = i;
        }
    }
    float top = best[0];
    /* Pass 2: sum e^(v - top) and sum e^(v - top) (v - top); any inf or NaN shows in d. */
    float total = 0.f, weighted = 0.f;
    int finite = 1;
    for (long i = 0; i < n; i++) {
        float d = logits[i] - top;
        finite &= fabsf(d) <= 3.4e38f;
        float e = exp_of_nonpositive(d);
        total += e;
        weighted += e * d;
    }
    if (!finite || !(fabsf(top) <= 3.4e38f)) return -1;
    for (long j = 0; j < k; j++) top_probs[j] = exp_of_nonpositive(best[j] - top) / total;
    /* H = -sum p log p = log(total) - weighted / total, in nats */
    *entropy_bits = (log((double)total) - (double)weighted / total) / log(2.0);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * A whole one-token step of the chapter-4 GPT (every variant the explorer builds), so that a
 * generated token costs one call instead of ~250 PyTorch operations from Python (~7 ms of a
 * 28 ms step on GPT-2 small). explorer/book/model.py stays the reference; the tests compare. */
enum { NORM_NONE = 0, NORM_PRE = 1, NORM_POST = 2 };
enum { ACT_GELU = 0, ACT_GELU_EXACT = 1, ACT_RELU = 2, ACT_SILU = 3 };

struct block_weights {     /* NULL where a variant has no such tensor */
    const float *norm1_scale, *norm1_shift, *norm2_scale, *norm2_shift;
    const float *W_query, *b_query, *W_key, *b_key, *W_value, *b_value, *W_out, *b_out;
    const float *W_ff1, *b_ff1, *W_ff2, *b_ff2;
    float *cache_keys, *cache_values;                   /* (heads, capacity, head_dim) */
};

struct model_weights {
    long emb, heads, head_dim, hidden, vocab, layers, capacity;
    int norm, shortcut, activation;
    float eps;
    const float *tok_emb, *pos_emb;                      /* pos_emb NULL with RoPE */
    const float *rope_cos, *rope_sin;                    /* (context, head_dim) or NULL */
    const float *final_scale, *final_shift, *W_head;
    const struct block_weights *blocks;
};

static void layer_norm(const float *x, const float *scale, const float *shift, float eps,
                       long n, float *y) {
    double sum = 0.0, squares = 0.0;
    for (long i = 0; i < n; i++) sum += x[i];
    float mean = (float)(sum / n);
    for (long i = 0; i < n; i++) squares += (double)(x[i] - mean) * (x[i] - mean);
    float inv = 1.0f / sqrtf((float)(squares / n) + eps);
    for (long i = 0; i < n; i++) y[i] = (x[i] - mean) * inv * scale[i] + shift[i];
}

static void activate(int kind, float *x, long n) {
    for (long i = 0; i < n; i++) {
        float v = x[i];
        if (kind == ACT_GELU)
            x[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        else if (kind == ACT_GELU_EXACT)
            x[i] = 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
        else if (kind == ACT_RELU)
            x[i] = v > 0.f ? v : 0.f;
        else
            x[i] = v / (1.0f + expf(-v));
    }
}

static void rotate(float *x, const float *cos_, const float *sin_, long heads, long d) {
    long half = d / 2;
    for (long h = 0; h < heads; h++) {
        float *v = x + h * d;
        for (long i = 0; i < half; i++) {
            float x1 = v[i], x2 = v[i + half];
            v[i] = x1 * cos_[i] - x2 * sin_[i];
            v[i + half] = x2 * cos_[i + half] + x1 * sin_[i + half];
        }
    }
}

/* gemv, remembering the highest job number whose chunk was taken back (see run()). */
static void product(const float *W, const float *x, const float *b, float *y, long in,
                    long out, int share, uint64_t *keep_until) {
    uint64_t job = gemv(W, x, b, y, in, out, share);
    if (job > *keep_until) *keep_until = job;
}

/* One token at position `pos` (its keys and values go into the caches there) -> logits
 * (vocab). `scratch` holds 6 * emb + hidden floats. Returns the job number the caller must keep
 * the weights and scratch alive for (as gemv), 0 if none, -1 for sizes it does not take. */
int64_t model_step(const struct model_weights *m, long token, long pos, float *scratch,
                   float *logits, int share) {
    long E = m->emb, H = m->heads, D = m->head_dim;
    if (pos + 1 > MAX_KEYS || D > MAX_CHUNK_ROWS || H > MAX_CHUNKS || pos >= m->capacity
            || (m->rope_cos && D % 2))
        return -1;
    float *x = scratch, *h = x + E, *q = h + E, *k = q + E, *v = k + E, *ctx = v + E,
          *f = ctx + E;
    uint64_t keep_until = 0;
    for (long i = 0; i < E; i++)
        x[i] = m->tok_emb[token * E + i] + (m->pos_emb ? m->pos_emb[pos * E + i] : 0.f);
    for (long l = 0; l < m->layers; l++) {
        const struct block_weights *w = &m->blocks[l];
        /* attention sub-block */
        if (m->norm == NORM_PRE) layer_norm(x, w->norm1_scale, w->norm1_shift, m->eps, E, h);
        else memcpy(h, x, (size_t)E * sizeof(float));
        product(w->W_key, h, w->b_key, k, E, E, share, &keep_until);
        product(w->W_query, h, w->b_query, q, E, E, share, &keep_until);
        product(w->W_value, h, w->b_value, v, E, E, share, &keep_until);
        if (m->rope_cos) {
            rotate(q, m->rope_cos + pos * D, m->rope_sin + pos * D, H, D);
            rotate(k, m->rope_cos + pos * D, m->rope_sin + pos * D, H, D);
        }
        for (long head = 0; head < H; head++) {
            memcpy(w->cache_keys + (head * m->capacity + pos) * D, k + head * D,
                   (size_t)D * sizeof(float));
            memcpy(w->cache_values + (head * m->capacity + pos) * D, v + head * D,
                   (size_t)D * sizeof(float));
        }
        struct job spec = {.kind = ATTENTION, .x = q, .K = w->cache_keys, .V = w->cache_values,
                           .y = ctx, .chunks = H, .keys = pos + 1, .head_dim = D,
                           .head_stride = m->capacity * D, .scale = 1.0f / sqrtf((float)D)};
        uint64_t job = run(&spec, share && 2 * H * (pos + 1) * D * (long)sizeof(float)
                                          >= MIN_SHARED_BYTES);
        keep_until = job > keep_until ? job : keep_until;
        product(w->W_out, ctx, w->b_out, h, E, E, share, &keep_until);
        for (long i = 0; i < E; i++) x[i] = m->shortcut ? x[i] + h[i] : h[i];
        if (m->norm == NORM_POST) {
            layer_norm(x, w->norm1_scale, w->norm1_shift, m->eps, E, h);
            memcpy(x, h, (size_t)E * sizeof(float));
        }
        /* feed-forward sub-block */
        if (m->norm == NORM_PRE) layer_norm(x, w->norm2_scale, w->norm2_shift, m->eps, E, h);
        else memcpy(h, x, (size_t)E * sizeof(float));
        product(w->W_ff1, h, w->b_ff1, f, E, m->hidden, share, &keep_until);
        activate(m->activation, f, m->hidden);
        product(w->W_ff2, f, w->b_ff2, h, m->hidden, E, share, &keep_until);
        for (long i = 0; i < E; i++) x[i] = m->shortcut ? x[i] + h[i] : h[i];
        if (m->norm == NORM_POST) {
            layer_norm(x, w->norm2_scale, w->norm2_shift, m->eps, E, h);
            memcpy(x, h, (size_t)E * sizeof(float));
        }
    }
    if (m->norm != NORM_NONE) layer_norm(x, m->final_scale, m->final_shift, m->eps, E, h);
    else memcpy(h, x, (size_t)E * sizeof(float));
    product(m->W_head, h, NULL, logits, E, m->vocab, share, &keep_until);
    return (int64_t)keep_until;
}

/* next_token_summary for each of `rows` rows of n logits (a trace's every position): ids and
 * probs are (rows, k), entropy_bits (rows). Returns -1 if any row has inf or NaN. */
int rows_summary(const float *logits, long rows, long n, long k, int64_t *top_ids,
                 float *top_probs, double *entropy_bits) {
    for (long r = 0; r < rows; r++)
        if (next_token_summary(logits + r * n, n, k, top_ids + r * k, top_probs + r * k,
                               entropy_bits + r))
            return -1;
    return 0;
}

/* A trace's attention weights, in place, with the steps of the book's explicit attention: each
 * of `rows` rows of `keys` scores (queries @ keys.T; row r is query r % queries, the queries
 * being the last `queries` of the keys) gets its future masked (weight exactly 0), is
 * multiplied by `scale` (1/sqrt(head_dim)) and softmaxed; plogp[r] = sum of w ln w. Returns -1
 * (the rows already done changed) if a score it uses is inf or NaN. */
int attention_rows(float *scores, long rows, long queries, long keys, float scale,
                   float *plogp) {
    for (long r = 0; r < rows; r++) {
        float *s = scores + r * keys;
        long allowed = keys - queries + r % queries + 1;     /* keys 0 .. allowed - 1 */
        float top = -INFINITY;
        int finite = 1;
        for (long j = 0; j < allowed; j++) {
            float v = s[j] * scale;
            finite &= isfinite(v);
            s[j] = v;
            top = v > top ? v : top;
        }
        if (!finite) return -1;
        float total = 0.f, weighted = 0.f;
        for (long j = 0; j < allowed; j++) {
            float d = s[j] - top;
            float e = exp_of_nonpositive(d);
            s[j] = e;
            total += e;
            weighted += e * d;
        }
        float inv = 1.0f / total;
        for (long j = 0; j < allowed; j++) s[j] *= inv;
        for (long j = allowed; j < keys; j++) s[j] = 0.f;
        plogp[r] = weighted * inv - logf(total);
    }
    return 0;
}

uint64_t helper_left(void) { return atomic_load(&last_left); }

/* How many chunks the helper has computed, and how many the caller took back from it. */
long helper_chunks(void) { return atomic_load(&chunks_by_helper); }
long taken_back_chunks(void) { return atomic_load(&chunks_taken_back); }

/* Tests: make the helper pause after each chunk, so that the caller must take chunks back. */
void set_helper_delay(long ns) { atomic_store(&helper_delay_ns, ns); }
