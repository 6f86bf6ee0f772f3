// zero/placement.h: where ZeRO's model states live, and the buffers that hold them.
//
// The placement follows from the flags: the GPU trainer keeps an fp32 master beside
// its bf16 (or fp16) parameters; ZeRO-Offload puts the optimizer partition and its
// update on the host (Ren et al., 2021); ZeRO-Infinity puts state planes on NVMe
// (zero/state.h). The buffer table lists every buffer with its size for a plan:
// zero_init allocates exactly these, and the estimator (train/zero_report.h) adds
// them up without allocating anything.
//
//                        CPU trainer (fp32)            GPU trainer (floatX: bf16, or fp16 + fp32 master)
//   params               full or shard; the master     full or shard, floatX working copy
//   master               (params are the master)       fp32 partition (device, or pinned host: offload)
//   grads (stages 0-1)   full, fp32                    full, floatX (micro-steps add in floatX, as llm.c)
//   grad_shard (2-3)     fp32 accumulator              fp32 accumulator of the reduced floatX slices
//   opt_m, opt_v         fp32 partition                fp32 partition (device, or pinned host: offload)
//
// The CPU trainer's fp16 mode (--fp16 1) takes the GPU's column: a separate fp32 master,
// and parameters and gradients stored as fp16 values (zero/host.h says where they are rounded).
#pragma once
#include "zero/plan.h"
#include "util/quantize.h"
#ifdef __CUDACC__
#include "zero/device.cuh"
#else
#include "zero/host.h"
#endif

#ifndef ZERO_GRADS_FIRST_WRITE
#define ZERO_GRADS_FIRST_WRITE 0   // the GPU trainer's kernels add to zeroed gradients
#endif

// Stage 3's gathered units alive at once, at most: the slots of the gather ring. A gather
// that finds every slot taken does not fit, as one over the live cap does not.
#define ZERO_RING_SLOTS 8

typedef struct {
    int separate_master;        // an fp32 master beside floatX parameters (the GPU; the CPU's fp16 mode)
    int offload;                // ZeRO-Offload: the optimizer partition and its update on the host (GPU)
    int offload_param;          // stage 3: the parameter shard in pinned host memory (GPU)
    ZeroNvmePlan nvme;          // ZeRO-Infinity: which planes are on NVMe, and their tiles (zero/state.h)
    int lean_adamw;             // GPU, --lean-step 1: AdamW in one launch over the partition, with a weight-decay mask
    int whole;                  // stage 3 at one rank, the shard in working memory: units used in place
    int qw, hpz, qg;            // ZeRO++ at stage 3 with several ranks: qwZ, hpZ's partition size (0: off), qgZ
} ZeroPlacement;

// The same for a run and for the estimator. x is the size of a floatX.
static ZeroPlacement zero_placement(const ZeroPlan *p, const TrainConfig *cfg, int gpu, size_t x) {
    // The GPU's NVMe optimizer offload is an optimizer offload: CPU-Adam streams the state.
    ZeroPlacement pl = {gpu || cfg->fp16, gpu && (cfg->offload || cfg->nvme_optim_dir[0]), gpu && cfg->offload_param && p->stage == 3};
    pl.nvme = zero_nvme_plan(cfg, p->stage, pl.separate_master, x, p->shard_elems, p->max_shard);
    // The lean AdamW (--lean-step 1) updates the state and the parameters where they are, so both
    // must be in memory.
    pl.lean_adamw = gpu && cfg->lean_step && !pl.offload && !pl.nvme.on[ZS_PARAM];
    // Stage 3 at one rank: the shard is the whole model. Unless it lives in host memory or on
    // NVMe, it already sits where the compute reads it, and a gather would copy every unit onto
    // itself. So the units are used in place: no arena, no resident copies, no all-gathers.
    pl.whole = p->stage == 3 && p->P == 1 && !pl.offload_param && !pl.nvme.on[ZS_PARAM];
    int zpp = p->stage == 3 && p->P > 1;   // ZeRO++ changes stage 3's collectives; at one rank there are none
    pl.qw = zpp && cfg->zpp_quantized_weights;
    pl.hpz = zpp && cfg->zpp_hpz_size > 1 ? cfg->zpp_hpz_size : 0;
    pl.qg = zpp && cfg->zpp_quantized_gradients;
    return pl;
}

