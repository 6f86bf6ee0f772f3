// zero/device.cuh: the GPU trainer's backend, zero/backend.h's contract on device memory,
// streams and NCCL or host-staged MPI.
//
// The stream rule. Every kernel runs on the compute stream. An NCCL collective runs on
// the communication stream after waiting for the compute stream, comm_nccl_begin, so it
// overlaps the kernels queued after it, and a gather into a released arena place waits
// for the kernels that read the place before. Reduced gradients land on the reduce
// stream: the communication stream under NCCL, the compute stream under host-staged MPI.
// A gradient slot's event, recorded there after its reduction, gates its reuse;
// zb_wait_collectives makes the compute stream wait for the reduce stream.
//
// ZeRO-Offload, --offload: the fp32 master, m and v live in pinned host memory. Each
// unit's final gradient slice is copied to pinned staging on the reduce stream; CPU-Adam
// updates the partition tile by tile and each finished tile of floatX parameters goes
// back to the GPU while the next one computes. ZeRO-Infinity streams master, m and v
// from NVMe instead, zero/infinity.h.
#pragma once
#include "cuda/common.cuh"
#include "cuda/global_norm.cuh"
#include "cuda/quantize.cuh"
#include "zero/infinity.h"

#define ZPARAM_DT DT_FLOATX

#define ZERO_OFFLOAD_TILE (1 << 20)

struct ZeroBackend {
    Comm *comm;
    cudaStream_t stream;         // the compute stream
    cudaStream_t reduce_stream;  // where reduced gradients land
    cudaEvent_t *slot_free;      // per gradient slot: its last reduction is done with it
    int n_slots;
    float *norm_dev, *norm_scratch;
    int n_sumsq;                 // segments summed into norm_dev this step
    int offload;
    int delayed;                 // DPU: CPU-Adam on the segments' host copies
    void *host_grad;             // offload: pinned staging of this rank's gradient partition (zgrad_t)
    uint16_t *host_x;            // offload: pinned floatX parameters (bits), copied to the device tile by tile
    size_t host_from;            // the staging's first shard offset: Twin-Flow's device side stays on the GPU
    ZeroInfinity state;          // the partition's state planes
    AdamWParams ap;              // the step's hyperparameters
    cudaEvent_t unit_copied[2];  // stage 3, parameters on NVMe: each unit buffer's copy to the GPU
    int lean;                    // --lean-step 1
    int say;                     // rank 0, not --quiet
    AdamWRun<zgrad_t> *runs;     // the lean step: the partition's runs on the device
    int n_runs, norm_grid, adam_grid;
    uint32_t *decay_mask;        // the lean AdamW's weight-decay bits, ZBUF_DECAY_MASK
    unsigned int *norm_blocks_done;
    float *quant_sums;           // ZeRO++: squared error and squares quantized, int8 and int4
};

static void *zb_alloc(ZeroBackend *b, size_t bytes, int where, const char *what) {
    void *p = NULL;
    if (where == ZMEM_HOST) {
        cudaError_t e = cudaMallocHost(&p, bytes ? bytes : 16);
        if (e != cudaSuccess) fatal("out of pinned host memory allocating %zu bytes for %s (%s)", bytes, what, cudaGetErrorString(e));
        memset(p, 0, bytes);
        return p;
    }
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 16);
    if (e != cudaSuccess) fatal("out of GPU memory allocating %zu bytes for %s (%s)", bytes, what, cudaGetErrorString(e));
    // on the compute stream: the non-blocking streams are not ordered after the legacy one
    cudaCheck(cudaMemsetAsync(p, 0, bytes, b->stream));
    return p;
}
static void zb_free(ZeroBackend *b, void *p, int where) {
    if (!p) return;
    cudaCheck(where == ZMEM_HOST ? cudaFreeHost(p) : cudaFree(p));
}

