// dev/cuda/classifier.cu: fused softmax cross-entropy (per-position fp32 loss, dlogits in place,
// only the first V of Vp columns take part) against a CPU reference in double; the padded
// columns hold garbage that must be ignored and come out as exact zeros; timed. And the mean
// loss kept on the device (loss_mean_accumulate) against the host's double sum: three
// micro-steps accumulated, bitwise repeatable.
#include "dev/cuda/kernel_check.cuh"
#include "cuda/classifier.cuh"

static void run_case(int N, int V, int Vp) {
    printf("N=%d V=%d Vp=%d\n", N, V, Vp);
    std::vector<float> logits = rand_normal_bf16((size_t)N * Vp, 2.0f);
    for (int n = 0; n < N; n++)
        for (int i = V; i < Vp; i++) logits[(size_t)n * Vp + i] = 30.0f;  // must not count
    std::vector<int> targets(N);
    for (int n = 0; n < N; n++) targets[n] = n == 0 ? V - 1 : dev_rand_int(V);
    const float dloss = 1.0f / N;
    std::vector<float> loss_ref(N), dl_ref((size_t)N * Vp);
    for (int n = 0; n < N; n++) {
        const float *x = &logits[(size_t)n * Vp];
        double m = -1e30;
        for (int i = 0; i < V; i++) m = std::max(m, (double)x[i]);
        double s = 0;
        for (int i = 0; i < V; i++) s += exp(x[i] - m);
        loss_ref[n] = (float)(log(s) + m - x[targets[n]]);
        for (int i = 0; i < Vp; i++)
            dl_ref[(size_t)n * Vp + i] = i < V ? (float)((exp(x[i] - m) / s - (i == targets[n])) * dloss) : 0.0f;
    }
    floatX *d_logits = to_device_bf16(logits);
    int *d_t = to_device_i32(targets);
    float *d_loss = dev_alloc<float>(N);
    // forward only: logits untouched
    dev_poison(d_loss, N);
    fused_classifier(d_logits, d_loss, d_t, dloss, N, V, Vp, 0, 0);
    check_close("losses (no backward)", from_device_f32(d_loss, N), loss_ref, 1e-5f, 1e-4f);
    check_close("logits untouched", from_device_bf16(d_logits, (size_t)N * Vp), logits, 0.0f, 0.0f, 0.0);
    dev_poison(d_loss, N);
    fused_classifier(d_logits, d_loss, d_t, dloss, N, V, Vp, 1, 0);
    check_close("losses", from_device_f32(d_loss, N), loss_ref, 1e-5f, 1e-4f);
    std::vector<float> g = from_device_bf16(d_logits, (size_t)N * Vp);
    check_close("dlogits", g, dl_ref, 1e-3f, 1e-2f);
    int pad_zero = 1;
    for (int n = 0; n < N; n++)
        for (int i = V; i < Vp; i++) pad_zero &= g[(size_t)n * Vp + i] == 0.0f;
    check_true("padded dlogits exactly 0", pad_zero);
    cudaCheck(cudaFree(d_logits)); cudaCheck(cudaFree(d_t)); cudaCheck(cudaFree(d_loss));
}

// three micro-batches of N per-position losses through loss_mean_accumulate (first, then +=)
// against the host's arithmetic (a sequential double sum, the mean rounded to float, the means
// summed in double): equal up to the float rounding of a mean whose double sums differ in order
static void loss_mean_case(int N) {
    printf("loss_mean_accumulate N=%d\n", N);
    double ref = 0;
    std::vector<std::vector<float>> batches(3);
    for (auto &l : batches) {
        l.resize(N);
        for (int i = 0; i < N; i++) l[i] = fabsf(10.0f + 2.0f * dev_rand_normal());
        double s = 0;
        for (int i = 0; i < N; i++) s += l[i];
        ref += (float)(s / N);
    }
    float *d_l = dev_alloc<float>(N);
    double *d_acc = dev_alloc<double>(1);
    std::vector<unsigned char> first_run;
    for (int run = 0; run < 2; run++) {
        dev_poison(d_acc, 1);   // NaN: the first micro-step must overwrite, not add
        for (int k = 0; k < 3; k++) {
            cudaCheck(cudaMemcpy(d_l, batches[k].data(), N * sizeof(float), cudaMemcpyHostToDevice));
            loss_mean_accumulate(d_acc, d_l, N, k == 0, 0);
        }
        std::vector<unsigned char> b = dev_bytes(d_acc, 1);
        if (run == 0) {
            double got;
            memcpy(&got, b.data(), sizeof(got));
            double rel = fabs(got - ref) / ref;
            printf("  sum of 3 means %.17g, host %.17g, rel %.2e (%s)\n", got, ref, rel, got == ref ? "bitwise" : "differs");
            // a mean may round to the neighbouring float (one ulp, at most 1.2e-7 of it): 2.5e-7 of the sum
            check_true("3 micro-steps within 2.5e-7 of the host", rel <= 2.5e-7);
            first_run = b;
        } else {
            check_true("bitwise repeatable", b == first_run);
        }
    }
    cudaCheck(cudaFree(d_l)); cudaCheck(cudaFree(d_acc));
}

int main(void) {
    dev_require_gpu();
    loss_mean_case(16 * 1024);
    loss_mean_case(37);
    loss_mean_case(1000);
    run_case(64, 50257, 50304);
    run_case(37, 1000, 1024);
    run_case(5, 3, 128);  // fewer columns than threads
    const int N = 4 * 1024, V = 50257, Vp = 50304;
    floatX *logits = dev_alloc<floatX>((size_t)N * Vp);
    upload_bf16(logits, rand_normal_bf16((size_t)N * Vp, 1.0f).data(), (size_t)N * Vp);
    std::vector<int> t(N);
    for (int n = 0; n < N; n++) t[n] = dev_rand_int(V);
    int *d_t = to_device_i32(t);
    float *loss = dev_alloc<float>(N);
    // dlogits overwrite the logits; the values stay finite, so repeated runs time the same work
    float us = time_us([&] { fused_classifier(logits, loss, d_t, 1.0f / N, N, V, Vp, 1, 0); }, 20, 5);
    report_bw("fused_classifier (read 2x, write 1x)", us, 3.0 * N * Vp * sizeof(floatX));
    double *acc = dev_alloc<double>(1);   // the trainer's per-micro-step loss reduction, one block
    us = time_us([&] { loss_mean_accumulate(acc, loss, N, 0, 0); });
    report_bw("loss_mean_accumulate (N=4096)", us, N * sizeof(float));
    cudaCheck(cudaFree(acc));
    cudaCheck(cudaFree(logits)); cudaCheck(cudaFree(d_t)); cudaCheck(cudaFree(loss));
    return dev_finish("classifier");
}
