// zero.h: ZeRO (Rajbhandari et al., 2020), stages 0-3, selected at compile
// time with ZERO_STAGE (make ... ZERO=k). Shared by both trainers.
//
// The paper's three model states, per parameter, and who holds them:
//
//   stage 0  plain data parallel: every rank holds everything; gradients are
//            all-reduced at the accumulation boundary.
//   stage 1  P_os: optimizer state (m, v; the fp32 master on the GPU) is
//            partitioned. Full gradients accumulate locally; at the boundary
//            they are reduce-scattered so each rank holds the averaged
//            gradient of its own partition, updates it, and the updated
//            parameters are all-gathered.
//   stage 2  P_os+g: gradients are partitioned too. Each unit's gradient is
//            reduce-scattered as soon as its backward finishes, on every
//            micro-step, and each rank accumulates only its own partition.
//   stage 3  P_os+g+p: parameters are partitioned too. A unit's parameters
//            are all-gathered just before its forward and again before its
//            backward, and released right after use; the next unit's gather
//            is prefetched while the current one computes. No all-gather of
//            the whole model after the step.
//
// THE PLAN (zero_plan_build) is computed once and is pure arithmetic:
//   - units: the embedding, each transformer layer, the final norm/head (model.h)
//   - each unit is padded to a multiple of P * ZERO_ALIGN elements and split
//     into P equal slices; rank r owns slice r of every unit (FSDP-style
//     per-unit flat parameters: a tensor may straddle two ranks' slices)
//   - the full buffer (stages 0-2) lays the padded units end to end; a rank's
//     shard buffer lays its slices end to end
//   - optimizer segments: (tensor ∩ slice) runs with their weight-decay flag
//   - stage 3: the fetch order of units in a pass, which units are
//     persistent (at most stage3_param_persistence_threshold elements: never
//     partitioned in use, like DeepSpeed's persistent parameters), the cap on
//     live gathered elements and the size of the gather arena
//   P is the world size in stages 1-3 and 1 in stage 0 (nothing is partitioned).
//
// The trainer drives a step through these calls, in this order:
//   zero_step_begin                           once per optimizer step
//   per micro-step:
//     zero_begin_pass                         the fetch order of this pass
//     zero_fetch_params / zero_release_params around each unit's forward and backward
//     zero_grads_begin / zero_grads_end       around each unit's backward
//     zero_end_pass, zero_micro_step_end
//   zero_step_end                             reduce, clip, AdamW, re-gather
// Each call is a few `#if ZERO_STAGE` blocks that follow the paper's data
// movement; the same code serves host buffers (train_gpt.c: fp32, MPI) and
// device buffers (train_gpt.cu: bf16 with an fp32 master, NCCL or MPI).
#pragma once
#include "comm.h"
#include "model.h"
#include "adamw.cuh"

#ifndef ZERO_STAGE
#define ZERO_STAGE 0
#endif
#if ZERO_STAGE < 0 || ZERO_STAGE > 3
#error "ZERO_STAGE must be 0, 1, 2 or 3"
#endif
#ifndef ZERO_POISON
#define ZERO_POISON 0   // debug build: fill released gather buffers with NaN
#endif

#define ZERO_ALIGN 16   // elements: every slice starts on a 64-byte boundary (fp32)

// ----------------------------------------------------------------------------
// the plan

typedef struct {
    size_t numel;       // real elements of the unit
    size_t padded;      // numel rounded up to a multiple of P * ZERO_ALIGN
    size_t shard;       // padded / P: the slice every rank owns
    size_t full_off;    // unit's offset in the full padded buffer
    size_t shard_off;   // this rank's slice's offset in the shard buffers
    size_t resident_off;// stage 3, persistent units: offset in the resident buffer
    int persistent;     // stage 3: small enough to stay gathered
} ZeroUnit;

typedef struct {
    int unit;
    size_t unit_off;    // first element, as an offset inside the padded unit
    size_t n;
    int decay;
} ZeroSegment;

typedef struct {
    int stage, world, rank;
    int P, part;                // optimizer partitions and this rank's partition
    int n_units;
    ZeroUnit *u;
    size_t num_params;          // Ψ
    size_t full_elems;          // Σ padded
    size_t shard_elems;         // Σ shard
    size_t max_padded, max_shard;
    size_t max_slot;            // stages 2-3: the largest unit that uses the alternating gradient slots
    ZeroSegment *seg;
    int n_seg;
    // stage 3
    int tied;                   // the head re-uses the embedding unit (gpt2)
    size_t resident_elems;      // Σ padded of persistent units
    size_t live_cap;            // most gathered elements alive at once
    size_t arena_elems;         // live_cap + one unit of slack for the ring's wrap
    int fetch_fwd[1030], n_fetch_fwd;       // fetch order of a forward-only pass
    int fetch_train[2060], n_fetch_train;   // of a forward + backward pass
} ZeroPlan;

static size_t zero_padded(size_t numel, int P) {
    size_t q = (size_t)P * ZERO_ALIGN;
    return (numel + q - 1) / q * q;
}

