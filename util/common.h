// util/common.h: the small utilities every zeroc program shares.
// One-line errors that name the file and the problem, checked file I/O,
// timing, and the deterministic random number generator used for
// initialization and sampling, identical on every platform and rank.
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
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <signal.h>

// ----------------------------------------------------------------------------
// errors: every fatal problem is one line on stderr and a non-zero exit.
// Under MPI every rank reaches the same check with the same data, so every
// rank prints and exits and no rank is left waiting in a collective.

static int g_error_rank = -1;   // set by the communicator so errors say which rank

// One diagnostic line on stderr, "[rank R] LEVEL: message", LEVEL being error, warning
// or note. It is written with one write() so that lines from several ranks never interleave.
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

static void fatal(const char *fmt, ...) __attribute__((noreturn));
static void fatal(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_v("error", fmt, ap);
    va_end(ap);
    exit(1);
}

// the index of the first value of v[0..n) that is not finite (Inf or NaN), or n: every
// model input (a model file, a safetensors tensor, a checkpoint) is checked with it
static size_t first_nonfinite(const float *v, size_t n) {
    size_t i = 0;
    while (i < n && isfinite(v[i])) i++;
    return i;
}

// The rank the launcher gave this process (Open MPI, PMIx, MPICH, Slurm), or -1: what a
// line can name before MPI_Init has said it.
static int launcher_rank(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (int i = 0; i < 4; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v >= '0' && *v <= '9') return atoi(v);
    }
    return -1;
}

// Tests only: ZEROC_TEST_STOP=NAME (or NAME:RANK) stops the process (or that rank) with
// SIGSTOP at the point the code calls NAME, so that a test acts while it is stopped exactly
// there, not after a sleep that may or may not land (tests/test_savedir.sh, test_watchdog.sh).
static void test_stop_point(const char *name) {
    const char *s = getenv("ZEROC_TEST_STOP");
    size_t n = strlen(name);
    if (!s || strncmp(s, name, n) != 0 || (s[n] != 0 && s[n] != ':')) return;
    int rank = g_error_rank >= 0 ? g_error_rank : launcher_rank();
    if (s[n] == ':' && atoi(s + n + 1) != (rank < 0 ? 0 : rank)) return;
    kill(getpid(), SIGSTOP);
}

// a / b rounded up, and x rounded up to a multiple of m
static inline size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
static inline size_t round_up(size_t x, size_t m) { return ceil_div(x, m) * m; }

// What the program allocates for, added to an out-of-memory message: the trainer puts the
// model's sizes and where they came from here, so that an absurd config.json is named.
static char g_alloc_context[640];

