// dev/cuda/attention_ref.h: the CPU reference of causal attention with grouped-query heads
// (forward, log-sum-exp, backward), written from docs/model.md in double precision, OpenMP
// over (batch, kv group). Shared by dev/cuda/attention.cu (the cuBLAS path) and
// dev/cuda/flash_attention.cu (the fused kernels).
#pragma once
#include <vector>
#include <cmath>
#include <algorithm>

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

