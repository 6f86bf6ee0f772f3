// zero/rank.h: what one rank holds, the Zero struct, and zero_init, which allocates its
// buffers from zero/placement.h's table. Every pointer is one allocation of the table.
#pragma once
#include <pthread.h>
#include "zero/placement.h"
#ifdef __CUDACC__
#include "zero/device.cuh"
#else
#include "zero/host.h"
#endif

#define ZERO_RING_SLOTS 8   // stage 3: the gather ring's entries, the most units gathered at once

// DPU's update in flight, zero/dpu.h: the gradient it reads, the parameters it writes, its thread
typedef struct { zgrad_t *grad; floatX *params; pthread_t thread; int running, threads; AdamWParams ap; } ZeroDpu;

typedef struct {
    ZeroPlan plan;
    ZeroPlacement place;
    ZeroBackend be;             // the backend's own state
    Comm *comm;
    const ModelLayout *layout;
    const TrainConfig *cfg;
    size_t mem[N_MEM], host_mem[N_MEM], nvme_mem[N_MEM];   // bytes by kind: working memory, pinned host, NVMe
    // the model states
    floatX *params;             // stages 0-2: the full buffer; stage 3: this rank's shard
    float *master;              // separate_master: the fp32 master of this rank's partition
    floatX *resident;           // stage 3: the persistent units, whole
    floatX *grads;              // stages 0-1: the full gradients, accumulated over micro-steps
    float *grad_shard;          // stages 2-3: this rank's gradient partition, accumulated in fp32
    float *opt_m, *opt_v;       // AdamW's moments of this rank's partition
    float *twin_state;          // Twin-Flow, GPU offload: the device side's master, m and v
    // working buffers
    floatX *arena;              // stage 3: the gather ring's memory
    floatX *grad_slots;         // stages 2-3: full gradients of units in backward, at plan.slot_off
    floatX *rs_scratch;         // stages 2-3: where a unit's reduced slice lands
    void *nvme_buffers;         // ZeRO-Infinity: the step's tiles and stage 3's unit reads
    uint32_t *decay_mask;       // the lean AdamW's weight-decay bits
    floatX *hpz_params;         // ZeRO++ hpZ: the secondary partition, unit u at hpz_off[u]
    size_t *hpz_off;
    unsigned char *hpz_valid;   // unit u's secondary part holds this step's parameters
    uint8_t *zpp_staging;       // ZeRO++: quantized messages and qgZ's sums
    ZeroDpu dpu;                // the delayed update
    ZeroAdamSeg *adam_seg;      // the optimizer step's segments
    int lean;                   // what the backend runs lean, LEAN_*; -1: not asked yet
    // what the trainer's views read: a unit's parameters while fetched, its gradient while open
    floatX **unit_params, **unit_grads;
    int *unit_slot;             // stages 2-3: the slot each open gradient uses
    int slot_next;              // stages 2-3: the alternating slot the next unit takes
    CommRequest *grad_reduce;   // stages 0-1: each unit's reduction at the boundary
    unsigned char *grad_reducing;   // stages 0-1: started and not yet waited for
    int reduced_in_backward;    // units whose reduction the last backward started
    // the pass in progress
    int training;               // forward and backward
    int micro;                  // the micro-step within the step
    const int *order; int n_order, cursor;   // stage 3: the gather order, the next unit to fetch
    struct { int unit; size_t off, n; CommRequest req; } ring[ZERO_RING_SLOTS];
    int ring_head, ring_count;  // stage 3: the gathered units, oldest first
    size_t live, peak_live;     // stage 3: gathered elements
    void (*grads_observer)(void *ctx, int unit, const floatX *g);   // tests: each full gradient
    void *observer_ctx;
} Zero;

static void *zero_alloc(Zero *z, int kind, size_t bytes, int where) {
    (where == ZMEM_HOST ? z->host_mem : z->mem)[kind] += bytes;
    return zb_alloc(&z->be, bytes, where, MEM_NAMES[kind]);
}

// The address each buffer of the table is kept at.
static void zero_buffer_ptrs(Zero *z, void **ptr[N_ZBUF], void **staging_grad, void **staging_params) {
    void **p[N_ZBUF] = {(void **)&z->params, (void **)&z->master, (void **)&z->opt_m, (void **)&z->opt_v,
                        (void **)&z->resident, (void **)&z->arena, (void **)&z->grads, (void **)&z->grad_shard,
                        (void **)&z->grad_slots, (void **)&z->rs_scratch, &z->nvme_buffers, (void **)&z->decay_mask,
                        (void **)&z->hpz_params, (void **)&z->zpp_staging, (void **)&z->dpu.grad, (void **)&z->dpu.params,
                        (void **)&z->twin_state, staging_grad, staging_params};
    memcpy(ptr, p, sizeof(p));
}

