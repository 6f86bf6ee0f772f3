// cuda/swiglu.cuh: the SwiGLU activation of the llama MLP.
// Input [N, 2F]: gate g in columns 0..F-1 (fc_w rows 0..F-1, w1), up u in F..2F-1 (w3).
// Forward:  out[n, f] = silu(g) * u,  silu(g) = g * sigmoid(g)            out: [N, F]
// Backward: dg = dout * u * sigmoid(g) * (1 + g * (1 - sigmoid(g)))
//           du = dout * silu(g)                                           dinp: [N, 2F]
#pragma once
#include "cuda/common.cuh"

__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }

// one thread per 8 consecutive f of one row (F % 8 == 0)
__global__ void swiglu_forward_kernel(floatX *out, const floatX *inp, size_t N, int F) {
    const int f_vec = F / 8;
    const size_t total = N * (size_t)f_vec;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / f_vec;
        int f = (int)(i % f_vec) * 8;
        const floatX *row = inp + n * 2 * (size_t)F;
        x128 g = load128cs(row + f);
        x128 u = load128cs(row + F + f);
        x128 o;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float gv = bf2f(g[k]);
            o[k] = f2bf(gv * sigmoid_f(gv) * bf2f(u[k]));
        }
        store128(out + n * (size_t)F + f, o);
    }
}

__global__ void swiglu_backward_kernel(floatX *dinp, const floatX *inp, const floatX *dout, size_t N, int F) {
    const int f_vec = F / 8;
    const size_t total = N * (size_t)f_vec;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / f_vec;
        int f = (int)(i % f_vec) * 8;
        const floatX *row = inp + n * 2 * (size_t)F;
        x128 g = load128cs(row + f);
        x128 u = load128cs(row + F + f);
        x128 d = load128cs(dout + n * (size_t)F + f);
        x128 dg, du;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            float gv = bf2f(g[k]), uv = bf2f(u[k]), dv = bf2f(d[k]);
            float s = sigmoid_f(gv);
            dg[k] = f2bf(dv * uv * s * (1.0f + gv * (1.0f - s)));
            du[k] = f2bf(dv * gv * s);
        }
        floatX *drow = dinp + n * 2 * (size_t)F;
        store128(drow + f, dg);
        store128(drow + F + f, du);
    }
}

// out[N, F] = silu(inp[:, :F]) * inp[:, F:]
static void swiglu_forward(floatX *out, const floatX *inp, size_t N, int F, cudaStream_t stream) {
    if (N == 0 || F == 0) return;
    const int block_size = 256;
    CUDA_REQUIRE(F % 8 == 0 && is_aligned16(out) && is_aligned16(inp));
    int grid = grid_for(N * (size_t)(F / 8), block_size);
    if (grid > 65536) grid = 65536;
    swiglu_forward_kernel<<<grid, block_size, 0, stream>>>(out, inp, N, F);
    cudaCheckLaunch();
}

// dinp[N, 2F] = (d gate, d up), overwritten; inp [N, 2F] is the forward input, dout [N, F].
// dinp may alias inp (each element pair is read before it is written by the same thread);
// dinp must not alias dout.
static void swiglu_backward(floatX *dinp, const floatX *inp, const floatX *dout, size_t N, int F, cudaStream_t stream) {
    if (N == 0 || F == 0) return;
    const int block_size = 256;
    CUDA_REQUIRE(F % 8 == 0 && is_aligned16(dinp) && is_aligned16(inp) && is_aligned16(dout));
    int grid = grid_for(N * (size_t)(F / 8), block_size);
    if (grid > 65536) grid = 65536;
    swiglu_backward_kernel<<<grid, block_size, 0, stream>>>(dinp, inp, dout, N, F);
    cudaCheckLaunch();
}