static void *xmalloc(size_t n, const char *what) {
    void *p = NULL;
    if (n == 0) n = 1;
    // 64-byte alignment: a cache line and a full AVX-512 register
    if (n > SIZE_MAX - 64 || posix_memalign(&p, 64, round_up(n, 64)) != 0 || !p)
        fatal("out of memory allocating %zu bytes for %s%s%s%s", n, what, g_alloc_context[0] ? " (" : "", g_alloc_context,
              g_alloc_context[0] ? ")" : "");
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

// what a path that is not a regular file is, for messages ("a FIFO (named pipe)")
static const char *file_kind(mode_t m) {
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO (named pipe)" : S_ISCHR(m) ? "a character device" :
           S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : S_ISREG(m) ? "a regular file" : "not a regular file";
}

// Every file the programs open goes through open_regular: it refuses what is not a regular
// file (a FIFO, a device, a socket, a directory) with one line naming `what` and the path.
// It opens with O_NONBLOCK and then looks with fstat, so that a FIFO never blocks the open
// (a reader would wait for a writer, and a writer for a reader). Returns the descriptor, or
// -1 with err, as "PATH: a FIFO (named pipe), not a model file", and errno: open's, or EINVAL.
static int open_regular(const char *path, int flags, const char *what, char *err, size_t errn) {
    int fd = open(path, flags | O_NONBLOCK | O_CLOEXEC, 0666);   // fopen's mode, less the umask
    struct stat sb;
    if (fd < 0) {
        int e = errno;   // a FIFO opened for writing with no reader fails (ENXIO): say what it is
        if (e == ENXIO && stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) snprintf(err, errn, "%s: %s, not %s", path, file_kind(sb.st_mode), what);
        else snprintf(err, errn, "%s: cannot %s (%s)", path, flags & O_CREAT ? "create" : "open", strerror(e));
        return -1;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(err, errn, "%s: %s, not %s", path, file_kind(sb.st_mode), what);
        close(fd);
        errno = EINVAL;
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

// open_regular as stdio: mode "rb", "wb", "ab" or "r+b". Returns NULL with err.
static FILE *fopen_regular(const char *path, const char *mode, const char *what, char *err, size_t errn) {
    int flags = mode[0] == 'r' ? (strchr(mode, '+') ? O_RDWR : O_RDONLY) : O_WRONLY | O_CREAT | (mode[0] == 'a' ? O_APPEND : O_TRUNC);
    int fd = open_regular(path, flags, what, err, errn);
    FILE *f = fd < 0 ? NULL : fdopen(fd, mode);
    if (fd >= 0 && !f) { snprintf(err, errn, "%s: cannot open (%s)", path, strerror(errno)); close(fd); }
    return f;
}

static FILE *fopen_regular_or_die(const char *path, const char *mode, const char *what) {
    char err[1400];
    FILE *f = fopen_regular(path, mode, what, err, sizeof(err));
    if (!f) fatal("%s", err);
    return f;
}

// ----------------------------------------------------------------------------
// checked writes: every write, flush, fsync, close and rename is checked, and the
// first failure is kept as one line naming the file and the OS error, for the caller
// to act on. A checkpoint save removes its temporary files and stops every rank
// (train/checkpoint.h); the tools stop at once through the atomic_* forms below.
//
// An atomic write goes to PATH.tmp, is flushed, synced and closed, then renamed over
// PATH and the directory synced: a reader sees the old file or the complete new one.
//
// Test hook for fault injection, used by tests/test_save_failure.sh:
// ZEROC_FAIL_WRITE=NAME:N makes the N-th write to a file named NAME fail with ENOSPC,
// NAME being its last path component without .tmp. NAME:last fails its final flush,
// where stdio hands the kernel the last buffered bytes: the write a full disk refuses
// last. NAME:dirsync fails the sync of its directory after its rename, with EIO.
// Writes are counted per process.

typedef struct {
    FILE *f;
    char path[1100];     // where it ends up
    char tmp[1105];      // the file being written: PATH.tmp (atomic) or PATH
    int atomic;
    int renamed;         // out_rename moved it into place, even if syncing the directory then failed
    long long writes;    // checked writes so far, which the fault injection counts
    char err[1400];      // the first failure, "" while everything succeeded
} OutFile;

static const char *path_base(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

// the injected failure for this file, if any: the write number, -1 for the final flush,
// -2 for the sync of its directory after its rename (NAME:dirsync, EIO), 0 for none
static long long out_injected(const OutFile *o) {
    const char *spec = getenv("ZEROC_FAIL_WRITE");
    if (!spec) return 0;
    const char *colon = strrchr(spec, ':');
    const char *base = path_base(o->path);
    if (!colon || strlen(base) != (size_t)(colon - spec) || strncmp(spec, base, colon - spec) != 0) return 0;
    if (strcmp(colon + 1, "last") == 0) return -1;
    if (strcmp(colon + 1, "dirsync") == 0) return -2;
    return atoll(colon + 1);
}

static int out_fail(OutFile *o, const char *what, int e) {
    if (!o->err[0]) snprintf(o->err, sizeof(o->err), "%s: %s (%s)", o->tmp, what, strerror(e));
    return 0;
}

// Opens PATH (atomic: PATH.tmp) for writing. Returns 1, or 0 with o->err.
static int out_open(OutFile *o, const char *path, int atomic) {
    memset(o, 0, sizeof(*o));
    snprintf(o->path, sizeof(o->path), "%s", path);
    snprintf(o->tmp, sizeof(o->tmp), atomic ? "%s.tmp" : "%s", o->path);
    o->atomic = atomic;
    o->f = fopen_regular(o->tmp, "wb", "a file to write", o->err, sizeof(o->err));
    return o->f != NULL;
}

// After a failure further writes do nothing: the caller checks once, at the end.
static int out_write(OutFile *o, const void *buf, size_t n) {
    if (o->err[0] || !o->f) return 0;
    o->writes++;
    if (out_injected(o) == o->writes) return out_fail(o, "write failed (injected by ZEROC_FAIL_WRITE)", ENOSPC);
    if (n && fwrite(buf, 1, n, o->f) != n) return out_fail(o, "write failed", errno);
    return 1;
}

// An existing file, which another rank created, opened for writing in place at
// out_seek's offsets: each rank of a checkpoint writes its own slices of model.bin.
static int out_open_existing(OutFile *o, const char *path) {
    memset(o, 0, sizeof(*o));
    snprintf(o->path, sizeof(o->path), "%s", path);
    snprintf(o->tmp, sizeof(o->tmp), "%s", path);
    o->f = fopen_regular(path, "r+b", "a file to write", o->err, sizeof(o->err));
    return o->f != NULL;
}
static int out_seek(OutFile *o, off_t offset) {
    if (o->err[0] || !o->f) return 0;
    if (fseeko(o->f, offset, SEEK_SET) != 0) return out_fail(o, "cannot seek", errno);
    return 1;
}
// the file's size set to `bytes`; what is not written yet reads as zeros
static int out_set_size(OutFile *o, off_t bytes) {
    if (o->err[0] || !o->f) return 0;
    if (fflush(o->f) != 0) return out_fail(o, "write failed", errno);
    if (ftruncate(fileno(o->f), bytes) != 0) return out_fail(o, "cannot set the size", errno);
    return 1;
}

// fsync of the directory holding `path`: makes a rename or a new file durable
static int fsync_parent_dir(const char *path, char *err, size_t errn) {
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s", path);
    char *s = strrchr(dir, '/');
    if (s == dir) s[1] = 0; else if (s) *s = 0; else strcpy(dir, ".");
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0 || fsync(fd) != 0) {
        if (fd >= 0) close(fd);
        snprintf(err, errn, "%s: cannot sync the directory (%s)", dir, strerror(errno));
        return 0;
    }
    close(fd);
    return 1;
}

// Flush, fsync and close, without the rename. Returns 1, or 0 with o->err; on failure
// the temporary file of an atomic write is removed.
static int out_finish(OutFile *o) {
    if (o->f) {
        int ok = !o->err[0];
        if (ok && out_injected(o) == -1) ok = out_fail(o, "write failed (injected by ZEROC_FAIL_WRITE)", ENOSPC);
        if (ok && fflush(o->f) != 0) ok = out_fail(o, "write failed", errno);
        if (ok && fsync(fileno(o->f)) != 0) ok = out_fail(o, "fsync failed", errno);
        if (fclose(o->f) != 0 && ok) out_fail(o, "close failed", errno);
        o->f = NULL;
    }
    if (o->err[0] && o->atomic) unlink(o->tmp);
    return !o->err[0];
}

// An atomic write's rename into place, then the directory synced. On failure o->renamed
// says whether the new file is in place already (only the sync failed).
static int out_rename(OutFile *o) {
    if (o->err[0]) return 0;
    if (rename(o->tmp, o->path) != 0) { out_fail(o, "cannot rename into place", errno); unlink(o->tmp); return 0; }
    o->renamed = 1;
    if (out_injected(o) == -2) {
        snprintf(o->err, sizeof(o->err), "%s: cannot sync the directory (%s, injected by ZEROC_FAIL_WRITE)", o->path, strerror(EIO));
        return 0;
    }
    return fsync_parent_dir(o->path, o->err, sizeof(o->err));
}

// finish, and for an atomic write rename into place
static int out_commit(OutFile *o) { return out_finish(o) && (!o->atomic || out_rename(o)); }

// give up: close and remove the temporary or partial file
static void out_abort(OutFile *o) {
    if (o->f) fclose(o->f);
    o->f = NULL;
    unlink(o->tmp);
}

// mkdir -p: dir and every missing parent. Returns 1, or 0 with a one-line err.
static int mkdir_p(const char *dir, char *err, size_t errn) {
    char p[1100];
    snprintf(p, sizeof(p), "%s", dir);
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s != 0) continue;
        char c = *s;
        *s = 0;
        struct stat sb;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) { snprintf(err, errn, "%s: cannot create (%s)", p, strerror(errno)); return 0; }
        if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) { snprintf(err, errn, "%s: exists and is not a directory", p); return 0; }
        if (c == 0) return 1;
        *s = c;
    }
}