// hpZ's secondary partition: this rank's 1/hpz of every unit gathered per use.
static size_t zero_hpz_elems(const ZeroPlan *p, int hpz) {
    size_t n = 0;
    for (int i = 0; i < p->n_units && hpz; i++) if (!p->u[i].persistent) n += p->u[i].padded / hpz;
    return n;
}

// ZeRO++'s staging, one allocation: the quantized message sent, the messages received, and
// qgZ's fp32 sums (at most one shard per node, plus the result). Laid out by zero_zpp_staging.
typedef struct { size_t send, recv, work; } ZeroZppStaging;
static ZeroZppStaging zero_zpp_staging(const ZeroPlan *p, const ZeroPlacement *pl) {
    size_t s = p->max_shard, P = (size_t)p->P, q8 = round_up(zq_bytes(s, 8), 16), q4 = round_up(zq_bytes(s, 4), 16);
    ZeroZppStaging z = {0, 0, 0};
    if (pl->qw) { z.send = q8; z.recv = P * q8; }
    if (pl->qg) { z.send = P * q4 > z.send ? P * q4 : z.send; z.recv = P * q4 > z.recv ? P * q4 : z.recv; z.work = (P + 1) * s * 4; }
    return z;
}

// The buffer table. The staging buffers are ZeRO-Offload's pinned copies of the reduced
// gradient partition and of the floatX parameters CPU-Adam writes, on their way between
// host and device. The lean AdamW's weight-decay mask, a bit per element of the
// partition, counts as scratch.
enum { ZBUF_PARAMS, ZBUF_MASTER, ZBUF_OPT_M, ZBUF_OPT_V, ZBUF_RESIDENT, ZBUF_ARENA, ZBUF_GRADS, ZBUF_GRAD_SHARD,
       ZBUF_GRAD_SLOTS, ZBUF_RS_SCRATCH, ZBUF_NVME_BUFFERS, ZBUF_DECAY_MASK, ZBUF_HPZ, ZBUF_ZPP_STAGING,
       ZBUF_STAGING_GRAD, ZBUF_STAGING_PARAMS, N_ZBUF };
typedef struct { size_t bytes; int kind, where; } ZeroBuffer;

