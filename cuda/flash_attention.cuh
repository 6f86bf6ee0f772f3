// cuda/flash_attention.cuh: fused causal self-attention with grouped-query heads (GQA),
// forward and backward, arranged as FlashAttention-2 arranges it (Dao, "FlashAttention-2:
// Faster Attention with Better Parallelism and Work Partitioning", 2023, sections 3.1-3.3), on
// the tensor cores through mma.sync.m16n8k16 (bf16 in, fp32 accumulate) and ldmatrix.
//
// STATUS: written and compiled (sm_90), not yet run on a GPU. Run on the CPU, instruction by
// instruction, by dev/cuda/flash_emulate.cpp (tests/test_flash_emulate.sh: the kernels' own
// code against the double-precision reference, with a shared-memory race detector); checked on
// a GPU by dev/cuda/flash_attention.cu against that reference and against cuda/attention.cuh.
// train_gpt.cu runs it with --attention flash (the default stays cublas until the GPU checks
// of docs/gpu.md pass).
//
// THE FUNCTION is the one cuda/attention.cuh computes, on the same layouts:
//   qkv  [B, T, (H + 2KV) * hd]   per token: H query heads, KV key heads, KV value heads
//                                 (after RoPE for llama); query head h uses kv head h / (H/KV)
//   out  [B, T, H * hd]           out[b,t,h] = sum_{t2 <= t} softmax_t2(scale q.k_t2) v_t2
//   dqkv [B, T, (H + 2KV) * hd]   the gradient of qkv (before RoPE backward for llama)
// with scale = 1/sqrt(hd). No permute: the kernels read q, k, v straight out of qkv (a row
// stride of (H+2KV)*hd elements) and write out / dqkv straight into the trainer's layouts.
// What the forward saves for the backward is out itself and
//   lse  [B, H, T] fp32           the log-sum-exp of each row's scaled scores,
//                                 lse = log sum_{t2<=t} exp(scale q.k_t2)
// instead of the [B, H, T, T] probabilities.
//
// WHY: attention.cuh materializes S (fp32) and P (bf16) of B*H*T*T elements and computes the
// whole T x T square: at B=16, T=1024, H=12, hd=64 about 2.4 GB of traffic per layer forward
// and 3.6 GB backward, and P (0.40 GB per layer) kept until the backward. These kernels read
// q, k, v once from device memory (re-reads of tiles hit L2), write out and lse, and skip the
// tiles above the diagonal: half the FLOPs, 20-30x less traffic (dev/cuda/NOTES.md).
//
// FORWARD (flash_fwd_kernel): one block of 4 warps per (batch and query head, query tile of
// BR rows); each warp owns 16 * MT query rows for the whole kernel (MT = 2 at hd 64: BR = 128;
// MT = 1 at hd 128: BR = 64, where O alone takes 64 registers per thread).
//   - Q in registers: the warp's Q rows are read once into mma A fragments (ldmatrix), so
//     shared memory serves only K and V; with MT = 2 every K or V fragment read from shared
//     memory feeds four mma instead of two, which halves the shared-memory traffic per FLOP
//     (at MT = 1 ldmatrix would need about as many shared-memory cycles as the tensor cores).
//   - K/V tiles of BC = 64 rows, double-buffered: tile j+1 is copied (cp.async) into the other
//     stage while tile j is computed; one __syncthreads per tile (it both publishes tile j and
//     frees the stage of tile j-1 for tile j+1). The Q tile is staged in stage 1 before key
//     tile 1 needs it, so the block uses 2 stages of shared memory and no more.
//   - per tile: S = Q K^T (fp32 accumulators), online softmax in fp32 in log2 units
//     (m_new = max(m, rowmax S); O and l rescaled by 2^(m - m_new); P = 2^(S - m_new);
//     l += rowsum P), O += P V. The accumulator fragment of S is exactly the A-operand fragment
//     of P V once rounded to bf16, so P never goes through shared memory.
//   - causal: key tiles after the block's last row are never loaded; a warp skips a loaded
//     tile whose every key follows its last row (warp-uniform, no barrier inside); only the
//     tiles crossing the diagonal or T are masked (-inf).
//   - at the end O / l is written as bf16 and lse = (m + log2 l) * ln 2 as fp32.
//   The query tile is the slowest grid index and runs from the last (longest) tile down, so
//   every head's heavy tiles start first and the short ones fill the tail.
//
// BACKWARD recomputes P = exp(scale q.k - lse) from the saved lse instead of reading it.
// With D = rowsum(dout * out) (= sum_t2 P dP, the softmax-backward term):
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - D),  dQ = scale dS K,  dK = scale dS^T Q.
// Three launches, every output element written exactly once by one thread, no atomics, so
// the result is deterministic (bitwise repeatable run to run), as FlashAttention-2's
// deterministic mode and FlashAttention-3 are with dQ split from dK/dV:
//   1. flash_bwd_dot_kernel: D [B, H, T] fp32, one warp per row.
//   2. flash_bwd_dkdv_kernel: one block per (key tile of 64 rows, batch, kv head), 4 warps of
//      16 key rows each. dK and dV (16 x hd per warp, fp32) stay in registers while the block
//      loops over the query tiles at or below the diagonal of EVERY query head of its group,
//      in a fixed order (head by head, tile by tile): the GQA sum over the group's heads
//      happens in registers. K and V are A operands for the whole loop (in registers at hd 64,
//      read from shared memory at hd 128 where dK and dV take 128 registers); Q, dO, lse and D
//      tiles are double-buffered as K/V are in the forward, one __syncthreads per tile. It
//      computes the transposed products (S^T = K Q^T, dP^T = V dO^T) so that P^T and dS^T come
//      out as accumulator fragments that are directly the A operands of dV += P^T dO and
//      dK += dS^T Q.
//   3. flash_bwd_dq_kernel: one block per (query tile of 64 rows, batch, query head), as the
//      forward: Q and dO as A operands (registers at hd 64), K/V tiles double-buffered,
//      S and dP recomputed per key tile, dQ += dS K accumulated in registers.
//   Splitting dQ from dK/dV (rather than flash-attention-2's atomic adds of dQ in fp32) costs
//   recomputing Q K^T and dO V^T a second time: 7 tile products instead of 5, i.e. 1.4x the
//   backward's tensor FLOPs, for determinism and no fp32 dQ scratch.
//
// Precision: inputs bf16, every product accumulated in fp32, softmax statistics fp32; P and
// dS are rounded to bf16 before their products (as flash-attention does). Results agree with
// attention.cuh (which also rounds P and dS to bf16) within bf16 tolerance, not bitwise.
//
// Requirements: hd 64 or 128, H % KV == 0, 16-byte aligned bf16 pointers (lse and D: 4-byte),
// any T up to FLASH_MAX_T (partial tiles are masked), bf16 storage (floatX must be bf16: the
// fp16 build would need the f16 mma variant; not provided).
//
// Resources (nvcc 13.0 -Xptxas -v, sm_90; dev/cuda/NOTES.md has the numbers): no local memory.
//
// The kernels reach the hardware only through the small wrappers below (cp.async, ldmatrix,
// mma, the barrier, the shuffle, the thread indices, the shared-memory base). With
// FLASH_EMULATE defined, this file expects dev/cuda/flash_emulate.h to have defined CPU
// stand-ins for them, and the same kernel code runs on the CPU; the host launchers are then
// left out.
#pragma once
#ifndef FLASH_EMULATE
#include "cuda/common.cuh"
#endif
#include "cuda/sizes.h"   // flash_lse_elems, FLASH_MAX_T

