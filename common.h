// common.h: the small utilities every zeroc program shares.
// One-line errors that name the file and the problem, checked file I/O,
// timing, and the deterministic random number generator used for
// initialization and sampling (identical on every platform and rank).
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <stdarg.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <math.h>
#include <unistd.h>

// ----------------------------------------------------------------------------
// errors: every fatal problem is one line on stderr and a non-zero exit.
// Under MPI every rank reaches the same check with the same data, so every
// rank prints and exits and no rank is left waiting in a collective.

static int g_error_rank = -1;   // set by the communicator so errors say which rank

// One diagnostic line on stderr, "[rank R] LEVEL: message" (LEVEL: error, warning,
// note), written with one write() so that lines from several ranks never interleave.
static void diag_v(const char *level, const char *fmt, va_list ap) {
    char line[2048];
    int n = 0;
    if (g_error_rank > 0) n = snprintf(line, sizeof(line), "[rank %d] ", g_error_rank);
    n += snprintf(line + n, sizeof(line) - n, "%s: ", level);
    n += vsnprintf(line + n, sizeof(line) - n, fmt, ap);
    if (n > (int)sizeof(line) - 2) n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    fflush(stdout);
    if (write(2, line, n) < 0) { /* nothing more to do */ }
}

static void diag(const char *level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_v(level, fmt, ap);
    va_end(ap);
}

static void fatal(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_v("error", fmt, ap);
    va_end(ap);
    exit(1);
}

// a / b rounded up, and x rounded up to a multiple of m
static inline size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
static inline size_t round_up(size_t x, size_t m) { return ceil_div(x, m) * m; }

static void *xmalloc(size_t n, const char *what) {
    void *p = NULL;
    if (n == 0) n = 1;
    // 64-byte alignment: a cache line and a full AVX-512 register
    if (posix_memalign(&p, 64, round_up(n, 64)) != 0 || !p)
        fatal("out of memory allocating %zu bytes for %s", n, what);
    return p;
}

static void *xcalloc(size_t n, const char *what) {
    void *p = xmalloc(n, what);
    memset(p, 0, n);
    return p;
}

// ----------------------------------------------------------------------------
// checked file I/O: each error names the file

static FILE *fopen_or_die(const char *path, const char *mode) {
    FILE *f = fopen(path, mode);
    if (!f) fatal("%s: cannot open (%s)", path, strerror(errno));
    return f;
}

static void fread_or_die(void *buf, size_t size, size_t count, FILE *f, const char *path, const char *what) {
    size_t got = fread(buf, size, count, f);
    if (got != count)
        fatal("%s: truncated file: expected %zu bytes of %s, got %zu", path, size * count, what, size * got);
}

static void fwrite_or_die(const void *buf, size_t size, size_t count, FILE *f, const char *path) {
    if (count && fwrite(buf, size, count, f) != count)
        fatal("%s: write failed (%s)", path, strerror(errno));
}

static long long file_size_or_die(FILE *f, const char *path) {
    if (fseeko(f, 0, SEEK_END) != 0) fatal("%s: cannot seek (%s)", path, strerror(errno));
    long long n = (long long)ftello(f);
    if (fseeko(f, 0, SEEK_SET) != 0) fatal("%s: cannot seek (%s)", path, strerror(errno));
    return n;
}

// Atomic file writes: write PATH.tmp, sync it, rename it over PATH. A reader
// sees the old file or the complete new one, never a half-written one.
typedef struct { FILE *f; char tmp[1100]; const char *path; } AtomicFile;

static AtomicFile atomic_open(const char *path) {
    AtomicFile a;
    snprintf(a.tmp, sizeof(a.tmp), "%s.tmp", path);
    a.path = path;
    a.f = fopen_or_die(a.tmp, "wb");
    return a;
}

static void atomic_commit(AtomicFile *a) {
    if (fflush(a->f) != 0 || fsync(fileno(a->f)) != 0) fatal("%s: write failed (%s)", a->tmp, strerror(errno));
    if (fclose(a->f) != 0) fatal("%s: write failed (%s)", a->tmp, strerror(errno));
    if (rename(a->tmp, a->path) != 0) fatal("%s: cannot rename into place (%s)", a->path, strerror(errno));
}

// ----------------------------------------------------------------------------
// floatX: the storage type of parameters, gradients and activations (llm.c's
// name): fp32 in the CPU trainer, bf16 in the GPU trainer. Master weights, the
// optimizer state and every accumulation are fp32 in both.

#ifdef __CUDACC__
#include <cuda_runtime.h>
#include <cuda_bf16.h>
typedef __nv_bfloat16 floatX;
#define HOST_DEVICE __host__ __device__
#else
typedef float floatX;
#define HOST_DEVICE
#endif

// bf16 values carried as their uint16_t bits on the host: the one conversion
// (CPU-Adam's bf16 output, host staging of bf16 buffers, checkpoints, tests).
// Round to nearest even; NaN stays a quiet NaN (sign and top payload bits
// kept); overflow rounds to +-Inf; denormals round like any other value.
HOST_DEVICE static inline uint32_t float_bits(float f) { union { float f; uint32_t u; } x; x.f = f; return x.u; }
HOST_DEVICE static inline float bits_float(uint32_t u) { union { float f; uint32_t u; } x; x.u = u; return x.f; }
HOST_DEVICE static inline uint16_t float_to_bf16_rne(float f) {
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
HOST_DEVICE static inline float bf16_to_float(uint16_t b) { return bits_float((uint32_t)b << 16); }

// ----------------------------------------------------------------------------
// the process's peak resident memory (what /usr/bin/time -v calls maximum resident set size)

#include <sys/resource.h>
static double peak_rss_bytes(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss * 1024.0;   // Linux: kilobytes
}

// ----------------------------------------------------------------------------
// timing

static double wall_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// ----------------------------------------------------------------------------
// random numbers: splitmix64 state, uniform floats and Box-Muller normals.
// Defined bit for bit so that the CPU and GPU trainers initialize identically.

typedef struct { uint64_t state; } Rng;

static uint64_t rng_u64(Rng *r) {
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// uniform in [0, 1) with 24 random bits
static float rng_uniform(Rng *r) { return (rng_u64(r) >> 40) * (1.0f / 16777216.0f); }

// standard normal, one Box-Muller draw per value (computed in double, rounded once)
static float rng_normal(Rng *r) {
    double u1 = ((rng_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0);  // (0, 1]
    double u2 = (rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);          // [0, 1)
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
