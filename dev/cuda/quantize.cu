// dev/cuda/quantize.cu: ZeRO++'s block quantization kernels (cuda/quantize.cuh) against the
// CPU reference (util/quantize.h): the messages byte for byte, int8 and int4, from bf16 and
// fp32 values, with a short last block, an all-zero block and outliers (dev/cuda/quantize_cases.h:
// lengths the trainer can produce); the dequantized values exactly (fp32, added to fp32, and
// rounded to bf16); the squared error and squares it sums. Timed.
#include "dev/cuda/kernel_check.cuh"
#include "cuda/quantize.cuh"
#include "dev/cuda/quantize_cases.h"

static void run_case(size_t n, int bits, int bf16) {
    char name[96];
    printf("n=%zu int%d from %s\n", n, bits, bf16 ? "bf16" : "fp32");
    std::vector<float> x = zq_test_values(n, bf16);
    size_t bytes = zq_bytes(n, bits);
    std::vector<uint8_t> ref(bytes);
    double ref_sums[2] = {0, 0};
    zq_quantize(x.data(), n, bits, ref.data(), ref_sums);
    uint8_t *d_q = dev_alloc<uint8_t>(bytes);
    float *d_err = dev_alloc<float>(2);
    cudaCheck(cudaMemset(d_err, 0, 2 * sizeof(float)));
    dev_poison(d_q, bytes);
    floatX *d_xb = NULL;
    float *d_xf = NULL;
    if (bf16) { d_xb = to_device_bf16(x); zq_quantize_gpu(d_xb, n, bits, d_q, d_err, 0); }
    else {
        d_xf = dev_alloc<float>(n);
        cudaCheck(cudaMemcpy(d_xf, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        zq_quantize_gpu(d_xf, n, bits, d_q, d_err, 0);
    }
    std::vector<unsigned char> got = dev_bytes(d_q, bytes);
    size_t differ = 0;
    for (size_t i = 0; i < bytes; i++) differ += got[i] != ref[i];
    snprintf(name, sizeof(name), "quantize int%d: the message (%zu bytes) equals the CPU's (%zu differ)", bits, bytes, differ);
    check_true(name, differ == 0);
    float sums[2];
    cudaCheck(cudaMemcpy(sums, d_err, sizeof(sums), cudaMemcpyDeviceToHost));
    snprintf(name, sizeof(name), "squared error %.6g and squares %.6g (CPU %.6g, %.6g)", sums[0], sums[1], ref_sums[0], ref_sums[1]);
    check_true(name, fabs(sums[0] - ref_sums[0]) <= 1e-4 * (1e-30 + ref_sums[0]) && fabs(sums[1] - ref_sums[1]) <= 1e-4 * ref_sums[1]);

    // dequantize the CPU's message: into fp32, added to fp32, and into bf16
    std::vector<float> y_ref(n), acc_ref(x);
    zq_dequantize(ref.data(), n, bits, y_ref.data(), 0);
    zq_dequantize(ref.data(), n, bits, acc_ref.data(), 1);
    cudaCheck(cudaMemcpy(d_q, ref.data(), bytes, cudaMemcpyHostToDevice));
    float *d_y = dev_alloc<float>(n);
    dev_poison(d_y, n);
    zq_dequantize_gpu(d_q, n, bits, d_y, 0, 0);
    check_close("dequantize to fp32 (exact)", from_device_f32(d_y, n), y_ref, 0.0f, 0.0f);
    cudaCheck(cudaMemcpy(d_y, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    zq_dequantize_gpu(d_q, n, bits, d_y, 1, 0);
    check_close("dequantize added to fp32 (exact)", from_device_f32(d_y, n), acc_ref, 0.0f, 0.0f);
    floatX *d_yb = dev_alloc<floatX>(n);
    zq_dequantize_gpu(d_q, n, bits, d_yb, 0, 0);
    std::vector<float> y_bf(n);
    for (size_t i = 0; i < n; i++) y_bf[i] = bf16_round(y_ref[i]);
    check_close("dequantize to bf16 (exact)", from_device_bf16(d_yb, n), y_bf, 0.0f, 0.0f);
    cudaCheck(cudaFree(d_q)); cudaCheck(cudaFree(d_err)); cudaCheck(cudaFree(d_y)); cudaCheck(cudaFree(d_yb));
    if (d_xb) cudaCheck(cudaFree(d_xb));
    if (d_xf) cudaCheck(cudaFree(d_xf));
}

int main(void) {
    dev_require_gpu();
    for (size_t c = 0; c < ZQ_N_CASES; c++)
        for (int bits = 8; bits >= 4; bits -= 4)
            for (int bf16 = 1; bf16 >= 0; bf16--) run_case(ZQ_CASES[c], bits, bf16);
    run_case((size_t)1 << 20, 4, 1);
    // a 50M-parameter unit's slice at 8 ranks, as qwZ quantizes it every gather
    size_t n = (size_t)50 * 1000 * 1000 / 8 / ZQ_BLOCK * ZQ_BLOCK;
    floatX *x = dev_alloc<floatX>(n);
    upload_bf16(x, rand_normal_bf16(n, 1.0f).data(), n);
    uint8_t *q = dev_alloc<uint8_t>(zq_bytes(n, 8));
    float *err = dev_alloc<float>(2);
    float us = time_us([&] { zq_quantize_gpu(x, n, 8, q, err, 0); });
    report_bw("quantize bf16 -> int8", us, (double)n * sizeof(floatX) + zq_bytes(n, 8));
    us = time_us([&] { zq_dequantize_gpu(q, n, 8, x, 0, 0); });
    report_bw("dequantize int8 -> bf16", us, (double)n * sizeof(floatX) + zq_bytes(n, 8));
    cudaCheck(cudaFree(x)); cudaCheck(cudaFree(q)); cudaCheck(cudaFree(err));
    return dev_finish("quantize");
}
