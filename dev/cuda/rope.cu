// dev/cuda/rope.cu: RoPE forward and backward on the q and k heads of a qkv activation
// [B, T, (H+2KV)*hd] against a CPU reference following docs/model.md (interleaved pairs,
// freq = 1/powf(theta, 2i/hd) in fp32, angle = t*freq in fp32); in place and out of place;
// backward(forward(x)) ~ x; rope_forward_at (positions t0..t0+T-1: a decode step) against the
// reference at those positions; timed.
#include "dev/cuda/kernel_check.cuh"
#include "cuda/rope.cuh"

// rotate q and k heads of x by sign * angle, in double from the fp32 angle; rows at positions t0..t0+T-1
static std::vector<float> rope_ref(const std::vector<float> &x, int B, int T, int H, int KV, int hd, float theta,
                                   int sign, int t0 = 0) {
    std::vector<float> y = x;
    const int nh = H + 2 * KV;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H + KV; h++)
                for (int i = 0; i < hd / 2; i++) {
                    float freq = 1.0f / powf(theta, (float)(2 * i) / (float)hd);
                    float angle = (float)(t0 + t) * freq;
                    double c = cos((double)angle), s = sin((double)angle) * sign;
                    size_t off = (((size_t)b * T + t) * nh + h) * hd + 2 * i;
                    double e0 = x[off], e1 = x[off + 1];
                    y[off] = (float)(e0 * c - e1 * s);
                    y[off + 1] = (float)(e0 * s + e1 * c);
                }
    return y;
}

static void run_case(int B, int T, int H, int KV, int hd) {
    const float theta = 10000.0f;
    printf("B=%d T=%d H=%d KV=%d hd=%d\n", B, T, H, KV, hd);
    size_t n = (size_t)B * T * (H + 2 * KV) * hd;
    std::vector<float> x = rand_normal_bf16(n, 1.0f);
    std::vector<float> fwd = rope_ref(x, B, T, H, KV, hd, theta, 1);
    std::vector<float> bwd = rope_ref(x, B, T, H, KV, hd, theta, -1);
    floatX *d_x = to_device_bf16(x), *d_y = dev_alloc<floatX>(n);
    dev_poison(d_y, n);
    rope_forward(d_y, d_x, B, T, H, KV, hd, theta, 0);
    check_close("rope_forward out of place", from_device_bf16(d_y, n), fwd, 2e-3f, 1e-2f);
    dev_poison(d_y, n);
    rope_backward(d_y, d_x, B, T, H, KV, hd, theta, 0);
    check_close("rope_backward out of place", from_device_bf16(d_y, n), bwd, 2e-3f, 1e-2f);
    rope_forward(d_x, d_x, B, T, H, KV, hd, theta, 0);
    check_close("rope_forward in place", from_device_bf16(d_x, n), fwd, 2e-3f, 1e-2f);
    rope_backward(d_x, d_x, B, T, H, KV, hd, theta, 0);
    check_close("backward(forward(x)) = x", from_device_bf16(d_x, n), x, 5e-3f, 2e-2f);
    const int t0 = 1000 - T > 0 ? 1000 - T : 3;   // rows at positions t0.. (a decode step: T = 1)
    upload_bf16(d_x, x.data(), n);
    dev_poison(d_y, n);
    rope_forward_at(d_y, d_x, B, T, t0, H, KV, hd, theta, 0);
    check_close("rope_forward_at t0", from_device_bf16(d_y, n), rope_ref(x, B, T, H, KV, hd, theta, 1, t0), 2e-3f, 1e-2f);
    cudaCheck(cudaFree(d_x)); cudaCheck(cudaFree(d_y));
}

int main(void) {
    dev_require_gpu();
    run_case(2, 1024, 12, 4, 64);
    run_case(3, 37, 4, 2, 16);
    run_case(1, 64, 4, 4, 6);
    run_case(8, 1, 12, 4, 64);   // a decode step's shape
    const int B = 16, T = 1024, H = 12, KV = 4, hd = 64;
    size_t n = (size_t)B * T * (H + 2 * KV) * hd;
    floatX *x = dev_alloc<floatX>(n);
    upload_bf16(x, rand_normal_bf16(n, 1.0f).data(), n);
    double bytes = 2.0 * (double)B * T * (H + KV) * hd * sizeof(floatX);  // q, k read and written
    float us = time_us([&] { rope_forward(x, x, B, T, H, KV, hd, 10000.0f, 0); });
    report_bw("rope_forward (in place)", us, bytes);
    us = time_us([&] { rope_backward(x, x, B, T, H, KV, hd, 10000.0f, 0); });
    report_bw("rope_backward (in place)", us, bytes);
    cudaCheck(cudaFree(x));
    return dev_finish("rope");
}
