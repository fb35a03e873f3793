/* PyTorch's CPU Tensor.uniform_ for float32, value for value: see uniform_kernel.py.
 *
 * PyTorch draws one 32-bit number per element from its Mersenne Twister (MT19937) and maps its
 * low 24 bits to [from, to) in float arithmetic. It does so one element at a time behind a lock;
 * here the twist runs over the whole 624-word state and the tempering and mapping run as plain
 * loops over each stretch of it, which vectorise. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum { N = 624, M = 397 };

static inline uint32_t twist(uint32_t u, uint32_t v)
{
    return (((u & 0x80000000u) | (v & 0x7fffffffu)) >> 1) ^ ((v & 1u) ? 0x9908b0dfu : 0u);
}

/* The next 624 words of the state, in place (MT19937's recurrence). */
static void next_state(uint32_t *s)
{
    int k = 0;
    for (; k < N - M; k++)
        s[k] = s[k + M] ^ twist(s[k], s[k + 1]);
    for (; k < N - 1; k++)
        s[k] = s[k + M - N] ^ twist(s[k], s[k + 1]);
    s[N - 1] = s[M - 1] ^ twist(s[N - 1], s[0]);
}

/* MT19937's tempering of a state word into the number it outputs. */
static inline uint32_t temper(uint32_t y)
{
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

/* Its low 24 bits as a float in [0, 1) (exact). */
static inline float unit(uint32_t word)
{
    return (float)(temper(word) & 0xffffffu) * (1.0f / 16777216.0f);
}

/* State words -> floats in [from, to): unit * (to - from) + from, in one of the ways a build of
 * PyTorch may round it: in float, multiply then add (mode 0) or a fused multiply-add (mode 1),
 * or in double (mode 2). uniform_kernel.py finds which one this PyTorch does by comparing. */
__attribute__((optimize("fp-contract=off")))
static void map_words(const uint32_t *s, long n, float from, float range, int mode, float *out)
{
    if (mode == 2)
        for (long i = 0; i < n; i++)
            out[i] = (float)((double)unit(s[i]) * (double)range + (double)from);
    else if (mode == 1)
        for (long i = 0; i < n; i++)
            out[i] = fmaf(unit(s[i]), range, from);
    else
        for (long i = 0; i < n; i++)
            out[i] = unit(s[i]) * range + from;
}

/* The kernel's first-touch page faults on fresh memory cost more than the numbers (about 2 ns
 * a float here, against 0.4), so for a large tensor a second thread has the far half of it
 * mapped in the meantime. MADV_POPULATE_WRITE only maps pages, it never changes what they hold,
 * so the two threads cannot disturb each other; where the kernel lacks it, nothing happens. */
enum { POPULATE_MIN_BYTES = 4 << 20 };

struct span { char *start; size_t length; };

static void *populate(void *arg)
{
    struct span *span = arg;
    madvise(span->start, span->length, MADV_POPULATE_WRITE);
    return NULL;
}

static int start_populating(float *out, long n, pthread_t *thread, struct span *span)
{
    if ((size_t)n * sizeof(float) < POPULATE_MIN_BYTES)
        return 0;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t first = ((uintptr_t)(out + n / 2) + page - 1) & ~(page - 1);
    uintptr_t end = (uintptr_t)(out + n) & ~(page - 1);
    if (end <= first)
        return 0;
    span->start = (char *)first;
    span->length = end - first;
    return pthread_create(thread, NULL, populate, span) == 0;
}

/* n floats into out, continuing the generator whose state is (state, *left, *next) as PyTorch
 * keeps it: a draw first decrements left and twists when it reaches 0, then takes word next.
 * Updates *left and *next. */
void uniform_floats(uint32_t *state, int32_t *left, uint64_t *next, float from, float to,
                    int mode, float *out, long n)
{
    const float range = to - from;
    pthread_t thread;
    struct span span;
    int populating = start_populating(out, n, &thread, &span);
    long at = (long)*next, remaining = (long)*left;
    while (n > 0) {
        if (remaining == 1) {          /* this draw twists, then takes word 0 */
            next_state(state);
            at = 0;
            remaining = N + 1;
        }
        long take = remaining - 1 < n ? remaining - 1 : n;
        map_words(state + at, take, from, range, mode, out);
        out += take;
        n -= take;
        at += take;
        remaining -= take;
    }
    *left = (int32_t)remaining;
    *next = (uint64_t)at;
    if (populating)
        pthread_join(thread, NULL);
}