// ----------------------------------------------------------------------------
// cutting byte ranges out of a file in place: a resumed run's monitors remove an
// earlier run's records after its checkpoint and nothing else (train/monitor.h)

typedef struct { off_t lo, hi; } ByteRange;
typedef struct { ByteRange *r; int n, cap; } ByteRanges;

// [lo, hi) added after the ranges so far, joined to the last one when they touch
static void ranges_add(ByteRanges *rs, off_t lo, off_t hi) {
    if (rs->n && rs->r[rs->n - 1].hi == lo) { rs->r[rs->n - 1].hi = hi; return; }
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? 2 * rs->cap : 16;
        rs->r = (ByteRange *)realloc(rs->r, rs->cap * sizeof(ByteRange));
        if (!rs->r) fatal("out of memory listing byte ranges");
    }
    rs->r[rs->n].lo = lo;
    rs->r[rs->n++].hi = hi;
}

// Removes the ranges rs (in order, disjoint) from the file at path, open as fd, `size`
// bytes mapped at map. A cut at the end is a truncation; otherwise the rest is written
// to DIR/.cut.tmp, synced and renamed over the file. Returns 1, or 0 with err.
static int file_cut_ranges(const char *path, int fd, const uint8_t *map, off_t size, const ByteRanges *rs, char *err, size_t errn) {
    if (rs->n == 0) return 1;
    if (rs->n == 1 && rs->r[0].hi == size) {
        if (ftruncate(fd, rs->r[0].lo) == 0 && fsync(fd) == 0) return 1;
        snprintf(err, errn, "%s: cannot truncate (%s)", path, strerror(errno));
        return 0;
    }
    char tmp[1100];
    const char *base = path_base(path);
    snprintf(tmp, sizeof(tmp), "%.*s.cut.tmp", (int)(base - path), path);
    OutFile o;
    off_t at = 0;
    if (out_open(&o, tmp, 0))
        for (int i = 0; i <= rs->n; i++) {
            off_t end = i < rs->n ? rs->r[i].lo : size;
            out_write(&o, map + at, (size_t)(end - at));
            if (i < rs->n) at = rs->r[i].hi;
        }
    if (!out_finish(&o)) { snprintf(err, errn, "%s", o.err); unlink(tmp); return 0; }
    if (rename(tmp, path) != 0) { snprintf(err, errn, "%s: cannot rename %s over it (%s)", path, tmp, strerror(errno)); unlink(tmp); return 0; }
    return fsync_parent_dir(path, err, errn);
}