static void zero_buffers(ZeroBuffer b[N_ZBUF], const ZeroPlan *p, size_t x, const ZeroPlacement *pl) {
    int st = p->stage, opt = pl->offload ? ZMEM_HOST : ZMEM_WORK, sm = pl->separate_master, off = pl->offload;
    int gathers = st == 3 && !pl->whole;
    const int *nvme = pl->nvme.on;
    size_t shard = p->shard_elems, grad_x = st <= 1 ? x : 4;   // the reduced gradient: floatX slices, or the fp32 shard
    memset(b, 0, sizeof(ZeroBuffer) * N_ZBUF);
    b[ZBUF_PARAMS] = (ZeroBuffer){(st <= 2 ? p->full_elems : shard) * x, MEM_PARAMS,
                                  nvme[ZS_PARAM] ? ZMEM_NVME : st == 3 && pl->offload_param ? ZMEM_HOST : ZMEM_WORK};
    b[ZBUF_MASTER] = (ZeroBuffer){sm ? shard * 4 : 0, MEM_OPTIM, nvme[ZS_MASTER] ? ZMEM_NVME : opt};
    b[ZBUF_OPT_M] = b[ZBUF_OPT_V] = (ZeroBuffer){shard * 4, MEM_OPTIM, nvme[ZS_M] ? ZMEM_NVME : opt};
    b[ZBUF_RESIDENT] = (ZeroBuffer){gathers ? p->resident_elems * x : 0, MEM_GATHER, ZMEM_WORK};
    b[ZBUF_ARENA] = (ZeroBuffer){gathers ? p->arena_elems * x : 0, MEM_GATHER, ZMEM_WORK};
    b[ZBUF_GRADS] = (ZeroBuffer){st <= 1 ? p->full_elems * x : 0, MEM_GRADS, ZMEM_WORK};
    b[ZBUF_GRAD_SHARD] = (ZeroBuffer){st >= 2 ? shard * 4 : 0, MEM_GRADS, ZMEM_WORK};
    b[ZBUF_GRAD_SLOTS] = (ZeroBuffer){st >= 2 ? p->slot_elems * x : 0, MEM_GRAD_BUCKETS, ZMEM_WORK};
    b[ZBUF_RS_SCRATCH] = (ZeroBuffer){st >= 2 ? p->max_shard * x : 0, MEM_GRAD_BUCKETS, ZMEM_WORK};
    b[ZBUF_NVME_BUFFERS] = (ZeroBuffer){zero_nvme_buffer_bytes(&pl->nvme), MEM_NVME_BUFFERS, opt};
    b[ZBUF_DECAY_MASK] = (ZeroBuffer){pl->lean_adamw ? round_up(shard, 32) / 8 : 0, MEM_SCRATCH, ZMEM_WORK};
    ZeroZppStaging zs = zero_zpp_staging(p, pl);
    b[ZBUF_HPZ] = (ZeroBuffer){zero_hpz_elems(p, pl->hpz) * x, MEM_GATHER, ZMEM_WORK};   // a copy, beside the partition
    b[ZBUF_ZPP_STAGING] = (ZeroBuffer){zs.send + zs.recv + zs.work, MEM_SCRATCH, ZMEM_WORK};
    b[ZBUF_STAGING_GRAD] = (ZeroBuffer){sm && off ? shard * grad_x : 0, MEM_GRAD_BUCKETS, ZMEM_HOST};
    // With the parameter shard on NVMe, CPU-Adam writes its floatX output into the shard's tiles instead.
    b[ZBUF_STAGING_PARAMS] = (ZeroBuffer){sm && off && !nvme[ZS_PARAM] ? shard * x : 0, MEM_GRAD_BUCKETS, ZMEM_HOST};
}

// ----------------------------------------------------------------------------
// the ZeRO state of one rank

