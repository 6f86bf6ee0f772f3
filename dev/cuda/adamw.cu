// dev/cuda/adamw.cu: the GPU AdamW kernel (adamw.cuh) against the CPU reference (the scalar path),
// then a timed benchmark.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -I. dev/cuda/adamw.cu -o dev/cuda/bin/adamw
//   ./dev/cuda/bin/adamw [bench_n]      (default bench_n = 124475904, GPT-2 124M padded)
// Correctness: random data with NaN/Inf/denormals sprinkled in, 3 steps (t = 1..3), fp32 and bf16
// grads, bf16 output on and off, aligned (vectorized kernel) and misaligned (scalar kernel)
// pointers, sizes with tails. The kernel follows the reference operation order with explicit
// round-to-nearest intrinsics, so the result is expected bitwise equal; the limit is 1 ulp.
// Exit 0 pass, 1 fail, 77 no usable GPU.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "cuda/common.cuh"
#include "adamw.cuh"


static uint64_t g_rng = 0x12345678abcdefull;
static uint64_t rnd(void) {
    uint64_t z = (g_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float urand(void) { return (float)((rnd() >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static int64_t ulp_diff(float a, float b) {
    if (isnan(a) || isnan(b)) return (isnan(a) && isnan(b)) ? 0 : (int64_t)1 << 40;
    uint32_t ua = f2u(a), ub = f2u(b);
    int64_t oa = (ua & 0x80000000u) ? -(int64_t)(ua & 0x7fffffffu) : (int64_t)ua;
    int64_t ob = (ub & 0x80000000u) ? -(int64_t)(ub & 0x7fffffffu) : (int64_t)ub;
    return oa > ob ? oa - ob : ob - oa;
}

struct Err { int64_t ulp; double abs_err, rel_err; size_t mismatches; };
static void compare(const float *a, const float *b, size_t n, Err *e) {
    for (size_t i = 0; i < n; i++) {
        int64_t u = ulp_diff(a[i], b[i]);
        if (u > e->ulp) e->ulp = u;
        if (u) e->mismatches++;
        if (isfinite(a[i]) && isfinite(b[i])) {
            double d = fabs((double)a[i] - b[i]);
            if (d > e->abs_err) e->abs_err = d;
            if (b[i] != 0 && d / fabs(b[i]) > e->rel_err) e->rel_err = d / fabs(b[i]);
        }
    }
}

// l2: weight decay added to the gradient (Adam, DeepSpeed adam_w_mode false) instead of decoupled
static AdamWParams hparams(int t, float wd, float gs, int l2) {
    AdamWParams hp;
    hp.lr = 1e-3f * (float)t; hp.beta1 = 0.9f; hp.beta2 = 0.95f; hp.eps = 1e-8f;
    hp.weight_decay = wd; hp.t = t; hp.grad_scale = gs; hp.l2_decay = l2;
    return hp;
}

// one correctness case; off = element offset of every device pointer (misaligns when not % 4)
static int check_case(size_t n, int bf16_grads, int with_out, size_t off, float wd, float gs, int l2) {
    float *p = (float *)malloc(n * 4), *g = (float *)malloc(n * 4), *m = (float *)calloc(n, 4), *v = (float *)calloc(n, 4);
    uint16_t *gb = (uint16_t *)malloc(n * 2), *out = (uint16_t *)calloc(n, 2);
    float *dp_h = (float *)malloc(n * 4), *dm_h = (float *)malloc(n * 4), *dv_h = (float *)malloc(n * 4);
    uint16_t *dout_h = (uint16_t *)malloc(n * 2);
    static const uint32_t specials[] = {0x7fc00000u, 0x7f800000u, 0xff800000u, 0x00000000u, 0x80000000u, 0x00000123u,
                                        0x7149f2cau};
    for (size_t i = 0; i < n; i++) p[i] = urand() * 0.1f;
    float *dp, *dg, *dm, *dv; __nv_bfloat16 *dgb, *dout;
    cudaCheck(cudaMalloc(&dp, (n + off) * 4)); cudaCheck(cudaMalloc(&dg, (n + off) * 4)); cudaCheck(cudaMalloc(&dm, (n + off) * 4));
    cudaCheck(cudaMalloc(&dv, (n + off) * 4)); cudaCheck(cudaMalloc(&dgb, (n + off) * 2)); cudaCheck(cudaMalloc(&dout, (n + off) * 2));
    cudaCheck(cudaMemcpy(dp + off, p, n * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(dm, 0, (n + off) * 4)); cudaCheck(cudaMemset(dv, 0, (n + off) * 4)); cudaCheck(cudaMemset(dout, 0, (n + off) * 2));
    adamw_cpu_set_path(ADAMW_PATH_SCALAR);
    for (int t = 1; t <= 3; t++) {
        for (size_t i = 0; i < n; i++) {
            g[i] = urand() * ((i % 3) ? 1.0f : 1e-3f);
            if (rnd() % 1000 == 0) g[i] = u2f(specials[rnd() % 7]);
            gb[i] = float_to_bf16_rne(g[i]);
        }
        AdamWParams hp = hparams(t, wd, gs, l2);
        if (bf16_grads) adamw_cpu_step_bf16grad(p, gb, m, v, with_out ? out : NULL, n, hp);
        else adamw_cpu_step(p, g, m, v, with_out ? out : NULL, n, hp);
        if (bf16_grads) {
            cudaCheck(cudaMemcpy(dgb + off, gb, n * 2, cudaMemcpyHostToDevice));
            adamw_gpu_step(dp + off, (const __nv_bfloat16 *)(dgb + off), dm + off, dv + off, with_out ? dout + off : NULL, n, hp, 0);
        } else {
            cudaCheck(cudaMemcpy(dg + off, g, n * 4, cudaMemcpyHostToDevice));
            adamw_gpu_step(dp + off, (const float *)(dg + off), dm + off, dv + off, with_out ? dout + off : NULL, n, hp, 0);
        }
        cudaCheck(cudaGetLastError());
    }
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(dp_h, dp + off, n * 4, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(dm_h, dm + off, n * 4, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(dv_h, dv + off, n * 4, cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(dout_h, dout + off, n * 2, cudaMemcpyDeviceToHost));
    Err ep = {0, 0, 0, 0}, em = {0, 0, 0, 0}, ev = {0, 0, 0, 0};
    compare(dp_h, p, n, &ep); compare(dm_h, m, n, &em); compare(dv_h, v, n, &ev);
    size_t out_mis = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t a = dout_h[i], b = out[i];
        int an = (a & 0x7fff) > 0x7f80, bn = (b & 0x7fff) > 0x7f80;
        if (!(a == b || (an && bn))) out_mis++;
    }
    int ok = ep.ulp <= 1 && em.ulp <= 1 && ev.ulp <= 1 && out_mis == 0;
    printf("  n=%-8zu%s grad=%s out=%s %s: p max abs %.2e rel %.2e (%lld ulp, %zu differ), m %lld ulp, v %lld ulp, bf16 out %zu differ  %s\n",
           n, l2 ? " L2" : "   ", bf16_grads ? "bf16" : "fp32", with_out ? "bf16" : "none ", off % 4 ? "misaligned(scalar)" : "aligned(vec4)     ",
           ep.abs_err, ep.rel_err, (long long)ep.ulp, ep.mismatches, (long long)em.ulp, (long long)ev.ulp, out_mis,
           ok ? "OK" : "FAIL");
    cudaFree(dp); cudaFree(dg); cudaFree(dm); cudaFree(dv); cudaFree(dgb); cudaFree(dout);
    free(p); free(g); free(m); free(v); free(gb); free(out); free(dp_h); free(dm_h); free(dv_h); free(dout_h);
    return ok;
}

int main(int argc, char **argv) {
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        printf("SKIP: no usable CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    printf("adamw (GPU) on %s, %d SMs\n", prop.name, prop.multiProcessorCount);

    printf("correctness vs the CPU scalar reference (3 steps, specials included):\n");
    int ok = 1;
    const size_t sizes[] = {1, 7, 1000003, (1 << 22) + 3};
    for (int si = 0; si < 4; si++)
        for (int gbf = 0; gbf < 2; gbf++)
            for (int out = 0; out < 2; out++)
                ok &= check_case(sizes[si], gbf, out, 0, (si & 1) ? 0.0f : 0.1f, (si & 1) ? 0.37f : 1.0f, 0);
    ok &= check_case(1000003, 0, 1, 1, 0.1f, 1.0f, 0);
    ok &= check_case(1000003, 1, 1, 3, 0.1f, 1.0f, 0);
    for (int si = 0; si < 3; si++)   // L2 weight decay (Adam): vec4 and scalar kernels, fp32 and bf16 grads
        ok &= check_case(sizes[si], si & 1, 1, si == 2 ? 1 : 0, 0.1f, 0.8f, 1);

    // benchmark
    size_t n = argc > 1 ? (size_t)atof(argv[1]) : (size_t)124475904;
    float *dp, *dg, *dm, *dv; __nv_bfloat16 *dgb, *dout;
    cudaCheck(cudaMalloc(&dp, n * 4)); cudaCheck(cudaMalloc(&dg, n * 4)); cudaCheck(cudaMalloc(&dm, n * 4)); cudaCheck(cudaMalloc(&dv, n * 4));
    cudaCheck(cudaMalloc(&dgb, n * 2)); cudaCheck(cudaMalloc(&dout, n * 2));
    cudaCheck(cudaMemset(dp, 0, n * 4)); cudaCheck(cudaMemset(dg, 0, n * 4)); cudaCheck(cudaMemset(dm, 0, n * 4)); cudaCheck(cudaMemset(dv, 0, n * 4));
    cudaCheck(cudaMemset(dgb, 0, n * 2)); cudaCheck(cudaMemset(dout, 0, n * 2));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0)); cudaCheck(cudaEventCreate(&e1));
    printf("benchmark, n = %zu (bytes counted: read p g m v, write p m v and the bf16 copy):\n", n);
    for (int cfg = 0; cfg < 3; cfg++) {
        int gbf = cfg >= 1, out = cfg <= 1;
        double bytes = (double)n * (4 + (gbf ? 2 : 4) + 4 + 4 + 12 + (out ? 2 : 0));
        const int iters = 20;
        for (int it = 0; it <= iters; it++) {
            if (it == 1) cudaCheck(cudaEventRecord(e0));
            AdamWParams hp = hparams(it + 1, 0.1f, 1.0f, 0);
            if (gbf) adamw_gpu_step(dp, (const __nv_bfloat16 *)dgb, dm, dv, out ? dout : NULL, n, hp, 0);
            else adamw_gpu_step(dp, (const float *)dg, dm, dv, out ? dout : NULL, n, hp, 0);
        }
        cudaCheck(cudaEventRecord(e1));
        cudaCheck(cudaEventSynchronize(e1));
        cudaCheck(cudaGetLastError());
        float ms = 0;
        cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
        ms /= iters;
        printf("  grad %s, out %s: %.3f ms/step, %.0f GB/s (%.0f B/param), %.1f G params/s\n", gbf ? "bf16" : "fp32",
               out ? "bf16" : "none", ms, bytes / (ms * 1e-3) / 1e9, bytes / n, n / (ms * 1e-3) / 1e9);
    }
    cudaFree(dp); cudaFree(dg); cudaFree(dm); cudaFree(dv); cudaFree(dgb); cudaFree(dout);
    printf("adamw (GPU): %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}
