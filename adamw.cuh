// adamw.cuh: AdamW for zeroc, on the CPU (SIMD + OpenMP, the CPU trainer and
// ZeRO-Offload's host-side optimizer) and on the GPU (one fused kernel).
// Usable from C (gcc -std=gnu11, train_gpt.c) and from CUDA (nvcc -std=c++17,
// train_gpt.cu): CUDA parts sit under #ifdef __CUDACC__.
//
// Math (DeepSpeed CPU-Adam == torch.optim.AdamW, decoupled weight decay, bias
// correction always on, t is the 1-based step; with l2_decay set, DeepSpeed's
// "Adam" with adam_w_mode false == torch.optim.Adam: the weight decay is added to
// the gradient instead, L2 regularisation). Per call, in double, each then
// rounded once to float:
//     c1   = 1 - beta1                    c2   = 1 - beta2
//     ibc2 = 1 / sqrt(1 - beta2^t)        nstep = -(lr / (1 - beta1^t))
//     nlrwd = -(lr * weight_decay)        (0 with l2_decay)
//     l2wd = weight_decay                 (0 without l2_decay)
// Per element, in float, every line rounded once to nearest-even (this order IS
// the reference; the scalar, AVX2, AVX-512 and GPU paths all follow it, so they
// agree bit for bit; fmaf is one rounding):
//     g  = grad * grad_scale
//     g  = fmaf(p, l2wd, g)                  // L2: g += wd*p (DeepSpeed's CPU-Adam FMA), skipped when l2wd == 0
//     m  = fmaf(g, c1, beta1 * m)
//     v  = fmaf(g * g, c2, beta2 * v)
//     d  = fmaf(sqrtf(v), ibc2, eps)         // sqrt(v)/sqrt(1-beta2^t) + eps
//     p  = fmaf(p, nlrwd, p)                 // p -= lr*wd*p, skipped when nlrwd == 0
//     p  = fmaf(m / d, nstep, p)             // p -= lr/(1-beta1^t) * m/d
//     out16 = bf16_rne(p) or fp16_rne(p)     // optional (hp.fp16 picks the 16-bit format)
// FMA is used deliberately (it is what DeepSpeed's SIMD code does): the
// scalar fallback calls fmaf() at the same places, and there is no bare a*b+c
// left for the compiler to contract, so -ffp-contract settings do not change
// results. sqrt and division stay exact IEEE operations (no rsqrt/rcp
// approximations): they are cheap next to the 28 bytes of memory traffic per
// element. Do not build with -ffast-math.
//
// 16-bit gradients and the 16-bit output are bf16, or IEEE fp16 with hp.fp16. The output
// rounds to nearest even, as util/common.h's float_to_bf16_rne and F16C's vcvtps2ph do:
// overflow to Inf, NaN stays a quiet NaN, denormals round like any value. Not stochastic
// rounding: deterministic, the same on CPU and GPU, so a resumed run is bitwise an
// unbroken one. The GPU matches the CPU bitwise with nvcc's default float modes.
//
// The calls: adamw_cpu_step with fp32 gradients, adamw_cpu_step_bf16grad with 16-bit
// ones, adamw_cpu_step_tiled for offload; adamw_cpu_set_path picks a SIMD path; on the
// GPU adamw_gpu_step and the lean step's adamw_gpu_runs. A 16-bit value on the host is
// its uint16_t bits. Threads: OpenMP's; a call inside a parallel region or on fewer
// than 32768 elements runs on the calling thread.
#pragma once
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <math.h>
#include "util/common.h"
#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ADAMW_X86 1
#include <immintrin.h>
#else
#define ADAMW_X86 0
#endif

#ifdef __CUDACC__
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "cuda/common.cuh"   // cuda_num_sms, grid_stride_first (the lean step's launch)
#endif

// ----------------------------------------------------------------------------
// hyperparameters of one step

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    int t;              // 1-based step number (bias correction)
    float grad_scale;   // multiplied into every gradient first (clip coef / 1/loss_scale); 1 = none
    int l2_decay;       // 0: decoupled weight decay (AdamW); 1: weight decay added to the gradient (Adam, L2)
    int fp16;           // 16-bit gradients and output are IEEE fp16 (0: bf16)
} AdamWParams;

