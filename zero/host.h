// zero/host.h: the CPU trainer's backend, zero/backend.h's contract on host memory and
// MPI. Collectives are complete when they return or are waited for, and nothing is
// queued. The fp32 parameters are the master weights; the optimizer is CPU-Adam.
//
// fp16 mode, --fp16 1, models the fp16 GPU build so that loss scaling meets real
// overflows. The buffers stay fp32, and every value the GPU stores as fp16 is rounded
// where the GPU stores it: the working parameters, the master rounded after each update;
// each unit's gradient after every backward step that writes it; the reduced gradient.
// Activations stay fp32, and reductions add in fp32 where NCCL adds in fp16.
#pragma once
#include "zero/infinity.h"
#include "util/quantize.h"

#define ZPARAM_DT DT_F32

struct ZeroBackend {
    Comm *comm;
    double sumsq;                // zb_sumsq_add's running sum
    int fp16;                    // fp16 mode
    ZeroInfinity state;          // the partition's state planes
    AdamWParams ap;              // the step's hyperparameters
    double quant_sums[2][2];     // ZeRO++: squared error and squares quantized, int8 and int4
};

static void zb_init(ZeroBackend *b, Comm *comm, const TrainConfig *cfg, int n_slots, void *staging_grad, void *staging_params, size_t staging_from) {
    b->comm = comm;
    b->sumsq = 0;
    b->fp16 = cfg->fp16;
}

static void zb_round_floatX(ZeroBackend *b, float *x, size_t n) {
    if (!b->fp16) return;
    #pragma omp parallel for
    for (size_t i = 0; i < n; i++) x[i] = fp16_round(x[i]);
}
static void zb_destroy(ZeroBackend *b) { zero_infinity_close(&b->state); }

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
    zb_round_floatX(b, dst, n);
}

static void zb_accumulate_reduced(ZeroBackend *b, CommRequest *r, float *acc, const floatX *src, size_t n, int first) {
    comm_wait(b->comm, r);
    for (size_t i = 0; i < n; i++) {
        float x = b->fp16 ? fp16_round(src[i]) : src[i];   // the reduced slice as the GPU stores it
        acc[i] = first ? x : acc[i] + x;
    }
}

// stages 0-1 store the reduced slice as floatX
static void zb_grad_slice_final(ZeroBackend *b, size_t shard_off, zgrad_t *slice, size_t n) {
    if (ZERO_STAGE <= 1) zb_round_floatX(b, slice, n);
}
// collectives here finish before the call that waits for them returns: nothing to order
static void zb_slot_acquire(ZeroBackend *b, int slot) {}
static void zb_slot_release(ZeroBackend *b, int slot) {}
static void zb_wait_collectives(ZeroBackend *b) {}
static void zb_sync(ZeroBackend *b) {}

// Squares summed in double, in an order that depends on n only, never on the thread
// count: blocks summed in order, each in SUMSQ_LANES interleaved lanes that vectorize.
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

// the GPU's lean optimizer step: the CPU walks the segments
static int zb_lean_init(ZeroBackend *b, const ZeroAdamSeg *runs, int n_runs, const ZeroAdamSeg *seg, int n_seg,
                        size_t shard_elems, uint32_t *decay_mask) { return 0; }
static void zb_lean_sumsq(ZeroBackend *b) {}
static void zb_lean_adamw(ZeroBackend *b, AdamWParams ap) {}

// ----------------------------------------------------------------------------
// the partition's state (zero/infinity.h): planes in memory are plain host memory

static void zb_state_init(ZeroBackend *b, const ZeroInfinityPlan *q, void *const *mem, int separate_master, const TrainConfig *cfg,
                          void *nvme_buffers, int say) {
    zero_infinity_open(&b->state, q, mem, separate_master, cfg, nvme_buffers, b->comm, say);
}

static void zb_state_read(ZeroBackend *b, int k, size_t off, size_t n, void *host) {
    ZeroInfinity *st = &b->state;
    if (st->mem[k]) memcpy(host, (char *)st->mem[k] + off * st->elem[k], n * st->elem[k]);
    else zero_infinity_rw(st, k, off, n, host, 0);
}
static void zb_state_write(ZeroBackend *b, int k, size_t off, size_t n, const void *host) {
    ZeroInfinity *st = &b->state;
    if (st->mem[k]) memcpy((char *)st->mem[k] + off * st->elem[k], host, n * st->elem[k]);
    else zero_infinity_rw(st, k, off, n, (void *)host, 1);
}
// vals is staging: fp16 mode rounds it in place
static void zb_state_write_floatX(ZeroBackend *b, size_t off, float *vals, size_t n) {
    zb_round_floatX(b, vals, n);
    zb_state_write(b, ZS_PARAM, off, n, vals);
}

