// bench/sgemm.c: the machine's sgemm peak, and the sgemm time of one training step of a model,
// for bench/cpu_train.sh (measured in the same run as the trainers).
//
//   build/sgemm_bench [--square N] [--reps R] [train_gpt_cpu's model flags: --arch --preset --batch --seq --threads ...]
//
// Prints:
//   sgemm: OpenBLAS core <name>, <threads> threads
//   RESULT sgemm_peak <N> <threads> <GFLOP/s>          best of R square N x N x N sgemms (the
//                                                      trainer's forward layout: A x B^T)
//   RESULT model_gemms <threads> <s/step> <GFLOP/step> <GFLOP/s>
//                                                      best of R passes over one step's GEMMs (every
//                                                      layer's four projections and the head, forward
//                                                      and both backward GEMMs) through train_gpt.c's own
//                                                      matmul_forward / matmul_backward, each layer with
//                                                      its own weights (so the caches see what training sees)
//   RESULT model_flops_per_token <FLOPs>               model/model.h's count (the trainer's GFLOP/s)
// The share of the step the trainer spends outside sgemm is then step time - model_gemms s/step.
#define TESTING
#include "train_gpt.c"

static void fill_pattern(float *x, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) x[i] = (float)((i * 2654435761u + seed) % 1000) * 1e-3f - 0.5f;
}

static float *bench_buffer(size_t n, unsigned seed) {
    float *x = (float *)xmalloc(n * sizeof(float), "sgemm bench");
    fill_pattern(x, n, seed);
    return x;
}

static double square_peak(int n, int reps) {
    float *a = bench_buffer((size_t)n * n, 1), *b = bench_buffer((size_t)n * n, 2), *c = bench_buffer((size_t)n * n, 3);
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) {   // the first call warms up (page faults, OpenBLAS buffers)
        double t0 = wall_time();
        matmul_forward(c, a, b, NULL, n, n, n);
        double t = wall_time() - t0;
        if (r > 0 && t < best) best = t;
    }
    free(a); free(b); free(c);
    return 2.0 * n * n * n / best * 1e-9;
}

int main(int argc, char **argv) {
    cpu_wait_policy(argv);   // the trainer's OpenMP wait policy (util/cpu_threads.h)
    int square = 2048, reps = 5;
    char **rest = (char **)xmalloc(sizeof(char *) * (argc + 1), "args");
    int nrest = 0;
    rest[nrest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--square") && i + 1 < argc) square = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else rest[nrest++] = argv[i];
    }
    if (square < 64 || reps < 1) fatal("usage: sgemm_bench [--square N >= 64] [--reps R >= 1] [model flags]");
    TrainConfig tc;
    parse_args(&tc, nrest, rest, 1);
    int threads = tc.threads > 0 ? tc.threads : omp_get_num_procs();
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    printf("sgemm: OpenBLAS core %s, %d thread%s\n", openblas_get_corename(), threads, threads > 1 ? "s" : "");
    printf("RESULT sgemm_peak %d %d %.1f\n", square, threads, square_peak(square, reps));

    // one step's GEMMs: the shapes of gpt_build / layer_rows / layer_backward / head_rows
    const ModelConfig *c = &tc.model;
    int N = tc.B * tc.T, C = c->d_model, F = c->d_ff, Vp = c->padded_vocab, L = c->n_layer;
    int hd = C / c->n_head, QKV = (c->n_head + 2 * c->n_kv_head) * hd, FC = c->arch == ARCH_LLAMA ? 2 * F : F;
    int oc[4] = {QKV, C, FC, C}, ic[4] = {C, C, C, F};   // qkv, attproj, fc, fcproj: out and in widths
    size_t per_layer = 0;
    for (int k = 0; k < 4; k++) per_layer += (size_t)oc[k] * ic[k];
    float *w = bench_buffer(per_layer * L + (size_t)Vp * C, 4), *g = bench_buffer(per_layer * L + (size_t)Vp * C, 5);
    size_t widest = (size_t)(Vp > FC ? Vp : FC);
    float *x = bench_buffer((size_t)N * widest, 6), *y = bench_buffer((size_t)N * widest, 7), *dx = bench_buffer((size_t)N * widest, 8);
    double flops = 0;
    for (int k = 0; k < 4; k++) flops += 2.0 * N * oc[k] * ic[k];
    flops = 3.0 * (flops * L + 2.0 * N * C * Vp);   // forward, and the backward's two GEMMs per forward GEMM
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) {
        double t0 = wall_time();
        float *wl = w;
        for (int l = 0; l < L; l++)
            for (int k = 0; k < 4; k++) { matmul_forward(y, x, wl, NULL, N, ic[k], oc[k]); wl += (size_t)oc[k] * ic[k]; }
        matmul_forward(y, x, wl, NULL, N, C, Vp);
        matmul_backward(dx, g + (wl - w), NULL, y, x, wl, N, C, Vp, 0);
        for (int l = L - 1; l >= 0; l--)
            for (int k = 3; k >= 0; k--) {
                wl -= (size_t)oc[k] * ic[k];
                matmul_backward(dx, g + (wl - w), NULL, y, x, wl, N, ic[k], oc[k], 0);
            }
        double t = wall_time() - t0;
        if (r > 0 && t < best) best = t;
    }
    printf("RESULT model_gemms %d %.6f %.3f %.1f\n", threads, best, flops * 1e-9, flops / best * 1e-9);
    printf("RESULT model_flops_per_token %.6e\n", model_flops_per_token(c, tc.T));
    free(w); free(g); free(x); free(y); free(dx); free(rest);
    return 0;
}
