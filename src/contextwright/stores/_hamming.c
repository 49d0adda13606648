/* Hamming distances for VectorMatrix._scored (stores/_vectors.py), the one loop of a vector
 * search that touches every row: at 100k MiniLM rows, 0.2 ms here against 0.6 ms in numpy, and
 * called through ctypes, which lets go of the GIL for the whole call, where numpy's dozen steps
 * each took it back beside an assemble call's reads. scripts/compile.py builds it into the
 * compiled build (docs/compiled.md); without it the numpy loop runs and gives the same numbers.
 *
 * Rows are sign bits, word-major: `words` rows of `stride` 64-bit words, row w holding word w of
 * every vector. For the rows [lo, n) it writes each row's distance to `q` into dist[0 .. n-lo)
 * (`far` where mask[i] is 0: rows the reader may not see) and adds their histogram to
 * hist[0 .. far]. Returns 0, or -1 if the histogram's scratch could not be allocated. */

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define CW_DISTANCES                                                                     \
    {                                                                                    \
        size_t m = n - lo;                                                               \
        for (size_t i = 0; i < m; i++) dist[i] = 0;                                      \
        for (int w = 0; w < words; w++) {                                                \
            const uint64_t *row = bits + (size_t)w * stride + lo;                        \
            uint64_t qw = q[w];                                                          \
            for (size_t i = 0; i < m; i++)                                               \
                dist[i] += (uint16_t)__builtin_popcountll(row[i] ^ qw);                  \
        }                                                                                \
    }

#define CW_ARGS                                                                          \
    const uint64_t *bits, size_t stride, int words, size_t lo, size_t n, const uint64_t *q, \
        uint16_t *dist

typedef void (*distances_fn)(CW_ARGS);

/* One build for every x86-64 CPU: the loop is compiled three times and the CPU picks, once.
 * With AVX-512 VPOPCNTDQ (this machine's EPYC) the compiler counts eight words at a time. */
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx512f,avx512vl,avx512bw,avx512vpopcntdq"))) static void
distances_vpopcnt(CW_ARGS) CW_DISTANCES

__attribute__((target("popcnt"))) static void distances_popcnt(CW_ARGS) CW_DISTANCES
#endif

static void distances_plain(CW_ARGS) CW_DISTANCES

static distances_fn pick(void) {
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512vpopcntdq") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw"))
        return distances_vpopcnt;
    if (__builtin_cpu_supports("popcnt")) return distances_popcnt;
#endif
    return distances_plain;
}

int cw_hamming(const uint64_t *bits, size_t stride, int words, size_t lo, size_t n,
               const uint64_t *q, const uint8_t *mask, uint16_t far, uint16_t *dist,
               int64_t *hist) {
    static distances_fn distances = NULL; /* the same pointer whichever thread sets it */
    if (distances == NULL) distances = pick();
    size_t m = n - lo, bins = (size_t)far + 1;
    /* Four histograms, one per row mod 4: a row's count waits on no other row's store. */
    int64_t *h = calloc(4 * bins, sizeof(int64_t));
    if (h == NULL) return -1;
    distances(bits, stride, words, lo, n, q, dist);
    if (mask != NULL)
        for (size_t i = 0; i < m; i++)
            if (!mask[i]) dist[i] = far;
    size_t i = 0;
    for (; i + 4 <= m; i += 4) {
        h[dist[i]]++;
        h[bins + dist[i + 1]]++;
        h[2 * bins + dist[i + 2]]++;
        h[3 * bins + dist[i + 3]]++;
    }
    for (; i < m; i++) h[dist[i]]++;
    for (size_t d = 0; d < bins; d++) hist[d] += h[d] + h[bins + d] + h[2 * bins + d] + h[3 * bins + d];
    free(h);
    return 0;
}