static void zero_plan_build(ZeroPlan *p, const ModelLayout *L, int world, int rank, const TrainConfig *cfg) {
    memset(p, 0, sizeof(*p));
    p->stage = ZERO_STAGE;
    p->world = world; p->rank = rank;
    p->P = ZERO_STAGE >= 1 ? world : 1;
    p->part = ZERO_STAGE >= 1 ? rank : 0;
    p->n_units = L->n_units;
    if (p->n_units > 1024) fatal("zero: at most 1022 layers");
    p->u = (ZeroUnit *)xcalloc(sizeof(ZeroUnit) * p->n_units, "zero plan");
    p->tied = L->cfg.arch == ARCH_GPT2;
    size_t full = 0, shard = 0, resident = 0;
    for (int i = 0; i < p->n_units; i++) {
        ZeroUnit *u = &p->u[i];
        u->numel = L->units[i].numel;
        u->padded = zero_padded(u->numel, p->P);
        u->shard = u->padded / p->P;
        u->full_off = full; full += u->padded;
        u->shard_off = shard; shard += u->shard;
        u->persistent = ZERO_STAGE == 3 && (long long)u->numel <= cfg->persistence_threshold;
        if (u->persistent) { u->resident_off = resident; resident += u->padded; }
        if (u->padded > p->max_padded) p->max_padded = u->padded;
        if (u->shard > p->max_shard) p->max_shard = u->shard;
    }
    p->num_params = L->num_params;
    p->full_elems = full; p->shard_elems = shard; p->resident_elems = resident;

    // optimizer segments: each tensor clipped to this rank's slice of its unit
    int cap = 0;
    for (int i = 0; i < p->n_units; i++) cap += L->units[i].n_tensors;
    p->seg = (ZeroSegment *)xcalloc(sizeof(ZeroSegment) * cap, "zero segments");
    for (int i = 0; i < p->n_units; i++) {
        size_t lo = (size_t)p->part * p->u[i].shard, hi = lo + p->u[i].shard;
        for (int k = 0; k < L->units[i].n_tensors; k++) {
            const TensorSpec *t = &L->units[i].t[k];
            size_t a = t->offset > lo ? t->offset : lo, b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
            if (a >= b) continue;
            p->seg[p->n_seg++] = (ZeroSegment){i, a, b - a, t->decay};
        }
    }

    // stage 3: the order units are fetched in (persistent ones never are).
    // forward: embedding, layers, final (+ the embedding again for a tied head);
    // backward: the final unit (and tied embedding) are still gathered from the
    // forward's head, the layers come in reverse, and the embedding's backward
    // needs no parameters (only token ids), so it is not fetched again.
    int E = model_unit_embed(L), F = model_unit_final(L);
#define PUSH(arr, n, unit) do { if (!p->u[unit].persistent) arr[n++] = unit; } while (0)
    PUSH(p->fetch_fwd, p->n_fetch_fwd, E);
    for (int l = 0; l < L->cfg.n_layer; l++) PUSH(p->fetch_fwd, p->n_fetch_fwd, model_unit_layer(L, l));
    PUSH(p->fetch_fwd, p->n_fetch_fwd, F);
    if (p->tied) PUSH(p->fetch_fwd, p->n_fetch_fwd, E);
    memcpy(p->fetch_train, p->fetch_fwd, sizeof(int) * p->n_fetch_fwd);
    p->n_fetch_train = p->n_fetch_fwd;
    for (int l = L->cfg.n_layer - 1; l >= 0; l--) PUSH(p->fetch_train, p->n_fetch_train, model_unit_layer(L, l));
#undef PUSH
    // Stage 3 sizing from the fetch schedule: at the i-th fetch the unit itself
    // must be live (and the final unit too when the tied head fetches the
    // embedding); a prefetch adds the next unit of the order.
    if (ZERO_STAGE == 3) {
        size_t need = 0, peak = 0, max_np = 0;
        for (int i = 0; i < p->n_fetch_train; i++) {
            int u = p->fetch_train[i];
            size_t req = p->u[u].padded;
            if (i > 0 && u == E && p->tied && !p->u[F].persistent) req += p->u[F].padded;  // the head: final + embedding
            size_t next = cfg->prefetch && i + 1 < p->n_fetch_train ? p->u[p->fetch_train[i + 1]].padded : 0;
            if (req > need) need = req;
            if (req + next > peak) peak = req + next;
            if (p->u[u].padded > max_np) max_np = p->u[u].padded;
        }
        if ((long long)need > cfg->max_live_elems)
            fatal("--max-live %lld is too small: stage 3 must hold %zu gathered elements at once (the largest unit, or the head's units)",
                  cfg->max_live_elems, need);
        p->live_cap = (long long)peak < cfg->max_live_elems ? peak : (size_t)cfg->max_live_elems;
        // FIFO release: one unit of slack guarantees a unit fits whenever the live count allows it
        p->arena_elems = p->live_cap + max_np;
    }
    // stages 2-3: gradient slots for one unit's full gradient (the tied embedding has its own)
    for (int i = 0; i < p->n_units; i++)
        if (!(i == E && p->tied) && p->u[i].padded > p->max_slot) p->max_slot = p->u[i].padded;
}

static void zero_plan_free(ZeroPlan *p) { free(p->u); free(p->seg); }

// ----------------------------------------------------------------------------
// where the model states live
//
//                        CPU trainer (fp32)            GPU trainer (bf16 + fp32 master)
//   zparam_t             float                         __nv_bfloat16
//   params               full or shard; the master     full or shard, bf16 working copy
//   master               (params are the master)       fp32 partition (device, or pinned host: offload)
//   grads (stages 0-1)   full, fp32                    full, bf16 (micro-steps add in bf16, as llm.c)
//   grad_shard (2-3)     fp32 accumulator              fp32 accumulator of the reduced bf16 slices
//   opt_m, opt_v         fp32 partition                fp32 partition (device, or pinned host: offload)

#ifdef __CUDACC__
#define ZERO_DEVICE 1
#include "cuda/common.cuh"
#include "cuda/global_norm.cuh"
typedef __nv_bfloat16 zparam_t;
#define ZPARAM_DT DT_BF16
#else
#define ZERO_DEVICE 0
typedef float zparam_t;
#define ZPARAM_DT DT_F32
#endif

// the reduced gradient of a partition: the full buffer's slice (stages 0-1) or the fp32 shard (2-3)
#if ZERO_STAGE <= 1
typedef zparam_t zgrad_t;
#else
typedef float zgrad_t;
#endif

enum { MEM_PARAMS = 0, MEM_GRADS, MEM_OPTIM, MEM_GATHER, MEM_GRAD_BUCKETS, MEM_ACTIVATIONS, N_MEM };
static const char *MEM_NAMES[N_MEM] = {"params", "grads", "optimizer", "gathered_params", "grad_buckets", "activations"};

typedef struct {
    ZeroPlan plan;
    Comm *comm;
    const ModelLayout *layout;
    const TrainConfig *cfg;
    size_t mem[N_MEM];          // bytes allocated on the device (the host, for the CPU trainer), by kind
    size_t host_mem[N_MEM];     // GPU trainer with offload: pinned host bytes, by kind
    int offload;                // optimizer state and update on the CPU (GPU trainer)
    int offload_param;          // stage 3: the bf16 parameter shard in pinned host memory (GPU trainer)

    // model states (one allocation each)
    zparam_t *params;           // stages 0-2: full padded parameters; stage 3: this rank's shard
    float *master;              // GPU: fp32 master of this rank's partition; CPU: NULL (params are the master)
    zparam_t *resident;         // stage 3: full copies of the persistent units
    zparam_t *grads;            // stages 0-1: full padded gradients (accumulated over micro-steps)
    float *grad_shard;          // stages 2-3: this rank's gradient partition, accumulated in fp32
    float *opt_m, *opt_v;       // AdamW moments of this rank's partition (everything in stage 0)

    // working buffers
    zparam_t *arena;            // stage 3: gathered units (a FIFO ring)
    zparam_t *grad_slots;       // stages 2-3: full gradients of units in backward: [tied embedding][slot 0][slot 1]
    zparam_t *rs_scratch;       // stages 2-3: where a unit's reduced slice lands before it is accumulated
    int slot_next;

    // stage 3 ring state
    struct { int unit; size_t off, n; CommRequest req; } ring[8];
    int ring_head, ring_count;  // FIFO of gathered units
    size_t live, peak_live;
    const int *order; int n_order, cursor;   // the fetch order of the pass in progress
    int micro;                  // micro-step index within the step
#if ZERO_DEVICE
    cudaStream_t stream;        // the compute stream (comm->compute)
    cudaEvent_t slot_free[3];   // a gradient slot's reduce-scatter has finished with it
    float *norm_dev, *norm_scratch;
    void *host_grad;            // offload: pinned staging of the gradient partition
    uint16_t *host_bf16;        // offload: pinned bf16 parameters, copied to the device tile by tile
#endif
} Zero;

// ----------------------------------------------------------------------------
// memory primitives: the only place where host and device differ in kind

static void *zero_alloc_bytes(Zero *z, int kind, size_t bytes) {
    z->mem[kind] += bytes;
#if ZERO_DEVICE
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 16);
    if (e != cudaSuccess) fatal("out of GPU memory allocating %zu bytes for %s (%s)", bytes, MEM_NAMES[kind], cudaGetErrorString(e));
    cudaCheck(cudaMemset(p, 0, bytes));
    return p;