// the per-call constants, derived once (in double, rounded to float once)
typedef struct {
    float beta1, beta2, c1, c2, ibc2, eps, nlrwd, l2wd, nstep, grad_scale;
    int fp16;
} AdamWConsts;

static AdamWConsts adamw_consts(AdamWParams hp) {
    AdamWConsts k;
    int t = hp.t < 1 ? 1 : hp.t;
    double bc1 = 1.0 - pow((double)hp.beta1, (double)t);
    double bc2 = 1.0 - pow((double)hp.beta2, (double)t);
    k.beta1 = hp.beta1;
    k.beta2 = hp.beta2;
    k.c1 = (float)(1.0 - (double)hp.beta1);
    k.c2 = (float)(1.0 - (double)hp.beta2);
    k.ibc2 = (float)(1.0 / sqrt(bc2));
    k.eps = hp.eps;
    k.nlrwd = hp.l2_decay ? 0.0f : (float)(-((double)hp.lr * (double)hp.weight_decay));
    k.l2wd = hp.l2_decay ? hp.weight_decay : 0.0f;
    k.nstep = (float)(-((double)hp.lr / bc1));
    k.grad_scale = hp.grad_scale;
    k.fp16 = hp.fp16;
    return k;
}

// ----------------------------------------------------------------------------
// the 16-bit formats (util/common.h has the conversions, float_to_bf16_rne / bf16_to_float,
// float_to_fp16_rne / fp16_to_float)

HOST_DEVICE static inline float adamw_bf16_round(float f) { return bf16_to_float(float_to_bf16_rne(f)); }
HOST_DEVICE static inline float adamw_x16_to_float(int fp16, uint16_t b) { return fp16 ? fp16_to_float(b) : bf16_to_float(b); }
HOST_DEVICE static inline uint16_t adamw_float_to_x16(int fp16, float f) { return fp16 ? float_to_fp16_rne(f) : float_to_bf16_rne(f); }

// ----------------------------------------------------------------------------
// the reference element update (shared by the scalar CPU path, SIMD tails and
// the GPU kernel). On the device the intrinsics pin every rounding even under
// --use_fast_math.

HOST_DEVICE static inline void adamw_elem(const AdamWConsts *k, float grad, float *p, float *m, float *v) {
#ifdef __CUDA_ARCH__
    float g = __fmul_rn(grad, k->grad_scale);
    if (k->l2wd != 0.0f) g = __fmaf_rn(*p, k->l2wd, g);
    float mm = __fmaf_rn(g, k->c1, __fmul_rn(k->beta1, *m));
    float vv = __fmaf_rn(__fmul_rn(g, g), k->c2, __fmul_rn(k->beta2, *v));
    float d = __fmaf_rn(__fsqrt_rn(vv), k->ibc2, k->eps);
    float pp = *p;
    if (k->nlrwd != 0.0f) pp = __fmaf_rn(pp, k->nlrwd, pp);
    pp = __fmaf_rn(__fdiv_rn(mm, d), k->nstep, pp);
#else
    float g = grad * k->grad_scale;
    if (k->l2wd != 0.0f) g = fmaf(*p, k->l2wd, g);
    float mm = fmaf(g, k->c1, k->beta1 * *m);
    float vv = fmaf(g * g, k->c2, k->beta2 * *v);
    float d = fmaf(sqrtf(vv), k->ibc2, k->eps);
    float pp = *p;
    if (k->nlrwd != 0.0f) pp = fmaf(pp, k->nlrwd, pp);
    pp = fmaf(mm / d, k->nstep, pp);
#endif
    *m = mm; *v = vv; *p = pp;
}

// ----------------------------------------------------------------------------
// CPU paths. Each updates [0, n) of the pointers it is given; exactly one of
// gf (fp32 grads) / gb (16-bit grads) is non-NULL; out (16-bit params) may be NULL.

enum { ADAMW_PATH_AUTO = -1, ADAMW_PATH_SCALAR = 0, ADAMW_PATH_AVX2 = 1, ADAMW_PATH_AVX512 = 2 };