#if defined(FLOATX_FP16) && FLOATX_FP16
#error "cuda/flash_attention.cuh: bf16 only (floatX is fp16 in this build)"
#endif

#define FA_WARPS 4
#define FA_THREADS (FA_WARPS * 32)
#define FA_BC 64            // key rows per tile (forward, dQ) and per dK/dV block (16 per warp)
#define FA_DOT_THREADS 256  // flash_bwd_dot_kernel: 8 rows per block, a warp each
#define FA_LOG2E 1.4426950408889634f
#define FA_LN2 0.6931471805599453f

// ----------------------------------------------------------------------------
// the hardware: PTX wrappers (cp.async, ldmatrix, mma.sync), barrier, shuffle

#ifndef FLASH_EMULATE
#define FA_KERNEL(threads, min_blocks) __global__ void __launch_bounds__(threads, min_blocks)
extern __shared__ uint4 fa_smem[];  // dynamic shared memory of every kernel here (16-byte aligned)

// 16 bytes global -> shared, asynchronously (L2 only); src_bytes = 0 writes 16 zero bytes
__device__ __forceinline__ void fa_cp_async16(void *smem, const void *gmem, int src_bytes) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
// 4 bytes (lse, D: rows of them are only float-aligned); src_bytes = 0 writes a zero
__device__ __forceinline__ void fa_cp_async4(void *smem, const void *gmem, int src_bytes) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void fa_cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
// wait until at most N of this thread's committed groups are still in flight
template <int N> __device__ __forceinline__ void fa_cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// four 8x8 b16 matrices; lane i gives the address of row (i % 8) of matrix i / 8
__device__ __forceinline__ void fa_ldsm_x4(uint32_t r[4], const floatX *smem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}
__device__ __forceinline__ void fa_ldsm_x4_trans(uint32_t r[4], const floatX *smem) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}

// c[16x8] += a[16x16] b[16x8], bf16 operands, fp32 accumulators. Fragments (PTX ISA,
// "mma.m16n8k16"), with g = lane / 4, c = lane % 4:
//   a: a[0] = A[g][2c..2c+1], a[1] = A[g+8][2c..], a[2] = A[g][2c+8..], a[3] = A[g+8][2c+8..]
//   b: b0 = B[2c..2c+1][g], b1 = B[2c+8..2c+9][g]
//   c: c[0..1] = C[g][2c..2c+1], c[2..3] = C[g+8][2c..2c+1]
__device__ __forceinline__ void fa_mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void fa_sync(void) { __syncthreads(); }
// a plain load of an fp32 from shared memory (a wrapper so that the emulation can check it)
__device__ __forceinline__ float fa_lds(const float *p) { return *p; }
__device__ __forceinline__ float fa_shfl_xor(float v, int lane_mask) { return __shfl_xor_sync(0xffffffff, v, lane_mask); }
#endif  // FLASH_EMULATE

__device__ __forceinline__ uint32_t fa_pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}
__device__ __forceinline__ int fa_min(int a, int b) { return a < b ? a : b; }

// ----------------------------------------------------------------------------
// tiles in shared memory: R rows of HD bf16, row stride HD + 8 (the padding puts the 8 row
// addresses of an ldmatrix in different banks: consecutive rows start 16 bytes apart modulo 128)

template <int HD> struct FaTile { static constexpr int LDS = HD + 8; };

