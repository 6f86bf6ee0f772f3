// dev/cuda/kernels_emulate.cpp: the kernels no GPU has run yet that use shuffles, shared memory or
// atomics, their own code and their launchers', run on the CPU (dev/cuda/emu/: the CUDA runtime
// over dev/cuda/emulate.h's fibers; the headers as dev/cuda/emulate_source.py rewrites them), each
// against its CPU reference:
//   quantize     cuda/quantize.cuh against util/quantize.h: ZeRO++'s messages byte for byte (int8,
//                int4; from bf16 and fp32), the worst block error, dequantizing exactly, at
//                dev/cuda/quantize_cases.h's lengths (the build checks alignment with UBSan)
//   lean norm    cuda/global_norm.cuh's global_norm_squared_runs against a double sum and the
//                per-run launcher; the last block's counter left at zero; a grid capped by the
//                multiprocessors, so that the threads loop over the runs
//   lean AdamW   adamw.cuh's adamw_gpu_runs against adamw_cpu_step per segment: bitwise
//   fused norm   cuda/layernorm.cuh's fused_residual_{layer,rms}norm_forward against
//                residual_forward then the norm: bitwise; and a double reference
//   device loss  cuda/classifier.cuh's loss_mean_accumulate against the host's double sum
//   bias grad    cuda/matmul.cuh's BGRADB epilogue (dev/cuda/emu/cublasLt.h): the output type, and a
//                cublasLtMatmul that fails falls back to the column-sum kernel once, with one line
// Each runs under three schedules (warps in turn; warps interleaved with the blocks shuffled) and
// must give bitwise the first schedule's outputs: a missing barrier, or a read of shared memory the
// block has not written (0xFF bytes at each block's start), shows under one of them.
// What it shows: the index arithmetic, the masks, the reductions, the launch geometry and the
// barriers; not the speed, nor the GPU's approximate rsqrtf, expf, logf (the host's here).
//   dev/cuda/bin/kernels_emulate                   every check (tests/test_kernels_emulate.sh)
//   dev/cuda/bin/kernels_emulate --quick           one case of each
//   dev/cuda/bin/kernels_emulate --only NAME       quantize, norm, adamw, fused_norm, loss or bias_grad alone
//   dev/cuda/bin/kernels_emulate --quantize N      the quantize checks at length N alone
//   dev/cuda/bin/kernels_emulate --misaligned N    zq_quantize_gpu on a message of N int8 values
#include "cuda/common.cuh"
#include "cuda/quantize.cuh"
#include "cuda/global_norm.cuh"
#include "adamw.cuh"
#include "cuda/layernorm.cuh"
#include "cuda/residual.cuh"
#include "cuda/classifier.cuh"
#include "cuda/matmul.cuh"
#include "dev/cuda/quantize_cases.h"

struct Schedule { const char *name; int switch_percent, shuffle_blocks; uint64_t seed; };
static const Schedule SCHEDULES[] = {
    {"warps in turn, blocks in order", 0, 0, 21},
    {"warps interleaved 30%, blocks shuffled", 30, 1, 22},
    {"warps interleaved 70%, blocks shuffled", 70, 1, 23},
};

typedef std::vector<unsigned char> Bytes;
template <class T> static void put(Bytes &b, const T *p, size_t n) {
    b.insert(b.end(), (const unsigned char *)p, (const unsigned char *)(p + n));
}

// run() under every schedule: no emulation error, and the same bytes as the first; returns those
template <class F> static Bytes under_schedules(F run) {
    Bytes first;
    for (size_t si = 0; si < sizeof(SCHEDULES) / sizeof(SCHEDULES[0]); si++) {
        const Schedule &sc = SCHEDULES[si];
        g_dev_rng = sc.seed;
        g_emu.switch_percent = sc.switch_percent;
        g_emu.shuffle_blocks = sc.shuffle_blocks;
        const long errors0 = g_emu.errors;
        Bytes b = run();
        char name[128];
        snprintf(name, sizeof(name), "emulation checks (%s)", sc.name);
        if (!check_true(name, g_emu.errors == errors0)) printf("    %ld errors, the first: %s\n", g_emu.errors - errors0, g_emu.first_error.c_str());
        g_emu.errors = 0;
        g_emu.first_error.clear();
        if (si == 0) first = b;
        else check_true("  bitwise the first schedule's outputs", b == first);
    }
    g_dev_rng = 7;
    return first;
}