static void adamw_range_scalar(const AdamWConsts *k, float *__restrict__ p, const float *__restrict__ gf,
                               const uint16_t *__restrict__ gb, float *__restrict__ m, float *__restrict__ v,
                               uint16_t *__restrict__ out, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float g = gf ? gf[i] : adamw_x16_to_float(k->fp16, gb[i]);
        adamw_elem(k, g, &p[i], &m[i], &v[i]);
        if (out) out[i] = adamw_float_to_x16(k->fp16, p[i]);
    }
}

#if ADAMW_X86
__attribute__((target("avx2,fma,f16c")))
static void adamw_range_avx2(const AdamWConsts *k, float *__restrict__ p, const float *__restrict__ gf,
                             const uint16_t *__restrict__ gb, float *__restrict__ m, float *__restrict__ v,
                             uint16_t *__restrict__ out, size_t n) {
    const __m256 b1 = _mm256_set1_ps(k->beta1), b2 = _mm256_set1_ps(k->beta2);
    const __m256 c1 = _mm256_set1_ps(k->c1), c2 = _mm256_set1_ps(k->c2);
    const __m256 ibc2 = _mm256_set1_ps(k->ibc2), eps = _mm256_set1_ps(k->eps);
    const __m256 nlrwd = _mm256_set1_ps(k->nlrwd), nstep = _mm256_set1_ps(k->nstep);
    const __m256 gs = _mm256_set1_ps(k->grad_scale), l2wd = _mm256_set1_ps(k->l2wd);
    const int decay = k->nlrwd != 0.0f, l2 = k->l2wd != 0.0f;
    const __m256i r7fff = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), qbit = _mm256_set1_epi32(0x40);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 g;
        if (gf) g = _mm256_loadu_ps(gf + i);
        else if (k->fp16) g = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(gb + i)));
        else g = _mm256_castsi256_ps(_mm256_slli_epi32(
                 _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(gb + i))), 16));
        g = _mm256_mul_ps(g, gs);
        __m256 pp = _mm256_loadu_ps(p + i);
        if (l2) g = _mm256_fmadd_ps(pp, l2wd, g);
        __m256 mm = _mm256_fmadd_ps(g, c1, _mm256_mul_ps(b1, _mm256_loadu_ps(m + i)));
        __m256 vv = _mm256_fmadd_ps(_mm256_mul_ps(g, g), c2, _mm256_mul_ps(b2, _mm256_loadu_ps(v + i)));
        __m256 d = _mm256_fmadd_ps(_mm256_sqrt_ps(vv), ibc2, eps);
        if (decay) pp = _mm256_fmadd_ps(pp, nlrwd, pp);
        pp = _mm256_fmadd_ps(_mm256_div_ps(mm, d), nstep, pp);
        _mm256_storeu_ps(m + i, mm);
        _mm256_storeu_ps(v + i, vv);
        _mm256_storeu_ps(p + i, pp);
        if (out && k->fp16) {
            _mm_storeu_si128((__m128i *)(out + i), _mm256_cvtps_ph(pp, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        } else if (out) {
            __m256i u = _mm256_castps_si256(pp);
            __m256i hi = _mm256_srli_epi32(u, 16);
            __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, r7fff), _mm256_and_si256(hi, one)), 16);
            __m256 isnan = _mm256_cmp_ps(pp, pp, _CMP_UNORD_Q);
            r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, qbit), _mm256_castps_si256(isnan));
            __m256i pk = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);  // [r0..3 r4..7 | ...]
            _mm_storeu_si128((__m128i *)(out + i), _mm256_castsi256_si128(pk));
        }
    }
    if (i < n) adamw_range_scalar(k, p + i, gf ? gf + i : NULL, gb ? gb + i : NULL, m + i, v + i, out ? out + i : NULL, n - i);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f")))
