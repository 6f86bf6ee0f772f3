// zero/host.h: zero.h's data-movement primitives for the CPU trainer, listed in
// zero/backend.h. Every buffer is ordinary host memory and every collective is MPI,
// complete when it returns or is waited for. The fp32 parameters are themselves the
// master weights, and the optimizer is CPU-Adam (adamw.cuh). zero/device.cuh
// implements the same calls for the GPU trainer.
//
// fp16 mode (--fp16 1, fp16.enabled) models what the fp16 GPU build (make train_gpt
// FP16=1) stores, so that loss scaling and its overflows happen for real. The buffers
// stay fp32, but every value the GPU would store as fp16 is rounded to the nearest
// fp16 value where the GPU stores it (fp16_round: ties to even, 65520 and up to Inf):
//   - parameters: AdamW updates a separate fp32 master, which checkpoints hold. The
//     working parameters are the master rounded, at load (zb_upload_floatX) and after
//     each update (zb_adamw_piece); the all-gathers move and the forward reads those.
//   - gradients: each unit's gradient after every backward step that writes it
//     (zb_grads_stored), so stages 0-1 accumulate micro-steps in fp16 as the GPU does;
//     and the reduced gradient, which is the averaged slice in stages 0-1
//     (zb_grad_slice_final) and the reduce-scatter's output before its fp32
//     accumulation in stages 2-3 (zb_accumulate_reduced).
// Not modelled: activations and their gradients stay fp32, and a reduction sums fp16
// values in fp32 before rounding the result, where NCCL adds in fp16. Without fp16
// nothing here rounds anything.
#pragma once
#include "zero/state.h"
#include "util/quantize.h"

#define ZPARAM_DT DT_F32
// At one rank a reduced gradient is the gradient itself, so zero.h skips the reduce-scatter,
// which MPI would run as a copy through a temporary buffer, and accumulates the slot in place.
#define ZERO_ONE_RANK_IN_PLACE 1
// The CPU trainer's backward writes a unit's gradients instead of adding them where
// zero_grads_first_write says so, and stages 0-1 then skip zeroing those units.
#define ZERO_GRADS_FIRST_WRITE 1

typedef struct {
    Comm *comm;
    double sumsq;                // zb_sumsq_add's running sum
    int fp16;                    // fp16 mode: values the GPU stores as fp16 are rounded to fp16
    ZeroNvme state;              // the partition's state planes: memory or NVMe (zero/state.h)
    AdamWParams ap;              // the step's hyperparameters (zb_adamw_partition)
    float quant_error[2];        // ZeRO++: the worst block error since zb_quant_errors, int8 and int4
} ZeroBackend;

static void zb_init(ZeroBackend *b, Comm *comm, const TrainConfig *cfg, int n_slots, void *staging_grad, void *staging_params) {
    b->comm = comm;
    b->sumsq = 0;
    b->fp16 = cfg->fp16;
}

// fp16 mode: x[0..n) rounded to fp16 values, in place
static void zb_round_fp16(ZeroBackend *b, float *x, size_t n) {
    if (!b->fp16) return;
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) x[i] = fp16_round(x[i]);
}
static void zb_destroy(ZeroBackend *b) { zero_nvme_close(&b->state); }

static void *zb_alloc(ZeroBackend *b, size_t bytes, int where, const char *what) {
    return xcalloc(bytes, what);
}
static void zb_free(ZeroBackend *b, void *p, int where) { free(p); }

static void zb_fill(ZeroBackend *b, void *p, int byte, size_t bytes) { memset(p, byte, bytes); }
static void zb_copy(ZeroBackend *b, void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }
static void zb_upload(ZeroBackend *b, void *dst, const void *host, size_t bytes) { memcpy(dst, host, bytes); }
static void zb_download(ZeroBackend *b, void *host, const void *src, size_t bytes) { memcpy(host, src, bytes); }
static void zb_upload_floatX(ZeroBackend *b, floatX *dst, const float *host, size_t n) {
    memcpy(dst, host, n * sizeof(float));
    zb_round_fp16(b, dst, n);
}

static void zb_grads_stored(ZeroBackend *b, floatX *g, size_t n) { zb_round_fp16(b, g, n); }