template <class T> static T *dev_buf(size_t n) {
    T *p = NULL;
    cudaCheck(cudaMalloc(&p, (n ? n : 1) * sizeof(T)));
    memset(p, 0xFF, (n ? n : 1) * sizeof(T));   // NaN: an element nothing wrote fails the checks
    return p;
}
static std::vector<float> rand_bf16_values(size_t n, float scale) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = (float)emu_bf16(scale * dev_rand_normal());
    return v;
}
static floatX *upload_bf16(const std::vector<float> &v) {
    floatX *d = dev_buf<floatX>(v.size());
    for (size_t i = 0; i < v.size(); i++) d[i] = emu_bf16(v[i]);
    return d;
}
static std::vector<float> bf16_values(const floatX *d, size_t n) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = (float)d[i];
    return v;
}

// ----------------------------------------------------------------------------
// ZeRO++'s quantization (cuda/quantize.cuh) against util/quantize.h

static void check_quantize(size_t n, int bits, int bf16) {
    printf("quantize: n=%zu int%d from %s\n", n, bits, bf16 ? "bf16" : "fp32");
    std::vector<float> x = zq_test_values(n, bf16);
    const size_t bytes = zq_bytes(n, bits);
    Bytes ref(bytes);
    double ref_sums[2] = {0, 0};
    zq_quantize(x.data(), n, bits, ref.data(), ref_sums);   // the CPU reference, under UBSan
    std::vector<float> y_ref(n), acc_ref(x);
    zq_dequantize(ref.data(), n, bits, y_ref.data(), 0);
    zq_dequantize(ref.data(), n, bits, acc_ref.data(), 1);
    float e[2];   // fp32 sums added in the blocks' order: outside the bitwise comparison
    Bytes out = under_schedules([&] {
        uint8_t *q = dev_buf<uint8_t>(bytes);
        float *err = dev_buf<float>(2);
        err[0] = err[1] = 0;
        float *xf = dev_buf<float>(n), *y = dev_buf<float>(n), *acc = dev_buf<float>(n);
        floatX *xb = upload_bf16(x), *yb = dev_buf<floatX>(n);
        memcpy(xf, x.data(), n * sizeof(float));
        if (bf16) zq_quantize_gpu(xb, n, bits, q, err, 0);
        else zq_quantize_gpu(xf, n, bits, q, err, 0);
        uint8_t *m = dev_buf<uint8_t>(bytes);   // the CPU's message, dequantized: into fp32, added to fp32, into bf16
        memcpy(m, ref.data(), bytes);
        memcpy(acc, x.data(), n * sizeof(float));
        zq_dequantize_gpu(m, n, bits, y, 0, 0);
        zq_dequantize_gpu(m, n, bits, acc, 1, 0);
        zq_dequantize_gpu(m, n, bits, yb, 0, 0);
        Bytes b;
        put(b, q, bytes);
        memcpy(e, err, sizeof(e));
        put(b, y, n);
        put(b, acc, n);
        put(b, yb, n);
        for (void *p : {(void *)q, (void *)err, (void *)xf, (void *)y, (void *)acc, (void *)xb, (void *)yb, (void *)m}) cudaFree(p);
        return b;
    });
    size_t differ = 0;
    for (size_t i = 0; i < bytes; i++) differ += out[i] != ref[i];
    char name[128];
    snprintf(name, sizeof(name), "message (%zu bytes) = the CPU's (%zu differ)", bytes, differ);
    check_true(name, differ == 0);
    snprintf(name, sizeof(name), "squared error %.6g and squares %.6g (CPU %.6g, %.6g)", e[0], e[1], ref_sums[0], ref_sums[1]);
    check_true(name, fabs(e[0] - ref_sums[0]) <= 1e-4 * (1e-30 + ref_sums[0]) && fabs(e[1] - ref_sums[1]) <= 1e-4 * ref_sums[1]);
    std::vector<float> y(n), acc(n), yb(n);
    memcpy(y.data(), &out[bytes], n * 4);
    memcpy(acc.data(), &out[bytes + 4 * n], n * 4);
    const floatX *ybx = (const floatX *)&out[bytes + 8 * n];
    for (size_t i = 0; i < n; i++) yb[i] = (float)ybx[i];
    std::vector<float> y_bf(n);
    for (size_t i = 0; i < n; i++) y_bf[i] = (float)emu_bf16(y_ref[i]);
    check_close("dequantize to fp32 (exact)", y, y_ref, 0.0f, 0.0f);
    check_close("dequantize added (exact)", acc, acc_ref, 0.0f, 0.0f);
    check_close("dequantize to bf16 (exact)", yb, y_bf, 0.0f, 0.0f);
}

