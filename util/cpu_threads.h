// util/cpu_threads.h: how the CPU trainer spends its threads so that a machine shared with other
// processes costs it about the share they take, no more (train_gpt.c includes it).
//
// Why a busy core used to cost far more than its share: every parallel region ends at a barrier
// that waits for its slowest thread, and when another process holds one thread's core, that
// thread runs a few milliseconds, then waits a few milliseconds. Meanwhile
//   - its teammates spin at the barrier (libgomp's default: about 300000 spins, milliseconds), so
//     the scheduler sees them busy and does not move the waiting thread to their core;
//   - OpenBLAS's own threading cuts each GEMM into one equal share per thread up front, and its
//     threads spin-wait for each other's packed panels: the GEMM takes as long as the share on the
//     slowed core, whatever the other core could have done.
// Hence three measures:
//   1. The OpenMP wait policy (cpu_wait_policy, first thing in main): unless the user set
//      OMP_WAIT_POLICY or GOMP_SPINCOUNT, OMP_WAIT_POLICY=CPU_WAIT_POLICY (passive): a thread waiting
//      at a barrier sleeps at once and gives its core away. Measured (bench/cpu_contention.sh's setup,
//      2 cores, GPT-2 124M's shape and the demo size, both archs): with one core busy, passive gave
//      1.01-1.10x the 1-thread rate where GOMP_SPINCOUNT=10000 (a few tens of microseconds of spinning)
//      gave 0.93-1.03x; with the machine to itself the two were within run-to-run noise (a step's
//      kernels are long enough that waking a sleeping thread costs little). libgomp reads its
//      environment once, when it is loaded, before main runs; so the program sets the variable and
//      executes itself again (execv of /proc/self/exe, same arguments, before MPI starts; if that
//      fails it runs on with libgomp's defaults).
//   2. The GEMMs' partition (cpu_gemm): with more than one thread, the output is cut into blocks
//      of whole rows or columns, CPU_GEMM_BLOCKS_PER_THREAD per thread, that the threads take in
//      turn (schedule(dynamic)); each block is one single-threaded OpenBLAS call (OpenBLAS's OpenMP
//      build does not nest inside a parallel region). A slowed thread takes fewer blocks and the
//      others do the rest. The blocks run along the dimension whose split re-packs the smaller
//      operand (each block packs its own copy of the operand it shares with the others).
//   3. The other loops (train_gpt.c's kernels) take their iterations in chunks, CPU_CHUNKS_PER_THREAD
//      per thread, in turn (schedule(dynamic, cpu_chunk(n))) rather than one equal share each.
// Results: one thread makes one OpenBLAS call per GEMM, exactly as before; with several threads the
// block boundaries (a function of the shape and the thread count, never of timing) decide how
// OpenBLAS's kernels tile the output, so runs are bitwise repeatable at a given thread count, as they
// were with OpenBLAS's own threading (which also differs in the last bits between thread counts).
#pragma once
#include <omp.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/prctl.h>
#include <cblas.h>

// what a waiting OpenMP thread does: sleep at once (libgomp's default spins about 300000 times first)
#define CPU_WAIT_POLICY "passive"

// The kernel names a process after the file it executes: the re-execution through /proc/self/exe
// below would show the ranks as "exe" in ps, top and pgrep. argv[0] is kept by execv; the name
// (what ps -e, top and pgrep match) is set back to its last component, as first started.
static void cpu_keep_name(char **argv) {
    const char *slash = strrchr(argv[0], '/');
    prctl(PR_SET_NAME, slash ? slash + 1 : argv[0], 0, 0, 0);   // at most 15 characters are kept
}

static void cpu_wait_policy(char **argv) {
    cpu_keep_name(argv);
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;   // the user's choice
    if (setenv("OMP_WAIT_POLICY", CPU_WAIT_POLICY, 0) != 0) return;
    execv("/proc/self/exe", argv);
    unsetenv("OMP_WAIT_POLICY");   // could not start again: libgomp keeps the defaults it read
}

// The start-up line's account of it: "OMP_WAIT_POLICY=passive", or the user's settings.
static void cpu_wait_policy_describe(char *out, size_t n) {
    const char *wp = getenv("OMP_WAIT_POLICY"), *sc = getenv("GOMP_SPINCOUNT");
    if (!wp && !sc) snprintf(out, n, "libgomp's default wait policy");
    else snprintf(out, n, "%s%s%s%s%s", wp ? "OMP_WAIT_POLICY=" : "", wp ? wp : "", wp && sc ? ", " : "",
                  sc ? "GOMP_SPINCOUNT=" : "", sc ? sc : "");
}

// The chunk of a loop over independent rows or elements, schedule(dynamic, cpu_chunk(n)): about
// CPU_CHUNKS_PER_THREAD chunks per thread, taken in turn (which thread computes an iteration never
// changes its result).
#define CPU_CHUNKS_PER_THREAD 16
static inline long cpu_chunk(long n) {
    long c = n / ((long)omp_get_max_threads() * CPU_CHUNKS_PER_THREAD);
    return c > 0 ? c : 1;
}

#define CPU_GEMM_BLOCKS_PER_THREAD 4
#define CPU_GEMM_MIN_BLOCK 64      // rows or columns per block at least (and a multiple of 16: whole cache lines)

// C[M,N] = op(A)[M,K] op(B)[K,N] + beta C (row-major; alpha 1). op(A) = A (lda >= K) or A^T (A is
// K x M, lda >= M); op(B) = B (K x N, ldb >= N) or B^T (B is N x K, ldb >= K).
static void cpu_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc) {
    int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    // split the rows of C (each block re-packs op(B), K x N) or its columns (each re-packs op(A), M x K)
    int rows = N < M, D = rows ? M : N;
    int want = threads * CPU_GEMM_BLOCKS_PER_THREAD;
    int width = (D + want - 1) / want;
    width = (width + 15) / 16 * 16;
    if (width < CPU_GEMM_MIN_BLOCK) width = CPU_GEMM_MIN_BLOCK;
    int blocks = (D + width - 1) / width;
    if (threads == 1 || blocks < 2) {
        cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    #pragma omp parallel for schedule(dynamic, 1)
    for (int b = 0; b < blocks; b++) {
        int d0 = b * width, d = D - d0 < width ? D - d0 : width;
        if (rows)   // rows d0.. of op(A) and of C
            cblas_sgemm(CblasRowMajor, ta, tb, d, N, K, 1.0f, ta == CblasNoTrans ? A + (size_t)d0 * lda : A + d0, lda,
                        B, ldb, beta, C + (size_t)d0 * ldc, ldc);
        else        // columns d0.. of op(B) and of C
            cblas_sgemm(CblasRowMajor, ta, tb, M, d, K, 1.0f, A, lda, tb == CblasNoTrans ? B + d0 : B + (size_t)d0 * ldb, ldb,
                        beta, C + d0, ldc);
    }
}