// A file being cut: open_regular's read-write descriptor, its bytes mapped read-only (NULL when empty)
typedef struct { int fd; const uint8_t *map; off_t size; } CutFile;

// Returns 1, or 0 with err and errno: open's for a file that cannot be opened.
static int cut_open(CutFile *f, const char *path, const char *what, char *err, size_t errn) {
    f->fd = open_regular(path, O_RDWR, what, err, errn);
    if (f->fd < 0) return 0;
    struct stat sb;
    f->size = fstat(f->fd, &sb) == 0 ? sb.st_size : 0;
    f->map = f->size ? (const uint8_t *)mmap(NULL, (size_t)f->size, PROT_READ, MAP_SHARED, f->fd, 0) : NULL;
    if (f->map != MAP_FAILED) return 1;
    snprintf(err, errn, "%s: cannot memory-map (%s)", path, strerror(errno));
    close(f->fd);
    return 0;
}

// The file removed, or the ranges rs cut out of it; then closed, and rs freed. Returns 1, or 0 with err.
static int cut_finish(CutFile *f, const char *path, int remove, ByteRanges *rs, char *err, size_t errn) {
    int ok = 1;
    if (remove && unlink(path) != 0) ok = 0, snprintf(err, errn, "%s: cannot remove (%s)", path, strerror(errno));
    if (!remove) ok = file_cut_ranges(path, f->fd, f->map, f->size, rs, err, errn);
    free(rs->r);
    if (f->map) munmap((void *)f->map, (size_t)f->size);
    close(f->fd);
    return ok;
}