#else
    return xcalloc(bytes, MEM_NAMES[kind]);
#endif
}
static float *zero_alloc(Zero *z, int kind, size_t elems) { return (float *)zero_alloc_bytes(z, kind, elems * sizeof(float)); }

// host memory for the model states in the CPU trainer; pinned host memory for offload on the GPU
static void *zero_alloc_host(Zero *z, int kind, size_t bytes) {
#if ZERO_DEVICE
    z->host_mem[kind] += bytes;
    void *p = NULL;
    cudaCheck(cudaMallocHost(&p, bytes ? bytes : 16));
    memset(p, 0, bytes);
    return p;
#else
    return zero_alloc_bytes(z, kind, bytes);
#endif
}

static void zero_free_ptr(void *p, int host) {
    if (!p) return;
#if ZERO_DEVICE
    if (host) cudaFreeHost(p); else cudaFree(p);
#else
    (void)host;
    free(p);
#endif
}

static void zero_memset(Zero *z, void *p, int byte, size_t bytes) {
#if ZERO_DEVICE
    cudaCheck(cudaMemsetAsync(p, byte, bytes, z->stream));
#else
    (void)z;
    memset(p, byte, bytes);
#endif
}

// copies between any two of the trainer's buffers (host or device)
static void zero_copy(Zero *z, void *dst, const void *src, size_t bytes) {
#if ZERO_DEVICE
    cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, z->stream));
#else
    (void)z;
    memcpy(dst, src, bytes);
#endif
}

#if ZERO_DEVICE
// acc (fp32) = (first ? 0 : acc) + src (bf16): the fp32 accumulation of a reduced gradient slice
__global__ static void zero_accumulate_kernel(float *acc, const __nv_bfloat16 *src, size_t n, int first) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        acc[i] = (first ? 0.0f : acc[i]) + __bfloat162float(src[i]);
}
static void zero_accumulate(Zero *z, float *acc, const zparam_t *src, size_t n, int first, cudaStream_t s) {
    (void)z;
    int grid = (int)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
    zero_accumulate_kernel<<<grid > 0 ? grid : 1, 256, 0, s>>>(acc, src, n, first);
    cudaCheck(cudaGetLastError());
}
static void zero_sumsq(Zero *z, const __nv_bfloat16 *g, size_t n, int acc) {
    global_norm_squared(z->norm_dev, g, n, z->norm_scratch, acc, z->stream);
}
static void zero_sumsq(Zero *z, const float *g, size_t n, int acc) {
    global_norm_squared_f32(z->norm_dev, g, n, z->norm_scratch, acc, z->stream);
}
// the compute stream waits for everything given to the communication stream
static void zero_join_comm(Zero *z) {
    if (z->comm->backend != COMM_BACKEND_NCCL) return;
    cudaEvent_t e = comm_next_event(z->comm);
    cudaCheck(cudaEventRecord(e, z->comm->stream));
    cudaCheck(cudaStreamWaitEvent(z->stream, e, 0));
}
#else
static void zero_accumulate(Zero *z, float *acc, const zparam_t *src, size_t n, int first) {
    (void)z;
    if (first) memcpy(acc, src, n * sizeof(float));
    else for (size_t i = 0; i < n; i++) acc[i] += src[i];
}
#endif

static void zero_init(Zero *z, const ModelLayout *L, const TrainConfig *cfg, Comm *comm) {
    memset(z, 0, sizeof(*z));
    z->comm = comm; z->layout = L; z->cfg = cfg;
    zero_plan_build(&z->plan, L, comm->world, comm->rank, cfg);
    const ZeroPlan *p = &z->plan;
    size_t ps = sizeof(zparam_t);
#if ZERO_DEVICE
    z->stream = comm->compute;
    z->offload = cfg->offload;
    for (int i = 0; i < 3; i++) cudaCheck(cudaEventCreateWithFlags(&z->slot_free[i], cudaEventDisableTiming));
    cudaCheck(cudaMalloc(&z->norm_dev, sizeof(float)));
    cudaCheck(cudaMalloc(&z->norm_scratch, global_norm_scratch_floats() * sizeof(float)));
    z->offload_param = cfg->offload_param;
#endif
#if ZERO_STAGE <= 2
    z->params = (zparam_t *)zero_alloc_bytes(z, MEM_PARAMS, p->full_elems * ps);
#else
    // ZeRO-Infinity's offload_param: the parameter shard in pinned host memory, each unit's slice
    // copied to the GPU just before its gather (zero_start_gather)
    z->params = (zparam_t *)(z->offload_param ? zero_alloc_host(z, MEM_PARAMS, p->shard_elems * ps)
                                              : zero_alloc_bytes(z, MEM_PARAMS, p->shard_elems * ps));
    if (p->resident_elems) z->resident = (zparam_t *)zero_alloc_bytes(z, MEM_GATHER, p->resident_elems * ps);
    z->arena = (zparam_t *)zero_alloc_bytes(z, MEM_GATHER, p->arena_elems * ps);
#endif
#if ZERO_STAGE <= 1
    z->grads = (zparam_t *)zero_alloc_bytes(z, MEM_GRADS, p->full_elems * ps);
#else
    z->grad_shard = (float *)zero_alloc_bytes(z, MEM_GRADS, p->shard_elems * sizeof(float));
    size_t tied = p->tied ? p->u[0].padded : 0;
    z->grad_slots = (zparam_t *)zero_alloc_bytes(z, MEM_GRAD_BUCKETS, (tied + 2 * p->max_slot) * ps);
    z->rs_scratch = (zparam_t *)zero_alloc_bytes(z, MEM_GRAD_BUCKETS, p->max_shard * ps);
#endif
    // the optimizer partition: m and v (and the fp32 master on the GPU), on the
    // device, or in pinned host memory with offload (ZeRO-Offload)
    size_t ob = p->shard_elems * sizeof(float);
#define OPT_ALLOC(bytes) (z->offload ? zero_alloc_host(z, MEM_OPTIM, bytes) : zero_alloc_bytes(z, MEM_OPTIM, bytes))
#if ZERO_DEVICE
    z->master = (float *)OPT_ALLOC(ob);
    if (z->offload) {
        z->host_grad = zero_alloc_host(z, MEM_GRAD_BUCKETS, ob);
        z->host_bf16 = (uint16_t *)zero_alloc_host(z, MEM_GRAD_BUCKETS, p->shard_elems * 2);
    }
#endif
    z->opt_m = (float *)OPT_ALLOC(ob);
    z->opt_v = (float *)OPT_ALLOC(ob);
#undef OPT_ALLOC
}

static void zero_free(Zero *z) {
    int h = z->offload;
    zero_free_ptr(z->params, z->offload_param); zero_free_ptr(z->resident, 0); zero_free_ptr(z->grads, 0); zero_free_ptr(z->grad_shard, 0);
    zero_free_ptr(z->master, h); zero_free_ptr(z->opt_m, h); zero_free_ptr(z->opt_v, h);
    zero_free_ptr(z->arena, 0); zero_free_ptr(z->grad_slots, 0); zero_free_ptr(z->rs_scratch, 0);
#if ZERO_DEVICE
    zero_free_ptr(z->host_grad, 1); zero_free_ptr(z->host_bf16, 1);
    cudaFree(z->norm_dev); cudaFree(z->norm_scratch);
#endif
    zero_plan_free(&z->plan);
}

