// dev/cuda/attention.cu: causal attention with grouped-query heads, forward (out, saved
// probabilities) and backward (dqkv), against a CPU reference written from docs/model.md
// (double accumulation, OpenMP over (batch, kv group)); gpt2 (KV = H), llama GQA (KV < H)
// and a tiny odd-T case; timed.
#include "dev/cuda/kernel_check.cuh"
#include "cuda/attention.cuh"

// reference forward and backward. qkv [B,T,(H+2KV)*hd], dout [B,T,H*hd].
static void attention_ref(std::vector<float> &out, std::vector<float> &att, std::vector<float> &dqkv,
                          const std::vector<float> &qkv, const std::vector<float> &dout,
                          int B, int T, int H, int KV, int hd) {
    const int nh = H + 2 * KV, rep = H / KV, C = H * hd;
    const double scale = 1.0 / sqrt((double)hd);
    out.assign((size_t)B * T * C, 0.0f);
    att.assign((size_t)B * H * T * T, 0.0f);
    dqkv.assign(qkv.size(), 0.0f);
#pragma omp parallel for collapse(2)
    for (int b = 0; b < B; b++)
        for (int g = 0; g < KV; g++) {
            std::vector<double> p(T), dp(T), dk((size_t)T * hd, 0.0), dv((size_t)T * hd, 0.0), dq(hd);
            auto at = [&](int t, int head, int d) { return (double)qkv[(((size_t)b * T + t) * nh + head) * hd + d]; };
            for (int h = g * rep; h < (g + 1) * rep; h++) {
                const int kh = H + g, vh = H + KV + g;
                for (int t = 0; t < T; t++) {
                    double m = -1e300;
                    for (int t2 = 0; t2 <= t; t2++) {
                        double s = 0;
                        for (int d = 0; d < hd; d++) s += at(t, h, d) * at(t2, kh, d);
                        p[t2] = s * scale;
                        m = std::max(m, p[t2]);
                    }
                    double sum = 0;
                    for (int t2 = 0; t2 <= t; t2++) { p[t2] = exp(p[t2] - m); sum += p[t2]; }
                    for (int t2 = 0; t2 <= t; t2++) {
                        p[t2] /= sum;
                        att[(((size_t)b * H + h) * T + t) * T + t2] = (float)p[t2];
                    }
                    const float *dy = &dout[((size_t)b * T + t) * C + (size_t)h * hd];
                    for (int d = 0; d < hd; d++) {
                        double y = 0;
                        for (int t2 = 0; t2 <= t; t2++) y += p[t2] * at(t2, vh, d);
                        out[((size_t)b * T + t) * C + (size_t)h * hd + d] = (float)y;
                    }
                    // backward of this query row
                    double dot = 0;
                    for (int t2 = 0; t2 <= t; t2++) {
                        double s = 0;
                        for (int d = 0; d < hd; d++) s += (double)dy[d] * at(t2, vh, d);
                        dp[t2] = s;
                        dot += p[t2] * s;
                        for (int d = 0; d < hd; d++) dv[(size_t)t2 * hd + d] += p[t2] * dy[d];
                    }
                    for (int d = 0; d < hd; d++) dq[d] = 0;
                    for (int t2 = 0; t2 <= t; t2++) {
                        double ds = p[t2] * (dp[t2] - dot) * scale;
                        for (int d = 0; d < hd; d++) {
                            dq[d] += ds * at(t2, kh, d);
                            dk[(size_t)t2 * hd + d] += ds * at(t, h, d);
                        }
                    }
                    for (int d = 0; d < hd; d++) dqkv[(((size_t)b * T + t) * nh + h) * hd + d] = (float)dq[d];
                }
            }
            for (int t = 0; t < T; t++)
                for (int d = 0; d < hd; d++) {
                    dqkv[(((size_t)b * T + t) * nh + H + g) * hd + d] = (float)dk[(size_t)t * hd + d];
                    dqkv[(((size_t)b * T + t) * nh + H + KV + g) * hd + d] = (float)dv[(size_t)t * hd + d];
                }
        }
}

// the part of a [B,T,nh*hd] tensor that belongs to heads [h0, h1)
static std::vector<float> heads(const std::vector<float> &x, int B, int T, int nh, int hd, int h0, int h1) {
    std::vector<float> r;
    r.reserve((size_t)B * T * (h1 - h0) * hd);
    for (size_t bt = 0; bt < (size_t)B * T; bt++)
        for (int h = h0; h < h1; h++)
            for (int d = 0; d < hd; d++) r.push_back(x[(bt * nh + h) * hd + d]);
    return r;
}

