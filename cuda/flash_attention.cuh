// cuda/flash_attention.cuh: fused causal self-attention with grouped-query heads (GQA),
// forward and backward, flash-attention-2 style (Dao, "FlashAttention-2", 2023), on the
// tensor cores through mma.sync.m16n8k16 (bf16 in, fp32 accumulate) and ldmatrix.
//
// STATUS: written and compiled (sm_90), not yet run on a GPU. Checked by
// dev/cuda/flash_attention.cu against a double-precision CPU reference and against
// cuda/attention.cuh on the same inputs. train_gpt.cu runs it with --attention flash (the
// default stays cublas until the GPU checks of docs/gpu.md pass).
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
// whole T x T square. At B=16, T=1024, H=12, hd=64 one layer moves per micro-step
//   forward:  S written + read (fp32) 1.61 GB, P written + read (bf16) 0.81 GB   ~2.4 GB
//   backward: dP written + read (fp32) 1.61 GB, P read twice 0.81 GB, dS written and read
//             twice (bf16) 1.21 GB                                               ~3.6 GB
// and keeps P (0.40 GB per layer, 4.8 GB for 12 layers) alive until the backward. The fused
// kernels read q, k, v (25 MB each at H=KV), write out (25 MB) and lse (0.8 MB); the backward
// reads q, k, v, out, dout and writes dqkv: about 0.1 GB forward and 0.2 GB backward (plus
// re-reads of k/v and q/dout tiles, which hit L2), some 20-30x less traffic, and half of the
// FLOPs because fully masked tiles are skipped. Nothing of size T x T ever leaves registers.
//
// FORWARD (flash_fwd_kernel): one block per (batch and query head, query tile of 64 rows), 4
// warps, each warp owns 16 query rows for the whole kernel.
//   - shared memory: the Q tile, and one K and one V tile of 64 rows at a time, loaded with
//     cp.async (rows past T zero-filled); each row padded by 8 bf16 so that ldmatrix's 8 row
//     addresses fall in different banks.
//   - registers: S = Q K^T for the warp's 16 rows x 64 keys (fp32 accumulators), the running
//     row max m and row sum l, and the output accumulator O (16 x hd, fp32).
//   - online softmax (fp32, in log2 units): per key tile, m_new = max(m, rowmax S);
//     O and l are rescaled by 2^(m - m_new); P = 2^(S - m_new); l += rowsum P; O += P V.
//     The accumulator fragment of S is exactly the A-operand fragment of P V (after rounding
//     P to bf16), so P never goes through shared memory.
//   - causal: key tiles entirely above the diagonal are never visited (query tile i reads key
//     tiles 0..i); inside the diagonal tile, and past T, scores are masked to -inf.
//   - at the end O / l is written as bf16 and lse = (m + log2 l) * ln 2 as fp32.
//   The tile index is the slowest grid index and runs from the last (longest) query tile down,
//   so every head's heavy tiles start first and the short ones fill the tail (the same in
//   the backward: dK/dV from key tile 0, dQ from the last query tile).
//
// BACKWARD recomputes P = exp(scale q.k - lse) from the saved lse instead of reading it:
// recomputing costs tensor-core FLOPs, which are cheap, and saves the B*H*T*T traffic, which
// is not. With D = rowsum(dout * out) (= sum_t2 P dP, the softmax-backward term):
//   dV = P^T dO,  dP = dO V^T,  dS = P * (dP - D),  dQ = scale dS K,  dK = scale dS^T Q.
// Three launches, every output element written exactly once, no atomics, so the result is
// deterministic (bitwise repeatable run to run):
//   1. flash_bwd_dot_kernel: D [B, H, T] fp32, one warp per row.
//   2. flash_bwd_dkdv_kernel: one block per (key tile of 64 rows, batch, kv head), 4 warps of
//      16 key rows each. dK and dV (16 x hd per warp, fp32) stay in registers while the block
//      loops over the query tiles at or below the diagonal of EVERY query head of its group:
//      the GQA sum over the group's rep heads happens in registers, in a fixed order. It
//      computes the transposed products (S^T = K Q^T, dP^T = V dO^T) so that P^T and dS^T come
//      out as accumulator fragments that are directly the A operands of dV += P^T dO and
//      dK += dS^T Q.
//   3. flash_bwd_dq_kernel: one block per (query tile, batch, query head), as the forward: it
//      recomputes S and dP per key tile and accumulates dQ += dS K in registers.
//   Splitting dQ from dK/dV (rather than flash-attention-2's atomic adds of dQ in fp32) costs
//   recomputing Q K^T and dO V^T a second time: 7 tile products instead of 5, i.e. 1.4x the
//   backward's tensor FLOPs, for determinism and no fp32 dQ scratch.
//
// Precision: inputs bf16, every product accumulated in fp32, softmax statistics fp32; P and
// dS are rounded to bf16 before their products (as flash-attention does). Results agree with
// attention.cuh (which also rounds P and dS to bf16) within bf16 tolerance, not bitwise.
//
// Requirements: hd 64 or 128, H % KV == 0, 16-byte aligned bf16 pointers (lse and D: 4-byte),
// any T up to FLASH_MAX_T (partial tiles are masked; 64 * 65535 for the grid), bf16 storage (floatX
// must be bf16: the fp16 build would need the f16 mma variant; not provided).
//
// Resources (nvcc 13.0 -Xptxas -v, sm_90; see dev/cuda/NOTES.md for the numbers): no local
// memory (0 bytes stack frame, no spills) for any of the six kernels.
#pragma once
#include "cuda/common.cuh"
#include "cuda/sizes.h"   // flash_lse_elems