// staging: ZeRO-Offload's pinned buffers from zero/placement.h's table, NULL without offload
static void zb_init(ZeroBackend *b, Comm *comm, const TrainConfig *cfg, int n_slots, void *staging_grad, void *staging_params, size_t staging_from) {
    memset(b, 0, sizeof(*b));
    b->comm = comm;
    b->stream = comm->compute;
    b->reduce_stream = comm->backend == COMM_BACKEND_NCCL ? comm->stream : comm->compute;
    b->n_slots = n_slots;
    b->slot_free = (cudaEvent_t *)xmalloc(sizeof(cudaEvent_t) * n_slots, "slot events");
    for (int i = 0; i < n_slots; i++) cudaCheck(cudaEventCreateWithFlags(&b->slot_free[i], cudaEventDisableTiming));
    cudaCheck(cudaMalloc(&b->norm_dev, sizeof(float)));
    cudaCheck(cudaMalloc(&b->norm_scratch, global_norm_scratch_floats() * sizeof(float)));
    cudaCheck(cudaMalloc(&b->quant_sums, 4 * sizeof(float)));
    cudaCheck(cudaMemsetAsync(b->quant_sums, 0, 4 * sizeof(float), b->stream));
    b->offload = staging_grad != NULL;
    b->host_grad = staging_grad;
    b->host_x = (uint16_t *)staging_params;
    b->host_from = staging_from;
    b->lean = cfg->lean_step;
    b->say = comm->rank == 0 && !cfg->quiet;
}
static void zb_destroy(ZeroBackend *b) {
    cudaCheck(cudaStreamSynchronize(b->stream));
    if (b->state.plane[ZS_PARAM] >= 0) for (int i = 0; i < 2; i++) cudaCheck(cudaEventDestroy(b->unit_copied[i]));
    zero_infinity_close(&b->state);
    for (int i = 0; i < b->n_slots; i++) cudaCheck(cudaEventDestroy(b->slot_free[i]));
    free(b->slot_free);
    cudaCheck(cudaFree(b->norm_dev)); cudaCheck(cudaFree(b->norm_scratch)); cudaCheck(cudaFree(b->quant_sums));
    if (b->runs) { cudaCheck(cudaFree(b->runs)); cudaCheck(cudaFree(b->norm_blocks_done)); }
    zb_free(b, b->host_grad, ZMEM_HOST); zb_free(b, b->host_x, ZMEM_HOST);
}

static void zb_fill(ZeroBackend *b, void *p, int byte, size_t bytes) { cudaCheck(cudaMemsetAsync(p, byte, bytes, b->stream)); }
static void zb_copy(ZeroBackend *b, void *dst, const void *src, size_t bytes) {
    cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, b->stream));
}
// after everything queued on the compute stream, and complete on return
static void zb_upload(ZeroBackend *b, void *dst, const void *host, size_t bytes) {
    zb_copy(b, dst, host, bytes);
    cudaCheck(cudaStreamSynchronize(b->stream));
}
static void zb_download(ZeroBackend *b, void *host, const void *src, size_t bytes) {
    zb_copy(b, host, src, bytes);
    cudaCheck(cudaStreamSynchronize(b->stream));
}
static void zb_upload_floatX(ZeroBackend *b, floatX *dst, const float *host, size_t n) {
    uint16_t *bits = (uint16_t *)xmalloc(n * sizeof(uint16_t), "floatX staging");
    for (size_t i = 0; i < n; i++) bits[i] = float_to_floatX_bits(host[i]);
    zb_upload(b, dst, bits, n * sizeof(uint16_t));
    free(bits);
}

static void zb_round_floatX(ZeroBackend *b, floatX *x, size_t n) {}   // the kernels store floatX already

// acc = (first ? 0 : acc) + src: a reduced floatX slice into the fp32 shard
__global__ static void zb_accumulate_kernel(float *acc, const floatX *src, size_t n, int first) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        acc[i] = (first ? 0.0f : acc[i]) + bf2f(src[i]);
}
// on the reduce stream, right behind the reduce-scatter that fills src
static void zb_accumulate_reduced(ZeroBackend *b, CommRequest *r, float *acc, const floatX *src, size_t n, int first) {
    int grid = grid_for(n, 256);
    zb_accumulate_kernel<<<grid < 4096 ? grid : 4096, 256, 0, b->reduce_stream>>>(acc, src, n, first);
    cudaCheckLaunch();
    r->active = 0;   // ordered by the stream; zb_wait_collectives joins it
}

// ZeRO-Offload: the final slice's part CPU-Adam reads to pinned host memory now, behind its reduction
static void zb_grad_slice_final(ZeroBackend *b, size_t shard_off, zgrad_t *slice, size_t n) {
    size_t skip = b->host_from > shard_off ? b->host_from - shard_off : 0;
    if (!b->offload || skip >= n) return;
    cudaCheck(cudaMemcpyAsync((zgrad_t *)b->host_grad + shard_off + skip - b->host_from, slice + skip, (n - skip) * sizeof(zgrad_t),
                              cudaMemcpyDeviceToHost, b->reduce_stream));
}

