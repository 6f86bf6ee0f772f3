// dev/cuda/layer_profile.cu: where a GPT-2 124M training step (B=16, T=1024, one GPU) spends
// its GPU time, kernel by kernel, without a profiler: each phase of train_gpt.cu's layer
// forward and backward, head and embedding, called with the trainer's launchers on buffers of
// the trainer's shapes (random values) and timed with CUDA events (the median of 5 rounds of
// 10 calls). Every phase is printed with its share of a step (x12 for the layer's phases), and
// the sums give the step's kernel time for the validated path (cuBLAS attention, the dbias
// kernel) and for the opt-in ones (--attention flash, --bias-grad-epilogue 1).
// Not a check (nothing is compared): a measurement for choosing the next optimization
// (dev/cuda/NOTES.md, "What the measured step shows next"). Beside a trainer step time
// measured in the same session (bench/gpu_train.sh, no --breakdown), the difference between the
// step and these sums is what no kernel accounts for: launch gaps, host synchronizations,
// the optimizer (dev/cuda/adamw times it), ZeRO's communication.
#include "dev/cuda/kernel_check.cuh"
#include "cuda/layernorm.cuh"
#include "cuda/matmul.cuh"
#include "cuda/attention.cuh"
#include "cuda/flash_attention.cuh"
#include "cuda/classifier.cuh"
#include "cuda/encoder.cuh"

static const int B = 16, T = 1024, C = 768, H = 12, HD = 64, F = 3072, V = 50257, VP = 50304, L = 12, N = B * T;

// deterministic pseudo-random values in [-scale, scale) (a hash of the index: no host upload)
__global__ void fill_kernel(floatX *p, size_t n, float scale, uint32_t seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 2654435761u ^ seed;
        h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
        p[i] = f2bf(scale * ((h & 0xffff) / 32768.0f - 1.0f));
    }
}
static floatX *buf(size_t n, float scale = 1.0f) {
    static uint32_t seed = 1;
    floatX *p = dev_alloc<floatX>(n);
    fill_kernel<<<1024, 256>>>(p, n, scale, seed++ * 0x9E3779B9u);
    cudaCheckLaunch();
    return p;
}

#include <string>

struct Phase { std::string name; const char *path; int per_step; float us; };
static std::vector<Phase> g_phases;
// path: "" for every path, else the variant it belongs to ("cublas", "flash", "kernel", "epilogue")
template <class Fn> static void phase(std::string name, const char *path, int per_step, Fn f) {
    g_phases.push_back({name, path, per_step, time_us(f, 10, 5)});
}
// the step's kernel time in ms for one attention path and one dbias way
static double step_ms(const char *attention, const char *dbias) {
    double us = 0;
    for (const Phase &p : g_phases)
        if (!*p.path || !strcmp(p.path, attention) || !strcmp(p.path, dbias)) us += p.us * p.per_step;
    return us / 1e3;
}

