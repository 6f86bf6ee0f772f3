// dev/cuda/attention.cu: causal attention with grouped-query heads, forward (out, saved
// probabilities) and backward (dqkv), against the CPU reference of dev/cuda/attention_ref.h;
// gpt2 (KV = H), llama GQA (KV < H) and a tiny odd-T case; timed.
#include "dev/cuda/kernel_check.cuh"
#include "cuda/attention.cuh"
#include "dev/cuda/attention_ref.h"

static void run_case(int B, int T, int H, int KV, int hd) {
    printf("B=%d T=%d H=%d KV=%d hd=%d\n", B, T, H, KV, hd);
    const int nh = H + 2 * KV;
    size_t nqkv = (size_t)B * T * nh * hd, nout = (size_t)B * T * H * hd, natt = attention_att_elems(B, T, H);
    std::vector<float> qkv = rand_normal_bf16(nqkv, 1.0f), dout = rand_normal_bf16(nout, 1.0f);
    std::vector<float> out_ref, att_ref, dqkv_ref;
    attention_ref(out_ref, &att_ref, NULL, dqkv_ref, qkv, dout, B, T, H, KV, hd);

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