// rows r0 .. r0+R-1 of a [T, ld] row-major global matrix (row t at g + t*ld), zero past T;
// every thread of the block issues its share
template <int R, int HD>
__device__ __forceinline__ void fa_load_tile(floatX *s, const floatX *g, size_t ld, int r0, int T) {
    constexpr int CHUNKS = HD / 8;  // 16-byte chunks per row
    for (int i = threadIdx.x; i < R * CHUNKS; i += FA_THREADS) {
        const int r = i / CHUNKS, c = (i % CHUNKS) * 8, t = r0 + r;
        fa_cp_async16(s + r * FaTile<HD>::LDS + c, g + (size_t)(t < T ? t : 0) * ld + c, t < T ? 16 : 0);
    }
}
// the same rows of two matrices a fixed distance apart in global memory (K and V of one kv
// head in qkv) into s and s + R * LDS: one address computation per chunk serves both, which
// spares the registers of a second set of addresses kept live across the tile loop
template <int R, int HD>
__device__ __forceinline__ void fa_load_tile_pair(floatX *s, const floatX *g, ptrdiff_t dist, size_t ld, int r0, int T) {
    constexpr int CHUNKS = HD / 8;
    for (int i = threadIdx.x; i < R * CHUNKS; i += FA_THREADS) {
        const int r = i / CHUNKS, c = (i % CHUNKS) * 8, t = r0 + r;
        const floatX *src = g + (size_t)(t < T ? t : 0) * ld + c;
        floatX *dst = s + r * FaTile<HD>::LDS + c;
        fa_cp_async16(dst, src, t < T ? 16 : 0);
        fa_cp_async16(dst + R * FaTile<HD>::LDS, src + dist, t < T ? 16 : 0);
    }
}
// elements r0 .. r0+R-1 of an fp32 row (lse, D), zero past T
template <int R>
__device__ __forceinline__ void fa_load_vec(float *s, const float *g, int r0, int T) {
    for (int i = threadIdx.x; i < R; i += FA_THREADS) {
        const int t = r0 + i;
        fa_cp_async4(s + i, g + (t < T ? t : 0), t < T ? 4 : 0);
    }
}

// A operand (16 x 16, row-major in shared memory) at rows r0.., columns k0..
template <int HD> __device__ __forceinline__ void fa_load_a(uint32_t a[4], const floatX *s, int r0, int k0, int lane) {
    fa_ldsm_x4(a, s + (r0 + (lane % 16)) * FaTile<HD>::LDS + k0 + (lane / 16) * 8);
}
// B operands of two n8 tiles where B = X^T and X (rows = n, columns = k) is row-major in
// shared memory: b[0], b[1] for rows n0..n0+7, b[2], b[3] for rows n0+8..n0+15 (Q K^T's K)
template <int HD> __device__ __forceinline__ void fa_load_b_nt(uint32_t b[4], const floatX *s, int n0, int k0, int lane) {
    fa_ldsm_x4(b, s + (n0 + (lane % 8) + (lane / 16) * 8) * FaTile<HD>::LDS + k0 + ((lane / 8) % 2) * 8);
}
// B operands of two n8 tiles where B = X (rows = k, columns = n) is row-major in shared
// memory (P V's V): b[0], b[1] for columns n0..n0+7, b[2], b[3] for columns n0+8..n0+15
template <int HD> __device__ __forceinline__ void fa_load_b_nn(uint32_t b[4], const floatX *s, int k0, int n0, int lane) {
    fa_ldsm_x4_trans(b, s + (k0 + (lane % 8) + ((lane / 8) % 2) * 8) * FaTile<HD>::LDS + n0 + (lane / 16) * 8);
}

// The A fragments of a warp's MT row blocks of 16 rows (rows r0 + 16 mt ..) over all HD
// columns, for a whole loop: a[k][mt] holds columns 16 k .. 16 k + 15
template <int HD, int MT>
__device__ __forceinline__ void fa_load_a_frags(uint32_t a[HD / 16][MT][4], const floatX *s, int r0, int lane) {
#pragma unroll
    for (int k = 0; k < HD / 16; k++)
#pragma unroll
        for (int mt = 0; mt < MT; mt++) fa_load_a<HD>(a[k][mt], s, r0 + 16 * mt, 16 * k, lane);
}

// the backward's two A operands a warp keeps in registers for its whole loop (K and V in dK/dV,
// Q and dO in dQ: 16 rows from r0 each), when REGS; at hd 128 they are re-read per product instead
#define FA_FRAGS(REGS, HD) ((REGS) ? (HD) / 16 : 1)
template <int HD, bool REGS>
__device__ __forceinline__ void fa_keep_a_frags(uint32_t a[FA_FRAGS(REGS, HD)][1][4], uint32_t b[FA_FRAGS(REGS, HD)][1][4],
                                                const floatX *sa, const floatX *sb, int r0, int lane) {
    if (!REGS) return;  // (array parameters are pointers: the shapes agree for the compiler either way)
    fa_load_a_frags<HD, 1>(a, sa, r0, lane);
    fa_load_a_frags<HD, 1>(b, sb, r0, lane);
}

template <int MT, int N8> __device__ __forceinline__ void fa_zero(float x[MT][N8][4]) {
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int i = 0; i < N8; i++) x[mt][i][0] = x[mt][i][1] = x[mt][i][2] = x[mt][i][3] = 0.0f;
}

// One 16-column slice k0.. of acc[MT x 16 rows][N] += A X^T, a[mt] the slice's A fragments, X
// rows x_r0 .. x_r0+N-1 of sX (row-major, HD columns). Each B fragment read from shared
// memory feeds 2 * MT mma.
template <int HD, int N, int MT>
__device__ __forceinline__ void fa_mma_abt_slice(float acc[MT][N / 8][4], const uint32_t a[MT][4], const floatX *sX,
                                                 int x_r0, int k0, int lane) {
#pragma unroll
    for (int n = 0; n < N / 16; n++) {
        uint32_t b[4];
        fa_load_b_nt<HD>(b, sX, x_r0 + n * 16, k0, lane);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            fa_mma(acc[mt][2 * n], a[mt], b[0], b[1]);
            fa_mma(acc[mt][2 * n + 1], a[mt], b[2], b[3]);
        }
    }
}
// acc = A X^T with A in registers (fa_load_a_frags): S = Q K^T, dP = dO V^T, their transposes
template <int HD, int N, int MT>
__device__ __forceinline__ void fa_mma_abt(float acc[MT][N / 8][4], const uint32_t a[HD / 16][MT][4], const floatX *sX,
                                           int x_r0, int lane) {
    fa_zero<MT, N / 8>(acc);
#pragma unroll
    for (int k = 0; k < HD / 16; k++) fa_mma_abt_slice<HD, N, MT>(acc, a[k], sX, x_r0, 16 * k, lane);
}
// the same with A (16 rows from a_r0 of sA) read slice by slice from shared memory: fewer
// registers, twice the shared-memory reads
template <int HD, int N>
__device__ __forceinline__ void fa_mma_abt_smem(float acc[1][N / 8][4], const floatX *sA, int a_r0, const floatX *sX,
                                                int x_r0, int lane) {
    fa_zero<1, N / 8>(acc);
#pragma unroll
    for (int k = 0; k < HD / 16; k++) {
        uint32_t a[1][4];
        fa_load_a<HD>(a[0], sA, a_r0, 16 * k, lane);
        fa_mma_abt_slice<HD, N, 1>(acc, a, sX, x_r0, 16 * k, lane);
    }
}

