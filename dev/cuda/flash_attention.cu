// dev/cuda/flash_attention.cu: the fused causal attention of cuda/flash_attention.cuh, forward
// (out, lse) and backward (dq, dk, dv inside dqkv), checked
//   1. against the double-precision CPU reference of dev/cuda/attention_ref.h, on fresh random
//      bf16 inputs, every output element poisoned first (NaN) and checked;
//   2. against today's cuBLAS path (cuda/attention.cuh) on the same inputs: the same function,
//      so out and dqkv must agree within bf16 tolerance;
//   3. for bitwise repeatability (no atomics: two runs give the same bytes);
// on T not a multiple of the tiles (and T = 3*64 + 1: a last key tile of one row), T < one
// tile, T = 1024, hd 64 and 128, H = KV, GQA (H=12, KV=4) and multi-query (KV=1). Then each
// pass of both paths is timed, the two alternately (CUDA events, medians), with TFLOP/s
// counted on the causal FLOPs (forward 4*hd per (query, key) pair with key <= query, backward
// 2.5x that, as flash-attention counts). dev/cuda/NOTES.md has the predictions to compare.
// The same kernels run on the CPU, emulated, in dev/cuda/flash_emulate.cpp.
#include "dev/cuda/kernel_check.cuh"
#include "cuda/attention.cuh"
#include "cuda/flash_attention.cuh"
#include "dev/cuda/attention_ref.h"

// the cuBLAS path's buffers for one shape (cuda/attention.cuh's scratch contract)
struct CublasAttention {
    floatX *qkvr, *att, *s_bf, *s_y, *s_dqkvr;
    float *s_f32;
    CublasAttention(int B, int T, int H, int KV, int hd) {
        const size_t nqkv = attention_qkv_elems(B, T, H, KV, hd), natt = attention_att_elems(B, T, H);
        qkvr = dev_alloc<floatX>(nqkv); s_dqkvr = dev_alloc<floatX>(nqkv);
        att = dev_alloc<floatX>(natt); s_bf = dev_alloc<floatX>(natt); s_f32 = dev_alloc<float>(natt);
        s_y = dev_alloc<floatX>(attention_y_elems(B, T, H, hd));
    }
    ~CublasAttention() {
        cudaCheck(cudaFree(qkvr)); cudaCheck(cudaFree(s_dqkvr)); cudaCheck(cudaFree(att));
        cudaCheck(cudaFree(s_bf)); cudaCheck(cudaFree(s_f32)); cudaCheck(cudaFree(s_y));
    }
    void forward(floatX *out, const floatX *qkv, int B, int T, int H, int KV, int hd) {
        attention_forward(out, qkvr, att, qkv, s_f32, s_y, B, T, H, KV, hd, 0);
    }
    void backward(floatX *dqkv, const floatX *dout, int B, int T, int H, int KV, int hd) {
        attention_backward(dqkv, dout, qkvr, att, s_f32, s_bf, s_y, s_dqkvr, B, T, H, KV, hd, 0);
    }
};