static void adamw_range_avx512(const AdamWConsts *k, float *__restrict__ p, const float *__restrict__ gf,
                               const uint16_t *__restrict__ gb, float *__restrict__ m, float *__restrict__ v,
                               uint16_t *__restrict__ out, size_t n) {
    const __m512 b1 = _mm512_set1_ps(k->beta1), b2 = _mm512_set1_ps(k->beta2);
    const __m512 c1 = _mm512_set1_ps(k->c1), c2 = _mm512_set1_ps(k->c2);
    const __m512 ibc2 = _mm512_set1_ps(k->ibc2), eps = _mm512_set1_ps(k->eps);
    const __m512 nlrwd = _mm512_set1_ps(k->nlrwd), nstep = _mm512_set1_ps(k->nstep);
    const __m512 gs = _mm512_set1_ps(k->grad_scale), l2wd = _mm512_set1_ps(k->l2wd);
    const int decay = k->nlrwd != 0.0f, l2 = k->l2wd != 0.0f;
    const __m512i r7fff = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), qbit = _mm512_set1_epi32(0x40);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 g;
        if (gf) g = _mm512_loadu_ps(gf + i);
        else if (k->fp16) g = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(gb + i)));
        else g = _mm512_castsi512_ps(_mm512_slli_epi32(
                 _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(gb + i))), 16));
        g = _mm512_mul_ps(g, gs);
        __m512 pp = _mm512_loadu_ps(p + i);
        if (l2) g = _mm512_fmadd_ps(pp, l2wd, g);
        __m512 mm = _mm512_fmadd_ps(g, c1, _mm512_mul_ps(b1, _mm512_loadu_ps(m + i)));
        __m512 vv = _mm512_fmadd_ps(_mm512_mul_ps(g, g), c2, _mm512_mul_ps(b2, _mm512_loadu_ps(v + i)));
        __m512 d = _mm512_fmadd_ps(_mm512_sqrt_ps(vv), ibc2, eps);
        if (decay) pp = _mm512_fmadd_ps(pp, nlrwd, pp);
        pp = _mm512_fmadd_ps(_mm512_div_ps(mm, d), nstep, pp);
        _mm512_storeu_ps(m + i, mm);
        _mm512_storeu_ps(v + i, vv);
        _mm512_storeu_ps(p + i, pp);
        if (out && k->fp16) {
            _mm256_storeu_si256((__m256i *)(out + i), _mm512_cvtps_ph(pp, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        } else if (out) {
            __m512i u = _mm512_castps_si512(pp);
            __m512i hi = _mm512_srli_epi32(u, 16);
            __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, r7fff), _mm512_and_si512(hi, one)), 16);
            __mmask16 isnan = _mm512_cmp_ps_mask(pp, pp, _CMP_UNORD_Q);
            r = _mm512_mask_mov_epi32(r, isnan, _mm512_or_si512(hi, qbit));
            _mm256_storeu_si256((__m256i *)(out + i), _mm512_cvtepi32_epi16(r));
        }
    }
    if (i < n) adamw_range_scalar(k, p + i, gf ? gf + i : NULL, gb ? gb + i : NULL, m + i, v + i, out ? out + i : NULL, n - i);
}
#pragma GCC diagnostic pop
#endif  // ADAMW_X86

// ----------------------------------------------------------------------------
// path selection: the best the CPU supports (checked at run time, so the file
// compiles with any -march), unless forced by adamw_cpu_set_path() or by the
// environment variable ZEROC_ADAMW_SIMD=scalar|avx2|avx512|auto.

static int adamw_cpu_path_supported(int path) {
    if (path == ADAMW_PATH_SCALAR) return 1;
#if ADAMW_X86
    __builtin_cpu_init();
    if (path == ADAMW_PATH_AVX2) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    if (path == ADAMW_PATH_AVX512) return __builtin_cpu_supports("avx512f");
#endif
    return 0;
}

static const char *adamw_path_name(int path) {
    switch (path) {
    case ADAMW_PATH_SCALAR: return "scalar";
    case ADAMW_PATH_AVX2: return "avx2";
    case ADAMW_PATH_AVX512: return "avx512";
    default: return "auto";
    }
}

static int g_adamw_path = -2;   // -2: not resolved yet

static int adamw_best_path(void) {
    if (adamw_cpu_path_supported(ADAMW_PATH_AVX512)) return ADAMW_PATH_AVX512;
    if (adamw_cpu_path_supported(ADAMW_PATH_AVX2)) return ADAMW_PATH_AVX2;
    return ADAMW_PATH_SCALAR;
}

