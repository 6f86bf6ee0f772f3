// cuda/gelu.cuh: tanh-approximated GELU, elementwise.
//   GELU(u) = 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))
// Forward and backward are standalone passes; matmul.cuh can fuse both into the fc
// matmul's epilogue instead (CUBLASLT_EPILOGUE_GELU_AUX_BIAS / CUBLASLT_EPILOGUE_DGELU).
#pragma once
#include "cuda/common.cuh"

#define GELU_SCALING_FACTOR 0.7978845608028654f  // sqrt(2/pi)

__device__ __forceinline__ float gelu_tanh_f(float x) {
    float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + cube)));
}
// d GELU(x) / dx
__device__ __forceinline__ float gelu_tanh_grad_f(float x) {
    float cube = 0.044715f * x * x * x;
    float tanh_out = tanhf(GELU_SCALING_FACTOR * (x + cube));
    float sech2 = 1.0f - tanh_out * tanh_out;
    return 0.5f * (1.0f + tanh_out) + 0.5f * x * sech2 * GELU_SCALING_FACTOR * (1.0f + 3.0f * 0.044715f * x * x);
}

__global__ void gelu_forward_kernel(floatX *out, const floatX *inp, size_t n_vec) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += (size_t)gridDim.x * blockDim.x) {
        x128 x = load128cs(inp + i * x128::size);
        x128 o;
#pragma unroll
        for (int k = 0; k < x128::size; k++) o[k] = f2bf(gelu_tanh_f(bf2f(x[k])));
        store128(out + i * x128::size, o);
    }
}

__global__ void gelu_backward_kernel(floatX *dinp, const floatX *inp, const floatX *dout, size_t n_vec) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n_vec; i += (size_t)gridDim.x * blockDim.x) {
        x128 x = load128cs(inp + i * x128::size);
        x128 d = load128cs(dout + i * x128::size);
        x128 o;
#pragma unroll
        for (int k = 0; k < x128::size; k++) o[k] = f2bf(gelu_tanh_grad_f(bf2f(x[k])) * bf2f(d[k]));
        store128(dinp + i * x128::size, o);
    }
}

// out = GELU(inp), N elements. out may alias inp.
static void gelu_forward(floatX *out, const floatX *inp, size_t N, cudaStream_t stream) {
    if (N == 0) return;
    const int block_size = 256;
    CUDA_REQUIRE(N % 8 == 0 && is_aligned16(out) && is_aligned16(inp));
    int grid = grid_for(N / 8, block_size);
    if (grid > 65536) grid = 65536;
    gelu_forward_kernel<<<grid, block_size, 0, stream>>>(out, inp, N / 8);
    cudaCheckLaunch();
}

// dinp = dout * GELU'(inp), N elements (overwrites dinp; dinp may alias dout: in-place is fine).
// inp is the GELU input saved by the forward pass.
static void gelu_backward(floatX *dinp, const floatX *inp, const floatX *dout, size_t N, cudaStream_t stream) {
    if (N == 0) return;
    const int block_size = 256;
    CUDA_REQUIRE(N % 8 == 0 && is_aligned16(dinp) && is_aligned16(inp) && is_aligned16(dout));
    int grid = grid_for(N / 8, block_size);
    if (grid > 65536) grid = 65536;
    gelu_backward_kernel<<<grid, block_size, 0, stream>>>(dinp, inp, dout, N / 8);
    cudaCheckLaunch();
}