// acc[MT x 16 rows][HD] += P X, P [MT x 16 rows][K] given as fp32 accumulator fragments
// (rounded to bf16 here), X rows x_r0 .. x_r0+K-1 of sX: O += P V, dV += P^T dO,
// dQ += dS K, dK += dS^T Q
template <int HD, int K, int MT>
__device__ __forceinline__ void fa_mma_pv(float acc[MT][HD / 8][4], const float p[MT][K / 8][4], const floatX *sX,
                                          int x_r0, int lane) {
#pragma unroll
    for (int k = 0; k < K / 16; k++) {
        // the accumulator layout of two n8 tiles is the A layout of one k16 slice
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            a[mt][0] = fa_pack_bf16(p[mt][2 * k][0], p[mt][2 * k][1]);
            a[mt][1] = fa_pack_bf16(p[mt][2 * k][2], p[mt][2 * k][3]);
            a[mt][2] = fa_pack_bf16(p[mt][2 * k + 1][0], p[mt][2 * k + 1][1]);
            a[mt][3] = fa_pack_bf16(p[mt][2 * k + 1][2], p[mt][2 * k + 1][3]);
        }
#pragma unroll
        for (int n = 0; n < HD / 16; n++) {
            uint32_t b[4];
            fa_load_b_nn<HD>(b, sX, x_r0 + k * 16, n * 16, lane);
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                fa_mma(acc[mt][2 * n], a[mt], b[0], b[1]);
                fa_mma(acc[mt][2 * n + 1], a[mt], b[2], b[3]);
            }
        }
    }
}

// a warp's MT x 16 x HD accumulator (rows r0 + 16 mt + lane/4 and + 8) times `mul`, as bf16
// into rows t < T of a row-major global matrix with row stride ld
template <int HD, int MT>
__device__ __forceinline__ void fa_store_rows(floatX *g, size_t ld, const float acc[MT][HD / 8][4], int r0, int T,
                                              float mul, int lane) {
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int t = r0 + 16 * mt + lane / 4 + half * 8;
            if (t >= T) continue;
            floatX *row = g + (size_t)t * ld + (lane % 4) * 2;
#pragma unroll
            for (int n = 0; n < HD / 8; n++)
                *(uint32_t *)(row + n * 8) = fa_pack_bf16(acc[mt][n][2 * half] * mul, acc[mt][n][2 * half + 1] * mul);
        }
}

// the column of element e (0..3) of accumulator tile n (8 columns) a thread holds, within the
// 16-row block's N columns (its row is lane/4 for e < 2, lane/4 + 8 for e >= 2)
__device__ __forceinline__ int fa_frag_col(int n, int e, int lane) { return n * 8 + (lane % 4) * 2 + (e & 1); }
// Causal mask of a query row against the key tile starting at k0: the thread's element in
// column n * 8 + (e & 1) + (lane % 4) * 2 of the tile is visible iff n * 8 + (e & 1) <= this
// limit (keys <= row and < T). One compare per element with a per-row limit instead of two
// with a per-element column (fewer registers).
__device__ __forceinline__ int fa_mask_limit(int row, int k0, int T, int lane) {
    return fa_min(row, T - 1) - k0 - (lane % 4) * 2;
}

// ----------------------------------------------------------------------------
// forward

// query rows per warp in units of 16: 2 at hd 64 (fewer shared-memory reads per mma), 1 at
// hd 128 (registers)
#define FA_FWD_MT(HD) ((HD) == 64 ? 2 : 1)