static void zero_init(Zero *z, const ModelLayout *L, const TrainConfig *cfg, Comm *comm) {
    memset(z, 0, sizeof(*z));
    z->comm = comm; z->layout = L; z->cfg = cfg;
    zero_plan_build(&z->plan, L, ZERO_STAGE, comm->world, comm->rank, cfg);
    const ZeroPlan *p = &z->plan;
    if ((long long)p->gather_need > cfg->max_live_elems)
        fatal("--max-live %lld is too small: stage 3 must hold %zu gathered elements at once (the largest step's units)",
              cfg->max_live_elems, p->gather_need);
    z->place = zero_placement(p, cfg, TRAINER_IS_GPU, sizeof(floatX));
    zero_zpp_check(&z->place, &z->plan, comm, cfg);
    zero_twin_check(&z->place, &z->plan, comm, cfg);
    ZeroBuffer b[N_ZBUF];
    zero_buffers(b, p, sizeof(floatX), &z->place);
    void *staging_grad = NULL, *staging_params = NULL, **ptr[N_ZBUF];
    zero_buffer_ptrs(z, ptr, &staging_grad, &staging_params);
    for (int i = 0; i < N_ZBUF; i++) {   // a buffer placed on NVMe is a plane of this rank's files
        if (b[i].where == ZMEM_NVME) z->nvme_mem[b[i].kind] += b[i].bytes;
        else if (b[i].bytes) *ptr[i] = zero_alloc(z, b[i].kind, b[i].bytes, b[i].where);
    }
    if (z->place.dpu && z->place.offload) staging_params = z->dpu.params;   // the GPU's parameter staging: the backend's from here
    zb_init(&z->be, comm, cfg, p->n_slots, staging_grad, staging_params, zero_twin_dev(&z->place));
    // the partition's state planes by shard offset: the buffers above, or NVMe
    void *planes[N_ZSTATE] = {z->master, z->opt_m, z->opt_v, ZERO_STAGE == 3 ? (void *)z->params : NULL};
    zb_state_init(&z->be, &z->place.nvme, planes, z->place.separate_master, cfg, z->nvme_buffers, comm->rank == 0 && !cfg->quiet);
    z->adam_seg = (ZeroAdamSeg *)xmalloc(sizeof(ZeroAdamSeg) * (p->n_seg + 1), "optimizer segments");
    z->lean = -1;

    z->unit_params = (floatX **)xcalloc(sizeof(floatX *) * p->n_units, "unit views");
    z->unit_grads = (floatX **)xcalloc(sizeof(floatX *) * p->n_units, "unit views");
    z->unit_slot = (int *)xcalloc(sizeof(int) * p->n_units, "unit views");
    z->grad_reduce = (CommRequest *)xcalloc(sizeof(CommRequest) * p->n_units, "gradient reductions");
    z->grad_reducing = (unsigned char *)xcalloc(p->n_units, "gradient reductions");
    z->hpz_off = (size_t *)xcalloc(sizeof(size_t) * (p->n_units + 1), "hpZ offsets");
    z->hpz_valid = (unsigned char *)xcalloc(p->n_units, "hpZ validity");
    if (z->place.hpz) comm_split_groups(comm, z->place.hpz);
    for (int i = 0; i < p->n_units; i++)
        z->hpz_off[i + 1] = z->hpz_off[i] + (z->place.hpz && !p->u[i].persistent ? p->u[i].padded / z->place.hpz : 0);
    // parameters that never move: stages 0-2, stage 3's persistent units, a whole shard
    for (int i = 0; i < p->n_units; i++)
        z->unit_params[i] = ZERO_STAGE <= 2 ? z->params + p->u[i].full_off
                          : z->place.whole ? z->params + p->u[i].shard_off
                          : p->u[i].persistent ? z->resident + p->u[i].resident_off : NULL;
}

static void zero_free(Zero *z) {
    ZeroBuffer b[N_ZBUF];
    zero_buffers(b, &z->plan, sizeof(floatX), &z->place);
    zb_destroy(&z->be);
    if (z->place.dpu && z->place.offload) z->dpu.params = NULL;   // zb_destroy freed it, as offload's staging
    void *staging_grad, *staging_params, **ptr[N_ZBUF];
    zero_buffer_ptrs(z, ptr, &staging_grad, &staging_params);
    for (int i = 0; i < ZBUF_STAGING_GRAD; i++) zb_free(&z->be, *ptr[i], b[i].where);
    free(z->unit_params); free(z->unit_grads); free(z->unit_slot); free(z->adam_seg);
    free(z->grad_reduce); free(z->grad_reducing); free(z->hpz_off); free(z->hpz_valid);
    zero_plan_free(&z->plan);
}

// Plane k of master, m and v at shard offset so. Twin-Flow's device side below d holds
// its planes in twin_state; the host buffers start at d. NULL: on NVMe, or no master.
static float *zero_opt_state(Zero *z, int k, size_t so) {
    size_t d = zero_twin_dev(&z->place);
    int sm = z->place.separate_master;
    float *host = k == ZS_MASTER ? z->master : k == ZS_M ? z->opt_m : z->opt_v;
    if (so >= d) return host ? host + (so - d) : NULL;
    return k == ZS_MASTER && !sm ? NULL : z->twin_state + (size_t)(k - !sm) * d + so;
}

// Plane k from shard offset off, for checkpoints: the two sides in one layout
static void zero_state_rw(Zero *z, int k, size_t off, size_t n, void *host, int write) {
    size_t d = k == ZS_PARAM ? 0 : zero_twin_dev(&z->place), lo = off >= d ? 0 : d - off < n ? d - off : n;
    if (lo && write) zb_upload(&z->be, zero_opt_state(z, k, off), host, lo * sizeof(float));
    if (lo && !write) zb_download(&z->be, host, zero_opt_state(z, k, off), lo * sizeof(float));
    void *rest = (char *)host + lo * sizeof(float);
    if (n > lo && write) zb_state_write(&z->be, k, off + lo - d, n - lo, rest);
    if (n > lo && !write) zb_state_read(&z->be, k, off + lo - d, n - lo, rest);
}

// This rank's slice of unit u in the working parameters; NULL where they are on NVMe.
static floatX *zero_param_slice(Zero *z, int u) {
    if (!z->params) return NULL;
    return z->params + (ZERO_STAGE <= 2 ? zero_slice_full_off(&z->plan, u) : z->plan.u[u].shard_off);
}
// This rank's slice of unit u in the reduced gradient.
static zgrad_t *zero_grad_slice(Zero *z, int u) {
#if ZERO_STAGE <= 1
    return z->grads + zero_slice_full_off(&z->plan, u);
#else
    return z->grad_shard + z->plan.u[u].shard_off;
#endif
}