// ----------------------------------------------------------------------------
// the lean step: the norm and AdamW over a partition's runs (zero/device.cuh's zb_lean_*)

// runs of the given lengths, each at its shard offset (one after another), their gradients and
// parameters in buffers with gaps between them (as units' slices of separate allocations)
template <class G> struct Partition {
    std::vector<AdamWRun<G>> runs;
    size_t elems = 0;
    G *grads;
    floatX *params;
    Partition(const std::vector<size_t> &lens) {
        size_t gap = 16, span = 0;
        for (size_t n : lens) span += n + gap;
        grads = dev_buf<G>(span);
        params = dev_buf<floatX>(span);
        size_t at = 0;
        for (size_t n : lens) {
            runs.push_back(AdamWRun<G>{elems, n, grads + at + gap, params + at + gap});
            for (size_t i = 0; i < n; i++) grads[at + gap + i] = G((float)emu_bf16(0.1f * dev_rand_normal()));
            for (size_t i = 0; i < n; i++) params[at + gap + i] = emu_bf16(dev_rand_normal());
            at += n + gap;
            elems += n;
        }
    }
    ~Partition() { cudaFree(grads); cudaFree(params); }
};

template <class G> static void check_lean_norm(const std::vector<size_t> &lens, int sms) {
    g_emu_sms = sms;
    g_cuda_device_info.init = 0;   // (cuda/common.cuh reads the count once)
    Partition<G> p(lens);
    const int grid = global_norm_runs_grid<G>(p.elems);
    printf("lean norm: %zu runs of %s, %zu elements, %d multiprocessors: %d blocks of %d\n", lens.size(),
           sizeof(G) == 4 ? "fp32" : "bf16", p.elems, sms, grid, GNORM_BLOCK);
    double ref = 0;
    for (const auto &r : p.runs)
        for (size_t i = 0; i < r.n; i++) ref += (double)(float)r.grad[i] * (double)(float)r.grad[i];
    Bytes out = under_schedules([&] {
        AdamWRun<G> *runs = dev_buf<AdamWRun<G>>(p.runs.size());
        memcpy(runs, p.runs.data(), p.runs.size() * sizeof(*runs));
        float *sum = dev_buf<float>(3), *scratch = dev_buf<float>(global_norm_scratch_floats());
        unsigned int *done = dev_buf<unsigned int>(1);
        *done = 0;
        global_norm_squared_runs(sum, runs, (int)p.runs.size(), grid, scratch, done, 0);
        const unsigned after_first = *done;
        global_norm_squared_runs(sum + 1, runs, (int)p.runs.size(), grid, scratch, done, 0);   // the counter reused
        for (size_t i = 0; i < p.runs.size(); i++)   // the per-run launcher, accumulating
            global_norm_squared(sum + 2, p.runs[i].grad, p.runs[i].n, scratch, i > 0, 0);
        Bytes b;
        put(b, sum, 3);
        put(b, &after_first, 1);
        put(b, done, 1);
        cudaFree(runs); cudaFree(sum); cudaFree(scratch); cudaFree(done);
        return b;
    });
    float s[3];
    unsigned counters[2];
    memcpy(s, out.data(), 12);
    memcpy(counters, out.data() + 12, 8);
    char name[160];
    snprintf(name, sizeof(name), "sum of squares %.6g (double %.6g, per run %.6g)", s[0], ref, s[2]);
    check_true(name, fabs(s[0] - ref) <= 1e-5 * ref && fabs(s[2] - ref) <= 1e-5 * ref);
    check_true("the second launch gives the same bits", !memcmp(&s[0], &s[1], 4));
    check_true("the last block leaves the counter at zero", counters[0] == 0 && counters[1] == 0);
    g_emu_sms = 132;
    g_cuda_device_info.init = 0;
}

