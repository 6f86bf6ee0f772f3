// cuda/attention.cuh: causal self-attention with grouped-query heads (GQA), forward and
// backward, as permute + cuBLAS strided-batched GEMMs + softmax kernels (llm.c's cuBLAS path).
//
// Layouts: qkv [B, T, (H + 2KV) * hd]: per token H query heads, then KV key heads, then KV
// value heads. Query head h uses kv head h / (H / KV). rep = H / KV.
//   qkvr (saved for backward) = q [B, H, T, hd] | k [B, KV, T, hd] | v [B, KV, T, hd]
//   att  (saved for backward) = softmax probabilities [B, H, T, T] bf16, zeros above the diagonal
//   out  [B, T, H * hd]
//
// GQA without copying k, v: the rep query heads of one kv group are adjacent in q [B,H,T,hd],
// so the group's queries form one [rep*T, hd] matrix. Every GEMM is batched over the B*KV
// groups with uniform strides:
//   S_g[rep*T, T]  = scale * Q_g K_g^T          (fp32 output)
//   Y_g[rep*T, hd] = P_g V_g
//   dP_g           = dY_g V_g^T                 (fp32 output)
//   dV_g[T, hd]    = P_g^T dY_g                 (sums over the group's rep heads inside the GEMM)
//   dQ_g           = scale * dS_g K_g
//   dK_g[T, hd]    = scale * dS_g^T Q_g          (sums over the group's rep heads)
// The GEMMs compute the full T x T square (masked entries are exact zeros in P and dS), twice
// the causal FLOPs. The scores are kept in fp32 before the softmax (scratch), the saved
// probabilities in bf16.
//
// Softmax forward: one warp per row, online max/sum over t2 <= t in fp32, then writes
// exp(s - max) / sum for t2 <= t and 0 above the diagonal.
// Softmax backward: dS = P * (dP - sum_t2 P dP), one warp per row.
//
// The fused replacement (no [B,H,T,T] tensors, half the FLOPs) is cuda/flash_attention.cuh,
// written but not yet run on a GPU nor used by the trainer; see docs/kernels.md.
//
// Requirements: hd % 8 == 0, H % KV == 0, 16-byte aligned pointers; matmul_setup() called.
#pragma once
#include "cuda/common.cuh"
#include "cuda/sizes.h"
#include "cuda/matmul.cuh"

// ----------------------------------------------------------------------------
// permutes (8 bf16 per thread)

// dir 0: qkv[B,T,nh*hd] -> q, k, v; dir 1: the inverse (dq, dk, dv -> dqkv)
__global__ void attention_permute_kernel(floatX *q, floatX *k, floatX *v, floatX *qkv,
                                         int B, int T, int H, int KV, int hd, int dir) {
    const int nh = H + 2 * KV;
    const int hv = hd / 8;
    const size_t total = (size_t)B * T * nh * hv;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int d = (int)(i % hv) * 8;
        size_t rest = i / hv;
        int j = (int)(rest % nh);
        size_t bt = rest / nh;
        int t = (int)(bt % T);
        int b = (int)(bt / T);
        floatX *src = qkv + (bt * nh + j) * hd + d;
        floatX *dst;
        if (j < H) dst = q + (((size_t)b * H + j) * T + t) * hd + d;
        else if (j < H + KV) dst = k + (((size_t)b * KV + (j - H)) * T + t) * hd + d;
        else dst = v + (((size_t)b * KV + (j - H - KV)) * T + t) * hd + d;
        if (dir == 0) store128(dst, load128cs(src));
        else store128(src, load128cs(dst));
    }
}