typedef struct {
    ZeroPlan plan;
    ZeroPlacement place;
    ZeroBackend be;             // the primitives' state (zero/host.h, zero/device.cuh)
    Comm *comm;
    const ModelLayout *layout;
    const TrainConfig *cfg;
    size_t mem[N_MEM];          // bytes in the trainer's working memory, by kind
    size_t host_mem[N_MEM];     // GPU trainer: pinned host bytes (offload), by kind
    size_t nvme_mem[N_MEM];     // bytes in this rank's NVMe files (ZeRO-Infinity), by kind

    // the model states, one allocation each
    floatX *params;             // stages 0-2: the full buffer; stage 3: this rank's shard
    float *master;              // separate_master: the fp32 master of this rank's partition
    floatX *resident;           // stage 3: full copies of the persistent units
    floatX *grads;              // stages 0-1: the full gradients, accumulated over micro-steps
    float *grad_shard;          // stages 2-3: this rank's gradient partition, accumulated in fp32
    float *opt_m, *opt_v;       // AdamW's moments of this rank's partition (everything in stage 0)

    // working buffers
    floatX *arena;              // stage 3: the gather ring
    floatX *grad_slots;         // stages 2-3: full gradients of the units in backward (plan.slot_off)
    floatX *rs_scratch;         // stages 2-3: where a unit's reduced slice lands before it is accumulated
    void *nvme_buffers;         // ZeRO-Infinity: the step's tiles, stage 3's unit reads (zero/state.h)
    uint32_t *decay_mask;       // the lean AdamW's weight-decay bits
    floatX *hpz_params;         // ZeRO++ hpZ: the secondary partition, each unit's part at hpz_off[u]
    size_t *hpz_off;
    uint8_t *zpp_staging;       // ZeRO++: quantized messages and qgZ's sums (zero_zpp_staging)
    ZeroAdamSeg *adam_seg;      // the optimizer step's segments
    int lean;                   // what of the step the backend runs lean (LEAN_*); -1: not asked yet

    // what the trainer's views read: each unit's parameters while fetched, its gradient while open
    floatX **unit_params, **unit_grads;
    int *unit_slot;             // stages 2-3: the slot each open gradient uses
    CommRequest *grad_reduce;   // stages 0-1: each unit's reduction at the boundary
    unsigned char *grad_reducing;   // stages 0-1: started and not yet waited for
    int reduced_in_backward;    // units whose reduction the last backward started (the comm report)
    int slot_next;              // stages 2-3: the alternating slot the next unit takes

    // the pass in progress
    int training;               // forward + backward
    const int *order; int n_order, cursor;   // stage 3: its gather order, and the next unit to fetch
    struct { int unit; size_t off, n; CommRequest req; } ring[ZERO_RING_SLOTS];
    int ring_head, ring_count;  // stage 3: the gathered units, oldest first
    size_t live, peak_live;
    int micro;                  // the micro-step within the step
    // tests: sees each unit's full gradient before it is reduced
    void (*grads_observer)(void *ctx, int unit, const floatX *g);
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
                        (void **)&z->hpz_params, (void **)&z->zpp_staging, staging_grad, staging_params};
    memcpy(ptr, p, sizeof(p));
}

// ZeRO++'s hierarchy needs nodes of equal, consecutive ranks (comm_nodes_init), and hpZ's
// secondary partition must span exactly one node. Every rank decides the same.
static void zero_zpp_check(const ZeroPlacement *pl, const ZeroPlan *p, const Comm *c, const TrainConfig *cfg) {
    if ((pl->hpz || pl->qg) && !c->node_size)
        fatal("ZeRO++ %s: the nodes here are not blocks of consecutive ranks of one size (comm/launch.h prints them); "
              "launch with the same number of ranks on every node, placed by node", pl->hpz ? "hpZ" : "qgZ");
    if (pl->hpz && pl->hpz != c->node_size)
        fatal("zero_hpz_partition_size %d (--zero-hpz-partition-size): the secondary partition spans one node, and the nodes "
              "here have %d rank%s each (comm/launch.h)", pl->hpz, c->node_size, c->node_size == 1 ? "" : "s");
    if (c->rank == 0 && !cfg->quiet && (pl->qw || pl->hpz || pl->qg))
        printf("ZeRO++ over %d node%s of %d rank%s:%s%s%s\n", c->n_nodes, c->n_nodes == 1 ? "" : "s", c->node_size,
               c->node_size == 1 ? "" : "s", pl->qw ? " qwZ (int8 parameter gathers, blocks of " ZQ_BLOCK_TEXT ")" : "",
               pl->hpz ? " hpZ (the backward gathers inside the node)" : "", pl->qg ? " qgZ (int4 hierarchical all-to-all gradients)" : "");
    // qwZ and hpZ act on the gathers of the units that are not persistent: with none (the plan's
    // forward gathers nothing), they do nothing
    if (c->rank == 0 && (pl->qw || pl->hpz) && p->n_fetch_fwd == 0)
        printf("note: ZeRO++ %s: every unit here has at most %lld elements, so all stay whole (stage3_param_persistence_threshold, "
               "--persistence-threshold) and no parameter is gathered: %s nothing; a lower threshold brings the gathers back\n",
               pl->qw && pl->hpz ? "qwZ and hpZ" : pl->qw ? "qwZ" : "hpZ", cfg->persistence_threshold,
               pl->qw && pl->hpz ? "they quantize and keep" : pl->qw ? "it quantizes" : "it keeps");
    if (TRAINER_IS_GPU && c->rank == 0 && (pl->qw || pl->hpz || pl->qg))
        printf("note: ZeRO++ in train_gpt has not run on a GPU yet (its kernels have dev/cuda/quantize.cu); its collectives are "
               "staged through host memory and MPI (comm/nodes.h)\n");
}