// this rank's slice of unit u in the working parameters, and in the reduced gradient
static zparam_t *zero_param_slice(Zero *z, int u) {
    const ZeroUnit *U = &z->plan.u[u];
#if ZERO_STAGE <= 2
    return z->params + U->full_off + (size_t)z->plan.part * U->shard;
#else
    return z->params + U->shard_off;
#endif
}
static zgrad_t *zero_grad_slice(Zero *z, int u) {
    const ZeroUnit *U = &z->plan.u[u];
#if ZERO_STAGE <= 1
    return z->grads + U->full_off + (size_t)z->plan.part * U->shard;
#else
    return z->grad_shard + U->shard_off;
#endif
}
// the fp32 master of this rank's slice of unit u
static float *zero_master_slice(Zero *z, int u) {
#if ZERO_DEVICE
    return z->master + z->plan.u[u].shard_off;
#else
    return zero_param_slice(z, u);
#endif
}

// ----------------------------------------------------------------------------
// loading and saving full parameters (flat, unpadded fp32: the model file)

#if ZERO_DEVICE
static void zero_to_bf16(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = float_to_bf16_bits(src[i]);
}
#endif

// every rank takes what it holds from the full flat parameters (host fp32)
static void zero_load_params(Zero *z, const float *flat) {
    const ZeroPlan *p = &z->plan;
#if ZERO_DEVICE
    cudaCheck(cudaStreamSynchronize(z->stream));   // nothing in flight reads or writes the parameters
#endif
    float *slice = (float *)xmalloc(p->max_padded * sizeof(float), "parameter staging");
#if ZERO_DEVICE
    uint16_t *half = (uint16_t *)xmalloc(p->max_padded * sizeof(uint16_t), "parameter staging");
#endif
    for (int i = 0; i < p->n_units; i++) {
        const ZeroUnit *U = &p->u[i];
        const float *src = flat + z->layout->units[i].flat_offset;
        // the padded unit, and this rank's slice of it
        memset(slice, 0, U->padded * sizeof(float));
        memcpy(slice, src, U->numel * sizeof(float));
        const float *mine = slice + (size_t)p->part * U->shard;
        (void)mine;
#if !ZERO_DEVICE
#if ZERO_STAGE <= 2
        memcpy(z->params + U->full_off, slice, U->padded * sizeof(float));
#else
        memcpy(z->params + U->shard_off, mine, U->shard * sizeof(float));
        if (U->persistent) memcpy(z->resident + U->resident_off, slice, U->padded * sizeof(float));
#endif
#else
        cudaCheck(cudaMemcpy(zero_master_slice(z, i), mine, U->shard * sizeof(float), cudaMemcpyDefault));
        zero_to_bf16(half, slice, U->padded);   // the working copy is the master rounded to nearest even
#if ZERO_STAGE <= 2
        cudaCheck(cudaMemcpy(z->params + U->full_off, half, U->padded * 2, cudaMemcpyHostToDevice));
#else
        cudaCheck(cudaMemcpy(z->params + U->shard_off, half + (size_t)p->part * U->shard, U->shard * 2, cudaMemcpyDefault));
        if (U->persistent) cudaCheck(cudaMemcpy(z->resident + U->resident_off, half, U->padded * 2, cudaMemcpyHostToDevice));
#endif
#endif
    }
    free(slice);
#if ZERO_DEVICE
    free(half);
    cudaCheck(cudaDeviceSynchronize());   // the copies are complete before the compute stream reads them
#endif
}

// Unit u's full fp32 master parameters into host memory dst (padded size).
// Collective whenever the master is partitioned: every rank must call it (this
// is how rank 0 writes the model file under ZeRO 1-3: DeepSpeed's
// stage3_gather_16bit_weights_on_model_save, but of the fp32 master).
static void zero_gather_unit(Zero *z, int u, float *dst) {
    const ZeroUnit *U = &z->plan.u[u];
#if !ZERO_DEVICE
#if ZERO_STAGE <= 2
    memcpy(dst, z->params + U->full_off, U->padded * sizeof(float));
#else
    comm_all_gather(z->comm, z->params + U->shard_off, dst, U->shard, DT_F32);
#endif
#else
    // the compute stream may still be running the AdamW that wrote the master
    cudaCheck(cudaStreamSynchronize(z->stream));
    if (z->plan.P == 1) {
        cudaCheck(cudaMemcpy(dst, zero_master_slice(z, u), U->padded * sizeof(float), cudaMemcpyDefault));
        return;
    }
    float *tmp;
    cudaCheck(cudaMalloc(&tmp, U->padded * sizeof(float)));
    cudaCheck(cudaMemcpyAsync(tmp + (size_t)z->plan.part * U->shard, zero_master_slice(z, u), U->shard * sizeof(float),
                              cudaMemcpyDefault, z->stream));
    comm_all_gather(z->comm, tmp + (size_t)z->plan.part * U->shard, tmp, U->shard, DT_F32);   // ordered after the copy
    cudaCheck(cudaMemcpyAsync(dst, tmp, U->padded * sizeof(float), cudaMemcpyDeviceToHost, z->stream));
    cudaCheck(cudaStreamSynchronize(z->stream));
    cudaCheck(cudaFree(tmp));
#endif
}

// The optimizer partition (m, v) to and from host arrays of shard_elems floats (checkpoints).
static void zero_optim_download(Zero *z, float *m, float *v) {
    size_t b = z->plan.shard_elems * sizeof(float);
#if ZERO_DEVICE
    cudaCheck(cudaStreamSynchronize(z->stream));
    cudaCheck(cudaMemcpy(m, z->opt_m, b, cudaMemcpyDefault));
    cudaCheck(cudaMemcpy(v, z->opt_v, b, cudaMemcpyDefault));
#else
    memcpy(m, z->opt_m, b); memcpy(v, z->opt_v, b);
#endif
}
static void zero_optim_upload(Zero *z, const float *m, const float *v) {
    size_t b = z->plan.shard_elems * sizeof(float);
#if ZERO_DEVICE
    cudaCheck(cudaStreamSynchronize(z->stream));
    cudaCheck(cudaMemcpy(z->opt_m, m, b, cudaMemcpyDefault));
    cudaCheck(cudaMemcpy(z->opt_v, v, b, cudaMemcpyDefault));
    cudaCheck(cudaDeviceSynchronize());
#else
    memcpy(z->opt_m, m, b); memcpy(z->opt_v, v, b);
#endif
}

// ----------------------------------------------------------------------------
// stage 3: fetching units into the gather arena (a FIFO ring)
//
// Units are released in the order they were gathered, so the arena is a ring.
// It holds live_cap elements plus one unit of slack: with FIFO release that
// slack guarantees a unit fits whenever the live count allows it.

static int zero_ring_alloc(Zero *z, size_t n, size_t *off) {
    size_t cap = z->plan.arena_elems;
    if (z->ring_count == 0) { *off = 0; return n <= cap; }
    int first = z->ring_head, last = (z->ring_head + z->ring_count - 1) % 8;
    size_t t = z->ring[first].off, h = z->ring[last].off + z->ring[last].n;
    if (z->ring[last].off >= t) {                 // not wrapped: free is [h, cap) and [0, t)
        if (cap - h >= n) { *off = h; return 1; }
        if (t >= n) { *off = 0; return 1; }
        return 0;
    }
    if (t - h >= n) { *off = h; return 1; }       // wrapped: free is [h, t)
    return 0;
}

