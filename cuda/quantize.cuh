// cuda/quantize.cuh: ZeRO++'s block quantization on the GPU, the same arithmetic as the CPU
// reference util/quantize.h, which says why (blocks of ZQ_BLOCK values, one fp32 scale each,
// symmetric codes, nearest code with ties to even) and lays out a message: the codes (int8, or
// int4 two to a byte, low nibble first), then the scales. dev/cuda/quantize.cu checks that both
// give the same bytes. zero/device.cuh calls these for train_gpt, a path no GPU has run yet.
//
// Quantize: one thread block of ZQ_BLOCK threads per quantization block, a thread per value.
// The block's largest magnitude comes from a warp-shuffle reduction, then each thread divides
// by the scale (IEEE division, as the CPU's) and rounds with rintf. For int4 the even thread
// packs its code with its odd neighbour's into one byte. The block's error, its largest
// |x - q * scale| over its largest |x|, goes to *err with an integer atomicMax on the float's
// bits, which orders non-negative floats as integers.
#pragma once
#include "cuda/common.cuh"
#include "util/quantize.h"

static_assert(ZQ_BLOCK == 256, "one thread per value: the kernels launch ZQ_BLOCK threads");

__device__ __forceinline__ float zq_load(const float *x, size_t i) { return x[i]; }
__device__ __forceinline__ float zq_load(const floatX *x, size_t i) { return bf2f(x[i]); }

// v over the thread block, its largest or its sum; every thread gets it
__device__ __forceinline__ float zq_block_reduce(float v, float *shared, int sum) {
    for (int o = 16; o > 0; o >>= 1) {
        float other = __shfl_xor_sync(0xffffffff, v, o);
        v = sum ? v + other : fmaxf(v, other);
    }
    if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = v;
    __syncthreads();
    v = shared[0];
    for (int w = 1; w < ZQ_BLOCK / 32; w++) v = sum ? v + shared[w] : fmaxf(v, shared[w]);
    __syncthreads();
    return v;
}

// sums[0..1] += the block's squared error and squares, as util/quantize.h's, in fp32
template <typename T>
__global__ void zq_quantize_kernel(const T *x, size_t n, int bits, uint8_t *out, float *sums) {
    __shared__ float shared[ZQ_BLOCK / 32];
    size_t i = (size_t)blockIdx.x * ZQ_BLOCK + threadIdx.x;
    int live = i < n, qmax = bits == 8 ? 127 : 7;
    float v = live ? zq_load(x, i) : 0.0f;
    float amax = zq_block_reduce(fabsf(v), shared, 0);
    float scale = amax / (float)qmax;
    if (threadIdx.x == 0) ((float *)(out + n * (size_t)bits / 8))[blockIdx.x] = scale;
    float q = scale > 0 ? rintf(__fdiv_rn(v, scale)) : 0.0f;
    q = fminf(fmaxf(q, (float)-qmax), (float)qmax);
    int code = (int)q;
    if (bits == 8) { if (live) out[i] = (uint8_t)(int8_t)code; }
    else {
        int odd = __shfl_down_sync(0xffffffff, code, 1);   // i is even at even threads: blocks start at multiples of 256
        if (live && !(i & 1)) out[i / 2] = (uint8_t)((code & 15) | ((odd & 15) << 4));
    }
    float d = __fsub_rn(v, __fmul_rn(q, scale));
    float e2 = zq_block_reduce(live ? d * d : 0.0f, shared, 1), x2 = zq_block_reduce(v * v, shared, 1);
    if (threadIdx.x == 0) { atomicAdd(&sums[0], e2); atomicAdd(&sums[1], x2); }
}

__device__ __forceinline__ void zq_store(float *y, size_t i, float v, int add) { y[i] = add ? y[i] + v : v; }
__device__ __forceinline__ void zq_store(floatX *y, size_t i, float v, int add) { y[i] = f2bf(add ? bf2f(y[i]) + v : v); }

template <typename T>
__global__ void zq_dequantize_kernel(const uint8_t *in, size_t n, int bits, T *y, int add) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float *scale = (const float *)(in + n * (size_t)bits / 8);
    int code = bits == 8 ? (int)(int8_t)in[i] : ((int)(int8_t)(uint8_t)((i & 1 ? in[i / 2] >> 4 : in[i / 2]) << 4) >> 4);
    zq_store(y, i, __fmul_rn((float)code, scale[i / ZQ_BLOCK]), add);
}

__global__ void zq_scale_kernel(const float *x, floatX *y, size_t n, float s) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = f2bf(x[i] * s);
}

// The scales follow the codes, so they start on a float boundary only when the message does and
// n * bits / 8 is a multiple of 4 (n a multiple of 8); a unit's shard always is (a multiple of
// ZERO_ALIGN, 16, values: zero/plan.h). Anything else would fault on the first scale store.
static void zq_require_aligned(const char *func, const uint8_t *msg, size_t n, int bits) {
    size_t at = n * (size_t)bits / 8;
    if (((uintptr_t)msg + at) % sizeof(float) != 0 || n * (size_t)bits % 8 != 0)
        fatal("%s: a message of %zu int%d values puts its scales at byte %zu from address %p, not on a 4-byte boundary "
              "(n * bits / 8 must be a multiple of 4, the message 4-byte aligned)", func, n, bits, at, (const void *)msg);
}

// launchers: x[0..n) into the message out; sums: two device floats, the running squared error and squares
template <typename T>
static void zq_quantize_gpu(const T *x, size_t n, int bits, uint8_t *out, float *sums, cudaStream_t s) {
    if (n == 0) return;
    zq_require_aligned("zq_quantize_gpu", out, n, bits);
    zq_quantize_kernel<T><<<(unsigned)zq_blocks(n), ZQ_BLOCK, 0, s>>>(x, n, bits, out, sums);
    cudaCheck(cudaGetLastError());
}
template <typename T>
static void zq_dequantize_gpu(const uint8_t *in, size_t n, int bits, T *y, int add, cudaStream_t s) {
    if (n == 0) return;
    zq_require_aligned("zq_dequantize_gpu", in, n, bits);
    zq_dequantize_kernel<T><<<(unsigned)((n + 255) / 256), 256, 0, s>>>(in, n, bits, y, add);
    cudaCheck(cudaGetLastError());
}
static void zq_scale_gpu(const float *x, floatX *y, size_t n, float s, cudaStream_t st) {
    if (n == 0) return;
    zq_scale_kernel<<<(unsigned)((n + 255) / 256), 256, 0, st>>>(x, y, n, s);
    cudaCheck(cudaGetLastError());
}