// One piece of a segment. Without a separate master the parameters are the master; in
// fp16 mode the working parameters are the updated master rounded.
static void zb_adamw_piece(void *ctx, const ZeroAdamSeg *s, size_t at, size_t n, float *master, float *m, float *v,
                           floatX *param, int param_in_tile) {
    ZeroBackend *b = (ZeroBackend *)ctx;
    AdamWParams ap = b->ap;
    ap.weight_decay = s->weight_decay;
    adamw_cpu_step(master, s->grad + at, m, v, NULL, n, ap);
    if (param != master) {
        memcpy(param, master, n * sizeof(float));
        zb_round_floatX(b, param, n);
    }
}

static void zb_adamw_partition(ZeroBackend *b, const ZeroAdamSeg *seg, int n_seg, AdamWParams ap) {
    b->ap = ap;
    if (b->state.open) { zero_infinity_adamw(&b->state, seg, n_seg, zb_adamw_piece, b); return; }
    for (int i = 0; i < n_seg; i++)
        zb_adamw_piece(b, &seg[i], 0, seg[i].n, seg[i].master ? seg[i].master : (float *)seg[i].param, seg[i].m, seg[i].v, seg[i].param, 0);
}

// DPU: the update reads a copy, since the next backward writes the gradient
static void zb_dpu_take_grad(ZeroBackend *b, ZeroAdamSeg *seg, int n_seg, zgrad_t **copy) {
    for (int s = 0; s < n_seg; s++) {
        memcpy(*copy + seg[s].shard_off, seg[s].grad, seg[s].n * sizeof(zgrad_t));
        seg[s].grad = *copy + seg[s].shard_off;
    }
}

// Stage 3: a unit's slice of the parameter shard into the gather arena, from memory, or
// from NVMe, where the next unit of the pass's order is read ahead.
static void zb_read_ahead(ZeroBackend *b, const ZeroUnit *U) {
    if (U) zero_infinity_read_ahead(&b->state, U->shard_off, U->shard);
}
static void zb_pass_begin(ZeroBackend *b, const ZeroPlan *p, const int *order, int n) {
    if (b->state.plane[ZS_PARAM] >= 0) zb_read_ahead(b, zero_infinity_pass_begin(&b->state, p, order, n));
}
static void zb_param_slice_to(ZeroBackend *b, floatX *dst, const floatX *src, size_t off, size_t n) {
    if (src) { memcpy(dst, src, n * sizeof(floatX)); return; }
    int buffer;
    memcpy(dst, zero_infinity_param_slice(&b->state, off, n, &buffer), n * sizeof(floatX));
    zb_read_ahead(b, zero_infinity_next(&b->state, off));
}

// ZeRO++'s block quantization, util/quantize.h. The CPU's floatX is fp32.
static void zb_quantize(ZeroBackend *b, const void *x, int x_floatX, size_t n, int bits, uint8_t *out) {
    zq_quantize((const float *)x, n, bits, out, b->quant_sums[bits == 8 ? 0 : 1]);
}
static void zb_dequantize(ZeroBackend *b, const uint8_t *in, size_t n, int bits, void *y, int y_floatX, int add) {
    zq_dequantize(in, n, bits, (float *)y, add);
    if (y_floatX) zb_round_floatX(b, (float *)y, n);
}
static void zb_scale_to_floatX(ZeroBackend *b, const float *x, floatX *y, size_t n, float s) {
    for (size_t i = 0; i < n; i++) y[i] = x[i] * s;
}
static void zb_quant_sums(ZeroBackend *b, double out[4]) {
    memcpy(out, b->quant_sums, sizeof(b->quant_sums));
    memset(b->quant_sums, 0, sizeof(b->quant_sums));
}

static int zb_nvme_stats(ZeroBackend *b, ZeroNvmeStats *out) { return zero_infinity_take_stats(&b->state, out); }

static int zb_device_memory(ZeroBackend *b, size_t *used, size_t *total) { *used = *total = 0; return 0; }