// start gathering unit u (non-blocking); returns 0 if it does not fit now
static int zero_start_gather(Zero *z, int u, int must) {
    const ZeroUnit *U = &z->plan.u[u];
    size_t off;
    if (z->ring_count == 8 || z->live + U->padded > z->plan.live_cap || !zero_ring_alloc(z, U->padded, &off)) {
        if (must) fatal("zero stage 3: unit %d (%zu elements) does not fit in the gather arena (live %zu of %zu): raise --max-live",
                        u, U->padded, z->live, z->plan.live_cap);
        return 0;
    }
    int slot = (z->ring_head + z->ring_count) % 8;
    z->ring[slot].unit = u; z->ring[slot].off = off; z->ring[slot].n = U->padded;
    // the paper's "broadcast of the parameters of a partition": an all-gather of every rank's slice
    const zparam_t *send = z->params + U->shard_off;
#if ZERO_DEVICE
    if (z->offload_param) {   // this rank's slice from host memory to its place in the arena, then in place
        zparam_t *mine = z->arena + off + (size_t)z->plan.part * U->shard;
        zero_copy(z, mine, send, U->shard * sizeof(zparam_t));
        send = mine;
    }
#endif
    z->ring[slot].req = comm_iall_gather(z->comm, send, z->arena + off, U->shard, ZPARAM_DT);
    z->ring_count++;
    z->live += U->padded;
    if (z->live > z->peak_live) z->peak_live = z->live;
    return 1;
}

static int zero_ring_find(Zero *z, int u) {
    for (int k = 0; k < z->ring_count; k++) {
        int s = (z->ring_head + k) % 8;
        if (z->ring[s].unit == u) return s;
    }
    return -1;
}

// The pass about to run: forward only (evaluation, sampling) or forward and
// backward (training). Every rank runs the same passes in the same order, so
// every rank issues the same collectives: no rank can wait on a gather that
// another rank never starts.
static void zero_begin_pass(Zero *z, int with_backward) {
    z->order = with_backward ? z->plan.fetch_train : z->plan.fetch_fwd;
    z->n_order = with_backward ? z->plan.n_fetch_train : z->plan.n_fetch_fwd;
    z->cursor = 0;
}

// Parameters of unit u, gathered in full (padded layout; tensors at their
// model.h offsets). Stage 3: waits for the prefetched gather or gathers now,
// then prefetches the next unit of the pass so that its all-gather overlaps
// this unit's compute.
static zparam_t *zero_fetch_params(Zero *z, int u) {
#if ZERO_STAGE <= 2
    return z->params + z->plan.u[u].full_off;
#else
    const ZeroUnit *U = &z->plan.u[u];
    if (U->persistent) return z->resident + U->resident_off;
    if (z->cursor >= z->n_order || z->order[z->cursor] != u)
        fatal("zero stage 3: unit %d fetched out of the planned order (expected %d)", u,
              z->cursor < z->n_order ? z->order[z->cursor] : -1);
    z->cursor++;
    int s = zero_ring_find(z, u);
    if (s < 0) { zero_start_gather(z, u, 1); s = zero_ring_find(z, u); }
    comm_wait(z->comm, &z->ring[s].req);
    if (z->cfg->prefetch && z->cursor < z->n_order && zero_ring_find(z, z->order[z->cursor]) < 0)
        zero_start_gather(z, z->order[z->cursor], 0);
    return z->arena + z->ring[s].off;
#endif
}

// Done with unit u's parameters until its next fetch: stage 3 frees them.
// (On the GPU "done" means the kernels that read them are queued: a later
// gather into the same space waits for them, see comm_nccl_begin.)
static void zero_release_params(Zero *z, int u) {
#if ZERO_STAGE == 3
    if (z->plan.u[u].persistent) return;
    if (z->ring_count == 0 || z->ring[z->ring_head].unit != u)
        fatal("zero stage 3: unit %d released out of order", u);
    int s = z->ring_head;
    comm_wait(z->comm, &z->ring[s].req);
#if ZERO_POISON
    zero_memset(z, z->arena + z->ring[s].off, 0xFF, z->ring[s].n * sizeof(zparam_t));   // all-ones bits: NaN
#endif
    z->live -= z->ring[s].n;
    z->ring_head = (z->ring_head + 1) % 8;
    z->ring_count--;
#else
    (void)z; (void)u;
#endif
}

// Stage 3, end of a pass: a prefetch that the pass did not use (none with the
// planned orders) would hold arena space; drain it so every pass starts empty.
static void zero_end_pass(Zero *z) {
#if ZERO_STAGE == 3
    while (z->ring_count) zero_release_params(z, z->ring[z->ring_head].unit);
#else
    (void)z;
#endif
}

// ----------------------------------------------------------------------------
// gradients

// The buffer that unit u's backward accumulates its full gradient into.
//   stages 0-1: the unit's place in the full gradient buffer (accumulates over micro-steps)
//   stages 2-3: a zeroed temporary slot, reduce-scattered by zero_grads_end
static zparam_t *zero_grads_begin(Zero *z, int u) {
#if ZERO_STAGE <= 1
    return z->grads + z->plan.u[u].full_off;
#else
    const ZeroUnit *U = &z->plan.u[u];
    zparam_t *g;
    int slot;
    if (u == 0 && z->plan.tied) { g = z->grad_slots; slot = 2; }   // the tied embedding collects from the head and the embedding
    else {
        slot = z->slot_next;
        g = z->grad_slots + (z->plan.tied ? z->plan.u[0].padded : 0) + (size_t)slot * z->plan.max_slot;
        z->slot_next ^= 1;   // two slots: one can be in flight while the next unit computes
    }
#if ZERO_DEVICE
    cudaCheck(cudaStreamWaitEvent(z->stream, z->slot_free[slot], 0));   // its last reduce-scatter is done with it
#endif
    (void)slot;
    zero_memset(z, g, 0, U->padded * sizeof(zparam_t));
    return g;
#endif
}

// Unit u's backward is finished.
//   stages 2-3: reduce-scatter its gradient now (the paper: "as the gradients of a
//   partition become available, they are reduced to the rank that owns it"), and
//   accumulate the averaged slice into this rank's fp32 gradient shard. On the
//   GPU with NCCL both run on the communication stream, overlapping the
//   backward of the next unit.
static void zero_grads_end(Zero *z, int u, zparam_t *g) {
#if ZERO_STAGE >= 2
    const ZeroUnit *U = &z->plan.u[u];
    float *acc = z->grad_shard + U->shard_off;
#if ZERO_DEVICE
    CommRequest r = comm_ireduce_scatter(z->comm, g, z->rs_scratch, U->shard, ZPARAM_DT, OP_AVG);
    int nccl = z->comm->backend == COMM_BACKEND_NCCL;
    zero_accumulate(z, acc, z->rs_scratch, U->shard, z->micro == 0, nccl ? z->comm->stream : z->stream);
    if (z->offload && z->micro == z->cfg->accum - 1)   // ZeRO-Offload: this slice is final: to the host now
        cudaCheck(cudaMemcpyAsync((float *)z->host_grad + U->shard_off, acc, U->shard * sizeof(float),
                                  cudaMemcpyDeviceToHost, nccl ? z->comm->stream : z->stream));
    int slot = (u == 0 && z->plan.tied) ? 2 : (z->slot_next ^ 1);
    cudaCheck(cudaEventRecord(z->slot_free[slot], nccl ? z->comm->stream : z->stream));
    r.active = 0;   // ordered on the communication stream; the step joins it
#else
    comm_reduce_scatter(z->comm, g, z->rs_scratch, U->shard, ZPARAM_DT, OP_AVG);
    zero_accumulate(z, acc, z->rs_scratch, U->shard, z->micro == 0);
#endif
#else
    (void)z; (void)u; (void)g;
#endif
}

