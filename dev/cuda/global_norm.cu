// dev/cuda/global_norm.cu: deterministic sum of squares of bf16 and fp32 buffers (16-byte
// aligned starts at several offsets, counts that are whole vectors, accumulate) against a CPU
// reference in double; bitwise repeatability; timed.
// Then the lean step's norm (global_norm_squared_runs: one launch over a partition's runs) on
// GPT-2 124M's partition as zero.h lays it out (dev/cuda/zero_partition.cuh) against the double
// reference and the per-segment path (global_norm_squared per segment, accumulating: what
// zero/device.cuh runs by default, --lean-step 0), repeatable bit for bit; both timed (alternating
// rounds, medians, the ratio). Tolerance: 2e-5 relative on the sum of squares (1e-5 on the norm)
// against the double sum, for both paths: fp32 running sums of ~460 squares per thread, then fixed
// trees, err by about 1e-6 in practice (the bound n*eps, 3e-5, is never approached by sums that
// round to nearest); the two paths add in different orders, so they differ at that level.
#include "dev/cuda/kernel_check.cuh"
#include "cuda/global_norm.cuh"
#include "adamw.cuh"                       // AdamWRun: the trainer's run table
#include "dev/cuda/zero_partition.cuh"

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

// ----------------------------------------------------------------------------
// the lean norm on GPT-2 124M's partition

template <typename G> static G dev_from_float(float x);
template <> float dev_from_float<float>(float x) { return x; }
template <> floatX dev_from_float<floatX>(float x) { return __float2bfloat16(x); }

// gradients of the partition: in the full floatX buffer (stages 0-1) or the fp32 shard (stages 2-3)
template <typename G> struct NormCase {
    const DevPartition *d;
    int merged, grid;   // one run for the whole partition; grid 0: global_norm_runs_grid's
    size_t grad_elems;
    size_t grad_index(int u, size_t so) const { return sizeof(G) == 2 ? dev_full_index(*d, u, so) : so; }
};

template <typename G>
static AdamWRun<G> *norm_runs(const NormCase<G> &c, const G *grad, int *n_runs) {
    const DevPartition &d = *c.d;
    std::vector<AdamWRun<G>> r;
    for (int u = 0; u < d.n_units; u++) r.push_back(AdamWRun<G>{d.shard_off[u], d.shard[u], grad + c.grad_index(u, d.shard_off[u]), NULL});
    if (c.merged) r = {AdamWRun<G>{0, d.shard_elems, r[0].grad, NULL}};
    AdamWRun<G> *dr = dev_alloc<AdamWRun<G>>(r.size());
    cudaCheck(cudaMemcpy(dr, r.data(), r.size() * sizeof(r[0]), cudaMemcpyHostToDevice));
    *n_runs = (int)r.size();
    return dr;
}

template <typename G>
static void norm_per_segment(const NormCase<G> &c, float *out, const G *grad, float *scratch) {
    int k = 0;
    for (const DevSegment &sg : c.d->seg) global_norm_squared(out, grad + c.grad_index(sg.unit, sg.so), sg.n, scratch, k++ > 0, 0);
}