static void run_case(int B, int T, int H, int KV, int hd) {
    printf("B=%d T=%d H=%d KV=%d hd=%d\n", B, T, H, KV, hd);
    const int nh = H + 2 * KV;
    size_t nqkv = (size_t)B * T * nh * hd, nout = (size_t)B * T * H * hd, natt = attention_att_elems(B, T, H);
    std::vector<float> qkv = rand_normal_bf16(nqkv, 1.0f), dout = rand_normal_bf16(nout, 1.0f);
    std::vector<float> out_ref, att_ref, dqkv_ref;
    attention_ref(out_ref, att_ref, dqkv_ref, qkv, dout, B, T, H, KV, hd);

    floatX *d_qkv = to_device_bf16(qkv), *d_dout = to_device_bf16(dout);
    floatX *d_out = dev_alloc<floatX>(nout), *d_qkvr = dev_alloc<floatX>(nqkv), *d_att = dev_alloc<floatX>(natt);
    floatX *d_dqkv = dev_alloc<floatX>(nqkv), *s_bf = dev_alloc<floatX>(natt), *s_y = dev_alloc<floatX>(attention_y_elems(B, T, H, hd));
    floatX *s_dqkvr = dev_alloc<floatX>(nqkv);
    float *s_f32 = dev_alloc<float>(natt);
    dev_poison(d_out, nout); dev_poison(d_qkvr, nqkv); dev_poison(d_att, natt); dev_poison(d_dqkv, nqkv);
    dev_poison(s_bf, natt); dev_poison(s_y, attention_y_elems(B, T, H, hd)); dev_poison(s_dqkvr, nqkv); dev_poison(s_f32, natt);

    attention_forward(d_out, d_qkvr, d_att, d_qkv, s_f32, s_y, B, T, H, KV, hd, 0);
    check_close("forward out", from_device_bf16(d_out, nout), out_ref, 1e-2f, 2e-2f);
    check_close("forward att (probabilities)", from_device_bf16(d_att, natt), att_ref, 1e-3f, 1e-2f);
    attention_backward(d_dqkv, d_dout, d_qkvr, d_att, s_f32, s_bf, s_y, s_dqkvr, B, T, H, KV, hd, 0);
    std::vector<float> g = from_device_bf16(d_dqkv, nqkv);
    check_close("backward dq", heads(g, B, T, nh, hd, 0, H), heads(dqkv_ref, B, T, nh, hd, 0, H), 1e-2f, 5e-2f, 2e-2);
    check_close("backward dk", heads(g, B, T, nh, hd, H, H + KV), heads(dqkv_ref, B, T, nh, hd, H, H + KV), 1e-2f, 5e-2f, 2e-2);
    check_close("backward dv", heads(g, B, T, nh, hd, H + KV, nh), heads(dqkv_ref, B, T, nh, hd, H + KV, nh), 1e-2f, 5e-2f, 2e-2);
    cudaCheck(cudaFree(d_qkv)); cudaCheck(cudaFree(d_dout)); cudaCheck(cudaFree(d_out)); cudaCheck(cudaFree(d_qkvr));
    cudaCheck(cudaFree(d_att)); cudaCheck(cudaFree(d_dqkv)); cudaCheck(cudaFree(s_bf)); cudaCheck(cudaFree(s_y));
    cudaCheck(cudaFree(s_dqkvr)); cudaCheck(cudaFree(s_f32));
}

static void time_case(int B, int T, int H, int KV, int hd) {
    const int nh = H + 2 * KV;
    size_t nqkv = (size_t)B * T * nh * hd, nout = (size_t)B * T * H * hd, natt = attention_att_elems(B, T, H);
    floatX *qkv = dev_alloc<floatX>(nqkv), *dout = dev_alloc<floatX>(nout), *out = dev_alloc<floatX>(nout);
    floatX *qkvr = dev_alloc<floatX>(nqkv), *att = dev_alloc<floatX>(natt), *dqkv = dev_alloc<floatX>(nqkv);
    floatX *s_bf = dev_alloc<floatX>(natt), *s_y = dev_alloc<floatX>(attention_y_elems(B, T, H, hd)), *s_dqkvr = dev_alloc<floatX>(nqkv);
    float *s_f32 = dev_alloc<float>(natt);
    upload_bf16(qkv, rand_normal_bf16(nqkv, 1.0f).data(), nqkv);
    upload_bf16(dout, rand_normal_bf16(nout, 1.0f).data(), nout);
    const double flops_fwd = 4.0 * B * H * (double)T * T * hd;  // full T x T squares, as computed
    char name[96];
    snprintf(name, sizeof(name), "forward B=%d T=%d H=%d KV=%d", B, T, H, KV);
    float us = time_us([&] { attention_forward(out, qkvr, att, qkv, s_f32, s_y, B, T, H, KV, hd, 0); }, 10, 5);
    report_flops(name, us, flops_fwd);
    snprintf(name, sizeof(name), "backward B=%d T=%d H=%d KV=%d", B, T, H, KV);
    us = time_us([&] { attention_backward(dqkv, dout, qkvr, att, s_f32, s_bf, s_y, s_dqkvr, B, T, H, KV, hd, 0); }, 10, 5);
    report_flops(name, us, 2.0 * flops_fwd);
    cudaCheck(cudaFree(qkv)); cudaCheck(cudaFree(dout)); cudaCheck(cudaFree(out)); cudaCheck(cudaFree(qkvr));
    cudaCheck(cudaFree(att)); cudaCheck(cudaFree(dqkv)); cudaCheck(cudaFree(s_bf)); cudaCheck(cudaFree(s_y));
    cudaCheck(cudaFree(s_dqkvr)); cudaCheck(cudaFree(s_f32));
}

int main(void) {
    dev_require_gpu();
    matmul_setup();
    run_case(2, 256, 12, 12, 64);  // gpt2
    run_case(2, 256, 12, 4, 64);   // llama GQA, rep 3
    run_case(3, 77, 4, 2, 16);     // tiny head size, T not a multiple of 8
    run_case(1, 64, 4, 1, 32);     // multi-query (KV = 1)
    time_case(8, 1024, 12, 12, 64);
    time_case(8, 1024, 12, 4, 64);
    matmul_teardown();
    return dev_finish("attention");
}