// Force a path (ADAMW_PATH_AUTO for the best one). Returns the path in effect,
// or -1 (and changes nothing) when the CPU cannot run the one asked for.
static int adamw_cpu_set_path(int path) {
    if (path == ADAMW_PATH_AUTO) { g_adamw_path = adamw_best_path(); return g_adamw_path; }
    if (!adamw_cpu_path_supported(path)) return -1;
    g_adamw_path = path;
    return path;
}

// The path in effect (resolved on first use, reading ZEROC_ADAMW_SIMD).
static int adamw_cpu_path(void) {
    if (g_adamw_path == -2) {
        const char *e = getenv("ZEROC_ADAMW_SIMD");
        int want = ADAMW_PATH_AUTO;
        if (e && *e) {
            if (!strcmp(e, "scalar")) want = ADAMW_PATH_SCALAR;
            else if (!strcmp(e, "avx2")) want = ADAMW_PATH_AVX2;
            else if (!strcmp(e, "avx512")) want = ADAMW_PATH_AVX512;
            else if (strcmp(e, "auto") != 0)
                fprintf(stderr, "warning: ZEROC_ADAMW_SIMD=%s not one of scalar|avx2|avx512|auto; using auto\n", e);
        }
        if (adamw_cpu_set_path(want) < 0) {
            fprintf(stderr, "warning: ZEROC_ADAMW_SIMD=%s is not supported by this CPU; using %s\n",
                    e, adamw_path_name(adamw_best_path()));
            adamw_cpu_set_path(ADAMW_PATH_AUTO);
        }
    }
    return g_adamw_path;
}

static void adamw_range(int path, const AdamWConsts *k, float *p, const float *gf, const uint16_t *gb,
                        float *m, float *v, uint16_t *out, size_t n) {
    if (n == 0) return;
#if ADAMW_X86
    if (path == ADAMW_PATH_AVX512) { adamw_range_avx512(k, p, gf, gb, m, v, out, n); return; }
    if (path == ADAMW_PATH_AVX2) { adamw_range_avx2(k, p, gf, gb, m, v, out, n); return; }
#endif
    (void)path;
    adamw_range_scalar(k, p, gf, gb, m, v, out, n);
}

// ----------------------------------------------------------------------------
// threading: one OpenMP region per call. Each tile is cut into a chunk per thread, in
// ADAMW_CHUNK elements, whole cache lines, so threads never share a line they write;
// a thread gets the same chunk every step, for cache and NUMA locality.

#define ADAMW_CHUNK 64
#define ADAMW_PAR_MIN ((size_t)1 << 15)   // below this many elements run single-threaded

static int adamw_threads_for(size_t n) {
#ifdef _OPENMP
    if (n >= ADAMW_PAR_MIN && !omp_in_parallel()) return omp_get_max_threads();
#endif
    (void)n;
    return 1;
}

// thread tid's chunk [*a, *b) of the tile [0, len)
static inline void adamw_chunk(size_t len, int tid, int nt, size_t *a, size_t *b) {
    size_t units = ceil_div(len, ADAMW_CHUNK);
    size_t ua = units * (size_t)tid / (size_t)nt, ub = units * (size_t)(tid + 1) / (size_t)nt;
    *a = ua * ADAMW_CHUNK < len ? ua * ADAMW_CHUNK : len;
    *b = ub * ADAMW_CHUNK < len ? ub * ADAMW_CHUNK : len;
}

typedef void (*AdamWTileFn)(size_t offset, size_t n, void *ctx);

