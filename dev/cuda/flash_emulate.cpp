// dev/cuda/flash_emulate.cpp: the kernels of cuda/flash_attention.cuh (forward, D, dK/dV, dQ),
// their own code, run on the CPU by dev/cuda/flash_emulate.h (a fiber per CUDA thread,
// ldmatrix / mma.sync / shfl / cp.async / __syncthreads emulated from the PTX ISA), then
//   1. against the double-precision reference (dev/cuda/attention_ref.h) with the tolerances
//      dev/cuda/flash_attention.cu uses on the GPU, every output poisoned (NaN) first;
//   2. the same run under other schedules (which warp runs when between barriers, copies that
//      land when issued or only at their wait): bitwise the same outputs, since every output
//      element is written once from a fixed order of operations;
//   3. every run: no shared-memory race, no out-of-bounds or misaligned shared access, no
//      cp.async reading outside its input, no deadlock (dev/cuda/flash_emulate.h's checks).
// It shows that the index arithmetic, the masks, the GQA loop, the double-buffered stages and
// the barriers do what the header says; not the speed, nor how the hardware rounds inside
// one mma (fp32 accumulation here in k order). Needs no GPU and no CUDA toolkit.
// Build and run: make dev/cuda/bin/flash_emulate && dev/cuda/bin/flash_emulate
// (tests/test_flash_emulate.sh; --long adds T = 1024 at hd 64 and 128, a minute or two;
// --quick runs one case).
#include "dev/cuda/flash_emulate.h"
#include "cuda/flash_attention.cuh"
#include "dev/cuda/attention_ref.h"
#include <chrono>

static std::vector<floatX> to_bf16(const std::vector<float> &v) {
    std::vector<floatX> r(v.size());
    for (size_t i = 0; i < v.size(); i++) r[i] = emu_bf16(v[i]);
    return r;
}
static std::vector<float> to_float(const std::vector<floatX> &v) {
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); i++) r[i] = __bfloat162float(v[i]);
    return r;
}
static std::vector<float> rand_bf16_values(size_t n) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = __bfloat162float(emu_bf16(dev_rand_normal()));
    return v;
}

struct Outputs {
    std::vector<floatX> out, dqkv;
    std::vector<float> lse, D;
    bool operator==(const Outputs &o) const {
        return !memcmp(out.data(), o.out.data(), out.size() * 2) && !memcmp(dqkv.data(), o.dqkv.data(), dqkv.size() * 2) &&
               !memcmp(lse.data(), o.lse.data(), lse.size() * 4) && !memcmp(D.data(), o.D.data(), D.size() * 4);
    }
};

// the four launches of flash_attention_forward / _backward, with the launchers' geometry
template <int HD>
static Outputs run_kernels(const std::vector<floatX> &qkv, const std::vector<floatX> &dout, int B, int T, int H, int KV) {
    Outputs o;
    o.out.assign((size_t)B * T * H * HD, emu_bf16(NAN));
    o.dqkv.assign(qkv.size(), emu_bf16(NAN));
    o.lse.assign(flash_lse_elems(B, T, H), NAN);
    o.D.assign(flash_lse_elems(B, T, H), NAN);
    g_emu.global.clear();  // what cp.async may read: the kernels' inputs
    emu_register(qkv.data(), qkv.size() * 2);
    emu_register(dout.data(), dout.size() * 2);
    emu_register(o.lse.data(), o.lse.size() * 4);
    emu_register(o.D.data(), o.D.size() * 4);
    const float scale = 1.0f / sqrtf((float)HD), scale_log2 = scale * FA_LOG2E;
    floatX *out = o.out.data(), *dqkv = o.dqkv.data();
    float *lse = o.lse.data(), *D = o.D.data();
    const floatX *q = qkv.data(), *dO = dout.data();
    emu_launch(EmuDim3(B * H, flash_fwd_tiles<HD>(T)), FA_THREADS, flash_fwd_smem<HD>(),
               [&] { flash_fwd_kernel<HD, FA_FWD_MT(HD)>(out, lse, q, T, H, KV, scale_log2); });
    const unsigned dot_blocks = (unsigned)(((size_t)B * T * H + FA_DOT_THREADS / 32 - 1) / (FA_DOT_THREADS / 32));
    emu_launch(dot_blocks, FA_DOT_THREADS, 0, [&] { flash_bwd_dot_kernel(D, dO, out, B, T, H, HD); });
    emu_launch(EmuDim3(B * KV, flash_bwd_tiles(T)), FA_THREADS, flash_dkdv_smem<HD>(), [&] {
        flash_bwd_dkdv_kernel<HD, FA_BWD_BR(HD), HD == 64>(dqkv, q, dO, lse, D, T, H, KV, scale_log2, scale);
    });
    emu_launch(EmuDim3(B * H, flash_bwd_tiles(T)), FA_THREADS, flash_dq_smem<HD>(),
               [&] { flash_bwd_dq_kernel<HD, HD == 64>(dqkv, q, dO, lse, D, T, H, KV, scale_log2, scale); });
    return o;
}

