// dev/cuda/host_check.h: the CUDA-free part of the dev/cuda harness (dev/cuda/kernel_check.cuh
// includes it; dev/cuda/flash_emulate.cpp, which runs kernels on the CPU, uses it alone):
// reproducible host random numbers, and tolerance checks that print max abs / rel error and
// count failures.
#pragma once
#include <vector>
#include <algorithm>
#include <cmath>
#include <stdio.h>
#include <stdint.h>

// ----------------------------------------------------------------------------
// host random numbers (splitmix64), reproducible

static uint64_t g_dev_rng = 0x2545F4914F6CDD1Dull;
static inline uint64_t dev_rand_u64(void) {
    uint64_t z = (g_dev_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline float dev_rand_uniform(void) { return (float)((dev_rand_u64() >> 40) * (1.0 / 16777216.0)); }  // [0,1)
static inline float dev_rand_normal(void) {
    float u1 = dev_rand_uniform(), u2 = dev_rand_uniform();
    if (u1 < 1e-7f) u1 = 1e-7f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
}
static inline int dev_rand_int(int n) { return (int)(dev_rand_u64() % (uint64_t)n); }

// ----------------------------------------------------------------------------
// checks

static int g_dev_failures = 0;

// Element i passes when |got - ref| <= atol + rtol * |ref|, atol = atol_frac * max|ref|;
// the whole output also needs ||got - ref|| / ||ref|| <= nrel_tol. NaN or Inf fails.
// Prints one line; returns 1 on pass and counts failures in g_dev_failures.
static int check_close(const char *name, const float *got, const float *ref, size_t n,
                       float atol_frac, float rtol, double nrel_tol = 1e-2) {
    double maxref = 0;
    for (size_t i = 0; i < n; i++) maxref = std::max(maxref, (double)fabsf(ref[i]));
    const double atol = atol_frac * maxref + 1e-30;
    double max_abs = 0, max_rel = 0, num = 0, den = 0;
    size_t bad = 0, first_bad = (size_t)-1, nonfinite = 0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], r = ref[i];
        if (!std::isfinite(g)) {
            nonfinite++;
            if (first_bad == (size_t)-1) first_bad = i;
            continue;
        }
        double d = fabs(g - r);
        max_abs = std::max(max_abs, d);
        if (fabs(r) > atol) max_rel = std::max(max_rel, d / fabs(r));
        num += d * d;
        den += r * r;
        if (d > atol + rtol * fabs(r)) {
            bad++;
            if (first_bad == (size_t)-1) first_bad = i;
        }
    }
    double nrel = den > 0 ? sqrt(num / den) : sqrt(num);
    int ok = bad == 0 && nonfinite == 0 && nrel <= nrel_tol;
    printf("  %-28s n=%-10zu max_abs=%.3e max_rel=%.3e norm_rel=%.3e (atol %.1e rtol %.1e) %s", name, n, max_abs,
           max_rel, nrel, atol, rtol, ok ? "OK" : "FAIL");
    if (!ok) {
        if (first_bad != (size_t)-1)
            printf("  [%zu bad, %zu non-finite; first at %zu: got %.6g ref %.6g]", bad, nonfinite, first_bad,
                   (double)got[first_bad], (double)ref[first_bad]);
        else
            printf("  [norm_rel above %.1e]", nrel_tol);
        g_dev_failures++;
    }
    printf("\n");
    return ok;
}
static int check_close(const char *name, const std::vector<float> &got, const std::vector<float> &ref,
                       float atol_frac, float rtol, double nrel_tol = 1e-2) {
    if (got.size() != ref.size()) {
        printf("  %-28s size mismatch %zu vs %zu FAIL\n", name, got.size(), ref.size());
        g_dev_failures++;
        return 0;
    }
    return check_close(name, got.data(), ref.data(), got.size(), atol_frac, rtol, nrel_tol);
}
static int check_true(const char *name, int cond) {
    printf("  %-28s %s\n", name, cond ? "OK" : "FAIL");
    if (!cond) g_dev_failures++;
    return cond;
}
