// dev/cuda/gelu.cu: tanh-GELU forward and backward against a CPU reference (double),
// sizes that are whole 16-byte vectors (what the launchers require), in-place backward; timed.
#include "dev/cuda/kernel_check.cuh"
#include "cuda/gelu.cuh"

static double gelu_ref(double x) {
    const double s = sqrt(2.0 / M_PI);
    return 0.5 * x * (1.0 + tanh(s * (x + 0.044715 * x * x * x)));
}
static double gelu_grad_ref(double x) {
    const double s = sqrt(2.0 / M_PI);
    double u = s * (x + 0.044715 * x * x * x);
    double th = tanh(u);
    double du = s * (1.0 + 3.0 * 0.044715 * x * x);
    return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
}

static void run_case(size_t N) {
    printf("N=%zu\n", N);
    std::vector<float> x = rand_normal_bf16(N, 2.0f), dy = rand_normal_bf16(N, 1.0f);
    std::vector<float> y_ref(N), dx_ref(N);
    for (size_t i = 0; i < N; i++) {
        y_ref[i] = (float)gelu_ref(x[i]);
        dx_ref[i] = (float)(gelu_grad_ref(x[i]) * dy[i]);
    }
    floatX *dx_in = to_device_bf16(x), *d_dy = to_device_bf16(dy), *d_out = dev_alloc<floatX>(N), *d_dx = dev_alloc<floatX>(N);
    dev_poison(d_out, N);
    dev_poison(d_dx, N);
    gelu_forward(d_out, dx_in, N, 0);
    check_close("gelu_forward out", from_device_bf16(d_out, N), y_ref, 1e-3f, 8e-3f);
    gelu_backward(d_dx, dx_in, d_dy, N, 0);
    check_close("gelu_backward dinp", from_device_bf16(d_dx, N), dx_ref, 1e-3f, 1e-2f);
    gelu_backward(d_dy, dx_in, d_dy, N, 0);  // in place
    check_close("gelu_backward in place", from_device_bf16(d_dy, N), dx_ref, 1e-3f, 1e-2f);
    cudaCheck(cudaFree(dx_in)); cudaCheck(cudaFree(d_dy)); cudaCheck(cudaFree(d_out)); cudaCheck(cudaFree(d_dx));
}

int main(void) {
    dev_require_gpu();
    run_case((size_t)4 * 1024 * 3072);
    run_case(123456);
    size_t N = (size_t)16 * 1024 * 3072;  // B=16, T=1024, 4C for C=768
    floatX *x = dev_alloc<floatX>(N), *dy = dev_alloc<floatX>(N), *o = dev_alloc<floatX>(N);
    upload_bf16(x, rand_normal_bf16(N, 1.0f).data(), N);
    upload_bf16(dy, rand_normal_bf16(N, 1.0f).data(), N);
    float us = time_us([&] { gelu_forward(o, x, N, 0); });
    report_bw("gelu_forward", us, 2.0 * N * sizeof(floatX));
    us = time_us([&] { gelu_backward(o, x, dy, N, 0); });
    report_bw("gelu_backward", us, 3.0 * N * sizeof(floatX));
    cudaCheck(cudaFree(x)); cudaCheck(cudaFree(dy)); cudaCheck(cudaFree(o));
    return dev_finish("gelu");
}