static void zero_init(Zero *z, const ModelLayout *L, const TrainConfig *cfg, Comm *comm) {
    memset(z, 0, sizeof(*z));
    z->comm = comm; z->layout = L; z->cfg = cfg;
    zero_plan_build(&z->plan, L, ZERO_STAGE, comm->world, comm->rank, cfg);
    const ZeroPlan *p = &z->plan;
    if ((long long)p->gather_need > cfg->max_live_elems)
        fatal("--max-live %lld is too small: stage 3 must hold %zu gathered elements at once (the largest step's units)",
              cfg->max_live_elems, p->gather_need);
    // The model states, then the working buffers. A buffer placed on NVMe is a plane of
    // this rank's NVMe files instead of memory.
    z->place = zero_placement(p, cfg, TRAINER_IS_GPU, sizeof(floatX));
    zero_zpp_check(&z->place, &z->plan, comm, cfg);
    ZeroBuffer b[N_ZBUF];
    zero_buffers(b, p, sizeof(floatX), &z->place);
    void *staging_grad = NULL, *staging_params = NULL, **ptr[N_ZBUF];
    zero_buffer_ptrs(z, ptr, &staging_grad, &staging_params);
    for (int i = 0; i < N_ZBUF; i++) {
        if (b[i].where == ZMEM_NVME) z->nvme_mem[b[i].kind] += b[i].bytes;
        else if (b[i].bytes) *ptr[i] = zero_alloc(z, b[i].kind, b[i].bytes, b[i].where);
    }
    zb_init(&z->be, comm, cfg, p->n_slots, staging_grad, staging_params);
    // The partition's state planes, addressed by shard offset: in the buffers above or in the NVMe files.
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
    for (int i = 0; i < p->n_units; i++)
        z->hpz_off[i + 1] = z->hpz_off[i] + (z->place.hpz && !p->u[i].persistent ? p->u[i].padded / z->place.hpz : 0);
    // Parameters that never move: every unit in stages 0-2; in stage 3 the persistent
    // units, or every unit where the shard is the whole model.
    for (int i = 0; i < p->n_units; i++)
        z->unit_params[i] = ZERO_STAGE <= 2 ? z->params + p->u[i].full_off
                          : z->place.whole ? z->params + p->u[i].shard_off
                          : p->u[i].persistent ? z->resident + p->u[i].resident_off : NULL;
}

static void zero_free(Zero *z) {
    ZeroBuffer b[N_ZBUF];
    zero_buffers(b, &z->plan, sizeof(floatX), &z->place);
    zb_destroy(&z->be);   // it owns the staging buffers, and closes the NVMe files
    void *staging_grad, *staging_params, **ptr[N_ZBUF];
    zero_buffer_ptrs(z, ptr, &staging_grad, &staging_params);
    for (int i = 0; i < ZBUF_STAGING_GRAD; i++) zb_free(&z->be, *ptr[i], b[i].where);
    free(z->unit_params); free(z->unit_grads); free(z->unit_slot); free(z->adam_seg);
    free(z->grad_reduce); free(z->grad_reducing); free(z->hpz_off);
    zero_plan_free(&z->plan);
}

// This rank's slice of unit u in the working parameters (NULL: they are in the NVMe
// store, at the unit's shard offset).
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
