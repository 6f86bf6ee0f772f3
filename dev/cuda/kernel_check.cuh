// dev/cuda/kernel_check.cuh: the shared harness of the dev/cuda kernel programs:
// GPU detection (exit 77 "SKIP" without one), bf16 <-> float transfers, output poisoning and
// event timing; host random numbers and the tolerance checks that print max abs / rel error
// come from dev/cuda/host_check.h (no CUDA: the CPU emulation of the flash kernels uses them).
#pragma once
#include <vector>
#include <algorithm>
#include <cmath>
#include "cuda/common.cuh"
#include "dev/cuda/host_check.h"

// exits 77 with "SKIP: ..." when no CUDA device can be used
static void dev_require_gpu(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("SKIP: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices found");
        exit(77);
    }
    cudaCheck(cudaSetDevice(0));
    cudaDeviceProp p;
    cudaCheck(cudaGetDeviceProperties(&p, 0));
    printf("device: %s, %d SMs, sm_%d%d\n", p.name, p.multiProcessorCount, p.major, p.minor);
}

// ----------------------------------------------------------------------------
// host values as the GPU stores them (bf16)

// value i of a random stream (seed): uniform in [-1, 1), whichever thread computes it (OpenMP fills)
static float dev_hrand(uint64_t seed, size_t i) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + i * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((z >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static inline float bf16_round(float x) { return __bfloat162float(__float2bfloat16(x)); }

// n values ~ N(0, std), rounded to bf16 (so the CPU reference sees what the GPU sees)
static std::vector<float> rand_normal_bf16(size_t n, float std) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = bf16_round(std * dev_rand_normal());
    return v;
}
static std::vector<float> rand_uniform_bf16(size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = bf16_round(lo + (hi - lo) * dev_rand_uniform());
    return v;
}

// ----------------------------------------------------------------------------
// device buffers

template <class T> static T *dev_alloc(size_t n) {
    T *p = NULL;
    cudaCheck(cudaMalloc(&p, (n > 0 ? n : 1) * sizeof(T)));
    return p;
}
// fill with 0xFF bytes: NaN for both bf16 and fp32, so unwritten outputs fail the checks
template <class T> static void dev_poison(T *p, size_t n) { cudaCheck(cudaMemset(p, 0xFF, n * sizeof(T))); }

static void upload_bf16(floatX *d, const float *h, size_t n) {
    std::vector<floatX> tmp(n);
    for (size_t i = 0; i < n; i++) tmp[i] = __float2bfloat16(h[i]);
    cudaCheck(cudaMemcpy(d, tmp.data(), n * sizeof(floatX), cudaMemcpyHostToDevice));
}
static floatX *to_device_bf16(const std::vector<float> &h) {
    floatX *d = dev_alloc<floatX>(h.size());
    upload_bf16(d, h.data(), h.size());
    return d;
}
static std::vector<float> from_device_bf16(const floatX *d, size_t n) {
    std::vector<floatX> tmp(n);
    cudaCheck(cudaMemcpy(tmp.data(), d, n * sizeof(floatX), cudaMemcpyDeviceToHost));
    std::vector<float> h(n);
    for (size_t i = 0; i < n; i++) h[i] = __bfloat162float(tmp[i]);
    return h;
}
static std::vector<float> from_device_f32(const float *d, size_t n) {
    std::vector<float> h(n);
    cudaCheck(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}
static int *to_device_i32(const std::vector<int> &h) {
    int *d = dev_alloc<int>(h.size());
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * sizeof(int), cudaMemcpyHostToDevice));
    return d;
}
// raw bytes of a device buffer (for bitwise determinism checks)
template <class T> static std::vector<unsigned char> dev_bytes(const T *d, size_t n) {
    std::vector<unsigned char> h(n * sizeof(T));
    cudaCheck(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

// ----------------------------------------------------------------------------
// timing: median over `rounds` of the mean time of `iters` calls, after a warm-up

template <class F> static float time_us(F f, int iters = 50, int rounds = 5) {
    for (int i = 0; i < 3; i++) f();
    cudaCheck(cudaDeviceSynchronize());
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    std::vector<float> t;
    for (int r = 0; r < rounds; r++) {
        cudaCheck(cudaEventRecord(a));
        for (int i = 0; i < iters; i++) f();
        cudaCheck(cudaEventRecord(b));
        cudaCheck(cudaEventSynchronize(b));
        float ms = 0;
        cudaCheck(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1000.0f / iters);
    }
    cudaCheck(cudaGetLastError());
    cudaCheck(cudaEventDestroy(a));
    cudaCheck(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

// two ways to compute the same thing, timed alternately (A B A B A B) so that a drift of the
// clock or of the machine touches both: the median of three time_us medians each
template <class FA, class FB>
static void time_us_alternating(FA fa, FB fb, float *us_a, float *us_b, int iters = 50, int rounds = 5) {
    float a[3], b[3];
    for (int r = 0; r < 3; r++) { a[r] = time_us(fa, iters, rounds); b[r] = time_us(fb, iters, rounds); }
    std::sort(a, a + 3);
    std::sort(b, b + 3);
    *us_a = a[1];
    *us_b = b[1];
}

static void report_bw(const char *name, float us, double bytes) {
    printf("  time %-30s %9.2f us  %8.1f GB/s\n", name, us, bytes / (us * 1e-6) / 1e9);
}
static void report_flops(const char *name, float us, double flops) {
    printf("  time %-30s %9.2f us  %8.1f TFLOP/s\n", name, us, flops / (us * 1e-6) / 1e12);
}

// final line and exit code: 0 all checks passed, 1 otherwise
static int dev_finish(const char *prog) {
    cudaCheck(cudaDeviceSynchronize());
    if (g_dev_failures) printf("%s: FAILED (%d checks)\n", prog, g_dev_failures);
    else printf("%s: all checks passed\n", prog);
    return g_dev_failures ? 1 : 0;
}