// The general entry point: grad is fp32, or 16-bit bits with grad_is_bf16; param_bf16,
// the 16-bit output, may be NULL. The elements go in tiles of tile_elems, a multiple of
// 64, 0 for one. Once all of a tile's outputs are written, on_tile(offset, count, ctx)
// runs on the calling thread, in offset order, while the other threads start the next
// tile: ZeRO-Offload queues the tile's copy to the GPU there, so it overlaps the next
// tile's update. Keep it short; it may be NULL.
static void adamw_cpu_step_tiled(float *param, const void *grad, int grad_is_bf16, float *m, float *v,
                                 uint16_t *param_bf16, size_t n, AdamWParams hp,
                                 size_t tile_elems, AdamWTileFn on_tile, void *ctx) {
    if (n == 0) return;
    const AdamWConsts k = adamw_consts(hp);
    const int path = adamw_cpu_path();
    const float *gf = grad_is_bf16 ? NULL : (const float *)grad;
    const uint16_t *gb = grad_is_bf16 ? (const uint16_t *)grad : NULL;
    size_t tile = tile_elems == 0 || tile_elems >= n ? n : round_up(tile_elems, ADAMW_CHUNK);
    int nthreads = adamw_threads_for(n);
    if (nthreads <= 1) {
        for (size_t off = 0; off < n; off += tile) {
            size_t len = n - off < tile ? n - off : tile;
            adamw_range(path, &k, param + off, gf ? gf + off : NULL, gb ? gb + off : NULL, m + off, v + off,
                        param_bf16 ? param_bf16 + off : NULL, len);
            if (on_tile) on_tile(off, len, ctx);
        }
        return;
    }
#ifdef _OPENMP
    #pragma omp parallel num_threads(nthreads)
    {
        const int tid = omp_get_thread_num(), nt = omp_get_num_threads();
        for (size_t off = 0; off < n; off += tile) {
            size_t len = n - off < tile ? n - off : tile, a, b;
            adamw_chunk(len, tid, nt, &a, &b);
            a += off; b += off;
            adamw_range(path, &k, param + a, gf ? gf + a : NULL, gb ? gb + a : NULL, m + a, v + a,
                        param_bf16 ? param_bf16 + a : NULL, b - a);
            if (on_tile) {
                #pragma omp barrier
                if (tid == 0) on_tile(off, len, ctx);
            }
        }
    }
#endif
}

// One AdamW step over n contiguous elements, fp32 gradients.
static void adamw_cpu_step(float *param, const float *grad, float *m, float *v, uint16_t *param_bf16,
                           size_t n, AdamWParams hp) {
    adamw_cpu_step_tiled(param, grad, 0, m, v, param_bf16, n, hp, 0, NULL, NULL);
}

// Same, 16-bit gradients (uint16_t bits: bf16, or fp16 with hp.fp16).
static void adamw_cpu_step_bf16grad(float *param, const uint16_t *grad, float *m, float *v, uint16_t *param_bf16,
                                    size_t n, AdamWParams hp) {
    adamw_cpu_step_tiled(param, grad, 1, m, v, param_bf16, n, hp, 0, NULL, NULL);
}

// ----------------------------------------------------------------------------
// GPU: one fused kernel, same math and rounding as the CPU (bitwise equal).
#ifdef __CUDACC__

__device__ __forceinline__ float adamw_grad_to_float(float g) { return g; }
__device__ __forceinline__ float adamw_grad_to_float(__nv_bfloat16 g) { return __bfloat162float(g); }
__device__ __forceinline__ float adamw_grad_to_float(__half g) { return __half2float(g); }

// Elements 4j .. 4j+3 of master, grad, m, v and of the floatX output out, which may be
// NULL: vector loads and stores, so the pointers must be aligned for them. Element e uses
// k_decay where bit e of decay4 is set, else k; decay enters only nlrwd and l2wd.
template <typename G>
__device__ __forceinline__ void adamw_vec4(const AdamWConsts &k, const AdamWConsts &k_decay, unsigned decay4,
                                           float *master, const G *grad, float *m, float *v, uint16_t *out, size_t j) {
    float4 p4 = reinterpret_cast<float4 *>(master)[j];
    float4 m4 = reinterpret_cast<float4 *>(m)[j];
    float4 v4 = reinterpret_cast<float4 *>(v)[j];
    float g[4];
    if (sizeof(G) == 4) {
        float4 g4 = reinterpret_cast<const float4 *>(grad)[j];
        g[0] = g4.x; g[1] = g4.y; g[2] = g4.z; g[3] = g4.w;
    } else {
        uint2 gb = reinterpret_cast<const uint2 *>(grad)[j];
        g[0] = adamw_x16_to_float(k.fp16, (uint16_t)(gb.x & 0xffffu)); g[1] = adamw_x16_to_float(k.fp16, (uint16_t)(gb.x >> 16));
        g[2] = adamw_x16_to_float(k.fp16, (uint16_t)(gb.y & 0xffffu)); g[3] = adamw_x16_to_float(k.fp16, (uint16_t)(gb.y >> 16));
    }
    float *pe[4] = {&p4.x, &p4.y, &p4.z, &p4.w}, *me[4] = {&m4.x, &m4.y, &m4.z, &m4.w}, *ve[4] = {&v4.x, &v4.y, &v4.z, &v4.w};
#pragma unroll
    for (int e = 0; e < 4; e++) {
        AdamWConsts ke = k;
        if ((decay4 >> e) & 1u) { ke.nlrwd = k_decay.nlrwd; ke.l2wd = k_decay.l2wd; }
        adamw_elem(&ke, g[e], pe[e], me[e], ve[e]);
    }
    reinterpret_cast<float4 *>(master)[j] = p4;
    reinterpret_cast<float4 *>(m)[j] = m4;
    reinterpret_cast<float4 *>(v)[j] = v4;
    if (out) {
        uint2 o;
        o.x = (uint32_t)adamw_float_to_x16(k.fp16, p4.x) | ((uint32_t)adamw_float_to_x16(k.fp16, p4.y) << 16);
        o.y = (uint32_t)adamw_float_to_x16(k.fp16, p4.z) | ((uint32_t)adamw_float_to_x16(k.fp16, p4.w) << 16);
        reinterpret_cast<uint2 *>(out)[j] = o;
    }
}

