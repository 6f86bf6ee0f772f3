// cuda/attention_decode.cuh: attention of a decode step (sampling with a KV cache): one
// new position per sequence, whose queries attend to every position so far of their kv head.
//
// Layouts: qkv [B, (H + 2KV) * hd]: the new position of each sequence, q heads, then k, then v
// heads, after RoPE (llama); one layer's cache k_cache, v_cache [B, KV, max_len, hd]: rows
// 0..pos-1 hold the earlier positions. Query head h uses kv head h / (H / KV) (GQA).
//   1. kv_cache_append: the new k and v heads become row pos of the cache (8 bf16 per thread).
//   2. attention_decode_kernel, one block per (head, sequence): q in shared memory (fp32); one
//      warp per key row for the scores s = scale * q.k (fp32, lanes split hd, warp sum); the
//      block's max; p = exp(s - max) / sum in fp32 (scores and probabilities in the fp32 scratch
//      [B, H, max_len]); out[d] = sum_t bf16(p_t) v_t[d], one thread per d, fp32 accumulation.
// The probabilities are rounded to bf16 before they weight v because the training forward
// (attention.cuh) stores them in bf16 for its P V GEMM: the two paths then differ only in the
// order of their fp32 sums (dev/cuda/attention_decode.cu compares them).
// Cost per step: reads the cache once, O(B H pos hd); no [T, T] tensor.
//
// Requirements: hd % 8 == 0, H % KV == 0, 0 <= pos < max_len, 16-byte aligned pointers.
#pragma once
#include "cuda/common.cuh"

__global__ void kv_cache_append_kernel(floatX *k_cache, floatX *v_cache, const floatX *qkv, int B, int H, int KV, int hd,
                                       int pos, int max_len) {
    const int hv = hd / 8;
    const size_t total = (size_t)B * KV * hv;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int d = (int)(i % hv) * 8;
        size_t r = i / hv;
        int g = (int)(r % KV), b = (int)(r / KV);
        const floatX *row = qkv + (size_t)b * (H + 2 * KV) * hd;
        size_t dst = (((size_t)b * KV + g) * max_len + pos) * hd + d;
        store128(k_cache + dst, load128(row + (size_t)(H + g) * hd + d));
        store128(v_cache + dst, load128(row + (size_t)(H + KV + g) * hd + d));
    }
}

// grid (H, B); dynamic shared memory: hd floats
__global__ void attention_decode_kernel(floatX *out, const floatX *__restrict__ qkv, const floatX *__restrict__ k_cache,
                                        const floatX *__restrict__ v_cache, float *__restrict__ scratch,
                                        int H, int KV, int hd, int n, int max_len, float scale) {
    extern __shared__ float q[];
    const int h = blockIdx.x, b = blockIdx.y, g = h / (H / KV);
    const floatX *qh = qkv + (size_t)b * (H + 2 * KV) * hd + (size_t)h * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) q[d] = bf2f(qh[d]);
    __syncthreads();
    const floatX *K = k_cache + ((size_t)b * KV + g) * max_len * hd;
    const floatX *V = v_cache + ((size_t)b * KV + g) * max_len * hd;
    float *s = scratch + ((size_t)b * H + h) * max_len;
    const int warp = threadIdx.x / WARP_SIZE, lane = threadIdx.x % WARP_SIZE, warps = blockDim.x / WARP_SIZE;
    float m = -INFINITY;
    for (int t = warp; t < n; t += warps) {
        float dot = 0.0f;
        for (int d = lane; d < hd; d += WARP_SIZE) dot += q[d] * bf2f(K[(size_t)t * hd + d]);
        dot = warpReduceSum(dot) * scale;
        if (lane == 0) s[t] = dot;
        m = fmaxf(m, dot);
    }
    m = blockReduceMax(m);           // its barriers also publish the scores to the block
    float sum = 0.0f;
    for (int t = threadIdx.x; t < n; t += blockDim.x) {
        float e = expf(s[t] - m);
        s[t] = e;
        sum += e;
    }
    const float inv = 1.0f / blockReduceSum(sum);
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float acc = 0.0f;
        for (int t = 0; t < n; t++) acc += bf2f(f2bf(s[t] * inv)) * bf2f(V[(size_t)t * hd + d]);
        out[(size_t)b * H * hd + (size_t)h * hd + d] = f2bf(acc);
    }
}

// out [B, H*hd]; qkv [B, (H+2KV)*hd] (not modified); the k and v of qkv are written to row pos of
// this layer's k_cache, v_cache [B, KV, max_len, hd], then the queries attend to rows 0..pos.
// scratch: fp32 [B, H, max_len].
static void attention_decode(floatX *out, const floatX *qkv, floatX *k_cache, floatX *v_cache, float *scratch,
                             int B, int H, int KV, int hd, int pos, int max_len, cudaStream_t stream) {
    CUDA_REQUIRE(hd % 8 == 0 && KV > 0 && H % KV == 0 && pos >= 0 && pos < max_len);
    CUDA_REQUIRE(is_aligned16(qkv) && is_aligned16(k_cache) && is_aligned16(v_cache));
    const int block_size = 128;
    int grid = grid_for((size_t)B * KV * (hd / 8), block_size);
    if (grid > 65536) grid = 65536;
    kv_cache_append_kernel<<<grid, block_size, 0, stream>>>(k_cache, v_cache, qkv, B, H, KV, hd, pos, max_len);
    cudaCheckLaunch();
    attention_decode_kernel<<<dim3(H, B), block_size, hd * sizeof(float), stream>>>(
        out, qkv, k_cache, v_cache, scratch, H, KV, hd, pos + 1, max_len, 1.0f / sqrtf((float)hd));
    cudaCheckLaunch();
}