// The forms for tools, where a failed write ends the program (fatal: exit). The
// temporary file of each atomic write not yet committed is removed on the way out,
// so a tool that stops mid-write (a full disk) leaves no PATH.tmp behind.
typedef OutFile AtomicFile;
#define ATOMIC_MAX_OPEN 8
static char g_atomic_open[ATOMIC_MAX_OPEN][sizeof(((OutFile *)0)->tmp)];
static void atomic_remove_uncommitted(void) {
    for (int i = 0; i < ATOMIC_MAX_OPEN; i++) if (g_atomic_open[i][0]) unlink(g_atomic_open[i]);
}
static AtomicFile atomic_open(const char *path) {
    static int registered = 0;
    if (!registered) { atexit(atomic_remove_uncommitted); registered = 1; }
    AtomicFile a;
    if (!out_open(&a, path, 1)) fatal("%s", a.err);
    int i = 0;
    while (i < ATOMIC_MAX_OPEN && g_atomic_open[i][0]) i++;
    if (i == ATOMIC_MAX_OPEN) fatal("%s: more than %d files open for atomic writes", path, ATOMIC_MAX_OPEN);
    strcpy(g_atomic_open[i], a.tmp);
    return a;
}
static void atomic_commit(AtomicFile *a) {
    int ok = out_commit(a);   // renamed into place, or its temporary file removed
    for (int i = 0; i < ATOMIC_MAX_OPEN; i++) if (!strcmp(g_atomic_open[i], a->tmp)) g_atomic_open[i][0] = 0;
    if (!ok) fatal("%s", a->err);
}

// ----------------------------------------------------------------------------
// floatX, llm.c's name for the storage type of parameters, gradients and
// activations: fp32 in the CPU trainer; bf16 in the GPU trainer, or IEEE fp16 in its
// fp16 build (make train_gpt FP16=1, which defines FLOATX_FP16). Master weights, the
// optimizer state and every accumulation are fp32 in all of them.

#ifndef FLOATX_FP16
#define FLOATX_FP16 0
#endif
#ifdef __CUDACC__
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#if FLOATX_FP16
typedef __half floatX;
#else
typedef __nv_bfloat16 floatX;
#endif
#define HOST_DEVICE __host__ __device__
#else
#if FLOATX_FP16
#error "FLOATX_FP16 is for the GPU trainer (the CPU trainer's fp16 mode is the run-time flag --fp16 1)"
#endif
typedef float floatX;
#define HOST_DEVICE
#endif

