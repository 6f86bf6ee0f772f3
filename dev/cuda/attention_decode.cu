// dev/cuda/attention_decode.cu: the decode step's attention with a KV cache
// (cuda/attention_decode.cuh) on bf16 inputs:
//   1. against a CPU reference in double: the output, the cache row it appends (exactly the
//      new k and v heads) and every other cache row (untouched, random values in the rows after
//      pos included: they must not be read);
//   2. against the training forward (cuda/attention.cuh) over the same sequence: position t of
//      attention_forward's output equals a decode step at pos = t whose cache holds the
//      sequence's positions 0..t, for every t (both bf16: they differ in the order of their fp32
//      sums, and attention_forward rounds its scores through a GEMM);
//   3. timed at GPT-2 124M shapes (12 heads, hd 64) at the last of 1024 positions, 8 sequences.
#include "dev/cuda/kernel_check.cuh"
#include "cuda/matmul.cuh"
#include "cuda/attention.cuh"
#include "cuda/attention_decode.cuh"

// out [B, H*hd] for the new position's queries in qkv [B, (H+2KV)*hd] over cache rows 0..pos
// (the cache already holding the new row)
static std::vector<float> decode_ref(const std::vector<float> &qkv, const std::vector<float> &kc, const std::vector<float> &vc,
                                     int B, int H, int KV, int hd, int pos, int max_len) {
    std::vector<float> out((size_t)B * H * hd);
    std::vector<double> p(pos + 1);
    const double scale = 1.0 / sqrt((double)hd);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            int g = h / (H / KV);
            const float *q = &qkv[((size_t)b * (H + 2 * KV) + h) * hd];
            const float *K = &kc[((size_t)b * KV + g) * max_len * hd], *V = &vc[((size_t)b * KV + g) * max_len * hd];
            double mx = -1e300, sum = 0;
            for (int t = 0; t <= pos; t++) {
                double s = 0;
                for (int d = 0; d < hd; d++) s += (double)q[d] * K[(size_t)t * hd + d];
                p[t] = s * scale;
                mx = std::max(mx, p[t]);
            }
            for (int t = 0; t <= pos; t++) { p[t] = exp(p[t] - mx); sum += p[t]; }
            for (int d = 0; d < hd; d++) {
                double o = 0;
                for (int t = 0; t <= pos; t++) o += p[t] / sum * V[(size_t)t * hd + d];
                out[((size_t)b * H + h) * hd + d] = (float)o;
            }
        }
    return out;
}

static void check_reference(int B, int H, int KV, int hd, int pos, int max_len) {
    printf("decode vs CPU reference: B=%d H=%d KV=%d hd=%d pos=%d max_len=%d\n", B, H, KV, hd, pos, max_len);
    const int row = (H + 2 * KV) * hd;
    size_t nc = (size_t)B * KV * max_len * hd;
    std::vector<float> kc = rand_normal_bf16(nc, 1.0f), vc = rand_normal_bf16(nc, 1.0f);
    std::vector<float> qkv = rand_normal_bf16((size_t)B * row, 1.0f);
    floatX *d_kc = to_device_bf16(kc), *d_vc = to_device_bf16(vc), *d_qkv = to_device_bf16(qkv);
    floatX *d_out = dev_alloc<floatX>((size_t)B * H * hd);
    float *d_scratch = dev_alloc<float>((size_t)B * H * max_len);
    dev_poison(d_out, (size_t)B * H * hd);
    dev_poison(d_scratch, (size_t)B * H * max_len);
    // what the cache must hold afterwards: row pos of every (b, kv head) is the new k and v
    for (int b = 0; b < B; b++)
        for (int g = 0; g < KV; g++)
            for (int d = 0; d < hd; d++) {
                size_t at = (((size_t)b * KV + g) * max_len + pos) * hd + d;
                kc[at] = qkv[(size_t)b * row + (H + g) * hd + d];
                vc[at] = qkv[(size_t)b * row + (H + KV + g) * hd + d];
            }
    std::vector<float> ref = decode_ref(qkv, kc, vc, B, H, KV, hd, pos, max_len);
    attention_decode(d_out, d_qkv, d_kc, d_vc, d_scratch, B, H, KV, hd, pos, max_len, 0);
    check_close("attention_decode out", from_device_bf16(d_out, (size_t)B * H * hd), ref, 5e-3f, 2e-2f);
    check_close("k cache (row pos = new k)", from_device_bf16(d_kc, nc), kc, 0.0f, 0.0f, 0.0);
    check_close("v cache (row pos = new v)", from_device_bf16(d_vc, nc), vc, 0.0f, 0.0f, 0.0);
    cudaCheck(cudaFree(d_kc)); cudaCheck(cudaFree(d_vc)); cudaCheck(cudaFree(d_qkv));
    cudaCheck(cudaFree(d_out)); cudaCheck(cudaFree(d_scratch));
}