// decayed: [from, to) shard ranges with weight decay (multiples of 16, as zero.h's segments)
template <class G> static void check_lean_adamw(const std::vector<size_t> &lens, const std::vector<std::pair<size_t, size_t>> &decayed, int sms) {
    g_emu_sms = sms;
    g_cuda_device_info.init = 0;
    Partition<G> p(lens);
    const size_t n = p.elems;
    const int grid = adamw_runs_grid(n);
    printf("lean AdamW: %zu runs of %s gradients, %zu elements, %zu decayed ranges, %d multiprocessors: %d blocks\n",
           lens.size(), sizeof(G) == 4 ? "fp32" : "bf16", n, decayed.size(), sms, grid);
    std::vector<float> master(n), m(n), v(n);
    for (size_t i = 0; i < n; i++) {
        master[i] = dev_rand_normal();
        m[i] = 0.01f * dev_rand_normal();
        v[i] = 1e-4f * dev_rand_uniform();
    }
    std::vector<uint32_t> mask((n + 31) / 32, 0);
    std::vector<char> decays(n, 0);
    for (auto &d : decayed) {
        adamw_decay_mask_set(mask.data(), d.first, d.second);
        for (size_t i = d.first; i < d.second; i++) decays[i] = 1;
    }
    AdamWParams hp = {6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 3, 0.7f, 0, 0};
    // the reference: adamw_cpu_step over each stretch of one decay, run by run
    std::vector<float> rp(master), rm(m), rv(v);
    std::vector<uint16_t> rout(n);
    for (const auto &r : p.runs)
        for (size_t a = 0; a < r.n;) {
            size_t b = a;
            while (b < r.n && decays[r.off + b] == decays[r.off + a]) b++;
            AdamWParams h = hp;
            if (!decays[r.off + a]) h.weight_decay = 0.0f;
            const size_t o = r.off + a;
            if (sizeof(G) == 4) adamw_cpu_step(&rp[o], (const float *)(r.grad + a), &rm[o], &rv[o], &rout[o], b - a, h);
            else adamw_cpu_step_bf16grad(&rp[o], (const uint16_t *)(r.grad + a), &rm[o], &rv[o], &rout[o], b - a, h);
            a = b;
        }
    Bytes out = under_schedules([&] {
        float *dm = dev_buf<float>(n), *dmm = dev_buf<float>(n), *dv = dev_buf<float>(n);
        memcpy(dm, master.data(), n * 4);
        memcpy(dmm, m.data(), n * 4);
        memcpy(dv, v.data(), n * 4);
        uint32_t *dmask = dev_buf<uint32_t>(mask.size());
        memcpy(dmask, mask.data(), mask.size() * 4);
        AdamWRun<G> *runs = dev_buf<AdamWRun<G>>(p.runs.size());
        memcpy(runs, p.runs.data(), p.runs.size() * sizeof(*runs));
        for (const auto &r : p.runs) memset(r.param, 0xFF, r.n * sizeof(floatX));   // each schedule's start poisoned
        adamw_gpu_runs(dm, dmm, dv, dmask, runs, (int)p.runs.size(), grid, hp, 0);
        Bytes b;
        put(b, dm, n);
        put(b, dmm, n);
        put(b, dv, n);
        for (const auto &r : p.runs) put(b, r.param, r.n);
        cudaFree(dm); cudaFree(dmm); cudaFree(dv); cudaFree(dmask); cudaFree(runs);
        return b;
    });
    Bytes ref;
    put(ref, rp.data(), n);
    put(ref, rm.data(), n);
    put(ref, rv.data(), n);
    put(ref, rout.data(), n);
    size_t differ = 0;
    for (size_t i = 0; i < ref.size(); i++) differ += out[i] != ref[i];
    char name[128];
    snprintf(name, sizeof(name), "master, m, v and bf16 parameters bitwise adamw_cpu_step's (%zu bytes differ)", differ);
    check_true(name, out.size() == ref.size() && differ == 0);
    g_emu_sms = 132;
    g_cuda_device_info.init = 0;
}