// bf16 values carried as their uint16_t bits on the host: the one conversion, for
// CPU-Adam's bf16 output, host staging of bf16 buffers, checkpoints and tests.
// Round to nearest even. NaN stays a quiet NaN, its sign and top payload bits kept;
// overflow rounds to +-Inf; denormals round like any other value.
HOST_DEVICE static inline uint32_t float_bits(float f) { union { float f; uint32_t u; } x; x.f = f; return x.u; }
HOST_DEVICE static inline float bits_float(uint32_t u) { union { float f; uint32_t u; } x; x.u = u; return x.f; }
HOST_DEVICE static inline uint16_t float_to_bf16_rne(float f) {
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
HOST_DEVICE static inline float bf16_to_float(uint16_t b) { return bits_float((uint32_t)b << 16); }

// IEEE fp16 (half) values as their uint16_t bits: the one conversion, for CPU-Adam's
// fp16 output, host staging in the fp16 GPU build, the CPU trainer's fp16 mode and
// Hugging Face F16 weights. Round to nearest even, as x86's F16C (vcvtps2ph) and
// CUDA's __float2half_rn do. Magnitudes from 65520 up, half-way above the largest
// half (65504), become +-Inf. Subnormal halves, multiples of 2^-24, are rounded like
// any other value, and smaller magnitudes go to +-0. NaN stays a quiet NaN, its sign
// and top payload bits kept.
HOST_DEVICE static inline uint16_t float_to_fp16_rne(float f) {
    uint32_t u = float_bits(f), a = u & 0x7fffffffu;
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);              // >= 65520 (and Inf)
    if (a >= 0x38800000u) {                                                // >= 2^-14: a normal half
        uint32_t r = a - 0x38000000u;                                      // exponent rebiased 127 -> 15
        r += 0x0fffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    if (a < 0x33000000u) return sign;                                      // < 2^-25: to zero (2^-25 is a tie)
    uint32_t e = a >> 23, mant = (a & 0x7fffffu) | 0x800000u, shift = 126 - e;   // a = mant * 2^(e-150)
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) h++;                // may carry into the smallest normal
    return (uint16_t)(sign | h);
}
HOST_DEVICE static inline float fp16_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return bits_float(sign | 0x7f800000u | (m << 13));     // Inf, NaN
    if (e == 0) { float v = (float)m * 5.9604644775390625e-8f; return sign ? -v : v; }   // m * 2^-24, exact
    return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}
// f rounded to the nearest fp16 value, as the CPU trainer's fp16 mode stores them
HOST_DEVICE static inline float fp16_round(float f) { return fp16_to_float(float_to_fp16_rne(f)); }

#ifdef __CUDACC__
// floatX of the GPU build as host bits, for host staging, CPU-Adam's output and tests
static inline uint16_t float_to_floatX_bits(float f) { return FLOATX_FP16 ? float_to_fp16_rne(f) : float_to_bf16_rne(f); }
static inline float floatX_bits_to_float(uint16_t b) { return FLOATX_FP16 ? fp16_to_float(b) : bf16_to_float(b); }
#define FLOATX_NAME (FLOATX_FP16 ? "fp16" : "bf16")
#endif

// ----------------------------------------------------------------------------
// the process's peak resident memory, which /usr/bin/time -v calls maximum resident set size

#include <sys/resource.h>
static double peak_rss_bytes(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss * 1024.0;   // Linux: kilobytes
}
// and now, from Linux's /proc/self/statm resident pages; 0 if unknown
static double current_rss_bytes(void) {
    long long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return 0;
    if (fscanf(f, "%lld %lld", &pages, &resident) != 2) resident = 0;
    fclose(f);
    return (double)resident * (double)sysconf(_SC_PAGESIZE);
}

// ----------------------------------------------------------------------------
// CRC-32 (IEEE): checkpoint files and manifests, the data's fingerprint, config hashes

// A reflected CRC-32 with polynomial `poly`, a byte at a time through `table`
// (built on first use). CRC-32 (IEEE) and TensorBoard's CRC-32C differ only in it.
static uint32_t crc32_reflected(uint32_t table[256], int *ready, uint32_t poly, uint32_t crc, const void *data, size_t n) {
    if (!*ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = c & 1 ? poly ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        *ready = 1;
    }
    const uint8_t *p = (const uint8_t *)data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

static uint32_t crc32_update(uint32_t crc, const void *data, size_t n) {
    static uint32_t table[256];
    static int ready = 0;
    return crc32_reflected(table, &ready, 0xEDB88320u, crc, data, n);
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

// standard normal, one Box-Muller draw per value, computed in double and rounded once
static float rng_normal(Rng *r) {
    double u1 = ((rng_u64(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0);  // (0, 1]
    double u2 = (rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);          // [0, 1)
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