// dir 0: y[B,H,T,hd] -> out[B,T,H*hd]; dir 1: the inverse (dout -> dy)
__global__ void attention_unpermute_kernel(floatX *out, floatX *y, int B, int T, int H, int hd, int dir) {
    const int hv = hd / 8;
    const size_t total = (size_t)B * T * H * hv;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int d = (int)(i % hv) * 8;
        size_t rest = i / hv;
        int h = (int)(rest % H);
        size_t bt = rest / H;
        int t = (int)(bt % T);
        int b = (int)(bt / T);
        floatX *o = out + (bt * H + h) * hd + d;
        floatX *yy = y + (((size_t)b * H + h) * T + t) * hd + d;
        if (dir == 0) store128(o, load128cs(yy));
        else store128(yy, load128cs(o));
    }
}

// ----------------------------------------------------------------------------
// causal softmax

// preatt [R, T] fp32 (already scaled), R = B*H*T, row r is query position t = r % T.
__global__ void attention_softmax_forward_kernel(floatX *__restrict__ att, const float *__restrict__ preatt,
                                                 int R, int T) {
    const int warps = blockDim.x / WARP_SIZE;
    const int lane = threadIdx.x % WARP_SIZE;
    const int r = blockIdx.x * warps + threadIdx.x / WARP_SIZE;
    if (r >= R) return;  // warp-uniform
    const int t = r % T;
    const float *x = preatt + (size_t)r * T;
    floatX *a = att + (size_t)r * T;
    float m = -INFINITY, s = 0.0f;
    for (int t2 = lane; t2 <= t; t2 += WARP_SIZE) {
        float v = x[t2];
        if (v > m) {
            s = s * expf(m - v) + 1.0f;
            m = v;
        } else {
            s += expf(v - m);
        }
    }
    const float M = warpReduceMax(m);
    s = (m == -INFINITY) ? 0.0f : s * expf(m - M);
    const float S = warpReduceSum(s);
    const float inv = 1.0f / S;
    for (int t2 = lane; t2 < T; t2 += WARP_SIZE) {
        float p = t2 <= t ? expf(x[t2] - M) * inv : 0.0f;
        a[t2] = f2bf(p);
    }
}

// dpreatt = att * (datt - sum_{t2<=t} att * datt), zeros above the diagonal (unscaled: the
// 1/sqrt(hd) is applied by the dQ/dK GEMMs).
__global__ void attention_softmax_backward_kernel(floatX *__restrict__ dpreatt, const float *__restrict__ datt,
                                                  const floatX *__restrict__ att, int R, int T) {
    const int warps = blockDim.x / WARP_SIZE;
    const int lane = threadIdx.x % WARP_SIZE;
    const int r = blockIdx.x * warps + threadIdx.x / WARP_SIZE;
    if (r >= R) return;
    const int t = r % T;
    const float *da = datt + (size_t)r * T;
    const floatX *a = att + (size_t)r * T;
    floatX *ds = dpreatt + (size_t)r * T;
    float sum = 0.0f;
    for (int t2 = lane; t2 <= t; t2 += WARP_SIZE) sum += bf2f(a[t2]) * da[t2];
    sum = warpReduceSum(sum);
    for (int t2 = lane; t2 < T; t2 += WARP_SIZE) {
        float g = t2 <= t ? bf2f(a[t2]) * (da[t2] - sum) : 0.0f;
        ds[t2] = f2bf(g);
    }
}

// ----------------------------------------------------------------------------
// batched GEMM helper: row-major semantics are worked out at each call site