// ----------------------------------------------------------------------------
// the residual add fused into the next norm (--fuse-residual 1)

static void check_fused_norm(int N, int C, int rms) {
    printf("fused residual + %s: N=%d C=%d\n", rms ? "RMSNorm" : "LayerNorm", N, C);
    const size_t nc = (size_t)N * C;
    std::vector<float> a = rand_bf16_values(nc, 1.0f), b = rand_bf16_values(nc, 0.5f);
    std::vector<float> w = rand_bf16_values(C, 0.2f), bias = rand_bf16_values(C, 0.2f);
    for (float &x : w) x = (float)emu_bf16(1.0f + x);
    const float eps = 1e-5f;
    std::vector<float> res_ref(nc), out_ref(nc);
    for (int r = 0; r < N; r++) {
        double s = 0, ss = 0;
        for (int c = 0; c < C; c++) {
            const size_t i = (size_t)r * C + c;
            res_ref[i] = (float)emu_bf16(a[i] + b[i]);
            s += res_ref[i];
            ss += (double)res_ref[i] * res_ref[i];
        }
        const double mean = rms ? 0 : s / C, var = rms ? ss / C : 0;
        double vv = 0;
        for (int c = 0; c < C && !rms; c++) vv += (res_ref[(size_t)r * C + c] - mean) * (res_ref[(size_t)r * C + c] - mean);
        const double rstd = 1.0 / sqrt((rms ? var : vv / C) + eps);
        for (int c = 0; c < C; c++) {
            const size_t i = (size_t)r * C + c;
            out_ref[i] = (float)((res_ref[i] - mean) * rstd * w[c] + (rms ? 0.0 : bias[c]));
        }
    }
    // [0]: residual_forward then the norm; [1]: fused; [2]: fused, the residual written over inp1
    Bytes outs[3];
    for (int way = 0; way < 3; way++)
        outs[way] = under_schedules([&] {
            floatX *in1 = upload_bf16(a), *in2 = upload_bf16(b), *dw = upload_bf16(w), *db = upload_bf16(bias);
            floatX *res = way == 2 ? in1 : dev_buf<floatX>(nc), *out = dev_buf<floatX>(nc);
            float *mean = dev_buf<float>(N), *rstd = dev_buf<float>(N);
            if (way == 0) {
                residual_forward(res, in1, in2, nc, 0);
                if (rms) rmsnorm_forward(out, rstd, res, dw, N, C, eps, 0);
                else layernorm_forward(out, mean, rstd, res, dw, db, N, C, eps, 0);
            } else if (rms) {
                fused_residual_rmsnorm_forward(res, out, rstd, in1, in2, dw, N, C, eps, 0);
            } else {
                fused_residual_layernorm_forward(res, out, mean, rstd, in1, in2, dw, db, N, C, eps, 0);
            }
            Bytes r;
            put(r, res, nc);
            put(r, out, nc);
            if (!rms) put(r, mean, N);
            put(r, rstd, N);
            for (void *p : {(void *)in1, (void *)in2, (void *)dw, (void *)db, (void *)out, (void *)mean, (void *)rstd}) cudaFree(p);
            if (way != 2) cudaFree(res);
            return r;
        });
    check_true("fused = residual_forward then the norm, bitwise", outs[1] == outs[0]);
    check_true("fused with the residual over its input, bitwise", outs[2] == outs[0]);
    const floatX *res = (const floatX *)outs[1].data(), *out = res + nc;
    std::vector<float> got_res(nc), got_out(nc);
    for (size_t i = 0; i < nc; i++) { got_res[i] = (float)res[i]; got_out[i] = (float)out[i]; }
    check_close("residual (exact)", got_res, res_ref, 0.0f, 0.0f);
    check_close("normalized (bf16 output)", got_out, out_ref, 1e-2f, 1e-2f);
}

