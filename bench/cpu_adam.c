// bench/cpu_adam.c: CPU-Adam (adamw.cuh) speed against a STREAM-style triad on the same
// machine, in the same run. Run by bench/cpu_adam.sh, which adds torch.optim.AdamW.
//
//   build/cpu_adam [--sizes 1000000,10000000,100000000] [--threads 1,2] [--path auto|scalar|avx2|avx512]
//
// Prints one line per measurement:
//   RESULT <kind> <n> <threads> <best seconds per step> <median seconds> <bytes counted per element>
// kinds:
//   ours_f32   fp32 grads, no bf16 copy (the CPU trainer): reads p g m v, writes p m v = 28 B/elem
//   ours_bf16  bf16 grads and a bf16 param copy (ZeRO-Offload): reads p g(2) m v, writes p m v out(2) = 28 B/elem
//   triad      a[i] = b[i] + s*c[i] on floats, OpenMP static, plain stores (what gcc makes of
//              STREAM's loop): 12 B/elem (STREAM convention: the write-allocate read of a is not
//              counted; with it, 16 B)
//   triad_nt   the same with non-temporal (streaming) stores, so no write-allocate: 12 B/elem, all real
// The report takes the faster triad as the bandwidth limit.
// Every step's writes go to lines it has just read, except the bf16 copy and triad's a.
#include "util/common.h"
#include "adamw.cuh"

static void triad(float *__restrict__ a, const float *__restrict__ b, const float *__restrict__ c, float s, size_t n) {
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}

// non-temporal stores; a is 64-byte aligned (xmalloc)
#if defined(__x86_64__)
__attribute__((target("avx512f")))
static void triad_nt512(float *__restrict__ a, const float *__restrict__ b, const float *__restrict__ c, float s, size_t n) {
    size_t nb = n / 16;
    #pragma omp parallel
    {
        const __m512 sv = _mm512_set1_ps(s);
        #pragma omp for schedule(static)
        for (size_t j = 0; j < nb; j++)
            _mm512_stream_ps(a + 16 * j, _mm512_fmadd_ps(sv, _mm512_loadu_ps(c + 16 * j), _mm512_loadu_ps(b + 16 * j)));
        _mm_sfence();
    }
    for (size_t i = nb * 16; i < n; i++) a[i] = b[i] + s * c[i];
}
__attribute__((target("avx2,fma")))
static void triad_nt256(float *__restrict__ a, const float *__restrict__ b, const float *__restrict__ c, float s, size_t n) {
    size_t nb = n / 8;
    #pragma omp parallel
    {
        const __m256 sv = _mm256_set1_ps(s);
        #pragma omp for schedule(static)
        for (size_t j = 0; j < nb; j++)
            _mm256_stream_ps(a + 8 * j, _mm256_fmadd_ps(sv, _mm256_loadu_ps(c + 8 * j), _mm256_loadu_ps(b + 8 * j)));
        _mm_sfence();
    }
    for (size_t i = nb * 8; i < n; i++) a[i] = b[i] + s * c[i];
}
#endif
static void triad_nt(float *a, const float *b, const float *c, float s, size_t n) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) { triad_nt512(a, b, c, s, n); return; }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) { triad_nt256(a, b, c, s, n); return; }
#endif
    triad(a, b, c, s, n);
}

// fill in parallel (first touch by the threads that use the pages)
static void fill(float *x, size_t n, uint64_t seed, float scale, float offset) {
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        uint64_t z = (seed + i) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 29)) * 0xBF58476D1CE4E5B9ull;
        z ^= z >> 32;
        x[i] = ((float)(z & 0xffffff) * (1.0f / 16777216.0f) - 0.5f) * scale + offset;
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int parse_list(const char *s, size_t *out, int max) {
    int k = 0;
    while (*s && k < max) {
        char *end;
        double v = strtod(s, &end);
        if (end == s) fatal("bad list '%s'", s);
        out[k++] = (size_t)v;
        s = *end == ',' ? end + 1 : end;
    }
    return k;
}