#if defined(FLOATX_FP16) && FLOATX_FP16
#error "cuda/flash_attention.cuh: bf16 only (floatX is fp16 in this build)"
#endif

// ----------------------------------------------------------------------------
// PTX wrappers: cp.async, ldmatrix, mma.sync

// 16 bytes global -> shared, asynchronously; src_bytes = 0 writes 16 zero bytes (rows past T)
__device__ __forceinline__ void fa_cp_async16(void *smem, const void *gmem, int src_bytes) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void fa_cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::); }
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

// two n8 tiles side by side: acc0 += a b[0..1], acc1 += a b[2..3] (b as the fa_load_b_* give it)
__device__ __forceinline__ void fa_mma_pair(float acc0[4], float acc1[4], const uint32_t a[4], const uint32_t b[4]) {
    fa_mma(acc0, a, b[0], b[1]);
    fa_mma(acc1, a, b[2], b[3]);
}

__device__ __forceinline__ uint32_t fa_pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}

// ----------------------------------------------------------------------------
// tiles in shared memory: R rows of HD bf16, row stride HD + 8 (the padding avoids ldmatrix
// bank conflicts: consecutive rows start 16 bytes apart modulo 128)

template <int HD> struct FaTile { static constexpr int LDS = HD + 8; };

// rows r0 .. r0+R-1 of a [T, ld] row-major global matrix (row t at g + t*ld), zero past T
template <int R, int HD>
__device__ __forceinline__ void fa_load_tile(floatX *s, const floatX *g, size_t ld, int r0, int T) {
    constexpr int CHUNKS = HD / 8;  // 16-byte chunks per row
    for (int i = threadIdx.x; i < R * CHUNKS; i += blockDim.x) {
        const int r = i / CHUNKS, c = (i % CHUNKS) * 8, t = r0 + r;
        const floatX *src = g + (size_t)(t < T ? t : 0) * ld + c;
        fa_cp_async16(s + r * FaTile<HD>::LDS + c, src, t < T ? 16 : 0);
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

template <int N> __device__ __forceinline__ void fa_zero(float x[N][4]) {
#pragma unroll
    for (int i = 0; i < N; i++) x[i][0] = x[i][1] = x[i][2] = x[i][3] = 0.0f;
}

// acc[16 x N] = A[16 x HD] X^T, A rows a_r0.. of sA, X rows x_r0.. of sX (both row-major,
// HD columns): scores S = Q K^T, dP = dO V^T and their transposes
template <int HD, int N>
__device__ __forceinline__ void fa_mma_abt(float acc[N / 8][4], const floatX *sA, int a_r0, const floatX *sX, int x_r0, int lane) {
    fa_zero<N / 8>(acc);
#pragma unroll
    for (int k = 0; k < HD / 16; k++) {
        uint32_t a[4];
        fa_load_a<HD>(a, sA, a_r0, k * 16, lane);
#pragma unroll
        for (int n = 0; n < N / 16; n++) {
            uint32_t b[4];
            fa_load_b_nt<HD>(b, sX, x_r0 + n * 16, k * 16, lane);
            fa_mma_pair(acc[2 * n], acc[2 * n + 1], a, b);
        }
    }
}

// acc[16 x HD] += P[16 x K] X, P given as fp32 accumulator fragments (rounded to bf16 here),
// X rows x_r0 .. x_r0+K-1 of sX: O += P V, dV += P^T dO, dQ += dS K, dK += dS^T Q
template <int HD, int K>
__device__ __forceinline__ void fa_mma_pv(float acc[HD / 8][4], const float p[K / 8][4], const floatX *sX, int x_r0, int lane) {
#pragma unroll
    for (int k = 0; k < K / 16; k++) {
        // the accumulator layout of two n8 tiles is the A layout of one k16 slice
        uint32_t a[4] = {fa_pack_bf16(p[2 * k][0], p[2 * k][1]), fa_pack_bf16(p[2 * k][2], p[2 * k][3]),
                         fa_pack_bf16(p[2 * k + 1][0], p[2 * k + 1][1]), fa_pack_bf16(p[2 * k + 1][2], p[2 * k + 1][3])};
#pragma unroll
        for (int n = 0; n < HD / 16; n++) {
            uint32_t b[4];
            fa_load_b_nn<HD>(b, sX, x_r0 + k * 16, n * 16, lane);
            fa_mma_pair(acc[2 * n], acc[2 * n + 1], a, b);
        }
    }
}

// the 16 x HD accumulator of a warp (rows r0 + lane/4 and r0 + lane/4 + 8) times `mul`, as
// bf16 into rows t < T of a row-major global matrix with row stride ld
template <int HD>
__device__ __forceinline__ void fa_store_rows(floatX *g, size_t ld, const float acc[HD / 8][4], int r0, int T, float mul, int lane) {
#pragma unroll
    for (int half = 0; half < 2; half++) {
        const int t = r0 + lane / 4 + half * 8;
        if (t >= T) continue;
        floatX *row = g + (size_t)t * ld + (lane % 4) * 2;
#pragma unroll
        for (int n = 0; n < HD / 8; n++)
            *(uint32_t *)(row + n * 8) = fa_pack_bf16(acc[n][2 * half] * mul, acc[n][2 * half + 1] * mul);
    }
}

#define FA_WARPS 4
#define FA_THREADS (FA_WARPS * WARP_SIZE)
#define FA_LOG2E 1.4426950408889634f
#define FA_LN2 0.6931471805599453f
extern __shared__ uint4 fa_smem[];  // dynamic shared memory of every kernel here (16-byte aligned)

// ----------------------------------------------------------------------------
// forward

// grid (B*H, ceil(T/BR)), FA_THREADS threads; BR = 16 * FA_WARPS query rows, BC key rows
template <int HD, int BR, int BC>
__global__ void __launch_bounds__(FA_THREADS) flash_fwd_kernel(floatX *out, float *lse, const floatX *qkv,
                                                                int T, int H, int KV, float scale_log2) {
    static_assert(BR == 16 * FA_WARPS && BR == BC, "one 16-row slice per warp; square tiles keep the diagonal simple");
    constexpr int LDS = FaTile<HD>::LDS;
    floatX *sQ = (floatX *)fa_smem, *sK = sQ + BR * LDS, *sV = sK + BC * LDS;
    const int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    const int qt = gridDim.y - 1 - blockIdx.y;  // the longest rows first (y is the slowest grid index)
    const int b = blockIdx.x / H, h = blockIdx.x % H, g = h / (H / KV);
    const size_t ld = (size_t)(H + 2 * KV) * HD;
    const floatX *base = qkv + (size_t)b * T * ld;
    const floatX *qg = base + (size_t)h * HD, *kg = base + (size_t)(H + g) * HD, *vg = base + (size_t)(H + KV + g) * HD;
    const int q0 = qt * BR, row0 = q0 + warp * 16;  // the warp's first query row
    const int row_a = row0 + lane / 4, row_b = row_a + 8;  // the two rows this thread holds

    fa_load_tile<BR, HD>(sQ, qg, ld, q0, T);
    fa_cp_async_commit();

    float o[HD / 8][4];
    fa_zero<HD / 8>(o);
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // log2 units; l: this thread's partial sum
    const int ntiles = qt + 1;  // key tiles 0..qt: the ones at or below the diagonal
    for (int j = 0; j < ntiles; j++) {
        const int k0 = j * BC;
        __syncthreads();  // every warp is done reading the previous K and V
        fa_load_tile<BC, HD>(sK, kg, ld, k0, T);
        fa_cp_async_commit();
        fa_load_tile<BC, HD>(sV, vg, ld, k0, T);
        fa_cp_async_commit();
        fa_cp_async_wait<1>();  // Q and K have landed (V may still be in flight)
        __syncthreads();

        float s[BC / 8][4];
        fa_mma_abt<HD, BC>(s, sQ, warp * 16, sK, 0, lane);

        // scale into log2 units, mask above the diagonal and past T (only the diagonal tile
        // and the last one need it), new row maxima
        const bool masked = k0 + BC > q0 || k0 + BC > T;
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int n = 0; n < BC / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int col = k0 + n * 8 + (lane % 4) * 2 + (e & 1), row = e < 2 ? row_a : row_b;
                const float v = (masked && (col > row || col >= T)) ? -INFINITY : s[n][e] * scale_log2;
                s[n][e] = v;
                mx[e / 2] = fmaxf(mx[e / 2], v);
            }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            // the 4 threads of a quad hold one row's columns
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffff, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffff, mx[r], 2));
            const float m_new = fmaxf(m[r], mx[r]);
            // a row with every key masked so far keeps m = -inf; use 0 so that exp2 gives 0, not NaN
            const float m_use = m_new == -INFINITY ? 0.0f : m_new;
            const float alpha = exp2f(m[r] - m_use);
            m[r] = m_new;
            l[r] *= alpha;
#pragma unroll
            for (int n = 0; n < HD / 8; n++) {
                o[n][2 * r] *= alpha;
                o[n][2 * r + 1] *= alpha;
            }
#pragma unroll
            for (int n = 0; n < BC / 8; n++) {
                s[n][2 * r] = exp2f(s[n][2 * r] - m_use);
                s[n][2 * r + 1] = exp2f(s[n][2 * r + 1] - m_use);
                l[r] += s[n][2 * r] + s[n][2 * r + 1];
            }
        }

        fa_cp_async_wait<0>();  // V
        __syncthreads();
        fa_mma_pv<HD, BC>(o, s, sV, 0, lane);
    }

    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffff, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffff, l[r], 2);
        inv[r] = 1.0f / l[r];
    }
    // rows 0..7 and 8..15 of the warp are scaled by different 1/l: scale in place, then store