// VEC: 4 elements per thread per iteration (adamw_vec4); the launcher picks VEC only when every
// pointer is aligned for it. Grid-stride.
template <typename G, bool VEC>
__global__ void adamw_kernel(float *__restrict__ master, const G *__restrict__ grad, float *__restrict__ m,
                             float *__restrict__ v, floatX *__restrict__ param_out, size_t n, AdamWConsts k) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    uint16_t *out = reinterpret_cast<uint16_t *>(param_out);
    if (VEC) {
        size_t nv = n / 4;
        for (size_t j = idx; j < nv; j += stride) adamw_vec4<G>(k, k, 0u, master, grad, m, v, out, j);
        for (size_t i = nv * 4 + idx; i < n; i += stride) {   // tail (< 4 elements)
            adamw_elem(&k, adamw_grad_to_float(grad[i]), &master[i], &m[i], &v[i]);
            if (out) out[i] = adamw_float_to_x16(k.fp16, master[i]);
        }
    } else {
        for (size_t i = idx; i < n; i += stride) {
            adamw_elem(&k, adamw_grad_to_float(grad[i]), &master[i], &m[i], &v[i]);
            if (out) out[i] = adamw_float_to_x16(k.fp16, master[i]);
        }
    }
}

template <typename G>
static void adamw_gpu_launch(float *master, const G *grad, float *m, float *v, floatX *param_out,
                             size_t n, AdamWParams hp, cudaStream_t stream) {
    if (n == 0) return;
    hp.fp16 = FLOATX_FP16;   // the 16-bit type is the build's floatX
    AdamWConsts k = adamw_consts(hp);
    int dev = 0, sms = 132;
    if (cudaGetDevice(&dev) == cudaSuccess) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    const int block = 256;
    const size_t galign = sizeof(G) * 4;
    bool vec = ((uintptr_t)master % 16 == 0) && ((uintptr_t)m % 16 == 0) && ((uintptr_t)v % 16 == 0) &&
               ((uintptr_t)grad % galign == 0) && ((uintptr_t)param_out % 8 == 0);
    size_t work = vec ? (n + 3) / 4 : n;
    size_t blocks = ceil_div(work, block), maxb = (size_t)sms * 16;
    if (blocks > maxb) blocks = maxb;
    if (vec) adamw_kernel<G, true><<<(unsigned)blocks, block, 0, stream>>>(master, grad, m, v, param_out, n, k);
    else adamw_kernel<G, false><<<(unsigned)blocks, block, 0, stream>>>(master, grad, m, v, param_out, n, k);
}

// One AdamW step on the GPU: fp32 master/m/v updated in place, param_out
// (floatX, may be NULL) written with RNE. Asynchronous on `stream`; check errors
// with cudaGetLastError() as usual.
static void adamw_gpu_step(float *master, const float *grad, float *m, float *v, floatX *param_out,
                           size_t n, AdamWParams hp, cudaStream_t stream) {
    adamw_gpu_launch<float>(master, grad, m, v, param_out, n, hp, stream);
}
static void adamw_gpu_step(float *master, const floatX *grad, float *m, float *v, floatX *param_out,
                           size_t n, AdamWParams hp, cudaStream_t stream) {
    adamw_gpu_launch<floatX>(master, grad, m, v, param_out, n, hp, stream);
}

