// zero_device.cuh: zero.h's data-movement primitives for the GPU trainer
// (the calls are listed in zero_host.h, which implements them for the CPU).
//
// Streams. Every kernel of the trainer runs on one compute stream
// (comm->compute). With NCCL the collectives run on a communication stream
// that first waits for the compute stream (comm_nccl_begin), so a non-blocking
// collective overlaps the kernels that follow it. Reduced gradients land on
// the "reduce stream": the communication stream under NCCL (where the
// reduce-scatter ran: the fp32 accumulation and the offload copy queue right
// behind it without stalling the backward), the compute stream under the
// host-staged MPI backend (whose collectives are complete when they return).
// zb_wait_collectives makes the compute stream wait for the reduce stream.
//
// Gradient slots (stages 2-3): a slot's reduce-scatter reads it on the reduce
// stream while the next unit's backward computes; an event per slot, recorded
// after the reduction, is what the compute stream waits on before zeroing the
// slot for reuse.
//
// ZeRO-Offload (--offload): the fp32 master, m and v live in pinned host memory.
// Each unit's gradient slice is copied to a pinned staging buffer as soon as it
// is final (zb_grad_slice_final), CPU-Adam (adamw_cpu_step_tiled) updates the
// partition tile by tile and writes floatX parameters (bf16, or fp16 in the fp16
// build), and each finished tile is copied back to the GPU while the next one computes.
#pragma once
#include "cuda/common.cuh"
#include "cuda/global_norm.cuh"

#define ZPARAM_DT DT_FLOATX
// at one rank the reduce-scatter still runs (an NCCL copy): it orders the reduce stream after the backward
#define ZB_ONE_RANK_IN_PLACE 0

#define ZERO_OFFLOAD_TILE (1 << 20)

typedef struct {
    Comm *comm;
    cudaStream_t stream;         // the compute stream
    cudaStream_t reduce_stream;  // where reduced gradients land (see above)
    cudaEvent_t *slot_free;      // per gradient slot: its last reduction is done with it
    int n_slots;
    float *norm_dev, *norm_scratch;
    int n_sumsq;                 // segments summed into norm_dev this step
    int offload;
    void *host_grad;             // offload: pinned staging of this rank's gradient partition (zgrad_t)
    uint16_t *host_x;            // offload: pinned floatX parameters (bits), copied to the device tile by tile
} ZeroBackend;

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
    cudaCheck(cudaMemset(p, 0, bytes));
    return p;
}
static void zb_free(ZeroBackend *b, void *p, int where) {
    if (!p) return;
    cudaCheck(where == ZMEM_HOST ? cudaFreeHost(p) : cudaFree(p));
}

// floatX working parameters, an fp32 master in the optimizer partition
static int zb_separate_master(const TrainConfig *cfg) { return 1; }