// grid (B*H, ceil(T/BR)), FA_THREADS threads, BR = 16 * MT * FA_WARPS query rows; dynamic
// shared memory: 2 stages of a K and a V tile (2 * 2 * FA_BC * LDS bf16)
template <int HD, int MT>
FA_KERNEL(FA_THREADS, 1) flash_fwd_kernel(floatX *out, float *lse, const floatX *qkv, int T, int H, int KV, float scale_log2) {
    constexpr int BR = 16 * MT * FA_WARPS, BC = FA_BC, LDS = FaTile<HD>::LDS, STAGE = 2 * BC * LDS;
    static_assert(BR <= 2 * BC, "the Q tile is staged where K/V stage 1 goes");
    floatX *smem = (floatX *)fa_smem;
    floatX *sQ = smem + STAGE;  // stage 1 is free until key tile 1 is loaded
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int qt = gridDim.y - 1 - blockIdx.y;  // the longest rows first (y is the slowest grid index)
    const int b = blockIdx.x / H, h = blockIdx.x % H, g = h / (H / KV);
    const size_t ld = (size_t)(H + 2 * KV) * HD;
    const floatX *base = qkv + (size_t)b * T * ld;
    const floatX *kg = base + (size_t)(H + g) * HD, *vg = base + (size_t)(H + KV + g) * HD;
    const int q0 = qt * BR, row0 = q0 + warp * 16 * MT, row_last = row0 + 16 * MT - 1;  // the warp's rows
    const int nk = (fa_min(q0 + BR, T) - 1) / BC + 1;  // key tiles holding a key <= the block's last row

    fa_load_tile<BR, HD>(sQ, base + (size_t)h * HD, ld, q0, T);
    fa_cp_async_commit();
    fa_load_tile_pair<BC, HD>(smem, kg, vg - kg, ld, 0, T);
    fa_cp_async_commit();
    fa_cp_async_wait<1>();  // this thread's part of Q has landed (key tile 0 may be in flight)
    fa_sync();              // and everyone's
    uint32_t qf[HD / 16][MT][4];
    fa_load_a_frags<HD, MT>(qf, sQ, warp * 16 * MT, lane);

    float o[MT][HD / 8][4];
    fa_zero<MT, HD / 8>(o);
    float m[MT][2], l[MT][2];  // per row the thread holds: running max (log2 units), this thread's partial sum
#pragma unroll
    for (int mt = 0; mt < MT; mt++) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;
    for (int j = 0; j < nk; j++) {
        fa_cp_async_wait<0>();  // this thread's part of key tile j has landed
        fa_sync();              // everyone's; and every warp is done with tile j-1 (and with sQ)
        if (j + 1 < nk) {       // tile j+1 into the other stage, in flight while tile j computes
            fa_load_tile_pair<BC, HD>(smem + ((j + 1) & 1) * STAGE, kg, vg - kg, ld, (j + 1) * BC, T);
            fa_cp_async_commit();
        }
        const int k0 = j * BC;
        if (k0 > row_last || row0 >= T) continue;  // warp-uniform: no key of the tile is visible to the warp's rows
        const floatX *sK = smem + (j & 1) * STAGE, *sV = sK + BC * LDS;

        float s[MT][BC / 8][4];
        fa_mma_abt<HD, BC, MT>(s, qf, sK, 0, lane);

        // scale into log2 units, mask after the diagonal and past T (only the tiles crossing
        // them), new row maxima
        const bool masked = k0 + BC - 1 > row0 || k0 + BC > T;
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            float mx[2] = {-INFINITY, -INFINITY};
            const int lim[2] = {fa_mask_limit(row0 + 16 * mt + lane / 4, k0, T, lane),
                                fa_mask_limit(row0 + 16 * mt + lane / 4 + 8, k0, T, lane)};
#pragma unroll
            for (int n = 0; n < BC / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float v = (masked && n * 8 + (e & 1) > lim[e / 2]) ? -INFINITY : s[mt][n][e] * scale_log2;
                    s[mt][n][e] = v;
                    mx[e / 2] = fmaxf(mx[e / 2], v);
                }
#pragma unroll
            for (int r = 0; r < 2; r++) {
                // the 4 threads of a quad hold one row's columns
                mx[r] = fmaxf(mx[r], fa_shfl_xor(mx[r], 1));
                mx[r] = fmaxf(mx[r], fa_shfl_xor(mx[r], 2));
                const float m_new = fmaxf(m[mt][r], mx[r]);
                // a row with every key masked so far keeps m = -inf; use 0 so that exp2 gives 0, not NaN
                const float m_use = m_new == -INFINITY ? 0.0f : m_new;
                const float alpha = exp2f(m[mt][r] - m_use);
                m[mt][r] = m_new;
                l[mt][r] *= alpha;
#pragma unroll
                for (int n = 0; n < HD / 8; n++) {
                    o[mt][n][2 * r] *= alpha;
                    o[mt][n][2 * r + 1] *= alpha;
                }
#pragma unroll
                for (int n = 0; n < BC / 8; n++) {
                    s[mt][n][2 * r] = exp2f(s[mt][n][2 * r] - m_use);
                    s[mt][n][2 * r + 1] = exp2f(s[mt][n][2 * r + 1] - m_use);
                    l[mt][r] += s[mt][n][2 * r] + s[mt][n][2 * r + 1];
                }
            }
        }
        fa_mma_pv<HD, BC, MT>(o, s, sV, 0, lane);
    }

    const size_t ldo = (size_t)H * HD;
    float *L = lse + ((size_t)b * H + h) * T;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            l[mt][r] += fa_shfl_xor(l[mt][r], 1);
            l[mt][r] += fa_shfl_xor(l[mt][r], 2);
            const float inv = 1.0f / l[mt][r];
#pragma unroll
            for (int n = 0; n < HD / 8; n++) {  // each row its own 1/l: scale in place, then store
                o[mt][n][2 * r] *= inv;
                o[mt][n][2 * r + 1] *= inv;
            }
            const int t = row0 + 16 * mt + lane / 4 + 8 * r;
            if (lane % 4 == 0 && t < T) L[t] = (m[mt][r] + log2f(l[mt][r])) * FA_LN2;
        }
    fa_store_rows<HD, MT>(out + (size_t)b * T * ldo + (size_t)h * HD, ldo, o, row0, T, 1.0f, lane);
}

// ----------------------------------------------------------------------------
// backward

// D[b,h,t] = sum_d dout[b,t,h,d] * out[b,t,h,d] (fp32), one warp per (b, t, h)
FA_KERNEL(FA_DOT_THREADS, 1) flash_bwd_dot_kernel(float *D, const floatX *dout, const floatX *out, int B, int T, int H, int hd) {
    const int lane = threadIdx.x % 32;
    const size_t r = (size_t)blockIdx.x * (FA_DOT_THREADS / 32) + threadIdx.x / 32;  // (b*T + t)*H + h
    if (r >= (size_t)B * T * H) return;  // warp-uniform
    const floatX *a = dout + r * hd, *o = out + r * hd;
    float s = 0.0f;
    for (int d = lane * 2; d < hd; d += 64) {
        const __nv_bfloat162 x = *(const __nv_bfloat162 *)(a + d), y = *(const __nv_bfloat162 *)(o + d);
        s += __bfloat162float(x.x) * __bfloat162float(y.x) + __bfloat162float(x.y) * __bfloat162float(y.y);
    }
#pragma unroll
    for (int mask = 16; mask > 0; mask /= 2) s += fa_shfl_xor(s, mask);
    if (lane == 0) {
        const int h = (int)(r % H);
        const size_t bt = r / H;
        const int t = (int)(bt % T), b = (int)(bt / T);
        D[((size_t)b * H + h) * T + t] = s;
    }
}