// ----------------------------------------------------------------------------
// the optimizer step

static void zero_step_begin(Zero *z) {
#if ZERO_STAGE <= 1
    zero_memset(z, z->grads, 0, z->plan.full_elems * sizeof(zparam_t));
#endif
    z->micro = 0;
}

static void zero_micro_step_end(Zero *z) { z->micro++; }

typedef struct { float lr, beta1, beta2, eps, weight_decay, grad_clip; int t; } ZeroOptim;

#if ZERO_DEVICE
// offload: CPU-Adam writes a tile of bf16 parameters, this copies it to the GPU
// while the next tile computes
typedef struct { Zero *z; const uint16_t *host; zparam_t *dev; } ZeroTileCopy;
static void zero_copy_tile(size_t off, size_t n, void *ctx) {
    ZeroTileCopy *t = (ZeroTileCopy *)ctx;
    cudaCheck(cudaMemcpyAsync(t->dev + off, t->host + off, n * 2, cudaMemcpyDefault, t->z->stream));
}
#define ZERO_OFFLOAD_TILE (1 << 20)
#endif

// At the accumulation boundary: reduce the gradients to their owners, clip by
// the global norm, run AdamW on this rank's partition, and give every rank the
// parameters it needs for the next step. Returns the global gradient norm.
static float zero_step_end(Zero *z, const ZeroOptim *o) {
    const ZeroPlan *p = &z->plan;
#if ZERO_STAGE == 0
    // plain data parallel: all-reduce (average) the full gradients
    comm_all_reduce(z->comm, z->grads, p->full_elems, ZPARAM_DT, OP_AVG);
#elif ZERO_STAGE == 1
    // P_os: reduce-scatter the full, locally accumulated gradients unit by unit;
    // each rank keeps the averaged gradient of its own slice, in place
    for (int i = 0; i < p->n_units; i++) {
        const ZeroUnit *U = &p->u[i];
        comm_reduce_scatter(z->comm, z->grads + U->full_off, zero_grad_slice(z, i), U->shard, ZPARAM_DT, OP_AVG);
#if ZERO_DEVICE
        if (z->offload)   // ZeRO-Offload: each reduced slice to the host as soon as it is reduced
            zero_copy(z, (zgrad_t *)z->host_grad + U->shard_off, zero_grad_slice(z, i), U->shard * sizeof(zgrad_t));
#endif
    }
#endif
#if ZERO_DEVICE && ZERO_STAGE == 0
    if (z->offload) zero_copy(z, z->host_grad, z->grads, p->full_elems * sizeof(zgrad_t));   // P = 1: the slice is everything
#endif
    // stages 2-3 reduced every unit during backward: the shard is complete
#if ZERO_DEVICE
    zero_join_comm(z);
#endif

    // global gradient norm: each rank's partition contributes its squares
    double sumsq = 0;
    for (int s = 0; s < p->n_seg; s++) {
        const ZeroSegment *sg = &p->seg[s];
        const zgrad_t *g = zero_grad_slice(z, sg->unit) + (sg->unit_off - (size_t)p->part * p->u[sg->unit].shard);
#if ZERO_DEVICE
        zero_sumsq(z, g, sg->n, s > 0);
#else
        double acc = 0;
        #pragma omp parallel for reduction(+:acc)
        for (size_t i = 0; i < sg->n; i++) acc += (double)g[i] * g[i];
        sumsq += acc;
#endif
    }
#if ZERO_DEVICE
    float sq = 0;
    if (p->n_seg) cudaCheck(cudaMemcpyAsync(&sq, z->norm_dev, sizeof(float), cudaMemcpyDeviceToHost, z->stream));
    cudaCheck(cudaStreamSynchronize(z->stream));
    sumsq = sq;
#endif
#if ZERO_STAGE >= 1
    comm_all_reduce_host(z->comm, &sumsq, 1, DT_F64, OP_SUM);
#endif
    float norm = (float)sqrt(sumsq);
    float scale = 1.0f;
    if (o->grad_clip > 0) { float c = o->grad_clip / (norm + 1e-6f); if (c < 1.0f) scale = c; }
    AdamWParams ap = {o->lr, o->beta1, o->beta2, o->eps, 0.0f, o->t, scale};
    ap.l2_decay = !z->cfg->adam_w_mode;   // DeepSpeed's Adam with adam_w_mode false: L2 weight decay

#if ZERO_DEVICE
    // ZeRO-Offload: the reduced gradient partition has been copying to pinned host
    // memory unit by unit as it was reduced (stages 2-3: during the last backward);
    // wait for the last copy, then CPU-Adam on the fp32 master, m and v there, and
    // the bf16 result back to the GPU tile by tile while the next tile computes
    if (z->offload) cudaCheck(cudaStreamSynchronize(z->stream));
#endif
    // AdamW on this rank's partition, segment by segment (weight decay per tensor)
    for (int s = 0; s < p->n_seg; s++) {
        const ZeroSegment *sg = &p->seg[s];
        size_t in_slice = sg->unit_off - (size_t)p->part * p->u[sg->unit].shard;
        size_t so = p->u[sg->unit].shard_off + in_slice;
        ap.weight_decay = sg->decay ? o->weight_decay : 0.0f;
#if ZERO_DEVICE
        zparam_t *out = zero_param_slice(z, sg->unit) + in_slice;
        if (z->offload) {
            ZeroTileCopy tc = {z, z->host_bf16 + so, out};
            adamw_cpu_step_tiled(z->master + so, (const zgrad_t *)z->host_grad + so, sizeof(zgrad_t) == 2,
                                 z->opt_m + so, z->opt_v + so, z->host_bf16 + so, sg->n, ap,
                                 ZERO_OFFLOAD_TILE, zero_copy_tile, &tc);
        } else {
            adamw_gpu_step(z->master + so, zero_grad_slice(z, sg->unit) + in_slice, z->opt_m + so, z->opt_v + so,
                           out, sg->n, ap, z->stream);
            cudaCheck(cudaGetLastError());
        }
#else
        adamw_cpu_step(zero_master_slice(z, sg->unit) + in_slice, zero_grad_slice(z, sg->unit) + in_slice,
                       z->opt_m + so, z->opt_v + so, NULL, sg->n, ap);
#endif
    }

#if ZERO_STAGE == 1 || ZERO_STAGE == 2
    // every rank updated its slice: all-gather the updated parameters, in place
    for (int i = 0; i < p->n_units; i++) {
        const ZeroUnit *U = &p->u[i];
        comm_all_gather(z->comm, zero_param_slice(z, i), z->params + U->full_off, U->shard, ZPARAM_DT);
    }
#elif ZERO_STAGE == 3
    // parameters stay partitioned; only the persistent units are re-gathered
    for (int i = 0; i < p->n_units; i++) {
        const ZeroUnit *U = &p->u[i];
        if (!U->persistent) continue;
        zparam_t *full = z->resident + U->resident_off, *mine = full + (size_t)p->part * U->shard;
        zero_copy(z, mine, zero_param_slice(z, i), U->shard * sizeof(zparam_t));   // (from host memory with offload_param)
        comm_all_gather(z->comm, mine, full, U->shard, ZPARAM_DT);
    }
#endif
    return norm;
}