#pragma unroll
    for (int n = 0; n < HD / 8; n++) {
        o[n][0] *= inv[0]; o[n][1] *= inv[0];
        o[n][2] *= inv[1]; o[n][3] *= inv[1];
    }
    const size_t ldo = (size_t)H * HD;
    fa_store_rows<HD>(out + (size_t)b * T * ldo + (size_t)h * HD, ldo, o, row0, T, 1.0f, lane);
    if (lane % 4 == 0) {
        float *L = lse + ((size_t)b * H + h) * T;
        if (row_a < T) L[row_a] = (m[0] + log2f(l[0])) * FA_LN2;
        if (row_b < T) L[row_b] = (m[1] + log2f(l[1])) * FA_LN2;
    }
}

// ----------------------------------------------------------------------------
// backward

// D[b,h,t] = sum_d dout[b,t,h,d] * out[b,t,h,d] (fp32), one warp per (b, t, h)
__global__ void flash_bwd_dot_kernel(float *D, const floatX *dout, const floatX *out, int B, int T, int H, int hd) {
    const int lane = threadIdx.x % WARP_SIZE;
    const size_t r = (size_t)blockIdx.x * (blockDim.x / WARP_SIZE) + threadIdx.x / WARP_SIZE;  // (b*T + t)*H + h
    if (r >= (size_t)B * T * H) return;  // warp-uniform
    const floatX *a = dout + r * hd, *o = out + r * hd;
    float s = 0.0f;
    for (int d = lane * 2; d < hd; d += 2 * WARP_SIZE) {
        const floatX2 x = *(const floatX2 *)(a + d), y = *(const floatX2 *)(o + d);
        s += bf2f(x.x) * bf2f(y.x) + bf2f(x.y) * bf2f(y.y);
    }
    s = warpReduceSum(s);
    if (lane == 0) {
        const int h = (int)(r % H);
        const size_t bt = r / H;
        const int t = (int)(bt % T), b = (int)(bt / T);
        D[((size_t)b * H + h) * T + t] = s;
    }
}