int main(void) {
    dev_require_gpu();
    matmul_setup();
    printf("GPT-2 124M, B=%d T=%d: one layer's phases (x%d per step), the head and the embedding (x1)\n", B, T, L);
    // activations and their gradients
    floatX *x = buf((size_t)N * C), *x_prev = buf((size_t)N * C), *ln1 = buf((size_t)N * C), *ln2 = buf((size_t)N * C);
    floatX *res2 = buf((size_t)N * C), *atty = buf((size_t)N * C), *branch = buf((size_t)N * C, 0.1f);
    floatX *qkv = buf((size_t)N * 3 * C), *qkvr = buf((size_t)N * 3 * C), *dqkv = buf((size_t)N * 3 * C);
    floatX *fch = buf((size_t)N * F), *fch_act = buf((size_t)N * F), *dfch = buf((size_t)N * F);
    floatX *dres = buf((size_t)N * C, 0.01f), *dbuf = buf((size_t)N * C, 0.01f);
    floatX *att = buf(attention_att_elems(B, T, H), 0.001f), *att_bf16 = buf(attention_att_elems(B, T, H));
    floatX *att_y = buf(attention_y_elems(B, T, H, HD)), *att_dqkvr = buf((size_t)N * 3 * C);
    float *att_f32 = dev_alloc<float>(attention_att_elems(B, T, H));
    float *lse = dev_alloc<float>(flash_lse_elems(B, T, H)), *D = dev_alloc<float>(flash_lse_elems(B, T, H));
    float *mean = dev_alloc<float>(N), *rstd = dev_alloc<float>(N);
    float *norm_scratch = dev_alloc<float>(norm_backward_scratch_floats(C));
    float *dbias_scratch = dev_alloc<float>(matmul_dbias_scratch_floats(F));
    // one layer's parameters and gradients; the head's (tied wte) and the embedding's
    floatX *ln_w = buf(C), *ln_b = buf(C, 0.1f), *qkv_w = buf((size_t)3 * C * C, 0.02f), *qkv_b = buf(3 * C, 0.02f);
    floatX *attproj_w = buf((size_t)C * C, 0.02f), *attproj_b = buf(C, 0.02f), *fc_w = buf((size_t)F * C, 0.02f);
    floatX *fc_b = buf(F, 0.02f), *fcproj_w = buf((size_t)C * F, 0.02f), *fcproj_b = buf(C, 0.02f);
    floatX *g_ln_w = buf(C), *g_ln_b = buf(C), *g_qkv_w = buf((size_t)3 * C * C), *g_qkv_b = buf(3 * C);
    floatX *g_attproj_w = buf((size_t)C * C), *g_attproj_b = buf(C), *g_fc_w = buf((size_t)F * C), *g_fc_b = buf(F);
    floatX *g_fcproj_w = buf((size_t)C * F), *g_fcproj_b = buf(C);
    floatX *wte = buf((size_t)VP * C, 0.02f), *wpe = buf((size_t)T * C, 0.02f), *g_wte = buf((size_t)VP * C);
    floatX *g_wpe = buf((size_t)T * C), *logits = buf((size_t)N * VP);
    float *losses = dev_alloc<float>(N);
    std::vector<int> tok(N);
    for (int &t : tok) t = dev_rand_int(V);
    int *tokens = to_device_i32(tok), *targets = to_device_i32(tok);
    EncoderBackwardScratch enc;
    encoder_backward_scratch_alloc(&enc, N, VP);
    const float eps = 1e-5f;

    // forward, in train_gpt.cu's order (layer_rows: LN1 finishes the previous layer's residual)
    phase("ln1 + residual add (fused)", "", L, [&] {
        fused_residual_layernorm_forward(x, ln1, mean, rstd, x_prev, branch, ln_w, ln_b, N, C, eps, 0); });
    phase("qkv matmul (+bias)", "", L, [&] { matmul_forward(qkv, ln1, qkv_w, qkv_b, N, C, 3 * C, NULL, 0); });
    phase("attention fwd, cuBLAS", "cublas", L, [&] { attention_forward(atty, qkvr, att, qkv, att_f32, att_y, B, T, H, H, HD, 0); });
    phase("attention fwd, flash", "flash", L, [&] { flash_attention_forward(atty, lse, qkv, B, T, H, H, HD, 0); });
    phase("attproj matmul (+bias)", "", L, [&] { matmul_forward(branch, atty, attproj_w, attproj_b, N, C, C, NULL, 0); });
    phase("ln2 + residual add (fused)", "", L, [&] {
        fused_residual_layernorm_forward(res2, ln2, mean, rstd, x, branch, ln_w, ln_b, N, C, eps, 0); });
    phase("fc matmul (+bias, GELU)", "", L, [&] { matmul_forward(fch_act, ln2, fc_w, fc_b, N, C, F, fch, 0); });
    phase("fcproj matmul (+bias)", "", L, [&] { matmul_forward(branch, fch_act, fcproj_w, fcproj_b, N, F, C, NULL, 0); });
    // backward (layer_backward); the four matmuls with a bias both ways
    const char *dbias_way[2] = {"kernel", "epilogue"};
    for (int e = 0; e < 2; e++) {
        g_matmul_bias_grad_epilogue = e;
        const std::string way = std::string(", dbias ") + dbias_way[e];
        phase("fcproj bwd (DGELU)" + way, dbias_way[e], L, [&] {
            matmul_backward(dfch, g_fcproj_w, g_fcproj_b, dbias_scratch, dres, fch_act, fcproj_w, N, F, C, fch, 0); });
        phase("fc bwd" + way, dbias_way[e], L, [&] {
            matmul_backward(dbuf, g_fc_w, g_fc_b, dbias_scratch, dfch, ln2, fc_w, N, C, F, NULL, 0); });
        phase("attproj bwd" + way, dbias_way[e], L, [&] {
            matmul_backward(dbuf, g_attproj_w, g_attproj_b, dbias_scratch, dres, atty, attproj_w, N, C, C, NULL, 0); });
        phase("qkv bwd" + way, dbias_way[e], L, [&] {
            matmul_backward(dbuf, g_qkv_w, g_qkv_b, dbias_scratch, dqkv, ln1, qkv_w, N, C, 3 * C, NULL, 0); });
    }
    g_matmul_bias_grad_epilogue = 0;
    phase("ln2 bwd", "", L, [&] {
        layernorm_backward(dres, g_ln_w, g_ln_b, norm_scratch, dbuf, res2, ln_w, mean, rstd, N, C, 0); });
    // the flash backward needs the flash forward's out and lse
    flash_attention_forward(atty, lse, qkv, B, T, H, H, HD, 0);
    phase("attention bwd, flash", "flash", L, [&] {
        flash_attention_backward(dqkv, D, dbuf, qkv, atty, lse, B, T, H, H, HD, 0); });
    phase("attention bwd, cuBLAS", "cublas", L, [&] {
        attention_backward(dqkv, dbuf, qkvr, att, att_f32, att_bf16, att_y, att_dqkvr, B, T, H, H, HD, 0); });
    phase("ln1 bwd", "", L, [&] { layernorm_backward(dres, g_ln_w, g_ln_b, norm_scratch, dbuf, x, ln_w, mean, rstd, N, C, 0); });
    // the head and the embedding (once per micro-step)
    phase("embedding fwd", "", 1, [&] { encoder_forward(x, tokens, wte, wpe, B, T, C, 0); });
    phase("lnf + residual add (fused)", "", 1, [&] {
        fused_residual_layernorm_forward(x, ln1, mean, rstd, x_prev, branch, ln_w, ln_b, N, C, eps, 0); });
    phase("lm_head matmul", "", 1, [&] { matmul_forward(logits, ln1, wte, NULL, N, C, VP, NULL, 0); });
    phase("classifier (loss, dlogits)", "", 1, [&] { fused_classifier(logits, losses, targets, 1.0f / N, N, V, VP, 1, 0); });
    phase("lm_head bwd", "", 1, [&] { matmul_backward(dbuf, g_wte, NULL, NULL, logits, ln1, wte, N, C, VP, NULL, 0); });
    phase("lnf bwd", "", 1, [&] { layernorm_backward(dres, g_ln_w, g_ln_b, norm_scratch, dbuf, x, ln_w, mean, rstd, N, C, 0); });
    phase("embedding bwd", "", 1, [&] { encoder_backward(g_wte, g_wpe, dres, tokens, B, T, C, VP, &enc, 0); });

    const double base = step_ms("cublas", "kernel");
    for (const Phase &p : g_phases) {  // the share of the validated path's kernel time, or (opt-in)
        const double ms = p.us * p.per_step / 1e3;
        const int in_base = !*p.path || !strcmp(p.path, "cublas") || !strcmp(p.path, "kernel");
        char share[32];
        if (in_base) snprintf(share, sizeof(share), "%5.1f%%", 100.0 * ms / base);
        else snprintf(share, sizeof(share), "(opt-in)");
        printf("  time phase %-40s %9.1f us x%-2d = %6.2f ms per step %s\n", p.name.c_str(), p.us, p.per_step, ms, share);
    }
    const char *attention_path[2] = {"cublas", "flash"};
    for (int a = 0; a < 2; a++)
        for (int e = 0; e < 2; e++) {
            const double ms = step_ms(attention_path[a], dbias_way[e]);
            printf("  time step kernels, attention %-6s dbias %-8s %8.2f ms  (%.0f tokens/s if the step were only these)\n",
                   attention_path[a], dbias_way[e], ms, N / (ms / 1e3));
        }
    printf("BGRADB epilogue unavailable (fell back) %ld times\n", g_matmul_bias_grad_fallbacks);
    encoder_backward_scratch_free(&enc);
    matmul_teardown();
    return dev_finish("layer_profile");  // the buffers go with the process
}