static void zb_slot_acquire(ZeroBackend *b, int slot) { cudaCheck(cudaStreamWaitEvent(b->stream, b->slot_free[slot], 0)); }
static void zb_slot_release(ZeroBackend *b, int slot) { cudaCheck(cudaEventRecord(b->slot_free[slot], b->reduce_stream)); }

static void zb_wait_collectives(ZeroBackend *b) {
    if (b->reduce_stream == b->stream) return;
    cudaEvent_t e = comm_next_event(b->comm);
    cudaCheck(cudaEventRecord(e, b->reduce_stream));
    cudaCheck(cudaStreamWaitEvent(b->stream, e, 0));
}

static void zb_sync(ZeroBackend *b) {
    cudaCheck(cudaStreamSynchronize(b->reduce_stream));
    cudaCheck(cudaStreamSynchronize(b->stream));
}

static void zb_sumsq_add(ZeroBackend *b, const zgrad_t *g, size_t n) {
    global_norm_squared(b->norm_dev, g, n, b->norm_scratch, b->n_sumsq > 0, b->stream);
    b->n_sumsq++;
}
// The offload barrier: the host waits for the compute stream, which waited for the
// reduce stream, so every gradient copy to pinned memory is complete when this returns.
static double zb_sumsq_take(ZeroBackend *b) {
    float sq = 0;
    if (b->n_sumsq) cudaCheck(cudaMemcpyAsync(&sq, b->norm_dev, sizeof(float), cudaMemcpyDeviceToHost, b->stream));
    cudaCheck(cudaStreamSynchronize(b->stream));
    b->n_sumsq = 0;
    return sq;
}

// offload: a tile CPU-Adam finished, to the GPU while the next tile computes
typedef struct { ZeroBackend *b; const uint16_t *host; floatX *dev; } ZeroTileCopy;
static void zb_copy_tile(size_t off, size_t n, void *ctx) {
    ZeroTileCopy *t = (ZeroTileCopy *)ctx;
    cudaCheck(cudaMemcpyAsync(t->dev + off, t->host + off, n * sizeof(uint16_t), cudaMemcpyHostToDevice, t->b->stream));
}

// ----------------------------------------------------------------------------
// the partition's state, zero/infinity.h: planes in device or pinned memory, or on NVMe

static void zb_state_init(ZeroBackend *b, const ZeroInfinityPlan *q, void *const *mem, int separate_master, const TrainConfig *cfg,
                          void *nvme_buffers, int say) {
    zero_infinity_open(&b->state, q, mem, separate_master, cfg, nvme_buffers, b->comm, say);
    if (b->state.plane[ZS_PARAM] >= 0)
        for (int i = 0; i < 2; i++) cudaCheck(cudaEventCreateWithFlags(&b->unit_copied[i], cudaEventDisableTiming));
}

static void zb_state_read(ZeroBackend *b, int k, size_t off, size_t n, void *host) {
    ZeroInfinity *st = &b->state;
    if (st->mem[k]) zb_download(b, host, (char *)st->mem[k] + off * st->elem[k], n * st->elem[k]);
    else zero_infinity_rw(st, k, off, n, host, 0);
}
static void zb_state_write(ZeroBackend *b, int k, size_t off, size_t n, const void *host) {
    ZeroInfinity *st = &b->state;
    if (st->mem[k]) zb_upload(b, (char *)st->mem[k] + off * st->elem[k], host, n * st->elem[k]);
    else zero_infinity_rw(st, k, off, n, (void *)host, 1);
}
static void zb_state_write_floatX(ZeroBackend *b, size_t off, float *vals, size_t n) {
    uint16_t *bits = (uint16_t *)xmalloc(n * sizeof(uint16_t), "floatX staging");
    for (size_t i = 0; i < n; i++) bits[i] = float_to_floatX_bits(vals[i]);
    zb_state_write(b, ZS_PARAM, off, n, bits);
    free(bits);
}

