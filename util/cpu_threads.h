// util/cpu_threads.h: how the CPU trainer spends its threads, so that on a machine shared
// with other processes it loses about the share they take and no more.
//
// Every parallel region ends at a barrier that waits for its slowest thread. When another
// process holds one thread's core, that thread runs and waits by turns of a few
// milliseconds, while its teammates spin at the barrier (libgomp's default is about 300000
// spins), so the scheduler sees them busy and does not move the waiting thread to their
// core. OpenBLAS's own threading cuts each GEMM into equal shares up front and spin-waits
// for the packed panels, so a GEMM takes as long as the share on the slowed core. Hence:
//   1. cpu_wait_policy, first thing in main, sets OMP_WAIT_POLICY=passive unless the user
//      set OMP_WAIT_POLICY or GOMP_SPINCOUNT: a waiting thread sleeps at once and gives its
//      core away. libgomp reads its environment once, when it is loaded before main, so the
//      program executes itself again (execv of /proc/self/exe, before MPI starts); if that
//      fails it runs on with libgomp's defaults. Measured with bench/cpu_contention.sh's
//      setup (2 cores, one busy, GPT-2 124M's shape and the demo size, both archs): passive
//      gave 1.01-1.10x the 1-thread rate, GOMP_SPINCOUNT=10000 gave 0.93-1.03x. On an idle
//      machine the two were within noise: waking a sleeping thread costs little next to a
//      step's kernels.
//   2. cpu_gemm cuts the output into blocks of whole rows or columns,
//      CPU_GEMM_BLOCKS_PER_THREAD per thread, which the threads take in turn. Each block is
//      one single-threaded OpenBLAS call, since OpenBLAS's OpenMP build does not nest in a
//      parallel region. A slowed thread takes fewer blocks. The split runs along the
//      dimension that re-packs the smaller operand, because each block packs its own copy
//      of the operand the blocks share.
//   3. The other loops (train_gpt.c's kernels) take chunks of cpu_chunk(n) in turn,
//      CPU_CHUNKS_PER_THREAD per thread, rather than one equal share each.
// The block boundaries depend on the shape and the thread count, never on timing, so runs
// are bitwise repeatable at a given thread count, as they were with OpenBLAS's threading.
// One thread makes one OpenBLAS call per GEMM, exactly as before.
#pragma once
#include <omp.h>
#include <stdlib.h>
#include <unistd.h>
#include <cblas.h>

// what a waiting OpenMP thread does: sleep at once (libgomp's default spins about 300000 times first)
#define CPU_WAIT_POLICY "passive"

static void cpu_wait_policy(char **argv) {
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

// The chunk of a loop over independent rows or elements, for schedule(dynamic, cpu_chunk(n)):
// about CPU_CHUNKS_PER_THREAD chunks per thread, taken in turn. Which thread computes an
// iteration never changes its result.
#define CPU_CHUNKS_PER_THREAD 16
static inline long cpu_chunk(long n) {
    long c = n / ((long)omp_get_max_threads() * CPU_CHUNKS_PER_THREAD);
    return c > 0 ? c : 1;
}

#define CPU_GEMM_BLOCKS_PER_THREAD 4
#define CPU_GEMM_MIN_BLOCK 64      // the fewest rows or columns in a block; blocks are multiples of 16 (cache lines)

// C[M,N] = op(A)[M,K] op(B)[K,N] + beta C, row-major, alpha 1.
// op(A) is A (lda >= K) or A^T with A K x M (lda >= M); op(B) is B, K x N (ldb >= N), or B^T
// with B N x K (ldb >= K).
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
