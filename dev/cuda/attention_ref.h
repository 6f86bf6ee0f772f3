// dev/cuda/attention_ref.h: the CPU reference of causal attention with grouped-query heads
// (forward, log-sum-exp, backward), written from docs/model.md in double precision, OpenMP
// over (batch, kv group). Shared by dev/cuda/attention.cu (the cuBLAS path),
// dev/cuda/flash_attention.cu (the fused kernels) and dev/cuda/flash_emulate.cpp (the fused
// kernels on the CPU); check_dqkv compares two gradients of qkv part by part.
#pragma once
#include <vector>
#include <cmath>
#include <algorithm>
#include "dev/cuda/host_check.h"

// reference forward and backward. qkv [B,T,(H+2KV)*hd], dout [B,T,H*hd].
// att [B,H,T,T] (probabilities) and lse [B,H,T] (log-sum-exp of each row's scaled scores) are
// filled when not NULL.
static void attention_ref(std::vector<float> &out, std::vector<float> *att, std::vector<float> *lse,
                          std::vector<float> &dqkv, const std::vector<float> &qkv, const std::vector<float> &dout,
                          int B, int T, int H, int KV, int hd) {
    const int nh = H + 2 * KV, rep = H / KV, C = H * hd;
    const double scale = 1.0 / sqrt((double)hd);
    out.assign((size_t)B * T * C, 0.0f);
    if (att) att->assign((size_t)B * H * T * T, 0.0f);
    if (lse) lse->assign((size_t)B * H * T, 0.0f);
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
                    if (lse) (*lse)[((size_t)b * H + h) * T + t] = (float)(m + log(sum));
                    for (int t2 = 0; t2 <= t; t2++) {
                        p[t2] /= sum;
                        if (att) (*att)[(((size_t)b * H + h) * T + t) * T + t2] = (float)p[t2];
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

// dq, dk, dv of two [B,T,(H+2KV)*hd] gradients, each part checked on its own. A part whose
// reference is zero (dq and dk at T = 1, where softmax has one term and dS = P (dP - D)
// vanishes; exactly in double, to rounding in a GPU reference) has no scale for a relative
// tolerance: computed, it is the rounding difference of dP and D in fp32, so both must be
// below 1e-5 times the largest |dv|.
static void check_dqkv(const char *what, const std::vector<float> &got, const std::vector<float> &ref,
                       int B, int T, int H, int KV, int hd, double nrel) {
    const int nh = H + 2 * KV;
    const char *names[3] = {"dq", "dk", "dv"};
    const int h0[3] = {0, H, H + KV}, h1[3] = {H, H + KV, nh};
    const std::vector<float> dv = heads(ref, B, T, nh, hd, H + KV, nh);
    float dv_max = 0;
    for (float x : dv) dv_max = std::max(dv_max, fabsf(x));
    for (int i = 0; i < 3; i++) {
        char name[96];
        const std::vector<float> g = heads(got, B, T, nh, hd, h0[i], h1[i]), r = heads(ref, B, T, nh, hd, h0[i], h1[i]);
        float g_max = 0, r_max = 0;
        for (size_t j = 0; j < r.size(); j++) g_max = std::max(g_max, fabsf(g[j])), r_max = std::max(r_max, fabsf(r[j]));
        if (r_max <= 1e-5f * dv_max && dv_max > 0) {
            snprintf(name, sizeof(name), "%s %s (zero): max |got| %.1e <= 1e-5 max |dv|", what, names[i], g_max);
            check_true(name, g_max <= 1e-5f * dv_max);  // NaN fails too
            continue;
        }
        snprintf(name, sizeof(name), "%s %s", what, names[i]);
        check_close(name, g, r, 1e-2f, 5e-2f, nrel);
    }
}