struct Schedule { const char *name; int copies_early, switch_percent; uint64_t seed; };
static const Schedule SCHEDULES[] = {
    {"warp by warp, copies land at their wait", 0, 0, 11},
    {"warps interleaved (30%), copies land when issued", 1, 30, 12},
    {"warps interleaved (70%), copies land at their wait", 0, 70, 13},
};

template <int HD> static void run_case(int B, int T, int H, int KV, int schedules) {
    printf("B=%d T=%d H=%d KV=%d hd=%d\n", B, T, H, KV, HD);
    const int nh = H + 2 * KV;
    std::vector<float> qkv = rand_bf16_values((size_t)B * T * nh * HD), dout = rand_bf16_values((size_t)B * T * H * HD);
    std::vector<float> out_ref, lse_ref, dqkv_ref;
    attention_ref(out_ref, NULL, &lse_ref, dqkv_ref, qkv, dout, B, T, H, KV, HD);
    const std::vector<floatX> qkv_x = to_bf16(qkv), dout_x = to_bf16(dout);

    Outputs first;
    for (int si = 0; si < schedules; si++) {
        const Schedule &sc = SCHEDULES[si];
        g_dev_rng = sc.seed;
        g_emu.copies_early = sc.copies_early;
        g_emu.switch_percent = sc.switch_percent;
        const long errors0 = g_emu.errors;
        const auto t0 = std::chrono::steady_clock::now();
        Outputs o = run_kernels<HD>(qkv_x, dout_x, B, T, H, KV);
        const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        char name[128];
        snprintf(name, sizeof(name), "emulation checks (%s)", sc.name);
        if (!check_true(name, g_emu.errors == errors0)) printf("    %ld errors, the first: %s\n", g_emu.errors - errors0, g_emu.first_error.c_str());
        g_emu.errors = 0;
        g_emu.first_error.clear();
        if (si == 0) {
            check_close("flash forward out", to_float(o.out), out_ref, 1e-2f, 2e-2f);
            check_close("flash forward lse", o.lse, lse_ref, 2e-4f, 1e-3f, 1e-4);
            check_dqkv("flash backward", to_float(o.dqkv), dqkv_ref, B, T, H, KV, HD, 2e-2);
            printf("  (%.1f s: %ld warp instructions, %ld barriers, %ld copies)\n", sec, g_emu.warp_ops, g_emu.barriers, g_emu.copies);
            first = o;
        } else {
            check_true("bitwise the first schedule's outputs", o == first);
        }
        g_emu.warp_ops = g_emu.barriers = g_emu.copies = 0;
    }
}

int main(int argc, char **argv) {
    const int longer = argc > 1 && !strcmp(argv[1], "--long"), quick = argc > 1 && !strcmp(argv[1], "--quick");
    g_dev_rng = 1;
    if (quick) {  // one case with several tiles of every kernel (tests/test_flash_emulate.sh's sanitizer and mutant runs)
        run_case<64>(1, 300, 2, 1, 2);
        return g_dev_failures ? 1 : 0;
    }
    run_case<64>(2, 200, 4, 4, 2);    // T not a multiple of either tile, H = KV
    run_case<128>(1, 193, 6, 2, 3);   // GQA rep 3, hd 128, T = 3 * 64 + 1 (a last tile of one row)
    run_case<64>(3, 37, 4, 1, 2);     // multi-query, T below one tile
    run_case<128>(1, 1, 2, 2, 2);     // a single position
    run_case<64>(1, 300, 2, 1, 2);    // MQA rep 2 over several query tiles of both sizes
    if (longer) {
        run_case<64>(1, 1024, 2, 1, 1);   // gpt2's T, GQA
        run_case<128>(1, 1024, 2, 2, 1);
    }
    if (g_dev_failures) printf("flash_emulate: FAILED (%d checks)\n", g_dev_failures);
    else printf("flash_emulate: all checks passed\n");
    return g_dev_failures ? 1 : 0;
}
