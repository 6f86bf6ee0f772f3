// dev/cuda/adamw.cu: the GPU AdamW kernel (adamw.cuh) against the CPU reference (the scalar path),
// then a timed benchmark.
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -I. dev/cuda/adamw.cu -o dev/cuda/bin/adamw
//   ./dev/cuda/bin/adamw [bench_n]      (default bench_n = 124475904, GPT-2 124M padded)
// Correctness: random data with NaN/Inf/denormals sprinkled in, 3 steps (t = 1..3), fp32 and bf16
// grads, bf16 output on and off, aligned (vectorized kernel) and misaligned (scalar kernel)
// pointers, sizes with tails. The kernel follows the reference operation order with explicit
// round-to-nearest intrinsics, so the result is expected bitwise equal; the limit is 1 ulp.
// Then the lean step (adamw_gpu_runs, zero/device.cuh's one launch over the partition) against the
// per-segment path and the CPU on GPT-2 124M's real partition at P = 1, 2 and 5 (dev/cuda/zero_partition.cuh),
// bitwise, and both timed (alternating rounds, medians, the ratio).
// Exit 0 pass, 1 fail, 77 no usable GPU.
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <vector>
#include <algorithm>
#include "cuda/common.cuh"
#include "adamw.cuh"
#include "dev/cuda/kernel_check.cuh"   // time_us
#include "dev/cuda/zero_partition.cuh"


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


// ----------------------------------------------------------------------------
// The lean step (adamw_gpu_runs: one launch over a partition's runs, weight decay by a bit mask)
// against the per-segment path (adamw_gpu_step on each segment with its tensor's weight decay: what
// zero/device.cuh runs by default, --lean-step 0) and against the CPU reference (adamw_cpu_step on each
// segment), on GPT-2 124M's partition as zero.h lays it out (dev/cuda/zero_partition.cuh). Expected
// bitwise equal everywhere: the master, m, v (padding included: it must stay zero) and the whole
// floatX parameter buffer.

// how the partition's gradients and parameters lie (zero.h): gradients in the full floatX buffer
// (stages 0-1) or in the fp32 gradient shard (stages 2-3); parameters in the full buffer (stages
// 0-2; at P = 1 stage 3's shard is the same contiguous array)
template <typename G> struct LeanCase {
    const DevPartition *d;
    int merged;              // one run for the whole partition (what zb_lean_init merges P = 1 into)
    int grid;                // 0: adamw_runs_grid's
    float wd, gs; int l2;
    size_t grad_elems;       // the gradient buffer: full (floatX) or shard (fp32)
    size_t grad_index(int u, size_t so) const {
        return sizeof(G) == 2 ? dev_full_index(*d, u, so) : so;
    }
};

