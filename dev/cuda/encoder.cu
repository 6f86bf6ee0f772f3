// dev/cuda/encoder.cu: token + position embedding forward (gpt2: wte + wpe; llama: wte only)
// and backward (dwte scatter-add by token through a stable sort, dwpe sum over batch), against
// a CPU reference; skewed token frequencies (one token on ~25% of positions) exercise long runs;
// bitwise determinism of dwte; timed.
#include "dev/cuda/kernel_check.cuh"
#include "cuda/encoder.cuh"

static void run_case(int B, int T, int C, int V, int Vp, int maxT, int use_wpe, int do_time) {
    printf("B=%d T=%d C=%d V=%d Vp=%d %s\n", B, T, C, V, Vp, use_wpe ? "(gpt2: wte + wpe)" : "(llama: wte only)");
    const int N = B * T;
    std::vector<int> tok(N);
    for (int i = 0; i < N; i++) {
        int r = dev_rand_int(100);
        tok[i] = r < 25 ? V - 1 : r < 50 ? dev_rand_int(50) : dev_rand_int(V);  // heavy, frequent, and rare tokens
    }
    std::vector<float> wte = rand_normal_bf16((size_t)Vp * C, 0.5f), wpe = rand_normal_bf16((size_t)maxT * C, 0.5f);
    std::vector<float> dout = rand_normal_bf16((size_t)N * C, 1.0f);
    std::vector<float> dwte0 = rand_normal_bf16((size_t)Vp * C, 0.1f), dwpe0 = rand_normal_bf16((size_t)maxT * C, 0.1f);

    std::vector<float> out_ref((size_t)N * C);
    for (int i = 0; i < N; i++) {
        int t = i % T;
        for (int c = 0; c < C; c++)
            out_ref[(size_t)i * C + c] = bf16_round(wte[(size_t)tok[i] * C + c] + (use_wpe ? wpe[(size_t)t * C + c] : 0.0f));
    }
    std::vector<double> dwte_acc((size_t)Vp * C, 0.0), dwpe_acc((size_t)maxT * C, 0.0);
    for (int i = 0; i < N; i++) {
        int t = i % T;
        for (int c = 0; c < C; c++) {
            double d = dout[(size_t)i * C + c];
            dwte_acc[(size_t)tok[i] * C + c] += d;
            dwpe_acc[(size_t)t * C + c] += d;
        }
    }
    std::vector<float> dwte_ref((size_t)Vp * C), dwpe_ref((size_t)maxT * C);
    for (size_t i = 0; i < dwte_ref.size(); i++) dwte_ref[i] = (float)(dwte0[i] + dwte_acc[i]);
    for (size_t i = 0; i < dwpe_ref.size(); i++) dwpe_ref[i] = (float)(dwpe0[i] + dwpe_acc[i]);

    int *d_tok = to_device_i32(tok);
    floatX *d_wte = to_device_bf16(wte), *d_wpe = use_wpe ? to_device_bf16(wpe) : NULL;
    floatX *d_out = dev_alloc<floatX>((size_t)N * C), *d_dout = to_device_bf16(dout);
    floatX *d_dwte = to_device_bf16(dwte0), *d_dwpe = use_wpe ? to_device_bf16(dwpe0) : NULL;
    EncoderBackwardScratch scratch;
    encoder_backward_scratch_alloc(&scratch, N, Vp);

    dev_poison(d_out, (size_t)N * C);
    encoder_forward(d_out, d_tok, d_wte, d_wpe, B, T, C, 0);
    check_close("encoder_forward out", from_device_bf16(d_out, (size_t)N * C), out_ref, 1e-6f, 1e-6f);

    encoder_backward(d_dwte, d_dwpe, d_dout, d_tok, B, T, C, Vp, &scratch, 0);
    std::vector<float> g_dwte = from_device_bf16(d_dwte, (size_t)Vp * C);
    check_close("encoder_backward dwte (+=)", g_dwte, dwte_ref, 1e-4f, 1e-2f);
    if (use_wpe) check_close("encoder_backward dwpe (+=)", from_device_bf16(d_dwpe, (size_t)maxT * C), dwpe_ref, 1e-4f, 1e-2f);
    // determinism
    upload_bf16(d_dwte, dwte0.data(), (size_t)Vp * C);
    if (use_wpe) upload_bf16(d_dwpe, dwpe0.data(), (size_t)maxT * C);
    encoder_backward(d_dwte, d_dwpe, d_dout, d_tok, B, T, C, Vp, &scratch, 0);
    std::vector<float> g_dwte2 = from_device_bf16(d_dwte, (size_t)Vp * C);
    check_true("dwte bitwise deterministic", memcmp(g_dwte.data(), g_dwte2.data(), g_dwte.size() * sizeof(float)) == 0);

    if (do_time) {
        float us = time_us([&] { encoder_forward(d_out, d_tok, d_wte, d_wpe, B, T, C, 0); });
        report_bw("encoder_forward", us, (use_wpe ? 3.0 : 2.0) * N * C * sizeof(floatX));
        us = time_us([&] { encoder_backward(d_dwte, d_dwpe, d_dout, d_tok, B, T, C, Vp, &scratch, 0); }, 20, 5);
        report_bw("encoder_backward", us, (use_wpe ? 2.0 : 1.0) * N * C * sizeof(floatX));
    }
    encoder_backward_scratch_free(&scratch);
    cudaCheck(cudaFree(d_tok)); cudaCheck(cudaFree(d_wte)); cudaCheck(cudaFree(d_out)); cudaCheck(cudaFree(d_dout));
    cudaCheck(cudaFree(d_dwte));
    if (use_wpe) { cudaCheck(cudaFree(d_wpe)); cudaCheck(cudaFree(d_dwpe)); }
}

int main(void) {
    dev_require_gpu();
    run_case(4, 256, 768, 50257, 50304, 1024, 1, 0);
    run_case(4, 256, 768, 50257, 50304, 1024, 0, 0);
    run_case(3, 17, 64, 300, 384, 64, 1, 0);  // tiny: C below one 256-channel slice
    run_case(2, 50, 1032, 1000, 1024, 64, 1, 0);  // C not a multiple of 256
    run_case(16, 1024, 768, 50257, 50304, 1024, 1, 1);
    return dev_finish("encoder");
}