// dK, dV. grid (B*KV, ceil(T/BC)), FA_THREADS threads; BC = 16 * FA_WARPS key rows, query
// tiles of BR rows (BR divides BC). Shared: K, V [BC], Q, dO [BR] tiles, lse and D of the tile.
template <int HD, int BR, int BC>
__global__ void __launch_bounds__(FA_THREADS) flash_bwd_dkdv_kernel(floatX *dqkv, const floatX *qkv, const floatX *dout,
                                                                     const float *lse, const float *D,
                                                                     int T, int H, int KV, float scale_log2, float scale) {
    static_assert(BC == 16 * FA_WARPS && BC % BR == 0, "one 16-row key slice per warp");
    constexpr int LDS = FaTile<HD>::LDS;
    floatX *sK = (floatX *)fa_smem, *sV = sK + BC * LDS, *sQ = sV + BC * LDS, *sdO = sQ + BR * LDS;
    float *sL = (float *)(sdO + BR * LDS), *sD = sL + BR;
    const int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    const int kt = blockIdx.y;  // key tile 0 (the most query tiles) first
    const int b = blockIdx.x / KV, g = blockIdx.x % KV, rep = H / KV;
    const size_t ld = (size_t)(H + 2 * KV) * HD, ldo = (size_t)H * HD;
    const floatX *base = qkv + (size_t)b * T * ld;
    const int k0 = kt * BC, key0 = k0 + warp * 16;  // the warp's first key row
    const int key_a = key0 + lane / 4, key_b = key_a + 8;

    fa_load_tile<BC, HD>(sK, base + (size_t)(H + g) * HD, ld, k0, T);
    fa_load_tile<BC, HD>(sV, base + (size_t)(H + KV + g) * HD, ld, k0, T);
    fa_cp_async_commit();

    float dk[HD / 8][4], dv[HD / 8][4];
    fa_zero<HD / 8>(dk);
    fa_zero<HD / 8>(dv);
    const int nq = (T + BR - 1) / BR;
    for (int hh = 0; hh < rep; hh++) {  // the group's query heads, in order: the GQA sum
        const int h = g * rep + hh;
        const floatX *qg = base + (size_t)h * HD, *dog = dout + (size_t)b * T * ldo + (size_t)h * HD;
        const float *L = lse + ((size_t)b * H + h) * T, *Dh = D + ((size_t)b * H + h) * T;
        for (int qt = k0 / BR; qt < nq; qt++) {  // query tiles at or below the diagonal
            const int q0 = qt * BR;
            __syncthreads();  // every warp is done with the previous Q, dO, lse, D
            fa_load_tile<BR, HD>(sQ, qg, ld, q0, T);
            fa_load_tile<BR, HD>(sdO, dog, ldo, q0, T);
            fa_cp_async_commit();
            for (int i = threadIdx.x; i < BR; i += blockDim.x) {
                const int t = q0 + i;
                sL[i] = t < T ? L[t] * FA_LOG2E : 0.0f;
                sD[i] = t < T ? Dh[t] : 0.0f;
            }
            fa_cp_async_wait<0>();
            __syncthreads();

            // P^T = exp(scale K Q^T - lse): the warp's 16 keys x BR queries; masks only in the
            // tiles that cross the diagonal or T
            const bool masked = q0 < k0 + BC || q0 + BR > T;
            float p[BR / 8][4];
            fa_mma_abt<HD, BR>(p, sK, warp * 16, sQ, 0, lane);
#pragma unroll
            for (int n = 0; n < BR / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int qi = n * 8 + (lane % 4) * 2 + (e & 1), q = q0 + qi, key = e < 2 ? key_a : key_b;
                    p[n][e] = (masked && (key > q || q >= T)) ? 0.0f : exp2f(p[n][e] * scale_log2 - sL[qi]);
                }
            fa_mma_pv<HD, BR>(dv, p, sdO, 0, lane);  // dV += P^T dO

            // dS^T = P^T * (dP^T - D), dP^T = V dO^T
            float ds[BR / 8][4];
            fa_mma_abt<HD, BR>(ds, sV, warp * 16, sdO, 0, lane);
#pragma unroll
            for (int n = 0; n < BR / 8; n++)
#pragma unroll
                for (int e = 0; e < 4; e++) ds[n][e] = p[n][e] * (ds[n][e] - sD[n * 8 + (lane % 4) * 2 + (e & 1)]);
            fa_mma_pv<HD, BR>(dk, ds, sQ, 0, lane);  // dK += dS^T Q (times scale at the end)
        }
    }
    floatX *dbase = dqkv + (size_t)b * T * ld;
    fa_store_rows<HD>(dbase + (size_t)(H + g) * HD, ld, dk, key0, T, scale, lane);
    fa_store_rows<HD>(dbase + (size_t)(H + KV + g) * HD, ld, dv, key0, T, 1.0f, lane);
}