// every position of attention_forward over qkv [B, T, row] against T decode steps
static void check_forward(int B, int T, int H, int KV, int hd) {
    printf("decode steps vs attention_forward: B=%d T=%d H=%d KV=%d hd=%d\n", B, T, H, KV, hd);
    const int row = (H + 2 * KV) * hd;
    std::vector<float> qkv = rand_normal_bf16((size_t)B * T * row, 1.0f);
    floatX *d_qkv = to_device_bf16(qkv);
    floatX *d_out = dev_alloc<floatX>((size_t)B * T * H * hd), *d_qkvr = dev_alloc<floatX>(attention_qkv_elems(B, T, H, KV, hd));
    floatX *d_att = dev_alloc<floatX>(attention_att_elems(B, T, H)), *d_y = dev_alloc<floatX>(attention_y_elems(B, T, H, hd));
    float *d_f32 = dev_alloc<float>(attention_att_elems(B, T, H));
    attention_forward(d_out, d_qkvr, d_att, d_qkv, d_f32, d_y, B, T, H, KV, hd, 0);
    std::vector<float> full = from_device_bf16(d_out, (size_t)B * T * H * hd);

    size_t nc = (size_t)B * KV * T * hd;
    floatX *d_kc = dev_alloc<floatX>(nc), *d_vc = dev_alloc<floatX>(nc), *d_new = dev_alloc<floatX>((size_t)B * row);
    floatX *d_dec = dev_alloc<floatX>((size_t)B * H * hd);
    float *d_scratch = dev_alloc<float>((size_t)B * H * T);
    dev_poison(d_kc, nc); dev_poison(d_vc, nc);   // NaN: a row read before it was written fails
    std::vector<float> dec((size_t)B * T * H * hd), step((size_t)B * row);
    for (int t = 0; t < T; t++) {
        for (int b = 0; b < B; b++) std::copy_n(&qkv[((size_t)b * T + t) * row], row, &step[(size_t)b * row]);
        upload_bf16(d_new, step.data(), step.size());
        attention_decode(d_dec, d_new, d_kc, d_vc, d_scratch, B, H, KV, hd, t, T, 0);
        std::vector<float> o = from_device_bf16(d_dec, (size_t)B * H * hd);
        for (int b = 0; b < B; b++) std::copy_n(&o[(size_t)b * H * hd], H * hd, &dec[((size_t)b * T + t) * H * hd]);
    }
    check_close("decode steps = forward positions", dec, full, 1e-2f, 3e-2f);
    floatX *bufs[] = {d_qkv, d_out, d_qkvr, d_att, d_y, d_kc, d_vc, d_new, d_dec};
    for (floatX *p : bufs) cudaCheck(cudaFree(p));
    cudaCheck(cudaFree(d_f32)); cudaCheck(cudaFree(d_scratch));
}

int main(void) {
    dev_require_gpu();
    matmul_setup();
    check_reference(3, 4, 2, 16, 0, 8);        // the first position: attention to itself alone
    check_reference(2, 12, 4, 64, 700, 1024);  // GQA, a long cache with unread rows after pos
    check_reference(1, 6, 6, 128, 37, 40);     // hd larger than the block
    check_forward(2, 33, 4, 2, 16);
    check_forward(1, 64, 12, 12, 64);
    // timing: 8 sequences at position 1023 of 1024, GPT-2 124M heads (and GQA with 4 kv heads)
    for (int KV : {12, 4}) {
        const int B = 8, H = 12, hd = 64, max_len = 1024, pos = 1023;
        size_t nc = (size_t)B * KV * max_len * hd;
        floatX *kc = dev_alloc<floatX>(nc), *vc = dev_alloc<floatX>(nc), *qkv = dev_alloc<floatX>((size_t)B * (H + 2 * KV) * hd);
        floatX *out = dev_alloc<floatX>((size_t)B * H * hd);
        float *scratch = dev_alloc<float>((size_t)B * H * max_len);
        upload_bf16(kc, rand_normal_bf16(nc, 1.0f).data(), nc);
        upload_bf16(vc, rand_normal_bf16(nc, 1.0f).data(), nc);
        upload_bf16(qkv, rand_normal_bf16((size_t)B * (H + 2 * KV) * hd, 1.0f).data(), (size_t)B * (H + 2 * KV) * hd);
        float us = time_us([&] { attention_decode(out, qkv, kc, vc, scratch, B, H, KV, hd, pos, max_len, 0); });
        char name[96];
        snprintf(name, sizeof(name), "decode B=8 H=12 KV=%d pos=1023", KV);
        report_bw(name, us, 2.0 * nc * sizeof(floatX));   // k and v read once (per kv head; L2 serves the group's other heads)
        cudaCheck(cudaFree(kc)); cudaCheck(cudaFree(vc)); cudaCheck(cudaFree(qkv)); cudaCheck(cudaFree(out)); cudaCheck(cudaFree(scratch));
    }
    matmul_teardown();
    return dev_finish("attention_decode");
}