int main(int argc, char **argv) {
    size_t sizes[8] = {1000000, 10000000, 100000000}, threads[8] = {1, 2};
    int nsizes = 3, nthreads = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sizes") && i + 1 < argc) nsizes = parse_list(argv[++i], sizes, 8);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) nthreads = parse_list(argv[++i], threads, 8);
        else if (!strcmp(argv[i], "--path") && i + 1 < argc) {
            const char *p = argv[++i];
            int want = !strcmp(p, "scalar") ? ADAMW_PATH_SCALAR : !strcmp(p, "avx2") ? ADAMW_PATH_AVX2
                     : !strcmp(p, "avx512") ? ADAMW_PATH_AVX512 : ADAMW_PATH_AUTO;
            if (adamw_cpu_set_path(want) < 0) fatal("path %s not supported by this CPU", p);
        } else fatal("usage: %s [--sizes a,b,c] [--threads 1,2] [--path auto|scalar|avx2|avx512]", argv[0]);
    }
    printf("# cpu_adam: path %s, OpenMP max threads %d\n", adamw_path_name(adamw_cpu_path()),
#ifdef _OPENMP
           omp_get_max_threads()
#else
           1
#endif
    );
    for (int si = 0; si < nsizes; si++) {
        size_t n = sizes[si];
        float *p = (float *)xmalloc(n * 4, "p"), *g = (float *)xmalloc(n * 4, "g");
        float *m = (float *)xmalloc(n * 4, "m"), *v = (float *)xmalloc(n * 4, "v");
        uint16_t *gb = (uint16_t *)xmalloc(n * 2, "gb"), *out = (uint16_t *)xmalloc(n * 2, "out");
        float *a = (float *)xmalloc(n * 4, "a"), *b = (float *)xmalloc(n * 4, "b"), *c = (float *)xmalloc(n * 4, "c");
        fill(p, n, 1, 0.1f, 0); fill(g, n, 2, 0.02f, 0); fill(m, n, 3, 0.001f, 0); fill(v, n, 4, 1e-6f, 1e-6f);
        fill(a, n, 5, 1, 0); fill(b, n, 6, 1, 0); fill(c, n, 7, 1, 0);
        #pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++) { gb[i] = float_to_bf16_rne(g[i]); out[i] = 0; }
        // enough repetitions for ~1 s of AdamW per configuration
        int reps = n <= 1000000 ? 200 : n <= 10000000 ? 40 : 12;
        for (int ti = 0; ti < nthreads; ti++) {
            int nt = (int)threads[ti];
#ifdef _OPENMP
            omp_set_num_threads(nt);
#endif
            double *tf = (double *)xmalloc(reps * sizeof(double), "t"), *tb = (double *)xmalloc(reps * sizeof(double), "t");
            double *tt = (double *)xmalloc(reps * sizeof(double), "t"), *tn = (double *)xmalloc(reps * sizeof(double), "t");
            AdamWParams hp = {1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, 1, 1.0f, 0};
            for (int w = 0; w < 2; w++) {   // warm up
                adamw_cpu_step(p, g, m, v, NULL, n, hp);
                adamw_cpu_step_bf16grad(p, gb, m, v, out, n, hp);
                triad(a, b, c, 3.0f, n);
                triad_nt(a, b, c, 3.0f, n);
            }
            for (int r = 0; r < reps; r++) {   // interleaved, so all three see the same conditions
                hp.t = r + 1;
                double t0 = wall_time();
                adamw_cpu_step(p, g, m, v, NULL, n, hp);
                double t1 = wall_time();
                adamw_cpu_step_bf16grad(p, gb, m, v, out, n, hp);
                double t2 = wall_time();
                triad(a, b, c, 3.0f, n);
                double t3 = wall_time();
                triad_nt(a, b, c, 3.0f, n);
                double t4 = wall_time();
                tf[r] = t1 - t0; tb[r] = t2 - t1; tt[r] = t3 - t2; tn[r] = t4 - t3;
            }
            qsort(tf, reps, sizeof(double), cmp_double);
            qsort(tb, reps, sizeof(double), cmp_double);
            qsort(tt, reps, sizeof(double), cmp_double);
            qsort(tn, reps, sizeof(double), cmp_double);
            printf("RESULT ours_f32 %zu %d %.6e %.6e 28\n", n, nt, tf[0], tf[reps / 2]);
            printf("RESULT ours_bf16 %zu %d %.6e %.6e 28\n", n, nt, tb[0], tb[reps / 2]);
            printf("RESULT triad %zu %d %.6e %.6e 12\n", n, nt, tt[0], tt[reps / 2]);
            printf("RESULT triad_nt %zu %d %.6e %.6e 12\n", n, nt, tn[0], tn[reps / 2]);
            fflush(stdout);
            free(tf); free(tb); free(tt); free(tn);
        }
        free(p); free(g); free(m); free(v); free(gb); free(out); free(a); free(b); free(c);
    }
    return 0;
}