// AdamW on one piece of a segment: on the GPU, Twin-Flow's device side too, or with
// offload CPU-Adam on the staged gradient, whose copies zb_sumsq_take waited for. Its
// floatX output goes into the NVMe shard's tile, or into pinned staging whose tiles are
// copied to the GPU as they finish.
static void zb_adamw_piece(void *ctx, const ZeroAdamSeg *s, size_t at, size_t n, float *master, float *m, float *v,
                           floatX *param, int param_in_tile) {
    ZeroBackend *b = (ZeroBackend *)ctx;
    AdamWParams ap = b->ap;
    ap.weight_decay = s->weight_decay;
    if (!b->offload || s->on_device) {
        adamw_gpu_step(master, s->grad + at, m, v, param, n, ap, b->stream);
        cudaCheckLaunch();
        return;
    }
    ap.fp16 = FLOATX_FP16;   // CPU-Adam's 16-bit gradients and output are floatX
    size_t h = s->shard_off - b->host_from + at;   // in the staging
    const zgrad_t *g = b->delayed ? s->grad + at : (const zgrad_t *)b->host_grad + h;
    if (param_in_tile || b->delayed) {   // DPU's parameters are uploaded when installed
        adamw_cpu_step_tiled(master, g, sizeof(zgrad_t) == 2, m, v, (uint16_t *)param, n, ap, 0, NULL, NULL);
        return;
    }
    ZeroTileCopy tc = {b, b->host_x + h, param};
    adamw_cpu_step_tiled(master, g, sizeof(zgrad_t) == 2, m, v, b->host_x + h, n, ap, ZERO_OFFLOAD_TILE, zb_copy_tile, &tc);
}

static void zb_adamw_partition(ZeroBackend *b, const ZeroAdamSeg *seg, int n_seg, AdamWParams ap) {
    b->ap = ap;
    if (b->state.open) { zero_infinity_adamw(&b->state, seg, n_seg, zb_adamw_piece, b); return; }
    // Twin-Flow: the device side's kernels are queued first, so they run while CPU-Adam
    // steps the host side; the tile copies queue behind them on the same stream
    for (int pass = 1; pass >= 0; pass--)
        for (int i = 0; i < n_seg; i++)
            if (seg[i].on_device == pass) zb_adamw_piece(b, &seg[i], 0, seg[i].n, seg[i].master, seg[i].m, seg[i].v, seg[i].param, 0);
    b->delayed = 0;
}

// DPU: the update reads the pinned staging this step's copies filled, and the next backward's copies
// land in the update's former buffer. The two trade places, so nothing is copied; host_from is 0, as
// Twin-Flow is refused with DPU.
static void zb_dpu_take_grad(ZeroBackend *b, ZeroAdamSeg *seg, int n_seg, zgrad_t **copy) {
    zgrad_t *filled = (zgrad_t *)b->host_grad;
    b->host_grad = *copy;
    *copy = filled;
    for (int s = 0; s < n_seg; s++) seg[s].grad = filled + seg[s].shard_off;
    b->delayed = 1;
}