// query rows per step of the dK/dV loop: fewer at hd 128 (registers)
#define FA_BWD_BR(HD) ((HD) == 128 ? 32 : 64)

// dK, dV. grid (B*KV, ceil(T/FA_BC)), FA_THREADS threads; the block's FA_BC key rows, 16 per
// warp; query tiles of BR rows. KV_REGS: K and V as A fragments in registers (else re-read
// from shared memory per product). Dynamic shared memory: K, V [FA_BC rows], then 2 stages of
// Q, dO [BR rows], then 2 stages of lse, D [BR floats].
template <int HD, int BR, bool KV_REGS>
FA_KERNEL(FA_THREADS, 1) flash_bwd_dkdv_kernel(floatX *dqkv, const floatX *qkv, const floatX *dout, const float *lse,
                                               const float *D, int T, int H, int KV, float scale_log2, float scale) {
    constexpr int BC = FA_BC, LDS = FaTile<HD>::LDS, STAGE = 2 * BR * LDS;
    static_assert(BC == 16 * FA_WARPS && BC % BR == 0, "16 key rows per warp; query tiles dividing the key tile");
    floatX *sK = (floatX *)fa_smem, *sV = sK + BC * LDS, *stages = sV + BC * LDS;
    float *vecs = (float *)(stages + 2 * STAGE);  // stage s: lse at vecs + 2 BR s, D after it
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int kt = blockIdx.y;  // key tile 0 (the most query tiles) first
    const int b = blockIdx.x / KV, g = blockIdx.x % KV, rep = H / KV;
    const size_t ld = (size_t)(H + 2 * KV) * HD, ldo = (size_t)H * HD;
    const floatX *base = qkv + (size_t)b * T * ld, *dbase = dout + (size_t)b * T * ldo;
    const int k0 = kt * BC, key0 = k0 + warp * 16;  // the warp's first key row
    const int key_a = key0 + lane / 4, key_b = key_a + 8;
    // the loop: tile i is query tile qt_first + i % per_head of the group's query head i / per_head
    const int qt_first = k0 / BR, per_head = (T + BR - 1) / BR - qt_first, ntiles = rep * per_head;

    // Q, dO, lse, D of loop tile i into stage s
    auto load_q_tile = [&](int i, int s) {
        const int h = g * rep + i / per_head, q0 = (qt_first + i % per_head) * BR;
        floatX *sQ = stages + s * STAGE;
        fa_load_tile<BR, HD>(sQ, base + (size_t)h * HD, ld, q0, T);
        fa_load_tile<BR, HD>(sQ + BR * LDS, dbase + (size_t)h * HD, ldo, q0, T);
        fa_load_vec<BR>(vecs + 2 * BR * s, lse + ((size_t)b * H + h) * T, q0, T);
        fa_load_vec<BR>(vecs + 2 * BR * s + BR, D + ((size_t)b * H + h) * T, q0, T);
    };
    fa_load_tile<BC, HD>(sK, base + (size_t)(H + g) * HD, ld, k0, T);
    fa_load_tile<BC, HD>(sV, base + (size_t)(H + KV + g) * HD, ld, k0, T);
    fa_cp_async_commit();
    load_q_tile(0, 0);
    fa_cp_async_commit();
    fa_cp_async_wait<1>();  // K and V have landed
    fa_sync();
    uint32_t kf[FA_FRAGS(KV_REGS, HD)][1][4], vf[FA_FRAGS(KV_REGS, HD)][1][4];
    fa_keep_a_frags<HD, KV_REGS>(kf, vf, sK, sV, warp * 16, lane);

    float dk[1][HD / 8][4], dv[1][HD / 8][4];
    fa_zero<1, HD / 8>(dk);
    fa_zero<1, HD / 8>(dv);
    for (int i = 0; i < ntiles; i++) {
        fa_cp_async_wait<0>();  // this thread's part of tile i
        fa_sync();              // everyone's; every warp is done with tile i-1
        if (i + 1 < ntiles) {
            load_q_tile(i + 1, (i + 1) & 1);
            fa_cp_async_commit();
        }
        const int q0 = (qt_first + i % per_head) * BR;
        if (key0 > q0 + BR - 1 || key0 >= T) continue;  // warp-uniform: every key of the warp follows every query
        const floatX *sQ = stages + (i & 1) * STAGE, *sdO = sQ + BR * LDS;
        const float *sL = vecs + 2 * BR * (i & 1), *sD = sL + BR;

        // P^T = exp(scale K Q^T - lse): the warp's 16 keys x BR queries; masks only in the
        // tiles that cross the diagonal or T
        const bool masked = key0 + 15 > q0 || q0 + BR > T;
        // visible: key <= query < T, i.e. lo[row] <= n * 8 + (e & 1) <= hi (fa_mask_limit's form)
        const int lo[2] = {key_a - q0 - (lane % 4) * 2, key_b - q0 - (lane % 4) * 2}, hi = T - 1 - q0 - (lane % 4) * 2;
        float p[1][BR / 8][4];
        if (KV_REGS) fa_mma_abt<HD, BR, 1>(p, kf, sQ, 0, lane);
        else fa_mma_abt_smem<HD, BR>(p, sK, warp * 16, sQ, 0, lane);
#pragma unroll
        for (int n = 0; n < BR / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int c = n * 8 + (e & 1);
                p[0][n][e] = (masked && (c < lo[e / 2] || c > hi)) ? 0.0f
                                                                   : exp2f(p[0][n][e] * scale_log2 - fa_lds(sL + fa_frag_col(n, e, lane)) * FA_LOG2E);
            }
        fa_mma_pv<HD, BR, 1>(dv, p, sdO, 0, lane);  // dV += P^T dO

        // dS^T = P^T * (dP^T - D), dP^T = V dO^T
        float ds[1][BR / 8][4];
        if (KV_REGS) fa_mma_abt<HD, BR, 1>(ds, vf, sdO, 0, lane);
        else fa_mma_abt_smem<HD, BR>(ds, sV, warp * 16, sdO, 0, lane);
#pragma unroll
        for (int n = 0; n < BR / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) ds[0][n][e] = p[0][n][e] * (ds[0][n][e] - fa_lds(sD + fa_frag_col(n, e, lane)));
        fa_mma_pv<HD, BR, 1>(dk, ds, sQ, 0, lane);  // dK += dS^T Q (times scale at the end)
    }
    floatX *dbase_qkv = dqkv + (size_t)b * T * ld;
    fa_store_rows<HD, 1>(dbase_qkv + (size_t)(H + g) * HD, ld, dk, key0, T, scale, lane);
    fa_store_rows<HD, 1>(dbase_qkv + (size_t)(H + KV + g) * HD, ld, dv, key0, T, 1.0f, lane);
}