// ----------------------------------------------------------------------------
// the loss summed on the device (--device-loss 1)

static void check_loss_mean(int N) {
    printf("device loss: N=%d\n", N);
    std::vector<float> l1(N), l2(N);
    for (int i = 0; i < N; i++) { l1[i] = 10.0f * dev_rand_uniform(); l2[i] = 3.0f + dev_rand_normal(); }
    Bytes out = under_schedules([&] {
        float *d1 = dev_buf<float>(N), *d2 = dev_buf<float>(N);
        memcpy(d1, l1.data(), N * 4);
        memcpy(d2, l2.data(), N * 4);
        double *acc = dev_buf<double>(2);
        loss_mean_accumulate(acc, d1, N, 1, 0);
        acc[1] = acc[0];
        loss_mean_accumulate(acc + 1, d2, N, 0, 0);
        Bytes b;
        put(b, acc, 2);
        cudaFree(d1); cudaFree(d2); cudaFree(acc);
        return b;
    });
    double acc[2];
    memcpy(acc, out.data(), 16);
    auto host_mean = [&](const std::vector<float> &l) {   // the host's sum, as train_gpt.cu's default path
        double s = 0;
        for (float x : l) s += x;
        return (double)(float)(s / N);
    };
    const double m1 = host_mean(l1), m2 = host_mean(l2);
    char name[160];
    snprintf(name, sizeof(name), "first micro-batch %.9g (host %.9g), both %.9g (host %.9g)", acc[0], m1, acc[1], m1 + m2);
    check_true(name, fabs(acc[0] - m1) <= 1.2e-7 * fabs(m1) && fabs(acc[1] - (acc[0] + m2)) <= 1.2e-7 * fabs(m1 + m2));
}

// ----------------------------------------------------------------------------
// the bias gradient from the dweight GEMM's BGRADB epilogue (--bias-grad-epilogue 1)