// ----------------------------------------------------------------------------
// The lean optimizer step, --lean-step 1: the global norm and AdamW over the whole
// partition in one launch each, instead of one or two per segment. The norm always runs
// lean, so offload's CPU-Adam and the GPU's AdamW clip by the same norm. AdamW runs lean
// where the state is in device memory: decay_mask is then allocated.
//
// A run is a unit's slice, padding included; runs that continue each other are merged.
// The padding stays zero: zero gradients, zero state and no decay leave AdamW's output
// at +0. Only the norm's fp32 summation order changes, so it agrees to rounding.
static int zb_lean_init(ZeroBackend *b, const ZeroAdamSeg *runs, int n_runs, const ZeroAdamSeg *seg, int n_seg,
                        size_t shard_elems, uint32_t *decay_mask) {
    if (!b->lean || n_runs < 1) return 0;
    const int adamw = decay_mask != NULL;
    if (adamw && (b->offload || b->state.open || !b->state.mem[ZS_MASTER]))
        fatal("internal: the lean AdamW was planned (zero_placement) but the optimizer state is not in device memory");
    for (int i = 0; i < n_runs && adamw; i++)
        if (!runs[i].param) fatal("internal: the lean AdamW was planned (zero_placement) but the parameters are on NVMe");
    AdamWRun<zgrad_t> *r = (AdamWRun<zgrad_t> *)xmalloc(sizeof(*r) * n_runs, "optimizer runs");
    int n = 0;
    for (int i = 0; i < n_runs; i++) {
        const ZeroAdamSeg *s = &runs[i];
        floatX *param = adamw ? s->param : NULL;   // the norm reads only the gradients
        // both kernels rely on ZERO_ALIGN: 16-element multiples and aligned vectors
        CUDA_REQUIRE(s->shard_off % 16 == 0 && s->n % 16 == 0 && is_aligned16(s->grad) && (!param || is_aligned16(param)));
        AdamWRun<zgrad_t> *last = n ? &r[n - 1] : NULL;
        if (last && last->off + last->n == s->shard_off && last->grad + last->n == s->grad && (!param || last->param + last->n == param))
            last->n += s->n;
        else r[n++] = (AdamWRun<zgrad_t>){s->shard_off, s->n, s->grad, param};
    }
    cudaCheck(cudaMalloc(&b->runs, sizeof(*r) * n));
    cudaCheck(cudaMalloc(&b->norm_blocks_done, sizeof(unsigned int)));
    zb_upload(b, b->runs, r, sizeof(*r) * n);
    cudaCheck(cudaMemsetAsync(b->norm_blocks_done, 0, sizeof(unsigned int), b->stream));
    b->n_runs = n;
    b->norm_grid = global_norm_runs_grid<zgrad_t>(shard_elems);
    free(r);
    if (adamw) {   // one bit per element of the shard, set over the decayed segments
        size_t words = ceil_div(shard_elems, 32);
        uint32_t *mask = (uint32_t *)xcalloc(words * sizeof(uint32_t), "weight-decay mask");
        for (int i = 0; i < n_seg; i++)
            if (seg[i].weight_decay != 0.0f) adamw_decay_mask_set(mask, seg[i].shard_off, seg[i].shard_off + seg[i].n);
        b->decay_mask = decay_mask;
        zb_upload(b, b->decay_mask, mask, words * sizeof(uint32_t));
        b->adam_grid = adamw_runs_grid(shard_elems);
        free(mask);
    }
    if (b->say)
        printf("lean optimizer step (--lean-step 1): the global norm%s in one launch over the partition's %d run%s "
               "(%zu elements)%s\n", adamw ? " and AdamW each" : "", n, n > 1 ? "s" : "", shard_elems,
               adamw ? "" : ", AdamW on the host (CPU-Adam)");
    return LEAN_NORM | (adamw ? LEAN_ADAMW : 0);
}

// the partition's sum of squares into norm_dev, one launch
static void zb_lean_sumsq(ZeroBackend *b) {
    global_norm_squared_runs(b->norm_dev, b->runs, b->n_runs, b->norm_grid, b->norm_scratch, b->norm_blocks_done, b->stream);
    b->n_sumsq = 1;
}

// AdamW on the partition, one launch: ap's weight decay where the mask says
static void zb_lean_adamw(ZeroBackend *b, AdamWParams ap) {
    const ZeroInfinity *st = &b->state;   // the planes are in device memory
    adamw_gpu_runs((float *)st->mem[ZS_MASTER], (float *)st->mem[ZS_M], (float *)st->mem[ZS_V], b->decay_mask, b->runs,
                   b->n_runs, b->adam_grid, ap, b->stream);
    cudaCheckLaunch();
}

// Stage 3: a unit's slice of the parameter shard into the gather arena, from device or
// pinned memory, or from NVMe through a pinned buffer read one unit ahead. A buffer is
// read into again only once its copy to the GPU is done.
static void zb_read_ahead(ZeroBackend *b, const ZeroUnit *U) {
    if (!U) return;
    cudaCheck(cudaEventSynchronize(b->unit_copied[zero_infinity_param_next(&b->state)]));
    zero_infinity_read_ahead(&b->state, U->shard_off, U->shard);
}
static void zb_pass_begin(ZeroBackend *b, const ZeroPlan *p, const int *order, int n) {
    if (b->state.plane[ZS_PARAM] >= 0) zb_read_ahead(b, zero_infinity_pass_begin(&b->state, p, order, n));
}
static void zb_param_slice_to(ZeroBackend *b, floatX *dst, const floatX *src, size_t off, size_t n) {
    if (src) { zb_copy(b, dst, src, n * sizeof(floatX)); return; }
    int k;
    cudaCheck(cudaEventSynchronize(b->unit_copied[zero_infinity_param_next(&b->state)]));   // if it must be read now
    const void *host = zero_infinity_param_slice(&b->state, off, n, &k);
    cudaCheck(cudaMemcpyAsync(dst, host, n * sizeof(floatX), cudaMemcpyHostToDevice, b->stream));
    cudaCheck(cudaEventRecord(b->unit_copied[k], b->stream));
    zb_read_ahead(b, zero_infinity_next(&b->state, off));
}

