// dev/cuda/residual.cu: residual_forward (out = a + b) and accumulate_inplace (dst += src)
// against a CPU reference, at 16-byte aligned offsets inside a buffer (what the launchers require); timed.
//   make dev/cuda/bin/residual && dev/cuda/bin/residual
#include "dev/cuda/kernel_check.cuh"
#include "cuda/residual.cuh"

static void run_case(size_t N, size_t offset) {
    printf("N=%zu offset=%zu\n", N, offset);
    std::vector<float> a = rand_normal_bf16(N, 1.0f), b = rand_normal_bf16(N, 1.0f);
    std::vector<float> ref(N);
    for (size_t i = 0; i < N; i++) ref[i] = a[i] + b[i];
    floatX *da = dev_alloc<floatX>(N + offset), *db = dev_alloc<floatX>(N + offset), *dout = dev_alloc<floatX>(N + offset);
    upload_bf16(da + offset, a.data(), N);
    upload_bf16(db + offset, b.data(), N);
    dev_poison(dout, N + offset);
    residual_forward(dout + offset, da + offset, db + offset, N, 0);
    check_close("residual_forward out", from_device_bf16(dout + offset, N), ref, 1e-6f, 8e-3f);
    // accumulate: a += b
    accumulate_inplace(da + offset, db + offset, N, 0);
    check_close("accumulate_inplace dst", from_device_bf16(da + offset, N), ref, 1e-6f, 8e-3f);
    cudaCheck(cudaFree(da)); cudaCheck(cudaFree(db)); cudaCheck(cudaFree(dout));
}

int main(void) {
    dev_require_gpu();
    run_case((size_t)8 * 1024 * 768, 0);
    run_case(1000000, 0);
    run_case(4096, 8);
    // timing at GPT-2 124M activation size, B=16, T=1024, C=768
    size_t N = (size_t)16 * 1024 * 768;
    floatX *a = dev_alloc<floatX>(N), *b = dev_alloc<floatX>(N), *o = dev_alloc<floatX>(N);
    upload_bf16(a, rand_normal_bf16(N, 1.0f).data(), N);
    upload_bf16(b, rand_normal_bf16(N, 1.0f).data(), N);
    float us = time_us([&] { residual_forward(o, a, b, N, 0); });
    report_bw("residual_forward", us, 3.0 * N * sizeof(floatX));
    us = time_us([&] { accumulate_inplace(a, b, N, 0); });
    report_bw("accumulate_inplace", us, 3.0 * N * sizeof(floatX));
    cudaCheck(cudaFree(a)); cudaCheck(cudaFree(b)); cudaCheck(cudaFree(o));
    return dev_finish("residual");
}