static void attention_gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                           const void *A, int lda, long long sA, const void *Bm, int ldb, long long sB,
                           void *C, cudaDataType_t ctype, int ldc, long long sC, int batch, cudaStream_t stream) {
    const float beta = 0.0f;
    cublasCheck(cublasSetStream(g_cublas_handle, stream));
    cublasCheck(cublasGemmStridedBatchedEx(g_cublas_handle, ta, tb, m, n, k, &alpha, A, CUDA_R_FLOATX, lda, sA,
                                           Bm, CUDA_R_FLOATX, ldb, sB, &beta, C, ctype, ldc, sC, batch,
                                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// scratch sizes in elements: attention_att_elems, attention_qkv_elems, attention_y_elems (cuda/sizes.h)

static void attention_check(int B, int T, int H, int KV, int hd) {
    CUDA_REQUIRE(hd % 8 == 0);
    CUDA_REQUIRE(KV > 0 && H % KV == 0);
    CUDA_REQUIRE(g_cublas_handle != NULL);  // matmul_setup()
}

// Forward.
//   out  [B,T,H*hd]          result
//   qkvr [B*T*(H+2KV)*hd]    permuted q|k|v, saved for backward
//   att  [B,H,T,T] bf16      probabilities, saved for backward
//   qkv  [B,T,(H+2KV)*hd]    input (after RoPE for llama); not modified
//   scratch_f32 [B*H*T*T] fp32, scratch_y [B*H*T*hd] bf16: temporaries
static void attention_forward(floatX *out, floatX *qkvr, floatX *att, const floatX *qkv,
                              float *scratch_f32, floatX *scratch_y,
                              int B, int T, int H, int KV, int hd, cudaStream_t stream) {
    attention_check(B, T, H, KV, hd);
    CUDA_REQUIRE(is_aligned16(out) && is_aligned16(qkvr) && is_aligned16(qkv) && is_aligned16(scratch_y));
    const int rep = H / KV;
    const float scale = 1.0f / sqrtf((float)hd);
    floatX *q = qkvr;
    floatX *k = q + (size_t)B * H * T * hd;
    floatX *v = k + (size_t)B * KV * T * hd;
    const int block_size = 256;
    {
        size_t total = (size_t)B * T * (H + 2 * KV) * (hd / 8);
        int grid = grid_for(total, block_size);
        if (grid > 65536) grid = 65536;
        attention_permute_kernel<<<grid, block_size, 0, stream>>>(q, k, v, (floatX *)qkv, B, T, H, KV, hd, 0);
        cudaCheckLaunch();
    }
    // S_g = scale * Q_g K_g^T: column-major S^T[T, rep*T] = K_g (op T of [hd,T] col-major) x Q_g^T ([hd, rep*T])
    attention_gemm(CUBLAS_OP_T, CUBLAS_OP_N, T, rep * T, hd, scale,
                   k, hd, (long long)T * hd, q, hd, (long long)rep * T * hd,
                   scratch_f32, CUDA_R_32F, T, (long long)rep * T * T, B * KV, stream);
    {
        const int R = B * H * T;
        attention_softmax_forward_kernel<<<(int)ceil_div(R, block_size / WARP_SIZE), block_size, 0, stream>>>(att, scratch_f32, R, T);
        cudaCheckLaunch();
    }
    // Y_g = P_g V_g: column-major Y^T[hd, rep*T] = V_g^T[hd, T] x P_g^T[T, rep*T]
    attention_gemm(CUBLAS_OP_N, CUBLAS_OP_N, hd, rep * T, T, 1.0f,
                   v, hd, (long long)T * hd, att, T, (long long)rep * T * T,
                   scratch_y, CUDA_R_FLOATX, hd, (long long)rep * T * hd, B * KV, stream);
    {
        size_t total = (size_t)B * T * H * (hd / 8);
        int grid = grid_for(total, block_size);
        if (grid > 65536) grid = 65536;
        attention_unpermute_kernel<<<grid, block_size, 0, stream>>>(out, scratch_y, B, T, H, hd, 0);
        cudaCheckLaunch();
    }
}

// Backward.
//   dqkv [B,T,(H+2KV)*hd]    overwritten with the gradient of qkv (before RoPE backward for llama)
//   dout [B,T,H*hd]          gradient of out
//   qkvr, att                saved by attention_forward
//   scratch_f32 [B*H*T*T] fp32, scratch_bf16 [B*H*T*T] bf16, scratch_y [B*H*T*hd] bf16,
//   scratch_dqkvr [B*T*(H+2KV)*hd] bf16: temporaries
static void attention_backward(floatX *dqkv, const floatX *dout, const floatX *qkvr, const floatX *att,
                               float *scratch_f32, floatX *scratch_bf16, floatX *scratch_y, floatX *scratch_dqkvr,
                               int B, int T, int H, int KV, int hd, cudaStream_t stream) {
    attention_check(B, T, H, KV, hd);
    CUDA_REQUIRE(is_aligned16(dqkv) && is_aligned16(dout) && is_aligned16(scratch_y) && is_aligned16(scratch_dqkvr));
    const int rep = H / KV;
    const float scale = 1.0f / sqrtf((float)hd);
    const floatX *q = qkvr;
    const floatX *k = q + (size_t)B * H * T * hd;
    const floatX *v = k + (size_t)B * KV * T * hd;
    floatX *dq = scratch_dqkvr;
    floatX *dk = dq + (size_t)B * H * T * hd;
    floatX *dv = dk + (size_t)B * KV * T * hd;
    floatX *dy = scratch_y;
    const int block_size = 256;
    {
        size_t total = (size_t)B * T * H * (hd / 8);
        int grid = grid_for(total, block_size);
        if (grid > 65536) grid = 65536;
        attention_unpermute_kernel<<<grid, block_size, 0, stream>>>((floatX *)dout, dy, B, T, H, hd, 1);
        cudaCheckLaunch();
    }
    // dP_g = dY_g V_g^T: column-major dP^T[T, rep*T] = V_g (op T of [hd,T]) x dY_g^T ([hd, rep*T])
    attention_gemm(CUBLAS_OP_T, CUBLAS_OP_N, T, rep * T, hd, 1.0f,
                   v, hd, (long long)T * hd, dy, hd, (long long)rep * T * hd,
                   scratch_f32, CUDA_R_32F, T, (long long)rep * T * T, B * KV, stream);
    // dV_g = P_g^T dY_g: column-major dV^T[hd, T] = dY_g^T[hd, rep*T] x P_g[rep*T, T] (op T of P^T)
    attention_gemm(CUBLAS_OP_N, CUBLAS_OP_T, hd, T, rep * T, 1.0f,
                   dy, hd, (long long)rep * T * hd, att, T, (long long)rep * T * T,
                   dv, CUDA_R_FLOATX, hd, (long long)T * hd, B * KV, stream);
    {
        const int R = B * H * T;
        attention_softmax_backward_kernel<<<(int)ceil_div(R, block_size / WARP_SIZE), block_size, 0, stream>>>(
            scratch_bf16, scratch_f32, att, R, T);
        cudaCheckLaunch();
    }
    // dQ_g = scale * dS_g K_g: column-major dQ^T[hd, rep*T] = K_g^T[hd, T] x dS_g^T[T, rep*T]
    attention_gemm(CUBLAS_OP_N, CUBLAS_OP_N, hd, rep * T, T, scale,
                   k, hd, (long long)T * hd, scratch_bf16, T, (long long)rep * T * T,
                   dq, CUDA_R_FLOATX, hd, (long long)rep * T * hd, B * KV, stream);
    // dK_g = scale * dS_g^T Q_g: column-major dK^T[hd, T] = Q_g^T[hd, rep*T] x dS_g[rep*T, T] (op T)
    attention_gemm(CUBLAS_OP_N, CUBLAS_OP_T, hd, T, rep * T, scale,
                   q, hd, (long long)rep * T * hd, scratch_bf16, T, (long long)rep * T * T,
                   dk, CUDA_R_FLOATX, hd, (long long)T * hd, B * KV, stream);
    {
        size_t total = (size_t)B * T * (H + 2 * KV) * (hd / 8);
        int grid = grid_for(total, block_size);
        if (grid > 65536) grid = 65536;
        attention_permute_kernel<<<grid, block_size, 0, stream>>>(dq, dk, dv, dqkv, B, T, H, KV, hd, 1);
        cudaCheckLaunch();
    }
}