// dQ. grid (B*H, ceil(T/BR)), FA_THREADS threads, as the forward. Shared: Q, dO [BR], K, V [BC].
template <int HD, int BR, int BC>
__global__ void __launch_bounds__(FA_THREADS) flash_bwd_dq_kernel(floatX *dqkv, const floatX *qkv, const floatX *dout,
                                                                   const float *lse, const float *D,
                                                                   int T, int H, int KV, float scale_log2, float scale) {
    static_assert(BR == 16 * FA_WARPS && BR == BC, "one 16-row slice per warp; square tiles");
    constexpr int LDS = FaTile<HD>::LDS;
    floatX *sQ = (floatX *)fa_smem, *sdO = sQ + BR * LDS, *sK = sdO + BR * LDS, *sV = sK + BC * LDS;
    const int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE;
    const int qt = gridDim.y - 1 - blockIdx.y;
    const int b = blockIdx.x / H, h = blockIdx.x % H, g = h / (H / KV);
    const size_t ld = (size_t)(H + 2 * KV) * HD, ldo = (size_t)H * HD;
    const floatX *base = qkv + (size_t)b * T * ld;
    const floatX *kg = base + (size_t)(H + g) * HD, *vg = base + (size_t)(H + KV + g) * HD;
    const int q0 = qt * BR, row0 = q0 + warp * 16;
    const int row_a = row0 + lane / 4, row_b = row_a + 8;

    fa_load_tile<BR, HD>(sQ, base + (size_t)h * HD, ld, q0, T);
    fa_load_tile<BR, HD>(sdO, dout + (size_t)b * T * ldo + (size_t)h * HD, ldo, q0, T);
    fa_cp_async_commit();
    const float *L = lse + ((size_t)b * H + h) * T, *Dh = D + ((size_t)b * H + h) * T;
    const float lse2[2] = {row_a < T ? L[row_a] * FA_LOG2E : 0.0f, row_b < T ? L[row_b] * FA_LOG2E : 0.0f};
    const float Dr[2] = {row_a < T ? Dh[row_a] : 0.0f, row_b < T ? Dh[row_b] : 0.0f};

    float dq[HD / 8][4];
    fa_zero<HD / 8>(dq);
    for (int j = 0; j <= qt; j++) {
        const int k0 = j * BC;
        __syncthreads();
        fa_load_tile<BC, HD>(sK, kg, ld, k0, T);
        fa_load_tile<BC, HD>(sV, vg, ld, k0, T);
        fa_cp_async_commit();
        fa_cp_async_wait<0>();
        __syncthreads();

        float p[BC / 8][4], ds[BC / 8][4];
        fa_mma_abt<HD, BC>(p, sQ, warp * 16, sK, 0, lane);    // S = Q K^T
        fa_mma_abt<HD, BC>(ds, sdO, warp * 16, sV, 0, lane);  // dP = dO V^T
        const bool masked = k0 + BC > q0 || k0 + BC > T;  // the diagonal tile, the last tile
#pragma unroll
        for (int n = 0; n < BC / 8; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int col = k0 + n * 8 + (lane % 4) * 2 + (e & 1), row = e < 2 ? row_a : row_b;
                const float pv = (masked && (col > row || col >= T)) ? 0.0f : exp2f(p[n][e] * scale_log2 - lse2[e / 2]);
                ds[n][e] = pv * (ds[n][e] - Dr[e / 2]);
            }
        fa_mma_pv<HD, BC>(dq, ds, sK, 0, lane);  // dQ += dS K (times scale at the end)
    }
    fa_store_rows<HD>(dqkv + (size_t)b * T * ld + (size_t)h * HD, ld, dq, row0, T, scale, lane);
}