// ----------------------------------------------------------------------------
// GPU, the lean optimizer step (zero/device.cuh): AdamW over a whole partition in one launch.
//
// The partition's fp32 master, m and v are contiguous by shard offset; its gradients and
// floatX parameters come in runs, a unit's slice each. The launch walks the runs as one
// flat array of 4-element vectors, grid-stride, so every thread has the same share and
// none searches for its run. Weight decay is one bit per element of the shard, bit i%32
// of word i/32: 1/8 byte next to AdamW's 28, where a table of ~150 tensor ranges would
// cost each vector a search.

// one run: n elements (a multiple of 4) from shard offset off (a multiple of 4) of the master, m,
// v and the mask; its gradients at grad (16-byte aligned), its floatX parameters at param (8-byte)
template <typename G> struct AdamWRun { size_t off, n; const G *grad; floatX *param; };

// a weight-decay mask: elements [from, to) decay (their bits set; the mask starts zeroed, words of 32)
static void adamw_decay_mask_set(uint32_t *mask, size_t from, size_t to) {
    size_t a = from;
    for (; a < to && a % 32; a++) mask[a / 32] |= 1u << (a % 32);
    for (; a + 32 <= to; a += 32) mask[a / 32] = 0xffffffffu;
    for (; a < to; a++) mask[a / 32] |= 1u << (a % 32);
}

#define ADAMW_BLOCK 256

template <typename G>
__global__ void __launch_bounds__(ADAMW_BLOCK)
adamw_runs_kernel(float *__restrict__ master, float *__restrict__ m, float *__restrict__ v,
                  const uint32_t *__restrict__ decay_mask, const AdamWRun<G> *__restrict__ runs, int n_runs,
                  AdamWConsts k, AdamWConsts k_decay) {
    const size_t stride = (size_t)gridDim.x * blockDim.x, idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t first = 0;   // the run's first vector in the flat order
    for (int r = 0; r < n_runs; r++) {
        const AdamWRun<G> run = runs[r];
        const size_t nv = run.n / 4;
        for (size_t j = grid_stride_first(idx, first, stride); j < nv; j += stride) {
            size_t i = run.off + 4 * j;   // a multiple of 4: the vector's 4 mask bits lie in one word
            unsigned decay4 = (decay_mask[i >> 5] >> (i & 31)) & 0xfu;
            adamw_vec4<G>(k, k_decay, decay4, master + run.off, run.grad, m + run.off, v + run.off,
                          reinterpret_cast<uint16_t *>(run.param), j);
        }
        first += nv;
    }
}

// the grid of adamw_gpu_runs for a partition of `elems` elements (as adamw_gpu_launch sizes its own)
static int adamw_runs_grid(size_t elems) {
    size_t blocks = ceil_div(elems / 4, ADAMW_BLOCK), maxb = (size_t)cuda_num_sms() * 16;
    return (int)(blocks < 1 ? 1 : blocks > maxb ? maxb : blocks);
}

// AdamW over the runs, a device table, of a partition whose master, m and v start at master,
// m, v: hp's weight decay where decay_mask's bit is set. Bit for bit adamw_gpu_step run by
// run, the same adamw_elem and constants. Asynchronous on `stream`.
template <typename G>
static void adamw_gpu_runs(float *master, float *m, float *v, const uint32_t *decay_mask, const AdamWRun<G> *runs,
                           int n_runs, int grid, AdamWParams hp, cudaStream_t stream) {
    hp.fp16 = FLOATX_FP16;   // the 16-bit type is the build's floatX
    AdamWConsts k_decay = adamw_consts(hp);
    hp.weight_decay = 0.0f;   // what zero.h passes a segment without decay
    AdamWConsts k = adamw_consts(hp);
    adamw_runs_kernel<G><<<grid, ADAMW_BLOCK, 0, stream>>>(master, m, v, decay_mask, runs, n_runs, k, k_decay);
}

#endif  // __CUDACC__