// A reduce-scatter was started into src: wait for it, then add the slice into
// the fp32 accumulator (the first micro-step of a step copies).
static void zb_accumulate_reduced(ZeroBackend *b, CommRequest *r, float *acc, floatX *src, size_t n, int first) {
    comm_wait(b->comm, r);
    zb_round_fp16(b, src, n);   // the reduced slice as the GPU stores it
    if (first) memcpy(acc, src, n * sizeof(float));
    else for (size_t i = 0; i < n; i++) acc[i] += src[i];
}

// the optimizer reads the slice where it is; stages 0-1 store the reduced slice as floatX
static void zb_grad_slice_final(ZeroBackend *b, size_t shard_off, zgrad_t *slice, size_t n) {
    if (ZERO_STAGE <= 1) zb_round_fp16(b, slice, n);
}
static void zb_slot_acquire(ZeroBackend *b, int slot) {}   // collectives here finish before
static void zb_slot_release(ZeroBackend *b, int slot) {}   // the call that started them returns
static void zb_wait_collectives(ZeroBackend *b) {}
static void zb_sync(ZeroBackend *b) {}   // every queued operation done (the breakdown's timings): nothing is queued here

// Squares summed in double, in an order that depends on n only, never on the thread
// count. The threads take blocks of SUMSQ_BLOCK elements in turn, and the blocks' sums
// are added in order. A block is summed in SUMSQ_LANES interleaved lanes, which the
// compiler turns into vector FMAs; one chain of dependent adds ran at one element per
// add's latency.
#define SUMSQ_LANES 16
#define SUMSQ_BLOCK ((size_t)1 << 16)
static double zb_sumsq_block(const zgrad_t *g, size_t n) {
    double lane[SUMSQ_LANES] = {0};
    size_t i = 0;
    for (; i + SUMSQ_LANES <= n; i += SUMSQ_LANES) {
        #pragma omp simd
        for (int l = 0; l < SUMSQ_LANES; l++) lane[l] += (double)g[i + l] * g[i + l];
    }
    for (int l = 0; i < n; i++, l++) lane[l] += (double)g[i] * g[i];
    double s = 0;
    for (int l = 0; l < SUMSQ_LANES; l++) s += lane[l];
    return s;
}
static void zb_sumsq_add(ZeroBackend *b, const zgrad_t *g, size_t n) {
    size_t blocks = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
    if (blocks <= 1) { b->sumsq += zb_sumsq_block(g, n); return; }
    double *part = (double *)xmalloc(sizeof(double) * blocks, "gradient norm blocks");
    #pragma omp parallel for schedule(dynamic, 1)
    for (size_t k = 0; k < blocks; k++) {
        size_t i0 = k * SUMSQ_BLOCK;
        part[k] = zb_sumsq_block(g + i0, n - i0 < SUMSQ_BLOCK ? n - i0 : SUMSQ_BLOCK);
    }
    for (size_t k = 0; k < blocks; k++) b->sumsq += part[k];
    free(part);
}
static double zb_sumsq_take(ZeroBackend *b) { double s = b->sumsq; b->sumsq = 0; return s; }

// the GPU's lean optimizer step (zero/device.cuh): not here, the segment walk is the CPU's step
static int zb_lean_init(ZeroBackend *b, const ZeroAdamSeg *runs, int n_runs, const ZeroAdamSeg *seg, int n_seg,
                        size_t shard_elems, uint32_t *decay_mask) { return 0; }
static void zb_lean_sumsq(ZeroBackend *b) {}
static void zb_lean_adamw(ZeroBackend *b, AdamWParams ap) {}

// ----------------------------------------------------------------------------
// the partition's state (zero/state.h): planes in memory are plain host memory here

static void zb_state_init(ZeroBackend *b, const ZeroNvmePlan *q, void *const *mem, int separate_master, const TrainConfig *cfg,
                          void *nvme_buffers, int say) {
    zero_nvme_open(&b->state, q, mem, separate_master, cfg, nvme_buffers, b->comm, say);
}

