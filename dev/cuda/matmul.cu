// dev/cuda/matmul.cu: cuBLASLt linear layer, forward (bias epilogue; GELU-aux epilogue, fused
// and unfused) and backward (dinp, dinp with the DGELU epilogue fused and unfused, dweight +=,
// dbias += deterministic, and dbias from the dweight GEMM's BGRADB epilogue against the kernel)
// against a CPU reference (double, OpenMP); timed in TFLOP/s, the two dbias ways alternately.
// The cuBLASLt plan cache: on GPT-2 124M's calls (B=16, T=1024), cached calls bitwise equal to
// uncached ones (also with pointers only 16-byte aligned), no heuristic run after a shape's first
// call, and the host time per call of each (medians, the two modes alternating).
#include <chrono>
#include "dev/cuda/kernel_check.cuh"
#include "cuda/matmul.cuh"

static double gelu_d(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
static double gelu_grad_d(double x) {
    const double s = sqrt(2.0 / M_PI);
    double th = tanh(s * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * s * (1.0 + 3.0 * 0.044715 * x * x);
}

// Device buffers of run_case start g_off elements into their allocation: with g_off = 8 every
// pointer is 16-byte but not 256-byte aligned, as the weights and activations at tensor/layer
// offsets inside train_gpt's big allocations are (cuBLASLt's heuristic must be told).
static size_t g_off = 0;
template <class T> static T *alloc_off(size_t n) { return dev_alloc<T>(n + g_off) + g_off; }
static floatX *to_dev_off(const std::vector<float> &h) {
    floatX *d = alloc_off<floatX>(h.size());
    upload_bf16(d, h.data(), h.size());
    return d;
}
template <class T> static void free_off(T *p) { cudaCheck(cudaFree(p - g_off)); }

// The bias gradient from the dweight GEMM's BGRADB epilogue (g_matmul_bias_grad_epilogue,
// --bias-grad-epilogue 1), dweight and dbias starting from dw0, db0 again: dbias against the
// reference within two bf16 roundings (cuBLASLt writes the sums in bf16, the output type: the sum
// rounded, then the add), and against the kernel's db_kernel within two bf16 roundings (not bitwise:
// cuBLASLt sums the rows in its own order); dweight against the reference; both bitwise repeatable.
static void check_bias_grad_epilogue(floatX *d_dw, floatX *d_db, float *d_scratch, const floatX *d_dout, const floatX *d_inp,
                                     const floatX *d_w, const std::vector<float> &dw0, const std::vector<float> &db0,
                                     const std::vector<float> &dw_ref, const std::vector<float> &db_ref,
                                     const std::vector<float> &db_kernel, int N, int C, int OC) {
    g_matmul_bias_grad_epilogue = 1;
    const long fallbacks0 = g_matmul_bias_grad_fallbacks;
    g_matmul_bias_grad_failed = 0;
    std::vector<float> dw[2], db[2];
    for (int r = 0; r < 2; r++) {
        upload_bf16(d_dw, dw0.data(), (size_t)OC * C);
        upload_bf16(d_db, db0.data(), OC);
        matmul_backward(NULL, d_dw, d_db, d_scratch, d_dout, d_inp, d_w, N, C, OC, NULL, 0);
        dw[r] = from_device_bf16(d_dw, (size_t)OC * C);
        db[r] = from_device_bf16(d_db, OC);
    }
    g_matmul_bias_grad_epilogue = 0;
    if (g_matmul_bias_grad_fallbacks > fallbacks0 || g_matmul_bias_grad_failed) {
        printf("  dbias epilogue: %s for this shape (the kernel ran: nothing to check)\n",
               g_matmul_bias_grad_failed ? "cublasLtMatmul failed on the BGRADB plan" : "cuBLASLt has no BGRADB algorithm");
        return;
    }
    printf("  dbias epilogue: cuBLASLt wrote the column sums in bf16 (the output type)\n");
    check_close("dbias (epilogue)", db[0], db_ref, 8e-3f, 1.6e-2f);
    check_close("dbias epilogue vs kernel", db[0], db_kernel, 8e-3f, 1.6e-2f);
    check_close("dweight (with the epilogue)", dw[0], dw_ref, 5e-3f, 1e-2f);
    check_true("dbias epilogue bitwise repeatable", dw[0] == dw[1] && db[0] == db[1]);
}

static void run_case(int N, int C, int OC) {
    printf("N=%d C=%d OC=%d%s\n", N, C, OC, g_off ? " (pointers 16-byte but not 256-byte aligned)" : "");
    std::vector<float> inp = rand_normal_bf16((size_t)N * C, 1.0f);
    std::vector<float> w = rand_uniform_bf16((size_t)OC * C, -0.06f, 0.06f);
    std::vector<float> bias = rand_normal_bf16(OC, 0.5f);
    std::vector<float> dout = rand_normal_bf16((size_t)N * OC, 1.0f);
    std::vector<float> dw0 = rand_normal_bf16((size_t)OC * C, 1.0f), db0 = rand_normal_bf16(OC, 1.0f);
    // pre-GELU values of the layer below, for the DGELU backward: shape [N, C]
    std::vector<float> pre = rand_normal_bf16((size_t)N * C, 1.5f);

    std::vector<float> out_ref((size_t)N * OC), gelu_ref((size_t)N * OC), dinp_ref((size_t)N * C),
        dinp_gelu_ref((size_t)N * C), dw_ref((size_t)OC * C), db_ref(OC);
#pragma omp parallel for
    for (int n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double acc = bias[o];
            for (int c = 0; c < C; c++) acc += (double)inp[(size_t)n * C + c] * w[(size_t)o * C + c];
            out_ref[(size_t)n * OC + o] = (float)acc;
            gelu_ref[(size_t)n * OC + o] = (float)gelu_d(bf16_round((float)acc));  // GELU of the stored pre-activation
        }
#pragma omp parallel for
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double acc = 0;
            for (int o = 0; o < OC; o++) acc += (double)dout[(size_t)n * OC + o] * w[(size_t)o * C + c];
            dinp_ref[(size_t)n * C + c] = (float)acc;
            dinp_gelu_ref[(size_t)n * C + c] = (float)(acc * gelu_grad_d(pre[(size_t)n * C + c]));
        }
#pragma omp parallel for
    for (int o = 0; o < OC; o++) {
        for (int c = 0; c < C; c++) {
            double acc = dw0[(size_t)o * C + c];
            for (int n = 0; n < N; n++) acc += (double)dout[(size_t)n * OC + o] * inp[(size_t)n * C + c];
            dw_ref[(size_t)o * C + c] = (float)acc;
        }
        double acc = db0[o];
        for (int n = 0; n < N; n++) acc += dout[(size_t)n * OC + o];
        db_ref[o] = (float)acc;
    }

    floatX *d_inp = to_dev_off(inp), *d_w = to_dev_off(w), *d_bias = to_dev_off(bias);
    floatX *d_dout = to_dev_off(dout), *d_pre = to_dev_off(pre);
    floatX *d_out = alloc_off<floatX>((size_t)N * OC), *d_pre_gelu = alloc_off<floatX>((size_t)N * OC);
    floatX *d_dinp = alloc_off<floatX>((size_t)N * C), *d_dw = to_dev_off(dw0), *d_db = to_dev_off(db0);
    float *d_scratch = alloc_off<float>(matmul_dbias_scratch_floats(OC));

    dev_poison(d_out, (size_t)N * OC);
    matmul_forward(d_out, d_inp, d_w, d_bias, N, C, OC, NULL, 0);
    check_close("forward out (+bias)", from_device_bf16(d_out, (size_t)N * OC), out_ref, 5e-3f, 1e-2f);
    for (int fusion = 1; fusion >= 0; fusion--) {
        g_matmul_gelu_fusion = fusion;
        dev_poison(d_out, (size_t)N * OC);
        dev_poison(d_pre_gelu, (size_t)N * OC);
        matmul_forward(d_out, d_inp, d_w, d_bias, N, C, OC, d_pre_gelu, 0);
        check_close(fusion ? "forward gelu pre (fused)" : "forward gelu pre (unfused)",
                    from_device_bf16(d_pre_gelu, (size_t)N * OC), out_ref, 5e-3f, 1e-2f);
        check_close(fusion ? "forward gelu out (fused)" : "forward gelu out (unfused)",
                    from_device_bf16(d_out, (size_t)N * OC), gelu_ref, 5e-3f, 1e-2f);
    }
    g_matmul_gelu_fusion = 1;

    dev_poison(d_dinp, (size_t)N * C);
    matmul_backward(d_dinp, d_dw, d_db, d_scratch, d_dout, d_inp, d_w, N, C, OC, NULL, 0);
    check_close("backward dinp", from_device_bf16(d_dinp, (size_t)N * C), dinp_ref, 5e-3f, 1e-2f);
    std::vector<float> g_dw = from_device_bf16(d_dw, (size_t)OC * C), g_db = from_device_bf16(d_db, OC);
    check_close("backward dweight (+=)", g_dw, dw_ref, 5e-3f, 1e-2f);
    check_close("backward dbias (+=)", g_db, db_ref, 1e-3f, 1e-2f);
    upload_bf16(d_db, db0.data(), OC);
    matmul_backward(NULL, NULL, d_db, d_scratch, d_dout, d_inp, d_w, N, C, OC, NULL, 0);
    check_true("dbias bitwise deterministic", memcmp(from_device_bf16(d_db, OC).data(), g_db.data(), OC * sizeof(float)) == 0);
    check_bias_grad_epilogue(d_dw, d_db, d_scratch, d_dout, d_inp, d_w, dw0, db0, dw_ref, db_ref, g_db, N, C, OC);
    for (int fusion = 1; fusion >= 0; fusion--) {
        g_matmul_gelu_fusion = fusion;
        dev_poison(d_dinp, (size_t)N * C);
        matmul_backward(d_dinp, NULL, NULL, NULL, d_dout, d_inp, d_w, N, C, OC, d_pre, 0);
        check_close(fusion ? "backward dinp*gelu' (fused)" : "backward dinp*gelu' (unfused)",
                    from_device_bf16(d_dinp, (size_t)N * C), dinp_gelu_ref, 5e-3f, 2e-2f);
    }
    g_matmul_gelu_fusion = 1;
    free_off(d_inp); free_off(d_w); free_off(d_bias); free_off(d_dout);
    free_off(d_pre); free_off(d_out); free_off(d_pre_gelu); free_off(d_dinp);
    free_off(d_dw); free_off(d_db); free_off(d_scratch);
}

// gelu_fwd: forward with the GELU epilogue; gelu_bwd: backward with the DGELU epilogue
static void time_case(int N, int C, int OC, int gelu_fwd, int gelu_bwd) {
    floatX *inp = dev_alloc<floatX>((size_t)N * C), *w = dev_alloc<floatX>((size_t)OC * C), *bias = dev_alloc<floatX>(OC);
    floatX *out = dev_alloc<floatX>((size_t)N * OC), *pre = dev_alloc<floatX>((size_t)N * OC);
    floatX *dout = dev_alloc<floatX>((size_t)N * OC), *dinp = dev_alloc<floatX>((size_t)N * C);
    floatX *dw = dev_alloc<floatX>((size_t)OC * C), *db = dev_alloc<floatX>(OC), *pre_in = dev_alloc<floatX>((size_t)N * C);
    float *scratch = dev_alloc<float>(matmul_dbias_scratch_floats(OC));
    upload_bf16(inp, rand_normal_bf16((size_t)N * C, 1.0f).data(), (size_t)N * C);
    upload_bf16(w, rand_normal_bf16((size_t)OC * C, 0.02f).data(), (size_t)OC * C);
    upload_bf16(bias, rand_normal_bf16(OC, 0.1f).data(), OC);
    upload_bf16(dout, rand_normal_bf16((size_t)N * OC, 1.0f).data(), (size_t)N * OC);
    upload_bf16(pre_in, rand_normal_bf16((size_t)N * C, 1.0f).data(), (size_t)N * C);
    cudaCheck(cudaMemset(dw, 0, (size_t)OC * C * sizeof(floatX)));
    cudaCheck(cudaMemset(db, 0, OC * sizeof(floatX)));
    double flops = 2.0 * N * C * OC;
    char name[96];
    snprintf(name, sizeof(name), "fwd N=%d C=%d OC=%d%s", N, C, OC, gelu_fwd ? " +gelu" : "");
    float us = time_us([&] { matmul_forward(out, inp, w, bias, N, C, OC, gelu_fwd ? pre : NULL, 0); });
    report_flops(name, us, flops);
    snprintf(name, sizeof(name), "bwd N=%d C=%d OC=%d%s", N, C, OC, gelu_bwd ? " +dgelu" : "");
    us = time_us([&] { matmul_backward(dinp, dw, db, scratch, dout, inp, w, N, C, OC, gelu_bwd ? pre_in : NULL, 0); });
    report_flops(name, us, 2.0 * flops);
    us = time_us([&] { matmul_dbias(db, scratch, dout, N, OC, 0); });
    report_bw("  of which dbias", us, (double)N * OC * sizeof(floatX));
    // the same backward with the bias gradient from the dweight GEMM's epilogue, alternately
    float us_kernel, us_epilogue;
    const long fallbacks0 = g_matmul_bias_grad_fallbacks;
    time_us_alternating([&] { g_matmul_bias_grad_epilogue = 0; matmul_backward(dinp, dw, db, scratch, dout, inp, w, N, C, OC, gelu_bwd ? pre_in : NULL, 0); },
                        [&] { g_matmul_bias_grad_epilogue = 1; matmul_backward(dinp, dw, db, scratch, dout, inp, w, N, C, OC, gelu_bwd ? pre_in : NULL, 0); },
                        &us_kernel, &us_epilogue, 10, 5);
    g_matmul_bias_grad_epilogue = 0;
    printf("  time bwd N=%d C=%d OC=%d dbias kernel %.1f us, dbias in the epilogue %.1f us (%.2fx)%s\n", N, C, OC, us_kernel,
           us_epilogue, us_kernel / us_epilogue, g_matmul_bias_grad_fallbacks > fallbacks0 ? " [no BGRADB algorithm: the kernel ran]" : "");
    cudaCheck(cudaFree(inp)); cudaCheck(cudaFree(w)); cudaCheck(cudaFree(bias)); cudaCheck(cudaFree(out));
    cudaCheck(cudaFree(pre)); cudaCheck(cudaFree(dout)); cudaCheck(cudaFree(dinp)); cudaCheck(cudaFree(dw));
    cudaCheck(cudaFree(db)); cudaCheck(cudaFree(pre_in)); cudaCheck(cudaFree(scratch));
}

// ----------------------------------------------------------------------------
// the plan cache (g_matmul_cache 1) against a plan built on every call (0, train_gpt's default: --plan-cache 0)

// one linear layer of the trainer: its forward and its backward (dinp, dweight +=, dbias +=)
typedef struct { const char *name; int N, C, OC, bias, gelu_fwd, gelu_bwd; } LayerCall;

// GPT-2 124M at B=16, T=1024: the calls of one layer (qkv, attention projection, fc with the
// GELU epilogue, fc projection with the DGELU one), then the tied classifier
static const int CACHE_N = 16 * 1024, CACHE_LAYERS = 12;
static const LayerCall CACHE_CALLS[] = {
    {"qkv", CACHE_N, 768, 2304, 1, 0, 0},    {"attproj", CACHE_N, 768, 768, 1, 0, 0},
    {"fc", CACHE_N, 768, 3072, 1, 1, 0},     {"fcproj", CACHE_N, 3072, 768, 1, 0, 1},
    {"lm_head", CACHE_N, 768, 50304, 0, 0, 0}};
static const int N_CACHE_CALLS = sizeof(CACHE_CALLS) / sizeof(CACHE_CALLS[0]);

typedef struct {
    floatX *inp, *w, *bias, *out, *pre, *dout, *dinp, *dw, *db, *pre_in;
    float *scratch;
} LayerBufs;

// n values ~ N(0, std) on the device: one block of 2^20 repeated (the bitwise and timing checks
// need finite, varied values; hundreds of millions of normals would take the host seconds)
static void upload_random(floatX *d, size_t n, float std) {
    size_t blk = std::min(n, (size_t)1 << 20);
    std::vector<float> h = rand_normal_bf16(blk, std);
    std::vector<floatX> hx(blk);
    for (size_t i = 0; i < blk; i++) hx[i] = __float2bfloat16(h[i]);
    for (size_t at = 0; at < n; at += blk)
        cudaCheck(cudaMemcpy(d + at, hx.data(), std::min(blk, n - at) * sizeof(floatX), cudaMemcpyHostToDevice));
}

// off: elements past each allocation's start (8: 16-byte but not 256-byte aligned pointers)
static LayerBufs layer_bufs(const LayerCall *c, size_t off) {
    size_t N = c->N, C = c->C, OC = c->OC;
    LayerBufs b;
    b.inp = dev_alloc<floatX>(N * C + off) + off;     b.w = dev_alloc<floatX>(OC * C + off) + off;
    b.bias = dev_alloc<floatX>(OC + off) + off;       b.out = dev_alloc<floatX>(N * OC + off) + off;
    b.pre = dev_alloc<floatX>(N * OC + off) + off;    b.dout = dev_alloc<floatX>(N * OC + off) + off;
    b.dinp = dev_alloc<floatX>(N * C + off) + off;    b.dw = dev_alloc<floatX>(OC * C + off) + off;
    b.db = dev_alloc<floatX>(OC + off) + off;         b.pre_in = dev_alloc<floatX>(N * C + off) + off;
    b.scratch = dev_alloc<float>(matmul_dbias_scratch_floats(c->OC));
    upload_random(b.inp, N * C, 1.0f);
    upload_random(b.w, OC * C, 0.02f);
    upload_random(b.bias, OC, 0.1f);
    upload_random(b.dout, N * OC, 1.0f);
    upload_random(b.pre_in, N * C, 1.0f);
    return b;
}
static void layer_bufs_free(LayerBufs *b, size_t off) {
    floatX *p[] = {b->inp, b->w, b->bias, b->out, b->pre, b->dout, b->dinp, b->dw, b->db, b->pre_in};
    for (floatX *x : p) cudaCheck(cudaFree(x - off));
    cudaCheck(cudaFree(b->scratch));
}
// the layer's forward and backward; the gradients start from zero
static void layer_call(const LayerCall *c, LayerBufs *b) {
    cudaCheck(cudaMemsetAsync(b->dw, 0, (size_t)c->OC * c->C * sizeof(floatX), 0));
    cudaCheck(cudaMemsetAsync(b->db, 0, (size_t)c->OC * sizeof(floatX), 0));
    matmul_forward(b->out, b->inp, b->w, c->bias ? b->bias : NULL, c->N, c->C, c->OC, c->gelu_fwd ? b->pre : NULL, 0);
    matmul_backward(b->dinp, b->dw, c->bias ? b->db : NULL, b->scratch, b->dout, b->inp, b->w, c->N, c->C, c->OC,
                    c->gelu_bwd ? b->pre_in : NULL, 0);
}
// the outputs of layer_call, as bytes
static std::vector<unsigned char> layer_outputs(const LayerCall *c, const LayerBufs *b) {
    size_t N = c->N, C = c->C, OC = c->OC;
    std::vector<unsigned char> all;
    for (auto v : {dev_bytes(b->out, N * OC), dev_bytes(b->pre, c->gelu_fwd ? N * OC : 0), dev_bytes(b->dinp, N * C),
                   dev_bytes(b->dw, OC * C), dev_bytes(b->db, OC)})
        all.insert(all.end(), v.begin(), v.end());
    return all;
}

// the same inputs through cached and uncached plans: bitwise the same outputs
static void cache_bitwise(const LayerCall *c, size_t off) {
    LayerBufs b = layer_bufs(c, off);
    std::vector<unsigned char> got[2];
    for (int cached = 0; cached <= 1; cached++) {
        g_matmul_cache = cached;
        dev_poison(b.out, (size_t)c->N * c->OC); dev_poison(b.pre, (size_t)c->N * c->OC); dev_poison(b.dinp, (size_t)c->N * c->C);
        layer_call(c, &b);
        got[cached] = layer_outputs(c, &b);
    }
    g_matmul_cache = 1;
    char name[96];
    snprintf(name, sizeof(name), "%s cached == uncached%s", c->name, off ? " (16B)" : "");
    check_true(name, got[0] == got[1]);
    layer_bufs_free(&b, off);
}

// host time of f, in microseconds, with the device idle before and after (the launch cost alone)
template <class F> static double host_us(F f) {
    cudaCheck(cudaDeviceSynchronize());
    auto t0 = std::chrono::steady_clock::now();
    f();
    auto t1 = std::chrono::steady_clock::now();
    cudaCheck(cudaDeviceSynchronize());
    return std::chrono::duration<double, std::micro>(t1 - t0).count();
}
static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Host time per layer call (forward + backward: 3 cuBLASLt calls, 2 with the bias gradient's
// kernels), cached and uncached, alternating which goes first, medians of `reps`; and the
// host time of one micro-step's matmuls (CACHE_LAYERS layers, then the classifier).
static void cache_host_time(int reps) {
    LayerBufs b[N_CACHE_CALLS];
    for (int i = 0; i < N_CACHE_CALLS; i++) b[i] = layer_bufs(&CACHE_CALLS[i], 0);
    std::vector<double> t[N_CACHE_CALLS][2];
    long heuristic_when_cached = 0;
    for (int r = 0; r < reps + 1; r++)   // round 0 warms up (builds the cached plans), not counted
        for (int k = 0; k < 2; k++) {
            int cached = (r + k) % 2;
            g_matmul_cache = cached;
            long runs0 = g_matmul_heuristic_runs;
            for (int i = 0; i < N_CACHE_CALLS; i++) {
                double us = host_us([&] { layer_call(&CACHE_CALLS[i], &b[i]); });
                if (r > 0) t[i][cached].push_back(us);
            }
            if (cached && r > 0) heuristic_when_cached += g_matmul_heuristic_runs - runs0;
        }
    g_matmul_cache = 1;
    double step[2] = {0, 0};
    for (int i = 0; i < N_CACHE_CALLS; i++) {
        double u = median(t[i][0]), c = median(t[i][1]);
        int per_step = i < N_CACHE_CALLS - 1 ? CACHE_LAYERS : 1;
        step[0] += per_step * u; step[1] += per_step * c;
        printf("  time host %-10s fwd+bwd  uncached %8.1f us  cached %8.1f us  (%.1fx, medians of %d)\n", CACHE_CALLS[i].name,
               u, c, u / c, reps);
    }
    printf("  time host one micro-step's matmuls (%d layers + classifier)  uncached %.2f ms  cached %.2f ms  saved %.2f ms\n",
           CACHE_LAYERS, step[0] / 1e3, step[1] / 1e3, (step[0] - step[1]) / 1e3);
    check_true("cached calls run no heuristic", heuristic_when_cached == 0);
    for (int i = 0; i < N_CACHE_CALLS; i++) layer_bufs_free(&b[i], 0);
}

int main(void) {
    dev_require_gpu();
    matmul_setup();
    run_case(512, 768, 2304);
    run_case(100, 64, 200);  // tiny sizes, N not a multiple of 8
    g_off = 8;                // the same with pointers only 16-byte aligned
    run_case(512, 768, 2304);
    run_case(100, 64, 200);
    g_off = 0;
    // informational: 0 means every "(fused)" check above really ran the cuBLASLt GELU epilogues
    printf("fused GELU/DGELU epilogue unavailable (fell back) %ld times\n", g_matmul_gelu_fallbacks);
    printf("BGRADB bias-gradient epilogue unavailable (fell back) %ld times\n", g_matmul_bias_grad_fallbacks);
    // GPT-2 124M at B=16, T=1024: qkv, attproj, fc (+gelu), fcproj, and the tied classifier
    const int N = 16 * 1024;
    time_case(N, 768, 2304, 0, 0);
    time_case(N, 768, 768, 0, 0);
    time_case(N, 768, 3072, 1, 0);
    time_case(N, 3072, 768, 0, 1);
    time_case(N / 2, 768, 50304, 0, 0);
    // the plan cache: bitwise, at 256- and then 16-byte-aligned pointers (a new key each), and host time
    printf("cuBLASLt plan cache (GPT-2 124M calls, N=%d)\n", CACHE_N);
    for (size_t off : {(size_t)0, (size_t)8})
        for (int i = 0; i < N_CACHE_CALLS; i++) cache_bitwise(&CACHE_CALLS[i], off);
    cache_host_time(30);
    printf("plans: %ld heuristic runs, %ld calls served by a cached plan, %ld uncached for a full table\n",
           g_matmul_heuristic_runs, g_matmul_plan_hits, g_matmul_plans_uncached);
    check_true("the plan table never full", g_matmul_plans_uncached == 0);
    matmul_teardown();
    return dev_finish("matmul");
}