static void run_case(int B, int T, int H, int KV, int hd) {
    printf("B=%d T=%d H=%d KV=%d hd=%d\n", B, T, H, KV, hd);
    const int nh = H + 2 * KV;
    const size_t nqkv = (size_t)B * T * nh * hd, nout = (size_t)B * T * H * hd, nlse = flash_lse_elems(B, T, H);
    std::vector<float> qkv = rand_normal_bf16(nqkv, 1.0f), dout = rand_normal_bf16(nout, 1.0f);
    std::vector<float> out_ref, lse_ref, dqkv_ref;
    attention_ref(out_ref, NULL, &lse_ref, dqkv_ref, qkv, dout, B, T, H, KV, hd);

    floatX *d_qkv = to_device_bf16(qkv), *d_dout = to_device_bf16(dout);
    floatX *d_out = dev_alloc<floatX>(nout), *d_dqkv = dev_alloc<floatX>(nqkv);
    float *d_lse = dev_alloc<float>(nlse), *d_D = dev_alloc<float>(nlse);
    dev_poison(d_out, nout); dev_poison(d_lse, nlse); dev_poison(d_dqkv, nqkv); dev_poison(d_D, nlse);

    flash_attention_forward(d_out, d_lse, d_qkv, B, T, H, KV, hd, 0);
    const std::vector<float> out = from_device_bf16(d_out, nout);
    check_close("flash forward out", out, out_ref, 1e-2f, 2e-2f);
    check_close("flash forward lse", from_device_f32(d_lse, nlse), lse_ref, 2e-4f, 1e-3f, 1e-4);
    flash_attention_backward(d_dqkv, d_D, d_dout, d_qkv, d_out, d_lse, B, T, H, KV, hd, 0);
    const std::vector<float> dqkv = from_device_bf16(d_dqkv, nqkv);
    check_dqkv("flash backward", dqkv, dqkv_ref, B, T, H, KV, hd, 2e-2);

    // bitwise repeatability, outputs poisoned again in between
    const std::vector<unsigned char> out_bytes = dev_bytes(d_out, nout), lse_bytes = dev_bytes(d_lse, nlse),
                                     dqkv_bytes = dev_bytes(d_dqkv, nqkv);
    dev_poison(d_out, nout); dev_poison(d_lse, nlse); dev_poison(d_dqkv, nqkv); dev_poison(d_D, nlse);
    flash_attention_forward(d_out, d_lse, d_qkv, B, T, H, KV, hd, 0);
    flash_attention_backward(d_dqkv, d_D, d_dout, d_qkv, d_out, d_lse, B, T, H, KV, hd, 0);
    check_true("flash rerun bitwise identical", dev_bytes(d_out, nout) == out_bytes && dev_bytes(d_lse, nlse) == lse_bytes &&
                                                    dev_bytes(d_dqkv, nqkv) == dqkv_bytes);

    {  // today's path on the same inputs: the same function
        CublasAttention cb(B, T, H, KV, hd);
        floatX *c_out = dev_alloc<floatX>(nout), *c_dqkv = dev_alloc<floatX>(nqkv);
        dev_poison(c_out, nout); dev_poison(c_dqkv, nqkv);
        cb.forward(c_out, d_qkv, B, T, H, KV, hd);
        cb.backward(c_dqkv, d_dout, B, T, H, KV, hd);
        check_close("flash vs cuBLAS out", out, from_device_bf16(c_out, nout), 1e-2f, 2e-2f);
        check_dqkv("flash vs cuBLAS", dqkv, from_device_bf16(c_dqkv, nqkv), B, T, H, KV, hd, 3e-2);
        cudaCheck(cudaFree(c_out)); cudaCheck(cudaFree(c_dqkv));
    }
    cudaCheck(cudaFree(d_qkv)); cudaCheck(cudaFree(d_dout)); cudaCheck(cudaFree(d_out)); cudaCheck(cudaFree(d_dqkv));
    cudaCheck(cudaFree(d_lse)); cudaCheck(cudaFree(d_D));
}

struct Timing { int B, T, H, KV, hd; float fwd, bwd, cb_fwd, cb_bwd; };

static Timing time_case(int B, int T, int H, int KV, int hd) {
    const int nh = H + 2 * KV;
    const size_t nqkv = (size_t)B * T * nh * hd, nout = (size_t)B * T * H * hd, nlse = flash_lse_elems(B, T, H);
    floatX *qkv = dev_alloc<floatX>(nqkv), *dout = dev_alloc<floatX>(nout), *out = dev_alloc<floatX>(nout);
    floatX *dqkv = dev_alloc<floatX>(nqkv);
    float *lse = dev_alloc<float>(nlse), *D = dev_alloc<float>(nlse);
    upload_bf16(qkv, rand_normal_bf16(nqkv, 1.0f).data(), nqkv);  // random data: never time on zeros
    upload_bf16(dout, rand_normal_bf16(nout, 1.0f).data(), nout);
    const double flops_fwd = 4.0 * B * H * hd * ((double)T * (T + 1) / 2);  // causal pairs only
    Timing r = {B, T, H, KV, hd, 0, 0, 0, 0};
    {  // each pass against today's path, alternately (A B A B A B), so that drift touches both
        CublasAttention cb(B, T, H, KV, hd);
        time_us_alternating([&] { flash_attention_forward(out, lse, qkv, B, T, H, KV, hd, 0); },
                            [&] { cb.forward(out, qkv, B, T, H, KV, hd); }, &r.fwd, &r.cb_fwd, 10, 5);
        // the flash backward reads the forward's out and lse: run it last so they are flash's
        flash_attention_forward(out, lse, qkv, B, T, H, KV, hd, 0);
        time_us_alternating([&] { flash_attention_backward(dqkv, D, dout, qkv, out, lse, B, T, H, KV, hd, 0); },
                            [&] { cb.backward(dqkv, dout, B, T, H, KV, hd); }, &r.bwd, &r.cb_bwd, 10, 5);
    }
    const char *what[4] = {"flash fwd", "flash bwd", "cuBLAS fwd", "cuBLAS bwd"};
    const float us[4] = {r.fwd, r.bwd, r.cb_fwd, r.cb_bwd};
    for (int i = 0; i < 4; i++) {
        char name[96];
        snprintf(name, sizeof(name), "%s B=%d T=%d H=%d KV=%d hd=%d", what[i], B, T, H, KV, hd);
        report_flops(name, us[i], (i % 2 ? 2.5 : 1.0) * flops_fwd);
    }
    cudaCheck(cudaFree(qkv)); cudaCheck(cudaFree(dout)); cudaCheck(cudaFree(out)); cudaCheck(cudaFree(dqkv));
    cudaCheck(cudaFree(lse)); cudaCheck(cudaFree(D));
    return r;
}