static void zb_state_read(ZeroBackend *b, int k, size_t off, size_t n, void *host) {
    ZeroNvme *st = &b->state;
    if (st->mem[k]) memcpy(host, (char *)st->mem[k] + off * st->elem[k], n * st->elem[k]);
    else zero_nvme_rw(st, k, off, n, host, 0);
}
static void zb_state_write(ZeroBackend *b, int k, size_t off, size_t n, const void *host) {
    ZeroNvme *st = &b->state;
    if (st->mem[k]) memcpy((char *)st->mem[k] + off * st->elem[k], host, n * st->elem[k]);
    else zero_nvme_rw(st, k, off, n, (void *)host, 1);
}
// vals is staging: fp16 mode rounds it in place
static void zb_state_write_floatX(ZeroBackend *b, size_t off, float *vals, size_t n) {
    zb_round_fp16(b, vals, n);
    zb_state_write(b, ZS_PARAM, off, n, vals);
}

// One piece of a segment: the master is the parameter slice itself, except in fp16
// mode, where the working parameters are the updated master rounded to fp16.
static void zb_adamw_piece(void *ctx, const ZeroAdamSeg *s, size_t at, size_t n, float *master, float *m, float *v,
                           floatX *param, int param_in_tile) {
    ZeroBackend *b = (ZeroBackend *)ctx;
    AdamWParams ap = b->ap;
    ap.weight_decay = s->weight_decay;
    adamw_cpu_step(master, s->grad + at, m, v, NULL, n, ap);
    if (param != master) {
        memcpy(param, master, n * sizeof(float));
        zb_round_fp16(b, param, n);
    }
}

// AdamW on this rank's partition, segment by segment in shard order (streamed from NVMe
// tile by tile where the state is there)
static void zb_adamw_partition(ZeroBackend *b, const ZeroAdamSeg *seg, int n_seg, AdamWParams ap) {
    b->ap = ap;
    zero_state_adamw(&b->state, seg, n_seg, zb_adamw_piece, b);
}

// Stage 3: a unit's slice of the parameter shard to dst (its place in the gather arena),
// from src in memory, or from NVMe (src NULL): the read started one unit ahead, or now.
static void zb_param_read_ahead(ZeroBackend *b, size_t off, size_t n) {
    if (b->state.plane[ZS_PARAM] >= 0) zero_nvme_param_read_ahead(&b->state, off, n);
}
static void zb_param_slice_to(ZeroBackend *b, floatX *dst, const floatX *src, size_t off, size_t n) {
    int buffer;
    if (!src) src = (const floatX *)zero_nvme_param_slice(&b->state, off, n, &buffer);
    memcpy(dst, src, n * sizeof(floatX));
}

// ZeRO++ (zero.h, util/quantize.h): n values, floatX or fp32 (x_floatX; the CPU's floatX is
// fp32), into a quantized message; a message back into floatX values or fp32 ones, or added
// to fp32 ones; fp32 values times s into floatX; the worst block error of each width since
// the last call.
static void zb_quantize(ZeroBackend *b, const void *x, int x_floatX, size_t n, int bits, uint8_t *out) {
    float e = zq_quantize((const float *)x, n, bits, out), *worst = &b->quant_error[bits == 8 ? 0 : 1];
    if (e > *worst) *worst = e;
}
static void zb_dequantize(ZeroBackend *b, const uint8_t *in, size_t n, int bits, void *y, int y_floatX, int add) {
    zq_dequantize(in, n, bits, (float *)y, add);
    if (y_floatX) zb_round_fp16(b, (float *)y, n);   // floatX values, as the GPU stores them
}
static void zb_scale_to_floatX(ZeroBackend *b, const float *x, floatX *y, size_t n, float s) {
    for (size_t i = 0; i < n; i++) y[i] = x[i] * s;
}
static void zb_quant_errors(ZeroBackend *b, float out[2]) {
    out[0] = b->quant_error[0]; out[1] = b->quant_error[1];
    b->quant_error[0] = b->quant_error[1] = 0;
}

static int zb_nvme_stats(ZeroBackend *b, ZeroNvmeStats *out) { return zero_nvme_take_stats(&b->state, out); }

static int zb_device_memory(ZeroBackend *b, size_t *used, size_t *total) { *used = *total = 0; return 0; }