static int zb_nvme_stats(ZeroBackend *b, ZeroNvmeStats *out) { return zero_infinity_take_stats(&b->state, out); }

static int zb_device_memory(ZeroBackend *b, size_t *used, size_t *total) {
    size_t free_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, total));
    *used = *total - free_b;
    return 1;
}

// ZeRO++: cuda/quantize.cuh's kernels on the compute stream, which comm/nodes.h's staged
// collectives synchronize with. Not yet run on a GPU.
static void zb_quantize(ZeroBackend *b, const void *x, int x_floatX, size_t n, int bits, uint8_t *out) {
    float *sums = b->quant_sums + (bits == 8 ? 0 : 2);
    if (x_floatX) zq_quantize_gpu((const floatX *)x, n, bits, out, sums, b->stream);
    else zq_quantize_gpu((const float *)x, n, bits, out, sums, b->stream);
}
static void zb_dequantize(ZeroBackend *b, const uint8_t *in, size_t n, int bits, void *y, int y_floatX, int add) {
    if (y_floatX) zq_dequantize_gpu(in, n, bits, (floatX *)y, add, b->stream);
    else zq_dequantize_gpu(in, n, bits, (float *)y, add, b->stream);
}
// On the reduce stream, where zb_accumulate_reduced reads: it waits for the sums, and the
// compute stream, which reuses them for the next unit, waits for it.
static void zb_scale_to_floatX(ZeroBackend *b, const float *x, floatX *y, size_t n, float s) {
    if (b->reduce_stream == b->stream) { zq_scale_gpu(x, y, n, s, b->stream); return; }
    cudaEvent_t sums_ready = comm_next_event(b->comm), scaled = comm_next_event(b->comm);
    cudaCheck(cudaEventRecord(sums_ready, b->stream));
    cudaCheck(cudaStreamWaitEvent(b->reduce_stream, sums_ready, 0));
    zq_scale_gpu(x, y, n, s, b->reduce_stream);
    cudaCheck(cudaEventRecord(scaled, b->reduce_stream));
    cudaCheck(cudaStreamWaitEvent(b->stream, scaled, 0));
}
static void zb_quant_sums(ZeroBackend *b, double out[4]) {
    float sums[4];
    cudaCheck(cudaMemcpyAsync(sums, b->quant_sums, sizeof(sums), cudaMemcpyDeviceToHost, b->stream));
    cudaCheck(cudaStreamSynchronize(b->stream));
    for (int i = 0; i < 4; i++) out[i] = sums[i];
    cudaCheck(cudaMemsetAsync(b->quant_sums, 0, sizeof(sums), b->stream));
}

// C++ takes a definition that differs from its prototype in zero/backend.h as an overload:
// an address taken without a type is then ambiguous, and the build stops.
static void *const zb_defined_as_declared[] = {
    (void *)&zb_init, (void *)&zb_destroy, (void *)&zb_alloc, (void *)&zb_free, (void *)&zb_fill, (void *)&zb_copy,
    (void *)&zb_upload, (void *)&zb_download, (void *)&zb_upload_floatX, (void *)&zb_round_floatX, (void *)&zb_accumulate_reduced,
    (void *)&zb_grad_slice_final, (void *)&zb_slot_acquire, (void *)&zb_slot_release, (void *)&zb_wait_collectives, (void *)&zb_sync,
    (void *)&zb_sumsq_add, (void *)&zb_sumsq_take, (void *)&zb_adamw_partition, (void *)&zb_lean_init, (void *)&zb_lean_sumsq,
    (void *)&zb_lean_adamw, (void *)&zb_state_init, (void *)&zb_state_read, (void *)&zb_state_write, (void *)&zb_state_write_floatX,
    (void *)&zb_pass_begin, (void *)&zb_param_slice_to, (void *)&zb_quantize, (void *)&zb_dequantize, (void *)&zb_scale_to_floatX,
    (void *)&zb_quant_sums, (void *)&zb_nvme_stats, (void *)&zb_device_memory, (void *)&zb_dpu_take_grad};