// staging_grad / staging_params: ZeRO-Offload's pinned staging (zero.h's buffer
// table allocates it; NULL without offload); the backend owns it from here
static void zb_init(ZeroBackend *b, Comm *comm, const TrainConfig *cfg, int n_slots, void *staging_grad, void *staging_params) {
    memset(b, 0, sizeof(*b));
    b->comm = comm;
    b->stream = comm->compute;
    b->reduce_stream = comm->backend == COMM_BACKEND_NCCL ? comm->stream : comm->compute;
    b->n_slots = n_slots;
    b->slot_free = (cudaEvent_t *)xmalloc(sizeof(cudaEvent_t) * n_slots, "slot events");
    for (int i = 0; i < n_slots; i++) cudaCheck(cudaEventCreateWithFlags(&b->slot_free[i], cudaEventDisableTiming));
    cudaCheck(cudaMalloc(&b->norm_dev, sizeof(float)));
    cudaCheck(cudaMalloc(&b->norm_scratch, global_norm_scratch_floats() * sizeof(float)));
    b->offload = staging_grad != NULL;
    b->host_grad = staging_grad;
    b->host_x = (uint16_t *)staging_params;
}
static void zb_destroy(ZeroBackend *b) {
    cudaCheck(cudaStreamSynchronize(b->stream));
    for (int i = 0; i < b->n_slots; i++) cudaCheck(cudaEventDestroy(b->slot_free[i]));
    free(b->slot_free);
    cudaCheck(cudaFree(b->norm_dev)); cudaCheck(cudaFree(b->norm_scratch));
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

// the kernels store floatX themselves
static void zb_grads_stored(ZeroBackend *b, floatX *g, size_t n) {}

// acc (fp32) = (first ? 0 : acc) + src (floatX): the fp32 accumulation of a reduced gradient slice
__global__ static void zb_accumulate_kernel(float *acc, const floatX *src, size_t n, int first) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        acc[i] = (first ? 0.0f : acc[i]) + bf2f(src[i]);
}
// queued on the reduce stream right behind the reduce-scatter that fills src
static void zb_accumulate_reduced(ZeroBackend *b, CommRequest *r, float *acc, const floatX *src, size_t n, int first) {
    int grid = grid_for(n, 256);
    zb_accumulate_kernel<<<grid < 4096 ? grid : 4096, 256, 0, b->reduce_stream>>>(acc, src, n, first);
    cudaCheckLaunch();
    r->active = 0;   // ordered on the reduce stream; the step joins it (zb_wait_collectives)
}

// ZeRO-Offload: the final slice to pinned host memory now, behind its reduction
static void zb_grad_slice_final(ZeroBackend *b, size_t shard_off, const zgrad_t *slice, size_t n) {
    if (!b->offload) return;
    cudaCheck(cudaMemcpyAsync((zgrad_t *)b->host_grad + shard_off, slice, n * sizeof(zgrad_t), cudaMemcpyDeviceToHost,
                              b->reduce_stream));
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
// the sum on the host; the compute stream (and with it every offload copy it waited for) is idle after
static double zb_sumsq_take(ZeroBackend *b) {
    float sq = 0;
    if (b->n_sumsq) cudaCheck(cudaMemcpyAsync(&sq, b->norm_dev, sizeof(float), cudaMemcpyDeviceToHost, b->stream));
    cudaCheck(cudaStreamSynchronize(b->stream));
    b->n_sumsq = 0;
    return sq;
}

// offload: CPU-Adam writes a tile of floatX parameters, this copies it to the GPU
// while the next tile computes
typedef struct { ZeroBackend *b; const uint16_t *host; floatX *dev; } ZeroTileCopy;
static void zb_copy_tile(size_t off, size_t n, void *ctx) {
    ZeroTileCopy *t = (ZeroTileCopy *)ctx;
    cudaCheck(cudaMemcpyAsync(t->dev + off, t->host + off, n * sizeof(uint16_t), cudaMemcpyHostToDevice, t->b->stream));
}

// AdamW on n elements of this rank's partition (shard offset so): the fp32
// master, m and v updated, the floatX working parameters written to param_out.
// Offload: on the host from the staged gradient (zb_sumsq_take left the streams
// idle, so every staging copy is complete).
static void zb_adamw(ZeroBackend *b, size_t so, float *master, const zgrad_t *grad, float *m, float *v, floatX *param_out,
                     size_t n, AdamWParams ap) {
    if (b->offload) {
        ZeroTileCopy tc = {b, b->host_x + so, param_out};
        ap.fp16 = FLOATX_FP16;   // CPU-Adam's 16-bit gradients and output are floatX
        adamw_cpu_step_tiled(master, (const zgrad_t *)b->host_grad + so, sizeof(zgrad_t) == 2, m, v, b->host_x + so, n, ap,
                             ZERO_OFFLOAD_TILE, zb_copy_tile, &tc);
        return;
    }
    adamw_gpu_step(master, grad, m, v, param_out, n, ap, b->stream);
    cudaCheckLaunch();
}

static int zb_device_memory(ZeroBackend *b, size_t *used, size_t *total) {
    size_t free_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, total));
    *used = *total - free_b;
    return 1;
}