static void check_bias_grad_epilogue(int N, int C, int OC) {
    printf("bias-gradient epilogue: N=%d C=%d OC=%d\n", N, C, OC);
    matmul_setup();
    std::vector<float> inp = rand_bf16_values((size_t)N * C, 1.0f), dout = rand_bf16_values((size_t)N * OC, 1.0f);
    std::vector<float> dw0 = rand_bf16_values((size_t)OC * C, 1.0f), db0 = rand_bf16_values(OC, 1.0f);
    std::vector<float> dw_ref(dw0), db_ref(db0);
    for (int o = 0; o < OC; o++) {
        double s = 0;
        for (int n = 0; n < N; n++) s += dout[(size_t)n * OC + o];
        db_ref[o] = (float)(db0[o] + s);
        for (int c = 0; c < C; c++) {
            double d = 0;
            for (int n = 0; n < N; n++) d += (double)dout[(size_t)n * OC + o] * inp[(size_t)n * C + c];
            dw_ref[(size_t)o * C + c] = (float)(dw0[(size_t)o * C + c] + d);
        }
    }
    floatX *d_inp = upload_bf16(inp), *d_dout = upload_bf16(dout), *d_w = upload_bf16(dw0);
    float *scratch = dev_buf<float>(matmul_dbias_scratch_floats(OC));
    for (int fail = 0; fail < 2; fail++) {
        g_emu_cublaslt_fail_bgradb = fail;
        g_matmul_bias_grad_epilogue = 1;
        const long calls0 = g_emu_cublaslt_calls[CUBLASLT_EPILOGUE_BGRADB];
        for (int rep = 0; rep < 2; rep++) {   // the second call: the epilogue again, or off after a failure
            floatX *dw = upload_bf16(dw0), *db = upload_bf16(db0);
            matmul_backward(NULL, dw, db, scratch, d_dout, d_inp, d_w, N, C, OC, NULL, 0);
            char name[128];
            snprintf(name, sizeof(name), "%s, call %d: dweight", fail ? "cublasLtMatmul failing" : "the epilogue", rep + 1);
            check_close(name, bf16_values(dw, (size_t)OC * C), dw_ref, 5e-3f, 1e-2f);
            snprintf(name, sizeof(name), "%s, call %d: dbias", fail ? "cublasLtMatmul failing" : "the epilogue", rep + 1);
            check_close(name, bf16_values(db, OC), db_ref, 8e-3f, 1.6e-2f);
            cudaFree(dw); cudaFree(db);
        }
        const long calls = g_emu_cublaslt_calls[CUBLASLT_EPILOGUE_BGRADB] - calls0;
        if (!fail) {
            check_true("BGRADB in the output type (bf16), on both calls",
                       g_matmul_bias_grad_type == CUDA_R_16BF && calls == 2 && g_matmul_bias_grad_epilogue == 1);
        } else {
            check_true("one failed BGRADB call, then the column-sum kernel with the epilogue off",
                       calls == 1 && g_matmul_bias_grad_epilogue == 0 && g_matmul_bias_grad_failed == CUBLAS_STATUS_NOT_SUPPORTED);
        }
    }
    g_emu_cublaslt_fail_bgradb = 0;
    cudaFree(d_inp); cudaFree(d_dout); cudaFree(d_w); cudaFree(scratch);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    g_emu.stack_bytes = 64 << 10;
    g_dev_rng = 7;
    const char *only = argc == 3 && !strcmp(argv[1], "--only") ? argv[2] : "";
    const int quick = argc == 2 && !strcmp(argv[1], "--quick");
    auto run = [&](const char *name) { return !*only || !strcmp(only, name); };
    if (argc == 3 && !strcmp(argv[1], "--misaligned")) {   // a message the trainer cannot produce
        const size_t n = (size_t)atoll(argv[2]);
        float *x = dev_buf<float>(n);
        uint8_t *q = dev_buf<uint8_t>(zq_bytes(n, 8) + 4);
        float *err = dev_buf<float>(2);
        zq_quantize_gpu(x, n, 8, q, err, 0);
        printf("zq_quantize_gpu took a message of %zu values\n", n);
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "--quantize")) {
        for (int bits = 8; bits >= 4; bits -= 4) check_quantize((size_t)atoll(argv[2]), bits, 1);
        return g_dev_failures ? 1 : 0;
    }
    // --quick: one case of each (tests/test_kernels_emulate.sh's AddressSanitizer run)
    for (size_t c = 0; c < (quick ? 1 : ZQ_N_CASES) && run("quantize"); c++)
        for (int bits = 8; bits >= 4; bits -= 4)
            for (int bf16 = 1; bf16 >= (quick ? 1 : 0); bf16--) check_quantize(ZQ_CASES[c], bits, bf16);
    // units' slices of 16-multiples, one longer than a block's stride; 1 multiprocessor: 4 blocks loop over them
    const std::vector<size_t> lens = {4096, 48, 16, 20000, 1024};
    if (run("norm")) {
        check_lean_norm<floatX>(lens, 1);
        if (!quick) check_lean_norm<float>(lens, 1);
        if (!quick) check_lean_norm<floatX>({65536, 32, 4096}, 132);
    }
    if (run("adamw")) {
        check_lean_adamw<floatX>(lens, {{0, 2048}, {4096 + 32, 4096 + 64}, {4096 + 48 + 16, 4096 + 48 + 16 + 10000}}, 1);
        if (!quick) check_lean_adamw<float>(lens, {{16, 4096 + 48}}, 2);
    }
    if (run("fused_norm")) {
        check_fused_norm(37, 768, 0);    // not a whole number of 8-row blocks; 3 passes of a warp over the row
        if (!quick) check_fused_norm(9, 96, 0);      // lanes with no columns
        if (!quick) check_fused_norm(37, 768, 1);
    }
    if (run("loss")) {
        check_loss_mean(quick ? 1000 : 16384);
        if (!quick) check_loss_mean(1000);
        if (!quick) check_loss_mean(7);
    }
    if (run("bias_grad")) check_bias_grad_epilogue(64, 32, 96);
    if (g_dev_failures) printf("kernels_emulate: FAILED (%d checks)\n", g_dev_failures);
    else printf("kernels_emulate: all checks passed\n");
    return g_dev_failures ? 1 : 0;
}