// dQ. grid (B*H, ceil(T/BR)), FA_THREADS threads, BR = 16 * FA_WARPS query rows, key tiles of
// FA_BC rows. QO_REGS: Q and dO as A fragments in registers. Dynamic shared memory: Q, dO
// [BR rows], then 2 stages of K, V [FA_BC rows].
template <int HD, bool QO_REGS>
FA_KERNEL(FA_THREADS, 1) flash_bwd_dq_kernel(floatX *dqkv, const floatX *qkv, const floatX *dout, const float *lse,
                                             const float *D, int T, int H, int KV, float scale_log2, float scale) {
    constexpr int BR = 16 * FA_WARPS, BC = FA_BC, LDS = FaTile<HD>::LDS, STAGE = 2 * BC * LDS;
    floatX *sQ = (floatX *)fa_smem, *sdO = sQ + BR * LDS, *stages = sdO + BR * LDS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int qt = gridDim.y - 1 - blockIdx.y;
    const int b = blockIdx.x / H, h = blockIdx.x % H, g = h / (H / KV);
    const size_t ld = (size_t)(H + 2 * KV) * HD, ldo = (size_t)H * HD;
    const floatX *base = qkv + (size_t)b * T * ld;
    const floatX *kg = base + (size_t)(H + g) * HD, *vg = base + (size_t)(H + KV + g) * HD;
    const int q0 = qt * BR, row0 = q0 + warp * 16;
    const int row_a = row0 + lane / 4, row_b = row_a + 8;
    const int nk = (fa_min(q0 + BR, T) - 1) / BC + 1;

    fa_load_tile<BR, HD>(sQ, base + (size_t)h * HD, ld, q0, T);
    fa_load_tile<BR, HD>(sdO, dout + (size_t)b * T * ldo + (size_t)h * HD, ldo, q0, T);
    fa_cp_async_commit();
    fa_load_tile_pair<BC, HD>(stages, kg, vg - kg, ld, 0, T);
    fa_cp_async_commit();
    const float *L = lse + ((size_t)b * H + h) * T, *Dh = D + ((size_t)b * H + h) * T;
    const float lse2[2] = {row_a < T ? L[row_a] * FA_LOG2E : 0.0f, row_b < T ? L[row_b] * FA_LOG2E : 0.0f};
    const float Dr[2] = {row_a < T ? Dh[row_a] : 0.0f, row_b < T ? Dh[row_b] : 0.0f};
    fa_cp_async_wait<1>();  // Q and dO have landed
    fa_sync();
    uint32_t qf[FA_FRAGS(QO_REGS, HD)][1][4], dof[FA_FRAGS(QO_REGS, HD)][1][4];
    fa_keep_a_frags<HD, QO_REGS>(qf, dof, sQ, sdO, warp * 16, lane);

    float dq[1][HD / 8][4];
    fa_zero<1, HD / 8>(dq);
    for (int j = 0; j < nk; j++) {
        fa_cp_async_wait<0>();
        fa_sync();
        if (j + 1 < nk) {
            fa_load_tile_pair<BC, HD>(stages + ((j + 1) & 1) * STAGE, kg, vg - kg, ld, (j + 1) * BC, T);
            fa_cp_async_commit();
        }
        const int k0 = j * BC;
        if (k0 > row0 + 15 || row0 >= T) continue;  // warp-uniform
        const floatX *sK = stages + (j & 1) * STAGE, *sV = sK + BC * LDS;

        float p[1][BC / 8][4], ds[1][BC / 8][4];
        if (QO_REGS) {
            fa_mma_abt<HD, BC, 1>(p, qf, sK, 0, lane);    // S = Q K^T
            fa_mma_abt<HD, BC, 1>(ds, dof, sV, 0, lane);  // dP = dO V^T
        } else {
            fa_mma_abt_smem<HD, BC>(p, sQ, warp * 16, sK, 0, lane);
            fa_mma_abt_smem<HD, BC>(ds, sdO, warp * 16, sV, 0, lane);
        }
        const bool masked = k0 + BC - 1 > row0 || k0 + BC > T;  // the tiles crossing the diagonal or T
        const int lim[2] = {fa_mask_limit(row_a, k0, T, lane), fa_mask_limit(row_b, k0, T, lane)};
#pragma unroll
        for (int n = 0; n < BC / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float pv = (masked && n * 8 + (e & 1) > lim[e / 2]) ? 0.0f : exp2f(p[0][n][e] * scale_log2 - lse2[e / 2]);
                ds[0][n][e] = pv * (ds[0][n][e] - Dr[e / 2]);
            }
        fa_mma_pv<HD, BC, 1>(dq, ds, sK, 0, lane);  // dQ += dS K (times scale at the end)
    }
    fa_store_rows<HD, 1>(dqkv + (size_t)b * T * ld + (size_t)h * HD, ld, dq, row0, T, scale, lane);
}

// the launch geometry: grid x is B*H (forward, dQ) or B*KV (dK/dV); grid y the tiles
template <int HD> static int flash_fwd_tiles(int T) {
    constexpr int BR = 16 * FA_FWD_MT(HD) * FA_WARPS;
    return (T + BR - 1) / BR;
}
static int flash_bwd_tiles(int T) { return (T + FA_BC - 1) / FA_BC; }  // dK/dV's key tiles, dQ's query tiles (64 rows)
static_assert(16 * FA_WARPS == FA_BC, "the dQ kernel's query tile is as tall as a key tile");