// ----------------------------------------------------------------------------
// host launchers

#define FA_TILE 64     // query rows of the forward and dQ blocks, key rows of the dK/dV blocks
#define FA_BWD_BR(HD) ((HD) == 128 ? 32 : 64)  // query rows per step of dK/dV: fewer at hd 128 (registers)

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
    const size_t smem = (size_t)3 * FA_TILE * FaTile<HD>::LDS * sizeof(floatX);
    auto kernel = flash_fwd_kernel<HD, FA_TILE, FA_TILE>;
    flash_smem_limit(kernel, smem);
    dim3 grid(B * H, (T + FA_TILE - 1) / FA_TILE);
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
    constexpr int BR = FA_BWD_BR(HD), LDS = FaTile<HD>::LDS;
    {
        const size_t smem = (size_t)(2 * FA_TILE + 2 * BR) * LDS * sizeof(floatX) + 2 * BR * sizeof(float);
        auto kernel = flash_bwd_dkdv_kernel<HD, BR, FA_TILE>;
        flash_smem_limit(kernel, smem);
        dim3 grid(B * KV, (T + FA_TILE - 1) / FA_TILE);
        kernel<<<grid, FA_THREADS, smem, stream>>>(dqkv, qkv, dout, lse, scratch_D, T, H, KV, scale_log2, scale);
        cudaCheckLaunch();
    }
    {
        const size_t smem = (size_t)4 * FA_TILE * LDS * sizeof(floatX);
        auto kernel = flash_bwd_dq_kernel<HD, FA_TILE, FA_TILE>;
        flash_smem_limit(kernel, smem);
        dim3 grid(B * H, (T + FA_TILE - 1) / FA_TILE);
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
    const int block_size = 256;
    const size_t rows = (size_t)B * T * H;
    flash_bwd_dot_kernel<<<(unsigned)ceil_div(rows, block_size / WARP_SIZE), block_size, 0, stream>>>(
        scratch_D, dout, out, B, T, H, hd);
    cudaCheckLaunch();
    const float scale = 1.0f / sqrtf((float)hd);
    if (hd == 64) flash_backward_hd<64>(dqkv, scratch_D, dout, qkv, lse, B, T, H, KV, scale, stream);
    else flash_backward_hd<128>(dqkv, scratch_D, dout, qkv, lse, B, T, H, KV, scale, stream);
}