// ----------------------------------------------------------------------------
// the plan, as a table (rank 0 at start-up)

static void zero_plan_print(const Zero *z) {
    const ZeroPlan *p = &z->plan;
    printf("ZeRO plan: %d units, %d partition%s, slices aligned to %d elements; each unit is one reduce bucket\n",
           p->n_units, p->P, p->P > 1 ? "s" : "", ZERO_ALIGN);
    printf("| %-8s | %12s | %12s | %12s | %s\n", "unit", "elements", "padded", "slice/rank", ZERO_STAGE == 3 ? "stage 3" : "");
    for (int i = 0; i < p->n_units; i++) {
        const ZeroUnit *U = &p->u[i];
        printf("| %-8s | %12zu | %12zu | %12zu | %s\n", z->layout->units[i].name, U->numel, U->padded, U->shard,
               ZERO_STAGE == 3 ? (U->persistent ? "persistent (kept whole)" : "gathered per use") : "");
    }
#if ZERO_STAGE == 3
    printf("stage 3: live cap %zu gathered elements, arena %zu, prefetch %s\n", p->live_cap, p->arena_elems,
           z->cfg->prefetch ? "one unit ahead" : "off");
#endif
}

// ----------------------------------------------------------------------------
// reports: measured memory and communication beside the paper's formulas

// Bytes per parameter of each model state: (param, grad, optimizer) =
// (4, 4, 8) for the fp32 CPU trainer (the master is the parameter; m and v),
// (2, 2, 12) for the bf16 GPU trainer (fp32 master, m and v).
typedef struct { double param, grad, optim; } ZeroBytesPerParam;

// The formula for one model state at this stage and world size, for psi parameters.
// The paper's formula for one model state at a stage and world size, for psi parameters.
static double zero_state_bytes(int stage, int kind, double psi, int world, ZeroBytesPerParam b) {
    double N = world;
    switch (kind) {
    case MEM_PARAMS: return stage >= 3 ? b.param * psi / N : b.param * psi;
    case MEM_GRADS:  return stage >= 2 ? b.grad * psi / N : b.grad * psi;
    case MEM_OPTIM:  return stage >= 1 ? b.optim * psi / N : b.optim * psi;
    default: return 0;
    }
}
static double zero_formula_bytes(int kind, double psi, int world, ZeroBytesPerParam b) {
    return zero_state_bytes(ZERO_STAGE, kind, psi, world, b);
}

// The memory estimator (--estimate-memory N): per-rank model-state bytes of every
// stage at world size N for both trainers, from the plan's arithmetic alone
// (the padding of each stage's partitions included): nothing is allocated, so
// it answers for models that would not fit. Activations and working buffers
// are not included.
static cJSON *zero_estimate(const ModelLayout *L, int world, int print) {
    static const char *TRAINERS[2] = {"train_gpt_cpu", "train_gpt"};
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "type", "estimate");
    cJSON_AddNumberToObject(rec, "world", world);
    cJSON_AddNumberToObject(rec, "params", (double)L->num_params);
    if (print) printf("per-rank model states at %d rank%s for %zu parameters (activations and working buffers not included)\n"
                      "| %-13s | %-5s | %14s | %14s | %14s | %14s |\n", world, world > 1 ? "s" : "", L->num_params,
                      "trainer", "stage", "params", "grads", "optimizer", "total");
    for (int tr = 0; tr < 2; tr++) {
        cJSON *t = cJSON_AddObjectToObject(rec, TRAINERS[tr]);
        for (int s = 0; s <= 3; s++) {
            // fp32 CPU trainer: 4 + 4 + 8 bytes; bf16 GPU trainer: 2 + 2 (fp32 shards from stage 2) + 12
            ZeroBytesPerParam b = tr == 0 ? (ZeroBytesPerParam){4, 4, 8} : (ZeroBytesPerParam){2, s >= 2 ? 4.0 : 2.0, 12};
            int P = s >= 1 ? world : 1;
            double padded = 0;
            for (int i = 0; i < L->n_units; i++) padded += (double)zero_padded(L->units[i].numel, P);
            double bytes[3], total = 0;
            for (int k = 0; k < 3; k++) { bytes[k] = zero_state_bytes(s, k, padded, world, b); total += bytes[k]; }
            char key[16];
            snprintf(key, sizeof(key), "stage%d", s);
            cJSON *e = cJSON_AddObjectToObject(t, key);
            for (int k = 0; k < 3; k++) cJSON_AddNumberToObject(e, MEM_NAMES[k], bytes[k]);
            cJSON_AddNumberToObject(e, "total", total);
            if (print) printf("| %-13s | %5d | %14.0f | %14.0f | %14.0f | %14.0f |  %.2f GiB\n", TRAINERS[tr], s,
                              bytes[0], bytes[1], bytes[2], total, total / 1073741824.0);
        }
    }
    return rec;
}

