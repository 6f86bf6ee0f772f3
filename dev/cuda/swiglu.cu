// dev/cuda/swiglu.cu: SwiGLU forward ([N,2F] -> [N,F], gate first) and backward against a
// CPU reference (double), F a multiple of 8 (what the launchers require); timed.
#include "dev/cuda/kernel_check.cuh"
#include "cuda/swiglu.cuh"

static void run_case(int N, int F) {
    printf("N=%d F=%d\n", N, F);
    std::vector<float> inp = rand_normal_bf16((size_t)N * 2 * F, 2.0f), dout = rand_normal_bf16((size_t)N * F, 1.0f);
    std::vector<float> out_ref((size_t)N * F), dinp_ref((size_t)N * 2 * F);
    for (int n = 0; n < N; n++)
        for (int f = 0; f < F; f++) {
            double g = inp[(size_t)n * 2 * F + f], u = inp[(size_t)n * 2 * F + F + f];
            double sg = 1.0 / (1.0 + exp(-g));
            double silu = g * sg;
            double d = dout[(size_t)n * F + f];
            out_ref[(size_t)n * F + f] = (float)(silu * u);
            dinp_ref[(size_t)n * 2 * F + f] = (float)(d * u * (sg + g * sg * (1.0 - sg)));
            dinp_ref[(size_t)n * 2 * F + F + f] = (float)(d * silu);
        }
    floatX *d_inp = to_device_bf16(inp), *d_dout = to_device_bf16(dout);
    floatX *d_out = dev_alloc<floatX>((size_t)N * F), *d_dinp = dev_alloc<floatX>((size_t)N * 2 * F);
    dev_poison(d_out, (size_t)N * F);
    dev_poison(d_dinp, (size_t)N * 2 * F);
    swiglu_forward(d_out, d_inp, N, F, 0);
    check_close("swiglu_forward out", from_device_bf16(d_out, (size_t)N * F), out_ref, 1e-3f, 1e-2f);
    swiglu_backward(d_dinp, d_inp, d_dout, N, F, 0);
    check_close("swiglu_backward dinp", from_device_bf16(d_dinp, (size_t)N * 2 * F), dinp_ref, 1e-3f, 1e-2f);
    swiglu_backward(d_inp, d_inp, d_dout, N, F, 0);  // in place over the input
    check_close("swiglu_backward in place", from_device_bf16(d_inp, (size_t)N * 2 * F), dinp_ref, 1e-3f, 1e-2f);
    cudaCheck(cudaFree(d_inp)); cudaCheck(cudaFree(d_dout)); cudaCheck(cudaFree(d_out)); cudaCheck(cudaFree(d_dinp));
}

int main(void) {
    dev_require_gpu();
    run_case(4096, 2048);  // llama preset gpt2-124m: F = round_up(8*768/3, 64) = 2048
    run_case(333, 24);
    const int N = 16 * 1024, F = 2048;
    size_t n2 = (size_t)N * 2 * F, n1 = (size_t)N * F;
    floatX *inp = dev_alloc<floatX>(n2), *dinp = dev_alloc<floatX>(n2), *out = dev_alloc<floatX>(n1), *dout = dev_alloc<floatX>(n1);
    upload_bf16(inp, rand_normal_bf16(n2, 1.0f).data(), n2);
    upload_bf16(dout, rand_normal_bf16(n1, 1.0f).data(), n1);
    float us = time_us([&] { swiglu_forward(out, inp, N, F, 0); });
    report_bw("swiglu_forward", us, (double)(n2 + n1) * sizeof(floatX));
    us = time_us([&] { swiglu_backward(dinp, inp, dout, N, F, 0); });
    report_bw("swiglu_backward", us, (double)(2 * n2 + n1) * sizeof(floatX));
    cudaCheck(cudaFree(inp)); cudaCheck(cudaFree(dinp)); cudaCheck(cudaFree(out)); cudaCheck(cudaFree(dout));
    return dev_finish("swiglu");
}