struct LeanState { float *master, *m, *v; floatX *param; };
static LeanState lean_state_alloc(const DevPartition &d, const float *master_h) {
    LeanState s;
    cudaCheck(cudaMalloc(&s.master, d.shard_elems * 4)); cudaCheck(cudaMalloc(&s.m, d.shard_elems * 4));
    cudaCheck(cudaMalloc(&s.v, d.shard_elems * 4)); cudaCheck(cudaMalloc(&s.param, d.full_elems * 2));
    cudaCheck(cudaMemcpy(s.master, master_h, d.shard_elems * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(s.m, 0, d.shard_elems * 4)); cudaCheck(cudaMemset(s.v, 0, d.shard_elems * 4));
    cudaCheck(cudaMemset(s.param, 0, d.full_elems * 2));
    return s;
}
static void lean_state_free(LeanState *s) {
    cudaCheck(cudaFree(s->master)); cudaCheck(cudaFree(s->m)); cudaCheck(cudaFree(s->v)); cudaCheck(cudaFree(s->param));
}

// the per-segment path: one adamw_gpu_step per segment, its tensor's weight decay
template <typename G>
static void lean_step_per_segment(const LeanCase<G> &c, LeanState &s, const G *grad, AdamWParams hp) {
    const DevPartition &d = *c.d;
    for (const DevSegment &sg : d.seg) {
        AdamWParams h = hp;
        h.weight_decay = sg.decay ? hp.weight_decay : 0.0f;
        adamw_gpu_step(s.master + sg.so, grad + c.grad_index(sg.unit, sg.so), s.m + sg.so, s.v + sg.so,
                       s.param + dev_full_index(d, sg.unit, sg.so), sg.n, h, 0);
    }
}

// the lean path's run table (device) and mask (device)
template <typename G>
static AdamWRun<G> *lean_runs(const LeanCase<G> &c, const G *grad, floatX *param, int *n_runs) {
    const DevPartition &d = *c.d;
    std::vector<AdamWRun<G>> r;
    for (int u = 0; u < d.n_units; u++)
        r.push_back(AdamWRun<G>{d.shard_off[u], d.shard[u], grad + c.grad_index(u, d.shard_off[u]),
                                param + dev_full_index(d, u, d.shard_off[u])});
    if (c.merged) r = {AdamWRun<G>{0, d.shard_elems, r[0].grad, r[0].param}};
    AdamWRun<G> *dr;
    cudaCheck(cudaMalloc(&dr, r.size() * sizeof(r[0])));
    cudaCheck(cudaMemcpy(dr, r.data(), r.size() * sizeof(r[0]), cudaMemcpyHostToDevice));
    *n_runs = (int)r.size();
    return dr;
}
static uint32_t *lean_mask(const DevPartition &d) {
    std::vector<uint32_t> mask(ceil_div(d.shard_elems, 32), 0u);
    for (const DevSegment &sg : d.seg)
        if (sg.decay) adamw_decay_mask_set(mask.data(), sg.so, sg.so + sg.n);
    uint32_t *dm;
    cudaCheck(cudaMalloc(&dm, mask.size() * 4));
    cudaCheck(cudaMemcpy(dm, mask.data(), mask.size() * 4, cudaMemcpyHostToDevice));
    return dm;
}

template <typename T> static size_t words_differ(const T *a, const T *b, size_t n) {
    size_t k = 0;
    #pragma omp parallel for reduction(+ : k)
    for (size_t i = 0; i < n; i++) k += memcmp(a + i, b + i, sizeof(T)) != 0;
    return k;
}
template <typename T> static std::vector<T> to_host(const T *d, size_t n) {
    std::vector<T> h(n);
    cudaCheck(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

// 3 steps of both paths and of the CPU from the same state and gradients; returns 1 when all agree
template <typename G>
static int lean_check(const char *name, const LeanCase<G> &c) {
    const DevPartition &d = *c.d;
    const int fp32g = sizeof(G) == 4;
    std::vector<char> pad = dev_full_padding(d);
    // the master: random in the tensors, zero in the padding (params_read's zeros)
    std::vector<float> master_h(d.shard_elems, 0.0f), m_h(d.shard_elems, 0.0f), v_h(d.shard_elems, 0.0f);
    for (int u = 0; u < d.n_units; u++) {
        #pragma omp parallel for
        for (size_t so = d.shard_off[u]; so < d.shard_off[u] + d.shard[u]; so++)
            if (!pad[dev_full_index(d, u, so)]) master_h[so] = 0.1f * dev_hrand(1, so);
    }
    std::vector<uint16_t> param_h(d.full_elems, 0);
    LeanState a = lean_state_alloc(d, master_h.data()), b = lean_state_alloc(d, master_h.data());
    G *grad;
    cudaCheck(cudaMalloc(&grad, c.grad_elems * sizeof(G)));
    std::vector<float> gf(fp32g ? c.grad_elems : 0);
    std::vector<uint16_t> gb(fp32g ? 0 : c.grad_elems);
    int n_runs = 0;
    AdamWRun<G> *runs = lean_runs<G>(c, grad, b.param, &n_runs);
    uint32_t *mask = lean_mask(d);
    int grid = c.grid ? c.grid : adamw_runs_grid(d.shard_elems);
    adamw_cpu_set_path(ADAMW_PATH_AUTO);   // (every CPU path is bitwise the scalar one: tests/test_adamw.sh)
    for (int t = 1; t <= 3; t++) {
        // gradients: random in the tensors (every rank's slice: the full buffer), zero in the padding
        #pragma omp parallel for
        for (size_t i = 0; i < c.grad_elems; i++) {
            float g = dev_hrand(100 + t, i) * ((i % 3) ? 1.0f : 1e-3f);
            if (fp32g) gf[i] = g; else gb[i] = float_to_bf16_rne(g);
        }
        if (fp32g) {   // the padding: of the shard's slices, or of the whole full buffer
            for (int u = 0; u < d.n_units; u++)
                for (size_t so = d.shard_off[u]; so < d.shard_off[u] + d.shard[u]; so++)
                    if (pad[dev_full_index(d, u, so)]) gf[so] = 0.0f;
        } else {
            for (size_t i = 0; i < d.full_elems; i++) if (pad[i]) gb[i] = 0;
        }
        cudaCheck(cudaMemcpy(grad, fp32g ? (const void *)gf.data() : (const void *)gb.data(), c.grad_elems * sizeof(G),
                             cudaMemcpyHostToDevice));
        AdamWParams hp = hparams(t, c.wd, c.gs, c.l2);
        lean_step_per_segment<G>(c, a, grad, hp);
        adamw_gpu_runs<G>(b.master, b.m, b.v, mask, runs, n_runs, grid, hp, 0);
        cudaCheck(cudaGetLastError());
        for (const DevSegment &sg : d.seg) {   // the CPU reference, segment by segment
            AdamWParams h = hp;
            h.weight_decay = sg.decay ? hp.weight_decay : 0.0f;
            size_t gi = c.grad_index(sg.unit, sg.so), fi = dev_full_index(d, sg.unit, sg.so);
            if (fp32g) adamw_cpu_step(&master_h[sg.so], &gf[gi], &m_h[sg.so], &v_h[sg.so], &param_h[fi], sg.n, h);
            else adamw_cpu_step_bf16grad(&master_h[sg.so], &gb[gi], &m_h[sg.so], &v_h[sg.so], &param_h[fi], sg.n, h);
        }
    }
    cudaCheck(cudaDeviceSynchronize());
    std::vector<float> am = to_host(a.master, d.shard_elems), bm = to_host(b.master, d.shard_elems);
    std::vector<float> a1 = to_host(a.m, d.shard_elems), b1 = to_host(b.m, d.shard_elems);
    std::vector<float> a2 = to_host(a.v, d.shard_elems), b2 = to_host(b.v, d.shard_elems);
    std::vector<floatX> ap = to_host(a.param, d.full_elems), bp = to_host(b.param, d.full_elems);
    size_t seg_m = words_differ(am.data(), bm.data(), d.shard_elems) + words_differ(a1.data(), b1.data(), d.shard_elems) +
                   words_differ(a2.data(), b2.data(), d.shard_elems);
    size_t seg_p = words_differ(ap.data(), bp.data(), d.full_elems);
    size_t cpu_m = words_differ(bm.data(), master_h.data(), d.shard_elems) + words_differ(b1.data(), m_h.data(), d.shard_elems) +
                   words_differ(b2.data(), v_h.data(), d.shard_elems);
    size_t cpu_p = words_differ((const uint16_t *)bp.data(), param_h.data(), d.full_elems);
    size_t pad_nonzero = 0, pad_n = 0, decayed = 0;
    for (int u = 0; u < d.n_units; u++)
        for (size_t so = d.shard_off[u]; so < d.shard_off[u] + d.shard[u]; so++) {
            if (!pad[dev_full_index(d, u, so)]) continue;
            pad_n++;
            pad_nonzero += (f2u(bm[so]) | f2u(b1[so]) | f2u(b2[so]) | __bfloat16_as_ushort(bp[dev_full_index(d, u, so)])) != 0;
        }
    for (const DevSegment &sg : d.seg) decayed += sg.decay ? sg.n : 0;
    int ok = seg_m == 0 && seg_p == 0 && cpu_m == 0 && cpu_p == 0 && pad_nonzero == 0;
    printf("  %-34s P=%d rank %d: %zu segments -> %d run%s, grid %d, %.1fM elements (%.2fM decay, %zu padding)%s%s\n"
           "      vs per-segment: %zu master/m/v words and %zu param words differ; vs CPU: %zu and %zu; padding non-zero: %zu  %s\n",
           name, d.P, d.rank, d.seg.size(), n_runs, n_runs > 1 ? "s" : "", grid, d.shard_elems / 1e6, decayed / 1e6, pad_n,
           c.l2 ? ", L2" : "", c.gs != 1.0f ? ", clip scale" : "", seg_m, seg_p, cpu_m, cpu_p, pad_nonzero, ok ? "OK" : "FAIL");
    lean_state_free(&a); lean_state_free(&b);
    cudaCheck(cudaFree(grad)); cudaCheck(cudaFree(runs)); cudaCheck(cudaFree(mask));
    return ok;
}

// the per-segment step and the lean one on the same partition, alternating, 9 rounds of 5 steps: medians
template <typename G>
static void lean_bench(const char *name, const LeanCase<G> &c) {
    const DevPartition &d = *c.d;
    std::vector<float> zeros(d.shard_elems, 0.0f);
    LeanState a = lean_state_alloc(d, zeros.data()), b = lean_state_alloc(d, zeros.data());
    G *grad;
    cudaCheck(cudaMalloc(&grad, c.grad_elems * sizeof(G)));
    cudaCheck(cudaMemset(grad, 0, c.grad_elems * sizeof(G)));
    int n_runs = 0;
    AdamWRun<G> *runs = lean_runs<G>(c, grad, b.param, &n_runs);
    uint32_t *mask = lean_mask(d);
    int grid = adamw_runs_grid(d.shard_elems);
    AdamWParams hp = hparams(1, 0.1f, 1.0f, 0);
    auto seg_step = [&] { lean_step_per_segment<G>(c, a, grad, hp); };
    auto lean_step = [&] { adamw_gpu_runs<G>(b.master, b.m, b.v, mask, runs, n_runs, grid, hp, 0); };
    std::vector<float> ts, tl;
    for (int r = 0; r < 9; r++) {   // (time_us: 3 warm-up calls, then the mean of 5, in µs)
        ts.push_back(time_us(seg_step, 5, 1) * 1e-3f);
        tl.push_back(time_us(lean_step, 5, 1) * 1e-3f);
    }
    cudaCheck(cudaGetLastError());
    std::sort(ts.begin(), ts.end()); std::sort(tl.begin(), tl.end());
    double bytes = (double)d.shard_elems * (12 + sizeof(G) + 12 + 2);
    printf("  time %-28s per-segment (%zu launches) %.3f ms, lean (1 launch) %.3f ms: %.2fx; lean %.0f GB/s (%.0f B/elem; "
           "min..max per-segment %.3f..%.3f, lean %.3f..%.3f)\n", name, d.seg.size(), ts[4], tl[4], ts[4] / tl[4],
           bytes / (tl[4] * 1e-3) / 1e9, bytes / d.shard_elems, ts[0], ts[8], tl[0], tl[8]);
    lean_state_free(&a); lean_state_free(&b);
    cudaCheck(cudaFree(grad)); cudaCheck(cudaFree(runs)); cudaCheck(cudaFree(mask));
}

static int lean_checks(void) {
    // (GPT-2 124M's units are multiples of 64 elements: no padding up to P = 4; at P = 5 the last rank's
    // slices end in 656 elements of padding)
    DevPartition p1 = dev_gpt2_partition(1, 0), p2r1 = dev_gpt2_partition(2, 1), p5r4 = dev_gpt2_partition(5, 4);
    printf("the lean step vs the per-segment path and the CPU, GPT-2 124M's partition (3 steps, bitwise expected):\n");
    int ok = 1;
    ok &= lean_check<floatX>("stage 0 (bf16 grads, 1 run)", LeanCase<floatX>{&p1, 1, 0, 0.1f, 1.0f, 0, p1.full_elems});
    ok &= lean_check<floatX>("stage 1 x2 (bf16 grads, unit runs)", LeanCase<floatX>{&p2r1, 0, 0, 0.1f, 0.37f, 0, p2r1.full_elems});
    ok &= lean_check<floatX>("stage 1 x5 (bf16, padding)", LeanCase<floatX>{&p5r4, 0, 0, 0.1f, 1.0f, 0, p5r4.full_elems});
    ok &= lean_check<float>("stage 2 x5 (fp32, padding, grid 3)", LeanCase<float>{&p5r4, 0, 3, 0.1f, 1.0f, 1, p5r4.shard_elems});
    ok &= lean_check<float>("stage 2-3 (fp32 shard, 1 run)", LeanCase<float>{&p1, 1, 0, 0.1f, 0.5f, 0, p1.shard_elems});
    printf("the optimizer step on GPT-2 124M (per-segment: adamw_gpu_step per tensor; lean: adamw_gpu_runs):\n");
    lean_bench<floatX>("stage 0 (bf16 grads)", LeanCase<floatX>{&p1, 1, 0, 0.1f, 1.0f, 0, p1.full_elems});
    lean_bench<float>("stage 2-3 (fp32 grads)", LeanCase<float>{&p1, 1, 0, 0.1f, 1.0f, 0, p1.shard_elems});
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
    ok &= lean_checks();

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