// Prints the per-rank memory table (rank 0) and returns it as a JSONL record.
static cJSON *zero_memory_report(Zero *z, ZeroBytesPerParam b, int print) {
    const ZeroPlan *p = &z->plan;
    double psi = (double)p->num_params, psi_pad = (double)p->full_elems;
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "type", "memory");
    cJSON_AddNumberToObject(rec, "stage", ZERO_STAGE);
    cJSON_AddNumberToObject(rec, "world", p->world);
    cJSON_AddNumberToObject(rec, "params", psi);
    cJSON_AddNumberToObject(rec, "params_padded", psi_pad);
    cJSON *meas = cJSON_AddObjectToObject(rec, "measured_bytes");
    cJSON *form = cJSON_AddObjectToObject(rec, "formula_bytes");
    cJSON *padb = cJSON_AddObjectToObject(rec, "padding_bytes");
    if (print) {
        printf("ZeRO stage %d, %d rank%s: per-rank bytes, measured from the allocations\n", ZERO_STAGE, p->world, p->world > 1 ? "s" : "");
        printf("| %-16s | %14s | %14s | %10s | %s\n", "model state", "measured", "formula", "padding", "formula");
    }
    static const char *FORMULA_TEXT[4][3] = {
        {"%gΨ", "%gΨ", "%gΨ"}, {"%gΨ", "%gΨ", "%gΨ/N"}, {"%gΨ", "%gΨ/N", "%gΨ/N"}, {"%gΨ/N", "%gΨ/N", "%gΨ/N"}};
    double total_m = 0, total_f = 0;
    for (int k = MEM_PARAMS; k <= MEM_OPTIM; k++) {
        double measured = (double)(z->mem[k] + z->host_mem[k]);   // offload moves the optimizer to the host, not away
        double formula = zero_formula_bytes(k, psi, p->world, b);
        double padding = zero_formula_bytes(k, psi_pad, p->world, b) - formula;
        total_m += measured; total_f += formula;
        cJSON_AddNumberToObject(meas, MEM_NAMES[k], measured);
        cJSON_AddNumberToObject(form, MEM_NAMES[k], formula);
        cJSON_AddNumberToObject(padb, MEM_NAMES[k], padding);
        if (print) {
            char ftxt[32];
            double per = k == MEM_PARAMS ? b.param : k == MEM_GRADS ? b.grad : b.optim;
            snprintf(ftxt, sizeof(ftxt), FORMULA_TEXT[ZERO_STAGE][k], per);
            printf("| %-16s | %14.0f | %14.0f | %10.0f | %s\n", MEM_NAMES[k], measured, formula, padding, ftxt);
        }
    }
    double per_param = (b.param + b.grad + b.optim);
    double paper = ZERO_STAGE == 0 ? per_param * psi : ZERO_STAGE == 1 ? (b.param + b.grad) * psi + b.optim * psi / p->world
                 : ZERO_STAGE == 2 ? b.param * psi + (b.grad + b.optim) * psi / p->world : per_param * psi / p->world;
    if (print) {
        printf("| %-16s | %14.0f | %14.0f |            | paper: %.0f bytes\n", "model states", total_m, total_f, paper);
        for (int k = MEM_GATHER; k < N_MEM; k++)
            if (z->mem[k]) printf("| %-16s | %14zu |    (working)   |            |\n", MEM_NAMES[k], z->mem[k]);
    }
    for (int k = MEM_GATHER; k < N_MEM; k++) cJSON_AddNumberToObject(meas, MEM_NAMES[k], (double)z->mem[k]);
#if ZERO_DEVICE
    // the device as a whole, and what offload keeps in pinned host memory
    size_t free_b = 0, total_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    cJSON_AddNumberToObject(rec, "device_used_bytes", (double)(total_b - free_b));
    cJSON_AddNumberToObject(rec, "device_total_bytes", (double)total_b);
    cJSON *host = cJSON_AddObjectToObject(rec, "host_pinned_bytes");
    size_t host_total = 0;
    for (int k = 0; k < N_MEM; k++) { cJSON_AddNumberToObject(host, MEM_NAMES[k], (double)z->host_mem[k]); host_total += z->host_mem[k]; }
    cJSON_AddBoolToObject(rec, "offload", z->offload);
    if (print) {
        printf("| %-16s | %14zu | cudaMemGetInfo: used of %.1f GiB (all allocations, CUDA context included)\n",
               "device in use", total_b - free_b, total_b / 1073741824.0);
        if (z->offload) printf("| %-16s | %14zu | optimizer offload: fp32 master, m, v and staging in pinned host memory\n",
                               "host (pinned)", host_total);
    }
#endif
    cJSON_AddNumberToObject(rec, "model_states_measured", total_m);
    cJSON_AddNumberToObject(rec, "model_states_formula", total_f);
#if ZERO_STAGE == 3
    cJSON_AddNumberToObject(rec, "live_cap_elems", (double)p->live_cap);
#endif
    return rec;
}

// Communication of one training step in theory (bytes, with the counting of comm.h),
// given K micro-steps of accumulation. scalar_allreduce_bytes: what the trainer
// adds for its loss (and the norm all-reduce below).
static void zero_comm_theory(const Zero *z, int K, double elem_bytes, double out[N_COLL]) {
    const ZeroPlan *p = &z->plan;
    double psi = (double)p->full_elems * elem_bytes;   // the padded model
    for (int i = 0; i < N_COLL; i++) out[i] = 0;
    out[COLL_ALL_REDUCE] = 2 * 4;                      // the step's mean loss (one fp32)
#if ZERO_STAGE == 0
    out[COLL_ALL_REDUCE] += 2 * psi;                   // gradients: 2Ψ
#else
    out[COLL_ALL_REDUCE] += 2 * 8;                     // the global norm's partial sums (one fp64)
#endif
#if ZERO_STAGE == 1
    out[COLL_REDUCE_SCATTER] = psi;                    // once, at the boundary
    out[COLL_ALL_GATHER] = psi;
#elif ZERO_STAGE == 2
    out[COLL_REDUCE_SCATTER] = K * psi;                // every micro-step
    out[COLL_ALL_GATHER] = psi;
#elif ZERO_STAGE == 3
    out[COLL_REDUCE_SCATTER] = K * psi;
    // every micro-step: each layer twice (forward, backward), the embedding once
    // (twice with a tied head), the final unit once (its backward follows its
    // forward); persistent units never, but once after the step
    double per_micro = 0, persistent = 0;
    int E = 0, F = p->n_units - 1;
    for (int i = 0; i < p->n_units; i++) {
        double b = (double)p->u[i].padded * elem_bytes;
        if (p->u[i].persistent) { persistent += b; continue; }
        per_micro += (i == E) ? (p->tied ? 2 : 1) * b : (i == F) ? b : 2 * b;
    }
    out[COLL_ALL_GATHER] = K * per_micro + persistent;
#endif
    (void)K;
}

static cJSON *zero_comm_report(const Zero *z, int K, double elem_bytes, int print) {
    double theory[N_COLL];
    zero_comm_theory(z, K, elem_bytes, theory);
    const Comm *c = z->comm;
    cJSON *rec = cJSON_CreateObject();
    cJSON_AddStringToObject(rec, "type", "comm");
    cJSON_AddNumberToObject(rec, "stage", ZERO_STAGE);
    cJSON_AddNumberToObject(rec, "world", c->world);
    cJSON_AddNumberToObject(rec, "accum", K);
    cJSON *m = cJSON_AddObjectToObject(rec, "bytes_per_step");
    cJSON *t = cJSON_AddObjectToObject(rec, "theory_bytes_per_step");
    double total = 0, psi_b = (double)z->plan.num_params * elem_bytes;
    if (print) {
        printf("communication per step, per rank (counted by the communicator)\n");
        printf("| %-15s | %14s | %14s | %6s |\n", "collective", "counted", "theory", "calls");
    }
    for (int k = 0; k < N_COLL; k++) {
        cJSON_AddNumberToObject(m, COLL_NAMES[k], (double)c->bytes[k]);
        cJSON_AddNumberToObject(t, COLL_NAMES[k], theory[k]);
        total += (double)c->bytes[k];
        if (print) printf("| %-15s | %14lld | %14.0f | %6lld |\n", COLL_NAMES[k], c->bytes[k], theory[k], c->calls[k]);
    }
    double paper = (ZERO_STAGE == 3 ? 3.0 : 2.0) * psi_b;
    cJSON_AddNumberToObject(rec, "total_bytes", total);
    cJSON_AddNumberToObject(rec, "paper_bytes", paper);
    cJSON_AddNumberToObject(rec, "psi_bytes", psi_b);
    if (print) printf("| %-15s | %14.0f | %.2fΨ (paper: %dΨ with Ψ = %.0f bytes; padding and K = %d micro-steps included)\n",
                      "total", total, total / psi_b, ZERO_STAGE == 3 ? 3 : 2, psi_b, K);
    return rec;
}