// The ceiling the predictions of dev/cuda/NOTES.md start from: the tensor cores' rate through
// mma.sync.m16n8k16 bf16 (the instruction the flash kernels use; Hopper's wgmma is faster).
// Each warp runs 8 independent accumulator chains (enough to cover the mma latency), 4 warps a
// block, 8 blocks per SM; the sums are stored so that nothing is optimized away.
__global__ void __launch_bounds__(128) mma_sync_rate_kernel(float *out, const uint32_t *in, int iters) {
    const int lane = threadIdx.x % 32;
    const uint32_t a[4] = {in[lane], in[lane + 32], in[lane + 64], in[lane + 96]}, b0 = in[lane + 128], b1 = in[lane + 160];
    float c[8][4] = {};
    for (int i = 0; i < iters; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) fa_mma(c[j], a, b0, b1);
    float s = 0;
#pragma unroll
    for (int j = 0; j < 8; j++) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

static void time_mma_sync_rate(void) {
    const int blocks = 8 * cuda_num_sms(), iters = 128;  // about 30 ms a launch
    std::vector<uint32_t> h(192);
    for (uint32_t &x : h) x = 0x3c003c00u ^ (uint32_t)(dev_rand_u64() & 0x00ff00ffu);  // bf16 pairs near 0.0078
    uint32_t *in = dev_alloc<uint32_t>(h.size());
    cudaCheck(cudaMemcpy(in, h.data(), h.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
    float *out = dev_alloc<float>((size_t)blocks * 128);
    const float us = time_us([&] { mma_sync_rate_kernel<<<blocks, 128>>>(out, in, iters); cudaCheckLaunch(); }, 5, 5);
    report_flops("mma.sync bf16 ceiling", us, (double)blocks * 4 * iters * 8 * 4096);
    cudaCheck(cudaFree(in)); cudaCheck(cudaFree(out));
}

// --checks-only: no timings (for compute-sanitizer's memcheck / racecheck, which are slow)
int main(int argc, char **argv) {
    const int timings = !(argc > 1 && strcmp(argv[1], "--checks-only") == 0);
    dev_require_gpu();
    matmul_setup();
    run_case(2, 200, 4, 4, 64);        // T not a multiple of the tile, H = KV
    run_case(2, 193, 12, 4, 128);      // GQA rep 3, hd 128, T = 3 * 64 + 1
    run_case(3, 37, 4, 1, 64);         // multi-query, T below one tile
    run_case(1, 1, 2, 2, 128);         // a single position
    run_case(1, 1024, 12, 12, 64);     // gpt2 124M's attention, T = 1024
    run_case(1, 1024, 12, 4, 128);     // GQA, hd 128, T = 1024
    std::vector<Timing> t;
    if (timings) {
        time_mma_sync_rate();
        t.push_back(time_case(8, 1024, 12, 12, 64));   // the shape of bench/gpu_check_*'s attention line
        t.push_back(time_case(16, 1024, 12, 12, 64));  // gpt2 124M at B=16
        t.push_back(time_case(8, 1024, 12, 4, 64));
        t.push_back(time_case(8, 1024, 12, 4, 128));
    }
    // the speedups, on lines tests/test_cuda_kernels.sh shows ("time ...")
    for (const Timing &r : t)
        printf("  time cuBLAS/flash B=%d T=%d H=%d KV=%d hd=%d: forward %.2fx, backward %.2fx\n", r.B, r.T, r.H, r.KV,
               r.hd, r.cb_fwd / r.fwd, r.cb_bwd / r.bwd);
    matmul_teardown();
    return dev_finish("flash_attention");
}