template <typename G>
static void lean_norm_case(const char *name, const NormCase<G> &c, int timed) {
    const DevPartition &d = *c.d;
    std::vector<char> pad = dev_full_padding(d);
    // gradients ~ 0.01 * uniform(-1, 1) rounded to G, zero in the padding
    std::vector<G> h(c.grad_elems);
    #pragma omp parallel for
    for (size_t i = 0; i < c.grad_elems; i++) h[i] = dev_from_float<G>(0.01f * dev_hrand(7, i));
    for (int u = 0; u < d.n_units; u++)
        for (size_t so = d.shard_off[u]; so < d.shard_off[u] + d.shard[u]; so++)
            if (pad[dev_full_index(d, u, so)]) h[c.grad_index(u, so)] = dev_from_float<G>(0.0f);
    if (sizeof(G) == 2) for (size_t i = 0; i < d.full_elems; i++) if (pad[i]) h[i] = dev_from_float<G>(0.0f);
    double ref = 0;
    for (const DevSegment &sg : d.seg) {
        double s = 0;
        size_t g0 = c.grad_index(sg.unit, sg.so);
        #pragma omp parallel for reduction(+ : s)
        for (size_t i = 0; i < sg.n; i++) { double v = (double)(float)h[g0 + i]; s += v * v; }
        ref += s;
    }
    G *grad = dev_alloc<G>(c.grad_elems);
    cudaCheck(cudaMemcpy(grad, h.data(), c.grad_elems * sizeof(G), cudaMemcpyHostToDevice));
    int n_runs = 0;
    AdamWRun<G> *runs = norm_runs<G>(c, grad, &n_runs);
    int grid = c.grid ? c.grid : global_norm_runs_grid<G>(d.shard_elems);
    float *out = dev_alloc<float>(1), *scratch = dev_alloc<float>(global_norm_scratch_floats());
    unsigned int *done = dev_alloc<unsigned int>(1);
    cudaCheck(cudaMemset(done, 0, sizeof(unsigned int)));
    auto lean = [&] { global_norm_squared_runs(out, runs, n_runs, grid, scratch, done, 0); };
    auto per_seg = [&] { norm_per_segment<G>(c, out, grad, scratch); };
    float got[2], seg;
    for (int k = 0; k < 2; k++) {   // twice, the output poisoned (NaN) before each: written, and the same bits
        dev_poison(out, 1);
        lean();
        got[k] = from_device_f32(out, 1)[0];
    }
    dev_poison(out, 1);
    per_seg();
    seg = from_device_f32(out, 1)[0];
    double rl = fabs(got[0] - ref) / ref, rs = fabs(seg - ref) / ref;
    printf("  %-30s P=%d rank %d, %zu segments, %d run%s, grid %d: sum %.9e (double) lean %.9e (rel %.2e) per-segment %.9e (rel %.2e)\n",
           name, d.P, d.rank, d.seg.size(), n_runs, n_runs > 1 ? "s" : "", grid, ref, got[0], rl, seg, rs);
    check_true("  lean within 2e-5 of double", std::isfinite(got[0]) && rl <= 2e-5);
    check_true("  per-segment within 2e-5", std::isfinite(seg) && rs <= 2e-5);
    check_true("  lean bitwise repeatable", memcmp(&got[0], &got[1], sizeof(float)) == 0);
    if (timed) {
        for (int k = 0; k < 3; k++) { lean(); per_seg(); }
        cudaCheck(cudaDeviceSynchronize());
        std::vector<float> tl, ts;
        for (int r = 0; r < 9; r++) { ts.push_back(time_us(per_seg, 10, 1)); tl.push_back(time_us(lean, 10, 1)); }
        std::sort(tl.begin(), tl.end()); std::sort(ts.begin(), ts.end());
        double bytes = (double)d.shard_elems * sizeof(G);
        printf("  time %-28s per-segment (%zu x 2 launches) %.1f us, lean (1 launch) %.1f us: %.2fx; lean %.0f GB/s "
               "(min..max per-segment %.1f..%.1f, lean %.1f..%.1f)\n", name, d.seg.size(), ts[4], tl[4], ts[4] / tl[4],
               bytes / (tl[4] * 1e-6) / 1e9, ts[0], ts[8], tl[0], tl[8]);
    }
    cudaCheck(cudaFree(grad)); cudaCheck(cudaFree(runs)); cudaCheck(cudaFree(out)); cudaCheck(cudaFree(scratch));
    cudaCheck(cudaFree(done));
}

static void lean_norm_checks(void) {
    DevPartition p1 = dev_gpt2_partition(1, 0), p2r1 = dev_gpt2_partition(2, 1), p5r4 = dev_gpt2_partition(5, 4);
    printf("the lean norm (one launch over the partition's runs) on GPT-2 124M's partition:\n");
    lean_norm_case<floatX>("stage 0 (bf16, 1 run)", NormCase<floatX>{&p1, 1, 0, p1.full_elems}, 1);
    lean_norm_case<float>("stage 2-3 (fp32, 1 run)", NormCase<float>{&p1, 1, 0, p1.shard_elems}, 1);
    lean_norm_case<floatX>("stage 1 x2 (bf16, unit runs)", NormCase<floatX>{&p2r1, 0, 0, p2r1.full_elems}, 0);
    lean_norm_case<floatX>("stage 1 x2, grid 1", NormCase<floatX>{&p2r1, 0, 1, p2r1.full_elems}, 0);
    lean_norm_case<float>("stage 2 x5 (fp32, padding), grid 7", NormCase<float>{&p5r4, 0, 7, p5r4.shard_elems}, 0);
    lean_norm_case<floatX>("stage 1 x5 (bf16, padding), max grid", NormCase<floatX>{&p5r4, 0, GNORM_MAX_BLOCKS, p5r4.full_elems}, 0);
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
    lean_norm_checks();
    return dev_finish("global_norm");
}