// the dynamic shared memory of each kernel, in bytes
template <int HD> static size_t flash_fwd_smem(void) { return (size_t)2 * 2 * FA_BC * FaTile<HD>::LDS * sizeof(floatX); }
template <int HD> static size_t flash_dkdv_smem(void) {
    constexpr int BR = FA_BWD_BR(HD);
    return (size_t)(2 * FA_BC + 2 * 2 * BR) * FaTile<HD>::LDS * sizeof(floatX) + (size_t)2 * 2 * BR * sizeof(float);
}
template <int HD> static size_t flash_dq_smem(void) { return (size_t)(2 * FA_BC + 2 * 2 * FA_BC) * FaTile<HD>::LDS * sizeof(floatX); }

// ----------------------------------------------------------------------------
// host launchers

#ifndef FLASH_EMULATE
// a, b: the bf16 tensors the call reads or writes 16 bytes at a time (cp.async, the row stores).
// lse and D need only float alignment (one element at a time): the trainer's layer l's lse starts
// l * B*H*T floats into its buffer.
static void flash_check(const void *a, const void *b, int B, int T, int H, int KV, int hd) {
    CUDA_REQUIRE(hd == 64 || hd == 128);
    CUDA_REQUIRE(KV > 0 && H % KV == 0);
    CUDA_REQUIRE(T > 0 && T <= FLASH_MAX_T);
    CUDA_REQUIRE(B > 0);
    CUDA_REQUIRE(is_aligned16(a) && is_aligned16(b));
}

// dynamic shared memory above 48 KB needs the kernel's limit raised once
template <class K> static void flash_smem_limit(K kernel, size_t bytes) {
    if (bytes > 48 * 1024) cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

template <int HD>
static void flash_forward_hd(floatX *out, float *lse, const floatX *qkv, int B, int T, int H, int KV, float scale_log2,
                             cudaStream_t stream) {
    const size_t smem = flash_fwd_smem<HD>();
    auto kernel = flash_fwd_kernel<HD, FA_FWD_MT(HD)>;
    flash_smem_limit(kernel, smem);
    dim3 grid(B * H, flash_fwd_tiles<HD>(T));
    kernel<<<grid, FA_THREADS, smem, stream>>>(out, lse, qkv, T, H, KV, scale_log2);
    cudaCheckLaunch();
}

// Forward. out [B,T,H*hd], lse [B,H,T] fp32 (flash_lse_elems), both saved for the backward;
// qkv [B,T,(H+2KV)*hd] (not modified).
static void flash_attention_forward(floatX *out, float *lse, const floatX *qkv, int B, int T, int H, int KV, int hd,
                                    cudaStream_t stream) {
    flash_check(out, qkv, B, T, H, KV, hd);
    const float scale_log2 = FA_LOG2E / sqrtf((float)hd);
    if (hd == 64) flash_forward_hd<64>(out, lse, qkv, B, T, H, KV, scale_log2, stream);
    else flash_forward_hd<128>(out, lse, qkv, B, T, H, KV, scale_log2, stream);
}

template <int HD>
static void flash_backward_hd(floatX *dqkv, float *scratch_D, const floatX *dout, const floatX *qkv, const float *lse,
                              int B, int T, int H, int KV, float scale, cudaStream_t stream) {
    const float scale_log2 = scale * FA_LOG2E;
    constexpr bool A_REGS = HD == 64;  // at hd 128 the A operands are re-read from shared memory (registers)
    {
        const size_t smem = flash_dkdv_smem<HD>();
        auto kernel = flash_bwd_dkdv_kernel<HD, FA_BWD_BR(HD), A_REGS>;
        flash_smem_limit(kernel, smem);
        dim3 grid(B * KV, flash_bwd_tiles(T));
        kernel<<<grid, FA_THREADS, smem, stream>>>(dqkv, qkv, dout, lse, scratch_D, T, H, KV, scale_log2, scale);
        cudaCheckLaunch();
    }
    {
        const size_t smem = flash_dq_smem<HD>();
        auto kernel = flash_bwd_dq_kernel<HD, A_REGS>;
        flash_smem_limit(kernel, smem);
        dim3 grid(B * H, flash_bwd_tiles(T));
        kernel<<<grid, FA_THREADS, smem, stream>>>(dqkv, qkv, dout, lse, scratch_D, T, H, KV, scale_log2, scale);
        cudaCheckLaunch();
    }
}

// Backward. dqkv [B,T,(H+2KV)*hd] overwritten (every element); dout [B,T,H*hd]; qkv, out, lse
// as given to / written by flash_attention_forward; scratch_D [B,H,T] fp32 (flash_lse_elems).
static void flash_attention_backward(floatX *dqkv, float *scratch_D, const floatX *dout, const floatX *qkv,
                                     const floatX *out, const float *lse, int B, int T, int H, int KV, int hd,
                                     cudaStream_t stream) {
    flash_check(dqkv, qkv, B, T, H, KV, hd);
    CUDA_REQUIRE(is_aligned16(dout) && is_aligned16(out));
    const size_t rows = (size_t)B * T * H;
    flash_bwd_dot_kernel<<<(unsigned)ceil_div(rows, FA_DOT_THREADS / 32), FA_DOT_THREADS, 0, stream>>>(
        scratch_D, dout, out, B, T, H, hd);
    cudaCheckLaunch();
    const float scale = 1.0f / sqrtf((float)hd);
    if (hd == 64) flash_backward_hd<64>(dqkv, scratch_D, dout, qkv, lse, B, T, H, KV, scale, stream);
    else flash_backward_hd<128>(dqkv, scratch_D, dout, qkv, lse, B, T, H, KV, scale, stream);
}
#endif  // FLASH_EMULATE
