// dev/cuda/global_norm.cu: deterministic sum of squares of bf16 and fp32 buffers (16-byte
// aligned starts at several offsets, counts that are whole vectors, accumulate) against a CPU
// reference in double; bitwise repeatability; timed.
#include "dev/cuda/kernel_check.cuh"
#include "cuda/global_norm.cuh"

static void run_case(size_t count, size_t offset) {
    printf("count=%zu offset=%zu\n", count, offset);
    std::vector<float> v = rand_normal_bf16(count, 0.01f);
    double ref = 0;
    for (size_t i = 0; i < count; i++) ref += (double)v[i] * v[i];
    floatX *d_bf = dev_alloc<floatX>(count + offset);
    float *d_f = dev_alloc<float>(count + offset);
    upload_bf16(d_bf + offset, v.data(), count);
    cudaCheck(cudaMemcpy(d_f + offset, v.data(), count * sizeof(float), cudaMemcpyHostToDevice));
    float *d_out = dev_alloc<float>(1), *scratch = dev_alloc<float>(global_norm_scratch_floats());
    std::vector<float> r1(1, (float)ref), r2(1, (float)(2.0 * ref));

    global_norm_squared(d_out, d_bf + offset, count, scratch, 0, 0);
    std::vector<float> g1 = from_device_f32(d_out, 1);
    check_close("bf16 sum of squares", g1, r1, 0.0f, 1e-4f);
    global_norm_squared(d_out, d_bf + offset, count, scratch, 0, 0);
    check_true("bf16 bitwise repeatable", memcmp(from_device_f32(d_out, 1).data(), g1.data(), sizeof(float)) == 0);
    global_norm_squared(d_out, d_bf + offset, count, scratch, 1, 0);
    check_close("bf16 accumulate (2x)", from_device_f32(d_out, 1), r2, 0.0f, 1e-4f);
    global_norm_squared(d_out, d_f + offset, count, scratch, 0, 0);
    check_close("fp32 sum of squares", from_device_f32(d_out, 1), r1, 0.0f, 1e-4f);
    global_norm_squared(d_out, d_f + offset, count, scratch, 1, 0);
    check_close("fp32 accumulate (2x)", from_device_f32(d_out, 1), r2, 0.0f, 1e-4f);
    cudaCheck(cudaFree(d_bf)); cudaCheck(cudaFree(d_f)); cudaCheck(cudaFree(d_out)); cudaCheck(cudaFree(scratch));
}

int main(void) {
    dev_require_gpu();
    run_case(10000008, 0);
    run_case(10000008, 8);   // a segment that starts inside a buffer (8 elements: 16 bytes of bf16)
    run_case(1000, 0);
    run_case(8, 16);
    size_t n = (size_t)124 * 1000 * 1000;
    floatX *bf = dev_alloc<floatX>(n);
    float *f = dev_alloc<float>(n), *out = dev_alloc<float>(1), *scratch = dev_alloc<float>(global_norm_scratch_floats());
    cudaCheck(cudaMemset(bf, 0x3c, n * sizeof(floatX)));  // finite non-zero values (0x3c3c)
    cudaCheck(cudaMemset(f, 0x3c, n * sizeof(float)));
    float us = time_us([&] { global_norm_squared(out, bf, n, scratch, 0, 0); });
    report_bw("global_norm_squared bf16 124M", us, (double)n * sizeof(floatX));
    us = time_us([&] { global_norm_squared(out, f, n, scratch, 0, 0); });
    report_bw("global_norm_squared fp32 124M", us, (double)n * sizeof(float));
    cudaCheck(cudaFree(bf)); cudaCheck(cudaFree(f)); cudaCheck(cudaFree(out)); cudaCheck(cudaFree(scratch));
    return dev_finish("global_norm");
}
