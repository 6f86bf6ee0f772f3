// cuda/residual.cuh: the residual connection.
// Forward: out = inp1 + inp2 (fp32 add, one bf16 rounding).
// Backward: the residual add passes its gradient through unchanged to both inputs, so
// there is no backward kernel; where two gradient contributions meet in one buffer,
// accumulate_inplace (dst += src) adds them.
// (fused_residual_layernorm_forward / fused_residual_rmsnorm_forward in layernorm.cuh fuse
// the add with the following norm.)
#pragma once
#include "cuda/common.cuh"

__global__ void residual_forward_kernel(floatX *out, const floatX *inp1, const floatX *inp2, size_t n_vec) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += (size_t)gridDim.x * blockDim.x) {
        x128 a = load128cs(inp1 + i * x128::size);
        x128 b = load128cs(inp2 + i * x128::size);
        x128 o;
#pragma unroll
        for (int k = 0; k < x128::size; k++) o[k] = f2bf(bf2f(a[k]) + bf2f(b[k]));
        store128(out + i * x128::size, o);
    }
}

__global__ void accumulate_inplace_kernel(floatX *dst, const floatX *src, size_t n_vec) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += (size_t)gridDim.x * blockDim.x) {
        x128 a = load128(dst + i * x128::size);
        x128 b = load128cs(src + i * x128::size);
        x128 o;
#pragma unroll
        for (int k = 0; k < x128::size; k++) o[k] = f2bf(bf2f(a[k]) + bf2f(b[k]));
        store128(dst + i * x128::size, o);
    }
}

// out[i] = inp1[i] + inp2[i], i < N. out may alias inp1 or inp2.
static void residual_forward(floatX *out, const floatX *inp1, const floatX *inp2, size_t N, cudaStream_t stream) {
    if (N == 0) return;
    const int block_size = 256;
    CUDA_REQUIRE(N % 8 == 0 && is_aligned16(out) && is_aligned16(inp1) && is_aligned16(inp2));
    size_t n_vec = N / 8;
    int grid = grid_for(n_vec, block_size);
    if (grid > 65536) grid = 65536;
    residual_forward_kernel<<<grid, block_size, 0, stream>>>(out, inp1, inp2, n_vec);
    cudaCheckLaunch();
}

// dst[i] += src[i], i < N (the gradient of a residual branch joining the stream)
static void accumulate_inplace(floatX *dst, const floatX *src, size_t N, cudaStream_t stream) {
    if (N == 0) return;
    const int block_size = 256;
    CUDA_REQUIRE(N % 8 == 0 && is_aligned16(dst) && is_aligned16(src));
    size_t n_vec = N / 8;
    int grid = grid_for(n_vec, block_size);
    if (grid > 65536) grid = 65536;
    accumulate_inplace_kernel<<<grid, block_size, 0, stream>>>(dst, src, n_vec);
    cudaCheckLaunch();
}
