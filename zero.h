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
//            (In both, the boundary's reduction runs unit by unit during the
//            last micro-step's backward, each unit's as soon as its gradient
//            is complete: PyTorch DDP's gradient buckets, DeepSpeed's
//            overlap_comm; the units are the buckets.)
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
//   - units: the embedding, each transformer layer, the final norm/head (model/model.h)
//   - each unit is padded to a multiple of P * ZERO_ALIGN elements and split
//     into P equal slices; rank r owns slice r of every unit (FSDP-style
//     per-unit flat parameters: a tensor may straddle two ranks' slices)
//   - the full buffer (stages 0-2) lays the padded units end to end; a rank's
//     shard buffer lays its slices end to end
//   - optimizer segments: (tensor ∩ slice) runs with their weight-decay flag
//   - from model/model.h's schedule (the units each step of a pass uses): the order
//     in which stage 3 gathers units, which units are persistent (at most
//     stage3_param_persistence_threshold elements: never partitioned in use,
//     like DeepSpeed's persistent parameters), the cap on live gathered
//     elements, the gradient slots of stages 2-3
//   P is the world size in stages 1-3 and 1 in stage 0 (nothing is partitioned).
//
// The trainer drives a step through these calls, in this order:
//   zero_step_begin                           once per optimizer step
//   per micro-step:
//     zero_begin_pass                         a forward (and backward) pass starts
//     for each step of the schedule:
//       zero_fetch / zero_release             the step's parameters, around its compute
//       zero_grads_open / zero_grads_close    backward: its gradients, around its compute
//     zero_end_pass, zero_micro_step_end
//   zero_step_end                             reduce, clip, AdamW, re-gather: zero_step_reduce,
//                                             zero_global_norm, zero_step_update (train/loop.h calls
//                                             the three itself, train/step_guard.h's overflow check between)
// Each call is a few `#if ZERO_STAGE` blocks that follow the paper's data
// movement, written against a handful of primitives (allocate, copy, accumulate
// a reduced slice, sum of squares, AdamW on a segment or, on the GPU, both over
// the whole partition at once, wait for the collectives)
// and comm/comm.h's collectives. The primitives have two implementations beside this
// file: zero/host.h (the CPU trainer: plain memory, MPI) and zero/device.cuh
// (the GPU trainer: device memory, streams and events, ZeRO-Offload's pinned
// host buffers and tiled CPU-Adam). Both keep the partition's state (master, m,
// v; stage 3's parameter shard) in memory or, with ZeRO-Infinity, on NVMe
// (zero/state.h): zero.h addresses it by shard offset. The reports (memory,
// communication, the estimator) are in train/zero_report.h.
#pragma once
#include "comm/comm.h"
#include "model/model.h"
#include "adamw.cuh"
#include "zero/backend.h"

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

#ifdef __CUDACC__
#include "zero/device.cuh"
#else
#include "zero/host.h"
#endif
#ifndef ZB_GRADS_FIRST_WRITE
#define ZB_GRADS_FIRST_WRITE 0   // the GPU trainer's kernels add to zeroed gradients
#endif

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
    int grad_slot;      // stages 2-3: the gradient slot it owns, or -1: one of the two alternating slots
    int last_grad_step; // the backward step after which its gradient is complete
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
    ZeroSegment *seg;
    int n_seg;
    // stage 3
    size_t resident_elems;      // Σ padded of persistent units
    size_t gather_need;         // gathered elements the largest step needs at once
    size_t live_cap;            // most gathered elements alive at once
    size_t arena_elems;         // live_cap + one unit of slack for the ring's wrap
    int *fetch_fwd, n_fetch_fwd;        // the gather order of a forward-only pass
    int *fetch_train, n_fetch_train;    // of a forward + backward pass
    // stages 2-3: slots for full gradients of units in backward: slots 0 and 1
    // alternate (one can be reducing while the next unit computes); a unit whose
    // gradient stays open across other units (a tied embedding) owns slot 2, 3, ...
    int n_slots;
    size_t *slot_off;           // each slot's offset in the slot buffer
    size_t slot_elems;          // the slot buffer
} ZeroPlan;

static size_t zero_padded(size_t numel, int P) { return round_up(numel, (size_t)P * ZERO_ALIGN); }

// The stage-3 gather order of a pass, from the schedule: every unit a step
// reads, unless it is persistent or still held from the forward.
static int zero_fetch_order(const ZeroPlan *p, const Schedule *S, int with_backward, int *order) {
    int n = 0;
    for (int pass = 0; pass <= with_backward; pass++) {
        const PassStep *steps = pass ? S->bwd : S->fwd;
        for (int i = 0; i < (pass ? S->n_bwd : S->n_fwd); i++)
            for (int k = 0; k < steps[i].n_params && !steps[i].kept; k++)
                if (!p->u[steps[i].params[k]].persistent) order[n++] = steps[i].params[k];
    }
    return n;
}

// Stage 3 sizing: walk a training pass as the ring will. Before a step runs,
// its units are all live (with what the forward kept); a prefetch adds the
// next unit of the order. `need` is what must fit, `peak` what prefetching uses.
static void zero_size_gathers(ZeroPlan *p, const Schedule *S, const TrainConfig *cfg) {
    size_t live = 0, need = 0, peak = 0, max_np = 0;
    int next = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < (pass ? S->n_bwd : S->n_fwd); i++) {
            const PassStep *s = pass ? &S->bwd[i] : &S->fwd[i];
            for (int k = 0; k < s->n_params && !s->kept; k++) {
                const ZeroUnit *U = &p->u[s->params[k]];
                if (U->persistent) continue;
                live += U->padded;
                next++;
                size_t ahead = cfg->prefetch && next < p->n_fetch_train ? p->u[p->fetch_train[next]].padded : 0;
                if (live > need) need = live;
                if (live + ahead > peak) peak = live + ahead;
                if (U->padded > max_np) max_np = U->padded;
            }
            if (!s->keep)
                for (int k = 0; k < s->n_params; k++)
                    if (!p->u[s->params[k]].persistent) live -= p->u[s->params[k]].padded;
        }
    p->gather_need = need;   // zero_init refuses a --max-live below it
    p->live_cap = (long long)peak < cfg->max_live_elems ? peak : (size_t)cfg->max_live_elems;
    if (p->live_cap < need) p->live_cap = need;
    // FIFO release: one unit of slack guarantees a unit fits whenever the live count allows it
    p->arena_elems = p->live_cap + max_np;
}

// Stages 2-3: a unit's gradient is complete after the last backward step that
// writes it. A unit written by two steps with others between (a tied embedding:
// the head, then the embedding) keeps its own slot; the others alternate.
static void zero_plan_grad_slots(ZeroPlan *p, const Schedule *S) {
    int *first = (int *)xmalloc(sizeof(int) * p->n_units, "gradient plan");
    for (int u = 0; u < p->n_units; u++) { first[u] = -1; p->u[u].last_grad_step = -1; p->u[u].grad_slot = -1; }
    for (int i = 0; i < S->n_bwd; i++)
        for (int k = 0; k < S->bwd[i].n_grads; k++) {
            int u = S->bwd[i].grads[k];
            if (first[u] < 0) first[u] = i;
            p->u[u].last_grad_step = i;
        }
    size_t own = 0, alternating = 0;
    p->n_slots = 2;
    for (int u = 0; u < p->n_units; u++) {
        if (p->u[u].last_grad_step > first[u]) p->n_slots++;
        else if (p->u[u].padded > alternating) alternating = p->u[u].padded;
    }
    p->slot_off = (size_t *)xcalloc(sizeof(size_t) * p->n_slots, "gradient slots");
    int slot = 2;
    for (int u = 0; u < p->n_units; u++)
        if (p->u[u].last_grad_step > first[u]) { p->u[u].grad_slot = slot; p->slot_off[slot++] = own; own += p->u[u].padded; }
    p->slot_off[0] = own;
    p->slot_off[1] = own + alternating;
    p->slot_elems = own + 2 * alternating;
    free(first);
}

// The plan of one stage (zero_init: the compiled one; the estimator: each) at a world size.
static void zero_plan_build(ZeroPlan *p, const ModelLayout *L, int stage, int world, int rank, const TrainConfig *cfg) {
    memset(p, 0, sizeof(*p));
    p->stage = stage;
    p->world = world; p->rank = rank;
    p->P = stage >= 1 ? world : 1;
    p->part = stage >= 1 ? rank : 0;
    p->n_units = L->n_units;
    p->u = (ZeroUnit *)xcalloc(sizeof(ZeroUnit) * p->n_units, "zero plan");
    size_t full = 0, shard = 0, resident = 0;
    for (int i = 0; i < p->n_units; i++) {
        ZeroUnit *u = &p->u[i];
        u->numel = L->units[i].numel;
        u->padded = zero_padded(u->numel, p->P);
        u->shard = u->padded / p->P;
        u->full_off = full; full += u->padded;
        u->shard_off = shard; shard += u->shard;
        u->persistent = stage == 3 && (long long)u->numel <= cfg->persistence_threshold;
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

    // what the schedule implies
    const Schedule *S = &L->schedule;
    int max_fetches = 0;
    for (int i = 0; i < S->n_fwd; i++) max_fetches += S->fwd[i].n_params;
    for (int i = 0; i < S->n_bwd; i++) max_fetches += S->bwd[i].n_params;
    p->fetch_fwd = (int *)xmalloc(sizeof(int) * (max_fetches + 1), "fetch order");
    p->fetch_train = (int *)xmalloc(sizeof(int) * (max_fetches + 1), "fetch order");
    p->n_fetch_fwd = zero_fetch_order(p, S, 0, p->fetch_fwd);
    p->n_fetch_train = zero_fetch_order(p, S, 1, p->fetch_train);
    if (stage == 3) zero_size_gathers(p, S, cfg);
    zero_plan_grad_slots(p, S);
}

static void zero_plan_free(ZeroPlan *p) { free(p->u); free(p->seg); free(p->fetch_fwd); free(p->fetch_train); free(p->slot_off); }

// ----------------------------------------------------------------------------
// where the model states live
//
//                        CPU trainer (fp32)            GPU trainer (floatX: bf16, or fp16 + fp32 master)
//   params               full or shard; the master     full or shard, floatX working copy
//   master               (params are the master)       fp32 partition (device, or pinned host: offload)
//   grads (stages 0-1)   full, fp32                    full, floatX (micro-steps add in floatX, as llm.c)
//   grad_shard (2-3)     fp32 accumulator              fp32 accumulator of the reduced floatX slices
//   opt_m, opt_v         fp32 partition                fp32 partition (device, or pinned host: offload)
// z->separate_master (zero_placement: the GPU trainer, the CPU's fp16 mode) says which column applies;
// the CPU trainer's fp16 mode (--fp16 1) takes the GPU's column: a separate fp32 master, and
// parameters and gradients stored as fp16 values (zero/host.h says where they are rounded).

typedef struct {
    ZeroPlan plan;
    ZeroBackend be;             // the primitives' state (zero/host.h / zero/device.cuh)
    Comm *comm;
    const ModelLayout *layout;
    const TrainConfig *cfg;
    size_t mem[N_MEM];          // bytes in the trainer's working memory, by kind
    size_t host_mem[N_MEM];     // GPU trainer: pinned host bytes (offload), by kind
    size_t nvme_mem[N_MEM];     // bytes in this rank's NVMe files (ZeRO-Infinity), by kind
    int offload;                // ZeRO-Offload: the optimizer partition and its update on the host
    int offload_param;          // stage 3: the parameter shard in host memory
    int whole;                  // stage 3 at one rank, the shard in working memory: units used in place (zero_shard_whole)
    int separate_master;        // an fp32 master beside floatX working parameters (GPU; CPU with --fp16 1)

    // model states (one allocation each)
    floatX *params;             // stages 0-2: full padded parameters; stage 3: this rank's shard
    float *master;              // separate_master: the fp32 master of this rank's partition
    floatX *resident;           // stage 3: full copies of the persistent units
    floatX *grads;              // stages 0-1: full padded gradients (accumulated over micro-steps)
    float *grad_shard;          // stages 2-3: this rank's gradient partition, accumulated in fp32
    float *opt_m, *opt_v;       // AdamW moments of this rank's partition (everything in stage 0)

    // working buffers
    floatX *arena;              // stage 3: gathered units (a FIFO ring)
    floatX *grad_slots;         // stages 2-3: full gradients of units in backward (plan.slot_off)
    floatX *rs_scratch;         // stages 2-3: where a unit's reduced slice lands before it is accumulated
    void *nvme_buffers;         // ZeRO-Infinity: the step's tiles, stage 3's unit reads (zero/state.h)
    uint32_t *decay_mask;       // the lean AdamW's weight-decay bits (zero_lean; NULL: AdamW segment by segment)
    ZeroAdamSeg *adam_seg;      // the optimizer step's segments (zero_adamw_partition)
    int lean;                   // what of the step the backend runs lean (ZB_LEAN_*; -1: not asked yet)

    // what the trainer's views read: each unit's parameters while fetched, its gradient while open
    floatX **unit_params, **unit_grads;
    int *unit_slot;             // stages 2-3: the slot each open gradient uses
    CommRequest *grad_reduce;   // stages 0-1: each unit's reduction at the boundary, started by its backward
    unsigned char *grad_reducing;   // stages 0-1: the unit's reduction is started and not yet waited for
    int reduced_in_backward;    // units whose boundary reduction the last micro-step's backward started (the comm report)
    int slot_next;

    // the pass in progress
    int training;               // forward + backward
    const int *order; int n_order, cursor;   // stage 3: its gather order
    struct { int unit; size_t off, n; CommRequest req; } ring[8];
    int ring_head, ring_count;  // stage 3: FIFO of gathered units
    size_t live, peak_live;
    int micro;                  // micro-step index within the step
    // tests: sees each unit's full gradient before it is reduced
    void (*grads_observer)(void *ctx, int unit, const floatX *g);
    void *observer_ctx;
} Zero;

static void *zero_alloc(Zero *z, int kind, size_t bytes, int where) {
    (where == ZMEM_HOST ? z->host_mem : z->mem)[kind] += bytes;
    return zb_alloc(&z->be, bytes, where, MEM_NAMES[kind]);
}

// Where the model states go, from the flags (the same for a run and for the estimator).
typedef struct {
    int separate_master;        // an fp32 master besides the floatX parameters (GPU; the CPU's fp16 mode)
    int offload;                // ZeRO-Offload: the optimizer partition and its update on the host (GPU)
    int offload_param;          // stage 3: the parameter shard in pinned host memory (GPU)
    ZeroNvmePlan nvme;          // ZeRO-Infinity: the planes on NVMe, their tiles (zero/state.h)
    int lean_adamw;             // GPU, --lean-step 1: AdamW in one launch over the partition (zero_lean), which needs
                                // the state and the parameters in memory: its weight-decay mask
} ZeroPlacement;

static ZeroPlacement zero_placement(const ZeroPlan *p, const TrainConfig *cfg, int gpu, size_t x) {
    // (the GPU's NVMe optimizer offload is an optimizer offload: CPU-Adam streams the state)
    ZeroPlacement pl = {gpu || cfg->fp16, gpu && (cfg->offload || cfg->nvme_optim_dir[0]), gpu && cfg->offload_param && p->stage == 3};
    pl.nvme = zero_nvme_plan(cfg, p->stage, pl.separate_master, x, p->shard_elems, p->max_shard);
    pl.lean_adamw = gpu && cfg->lean_step && !pl.offload && !pl.nvme.on[ZS_PARAM];
    return pl;
}

// Every buffer of the model states and of ZeRO's working memory, with its size
// for a plan: zero_init allocates exactly these (a buffer placed on NVMe is a plane
// of this rank's NVMe files instead), and the estimator adds them up.
//   x: bytes of a floatX; pl: where the states go, and ZeRO-Offload's pinned staging
//   (the reduced gradient partition and the floatX parameters CPU-Adam writes, on
//   their way between host and device); ZeRO-Infinity's tiles and unit buffers; the lean AdamW's
//   weight-decay mask (a bit per element of the partition: counted as scratch, a working buffer).
enum { ZB_PARAMS, ZB_MASTER, ZB_OPT_M, ZB_OPT_V, ZB_RESIDENT, ZB_ARENA, ZB_GRADS, ZB_GRAD_SHARD, ZB_GRAD_SLOTS,
       ZB_RS_SCRATCH, ZB_NVME_BUFFERS, ZB_DECAY_MASK, ZB_STAGING_GRAD, ZB_STAGING_PARAMS, N_ZBUF };
typedef struct { size_t bytes; int kind, where; } ZeroBuffer;

// Stage 3 at one rank: the shard is the whole model. Unless it lives elsewhere (offload_param's host
// memory on the GPU, or NVMe), it already sits where the compute reads it, and a gather would copy
// every unit onto itself: the units are used in place instead (no gather arena, no resident copies,
// no all-gathers).
static int zero_shard_whole(const ZeroPlan *p, const ZeroPlacement *pl) {
    return p->stage == 3 && p->P == 1 && !pl->offload_param && !pl->nvme.on[ZS_PARAM];
}

static void zero_buffers(ZeroBuffer b[N_ZBUF], const ZeroPlan *p, size_t x, const ZeroPlacement *pl) {
    int st = p->stage, opt = pl->offload ? ZMEM_HOST : ZMEM_WORK, sm = pl->separate_master, off = pl->offload;
    int gathers = st == 3 && !zero_shard_whole(p, pl);
    const int *nvme = pl->nvme.on;
    size_t shard = p->shard_elems, grad_x = st <= 1 ? x : 4;   // the reduced gradient: floatX slices, or the fp32 shard
    memset(b, 0, sizeof(ZeroBuffer) * N_ZBUF);
    b[ZB_PARAMS] = (ZeroBuffer){(st <= 2 ? p->full_elems : shard) * x, MEM_PARAMS,
                                nvme[ZS_PARAM] ? ZMEM_NVME : st == 3 && pl->offload_param ? ZMEM_HOST : ZMEM_WORK};
    b[ZB_MASTER] = (ZeroBuffer){sm ? shard * 4 : 0, MEM_OPTIM, nvme[ZS_MASTER] ? ZMEM_NVME : opt};
    b[ZB_OPT_M] = b[ZB_OPT_V] = (ZeroBuffer){shard * 4, MEM_OPTIM, nvme[ZS_M] ? ZMEM_NVME : opt};
    b[ZB_RESIDENT] = (ZeroBuffer){gathers ? p->resident_elems * x : 0, MEM_GATHER, ZMEM_WORK};
    b[ZB_ARENA] = (ZeroBuffer){gathers ? p->arena_elems * x : 0, MEM_GATHER, ZMEM_WORK};
    b[ZB_GRADS] = (ZeroBuffer){st <= 1 ? p->full_elems * x : 0, MEM_GRADS, ZMEM_WORK};
    b[ZB_GRAD_SHARD] = (ZeroBuffer){st >= 2 ? shard * 4 : 0, MEM_GRADS, ZMEM_WORK};
    b[ZB_GRAD_SLOTS] = (ZeroBuffer){st >= 2 ? p->slot_elems * x : 0, MEM_GRAD_BUCKETS, ZMEM_WORK};
    b[ZB_RS_SCRATCH] = (ZeroBuffer){st >= 2 ? p->max_shard * x : 0, MEM_GRAD_BUCKETS, ZMEM_WORK};
    b[ZB_NVME_BUFFERS] = (ZeroBuffer){zero_nvme_buffer_bytes(&pl->nvme), MEM_NVME_BUFFERS, opt};
    b[ZB_DECAY_MASK] = (ZeroBuffer){pl->lean_adamw ? round_up(shard, 32) / 8 : 0, MEM_SCRATCH, ZMEM_WORK};
    b[ZB_STAGING_GRAD] = (ZeroBuffer){sm && off ? shard * grad_x : 0, MEM_GRAD_BUCKETS, ZMEM_HOST};
    // (with the parameter shard on NVMe, CPU-Adam writes its floatX output into the shard's tiles)
    b[ZB_STAGING_PARAMS] = (ZeroBuffer){sm && off && !nvme[ZS_PARAM] ? shard * x : 0, MEM_GRAD_BUCKETS, ZMEM_HOST};
}

static void zero_init(Zero *z, const ModelLayout *L, const TrainConfig *cfg, Comm *comm) {
    memset(z, 0, sizeof(*z));
    z->comm = comm; z->layout = L; z->cfg = cfg;
    zero_plan_build(&z->plan, L, ZERO_STAGE, comm->world, comm->rank, cfg);
    const ZeroPlan *p = &z->plan;
    if ((long long)p->gather_need > cfg->max_live_elems)
        fatal("--max-live %lld is too small: stage 3 must hold %zu gathered elements at once (the largest step's units)",
              cfg->max_live_elems, p->gather_need);
    // the model states (stage 3: the parameters' shard in host memory with ZeRO-Infinity's
    // offload_param, each unit's slice copied to the GPU as part of its gather; the optimizer
    // partition in host memory with ZeRO-Offload; either on NVMe), then the working buffers
    ZeroPlacement pl = zero_placement(p, cfg, TRAINER_IS_GPU, sizeof(floatX));
    z->offload = pl.offload;
    z->offload_param = pl.offload_param;
    z->separate_master = pl.separate_master;
    z->whole = zero_shard_whole(p, &pl);
    ZeroBuffer b[N_ZBUF];
    zero_buffers(b, p, sizeof(floatX), &pl);
    void *staging_grad = NULL, *staging_params = NULL;
    void **ptr[N_ZBUF] = {(void **)&z->params, (void **)&z->master, (void **)&z->opt_m, (void **)&z->opt_v,
                          (void **)&z->resident, (void **)&z->arena, (void **)&z->grads, (void **)&z->grad_shard,
                          (void **)&z->grad_slots, (void **)&z->rs_scratch, &z->nvme_buffers, (void **)&z->decay_mask,
                          &staging_grad, &staging_params};
    for (int i = 0; i < N_ZBUF; i++) {
        if (b[i].where == ZMEM_NVME) z->nvme_mem[b[i].kind] += b[i].bytes;   // a plane of the NVMe files
        else if (b[i].bytes) *ptr[i] = zero_alloc(z, b[i].kind, b[i].bytes, b[i].where);
    }
    zb_init(&z->be, comm, cfg, p->n_slots, staging_grad, staging_params);
    // the partition's state planes, by shard offset: in the buffers above or in the NVMe files
    void *planes[N_ZSTATE] = {z->master, z->opt_m, z->opt_v, ZERO_STAGE == 3 ? (void *)z->params : NULL};
    zb_state_init(&z->be, &pl.nvme, planes, z->separate_master, cfg, z->nvme_buffers, comm->rank == 0 && !cfg->quiet);
    z->adam_seg = (ZeroAdamSeg *)xmalloc(sizeof(ZeroAdamSeg) * (p->n_seg + 1), "optimizer segments");
    z->lean = -1;

    z->unit_params = (floatX **)xcalloc(sizeof(floatX *) * p->n_units, "unit views");
    z->unit_grads = (floatX **)xcalloc(sizeof(floatX *) * p->n_units, "unit views");
    z->unit_slot = (int *)xcalloc(sizeof(int) * p->n_units, "unit views");
    z->grad_reduce = (CommRequest *)xcalloc(sizeof(CommRequest) * p->n_units, "gradient reductions");
    z->grad_reducing = (unsigned char *)xcalloc(p->n_units, "gradient reductions");
    // parameters that never move: stages 0-2 hold every unit whole, stage 3 its persistent units
    // (and at one rank every unit, its shard)
    for (int i = 0; i < p->n_units; i++)
        z->unit_params[i] = ZERO_STAGE <= 2 ? z->params + p->u[i].full_off
                          : z->whole ? z->params + p->u[i].shard_off
                          : p->u[i].persistent ? z->resident + p->u[i].resident_off : NULL;
}

static void zero_free(Zero *z) {
    ZeroPlacement pl = zero_placement(&z->plan, z->cfg, TRAINER_IS_GPU, sizeof(floatX));
    ZeroBuffer b[N_ZBUF];
    zero_buffers(b, &z->plan, sizeof(floatX), &pl);
    zb_destroy(&z->be);   // (its staging, and the NVMe files)
    void *ptr[] = {z->params, z->master, z->opt_m, z->opt_v, z->resident, z->arena, z->grads, z->grad_shard,
                   z->grad_slots, z->rs_scratch, z->nvme_buffers, z->decay_mask};
    for (int i = 0; i < ZB_STAGING_GRAD; i++) zb_free(&z->be, ptr[i], b[i].where);
    free(z->unit_params); free(z->unit_grads); free(z->unit_slot); free(z->adam_seg);
    free(z->grad_reduce); free(z->grad_reducing);
    zero_plan_free(&z->plan);
}

// this rank's slice of unit u in the working parameters (NULL: they are in the NVMe
// store, at the unit's shard offset), and in the reduced gradient
static floatX *zero_param_slice(Zero *z, int u) {
    const ZeroUnit *U = &z->plan.u[u];
    if (!z->params) return NULL;
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
// whether this rank holds every unit's whole fp32 master (CPU: stages 0-2;
// GPU: one partition). Then its slice sits at part * shard of the padded unit.
static int zero_master_whole(const Zero *z) { return z->separate_master ? z->plan.P == 1 : ZERO_STAGE <= 2; }

// n elements of unit u's fp32 master from element lo of the padded unit (inside what this
// rank holds: its slice, or the whole unit where zero_master_whole) into host memory,
// wherever it is: the separate master, or the parameters (without a separate master
// floatX is float: the CPU trainer's parameters are the master), in memory or on NVMe.
static void zero_master_read(Zero *z, int u, size_t lo, size_t n, float *host) {
    const ZeroUnit *U = &z->plan.u[u];
    size_t so = U->shard_off + (lo - (size_t)z->plan.part * U->shard);   // its shard offset, where it has one
    if (z->separate_master) zb_state_read(&z->be, ZS_MASTER, so, n, host);
    else if (!z->params) zb_state_read(&z->be, ZS_PARAM, so, n, host);
    else zb_download(&z->be, host, z->params + (ZERO_STAGE == 3 ? so : U->full_off + lo), n * sizeof(float));
}

// ----------------------------------------------------------------------------
// loading and saving full parameters (flat, unpadded fp32: the model file)

// Every rank takes what its stage holds of each unit from a parameter source
// (the seeded initialization, a model file, a checkpoint): the whole padded unit
// in stages 0-2 (the parameters are whole there), only its slice in stage 3
// (plus the persistent units whole) - DeepSpeed's zero.Init: no rank ever holds
// more of the model than its stage says, not even while loading. The fp32 values
// land in the parameters themselves where those are the fp32 master (the CPU
// trainer), else in one unit's staging, from which the master slice and the
// floatX working copy (the master rounded to nearest even) are uploaded (or
// written to NVMe, where the state is there).
// Returns 1, or 0 with src->err set.
static int zero_load_params(Zero *z, ParamSource *src) {
    const ZeroPlan *p = &z->plan;
    int direct = !z->separate_master && z->params;   // the values land in the parameters themselves
    float *staging = direct ? NULL : (float *)xmalloc(p->max_padded * sizeof(float), "parameter staging");
    int ok = 1;
    for (int i = 0; i < p->n_units && ok; i++) {
        const ZeroUnit *U = &p->u[i];
        size_t lo = ZERO_STAGE == 3 ? (size_t)p->part * U->shard : 0, n = ZERO_STAGE == 3 ? U->shard : U->padded;
        floatX *held = z->params ? z->params + (ZERO_STAGE == 3 ? U->shard_off : U->full_off) : NULL;
        float *vals = direct ? (float *)held : staging;
        ok = src->read(src, i, lo, n, vals);
        if (ok && z->separate_master)
            zb_state_write(&z->be, ZS_MASTER, U->shard_off, U->shard, vals + ((size_t)p->part * U->shard - lo));
        if (ok && !direct) {   // the floatX parameters: uploaded, or (stage 3) written to the NVMe shard
            if (held) zb_upload_floatX(&z->be, held, vals, n);
            else zb_state_write_floatX(&z->be, U->shard_off, vals, n);
        }
        if (ok && ZERO_STAGE == 3 && U->persistent && !z->whole) {   // stage 3's resident units are whole
            float *whole = z->separate_master ? staging : (float *)(z->resident + U->resident_off);
            ok = src->read(src, i, 0, U->padded, whole);
            if (ok && z->separate_master) zb_upload_floatX(&z->be, z->resident + U->resident_off, whole, U->padded);
        }
    }
    free(staging);
    return ok;
}

// n elements of the optimizer partition's m (which 0) or v (which 1) from shard
// offset off, to and from host memory (checkpoints, a piece at a time; from and to
// the NVMe files where they are there).
static void zero_optim_read(Zero *z, int which, size_t off, size_t n, float *host) {
    zb_state_read(&z->be, which ? ZS_V : ZS_M, off, n, host);
}
static void zero_optim_write(Zero *z, int which, size_t off, size_t n, const float *host) {
    zb_state_write(&z->be, which ? ZS_V : ZS_M, off, n, host);
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

// start gathering the unit at position pos of the pass's order (non-blocking); returns 0 if it does not fit now
static int zero_start_gather(Zero *z, int pos, int must) {
    int u = z->order[pos];
    const ZeroUnit *U = &z->plan.u[u];
    size_t off;
    if (z->ring_count == 8 || z->live + U->padded > z->plan.live_cap || !zero_ring_alloc(z, U->padded, &off)) {
        if (must) fatal("zero stage 3: unit %d (%zu elements) does not fit in the gather arena (live %zu of %zu): raise --max-live",
                        u, U->padded, z->live, z->plan.live_cap);
        return 0;
    }
    int slot = (z->ring_head + z->ring_count) % 8;
    z->ring[slot].unit = u; z->ring[slot].off = off; z->ring[slot].n = U->padded;
    // the paper's "broadcast of the parameters of a partition": this rank's slice
    // to its place in the arena (from host memory with offload_param; read from NVMe
    // with ZeRO-Infinity, and the next unit's read started now), then an in-place
    // all-gather of every rank's slice
    floatX *full = z->arena + off, *mine = full + (size_t)z->plan.part * U->shard;
    zb_param_slice_to(&z->be, mine, zero_param_slice(z, u), U->shard_off, U->shard);
    if (pos + 1 < z->n_order) {
        const ZeroUnit *next = &z->plan.u[z->order[pos + 1]];
        zb_param_read_ahead(&z->be, next->shard_off, next->shard);
    }
    z->ring[slot].req = comm_iall_gather(z->comm, mine, full, U->shard, ZPARAM_DT);
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

// Parameters of unit u, gathered in full (padded layout; tensors at their
// model/model.h offsets). Stage 3: waits for the prefetched gather or gathers now,
// then prefetches the next unit of the pass so that its all-gather overlaps
// this unit's compute.
static floatX *zero_fetch_params(Zero *z, int u) {
#if ZERO_STAGE == 3
    if (!z->plan.u[u].persistent) {
        if (z->cursor >= z->n_order || z->order[z->cursor] != u)
            fatal("zero stage 3: unit %d fetched out of the planned order (expected %d)", u,
                  z->cursor < z->n_order ? z->order[z->cursor] : -1);
        z->cursor++;
        if (z->whole) return z->unit_params[u];   // one rank: the shard is the unit
        int s = zero_ring_find(z, u);
        if (s < 0) { zero_start_gather(z, z->cursor - 1, 1); s = zero_ring_find(z, u); }
        comm_wait(z->comm, &z->ring[s].req);
        if (z->cfg->prefetch && z->cursor < z->n_order && zero_ring_find(z, z->order[z->cursor]) < 0)
            zero_start_gather(z, z->cursor, 0);
        z->unit_params[u] = z->arena + z->ring[s].off;
    }
#endif
    return z->unit_params[u];
}

// Done with unit u's parameters until its next fetch: stage 3 frees them.
// (On the GPU "done" means the kernels that read them are queued: a later
// gather into the same space waits for them, see comm_nccl_begin.)
static void zero_release_params(Zero *z, int u) {
#if ZERO_STAGE == 3
    if (z->plan.u[u].persistent || z->whole) return;
    if (z->ring_count == 0 || z->ring[z->ring_head].unit != u)
        fatal("zero stage 3: unit %d released out of order", u);
    int s = z->ring_head;
    comm_wait(z->comm, &z->ring[s].req);
    if (ZERO_POISON) zb_fill(&z->be, z->arena + z->ring[s].off, 0xFF, z->ring[s].n * sizeof(floatX));   // all-ones bits: NaN
    z->live -= z->ring[s].n;
    z->ring_head = (z->ring_head + 1) % 8;
    z->ring_count--;
    z->unit_params[u] = NULL;
#endif
}

// A forward-only pass (evaluation, sampling) or a forward and backward pass
// (training) starts. Every rank runs the same passes in the same order, so
// every rank issues the same collectives: no rank can wait on a gather that
// another rank never starts.
static void zero_begin_pass(Zero *z, int with_backward) {
    z->training = with_backward;
    z->order = with_backward ? z->plan.fetch_train : z->plan.fetch_fwd;
    z->n_order = with_backward ? z->plan.n_fetch_train : z->plan.n_fetch_fwd;
    z->cursor = 0;
#if ZERO_STAGE == 3
    if (z->n_order) zb_param_read_ahead(&z->be, z->plan.u[z->order[0]].shard_off, z->plan.u[z->order[0]].shard);
#endif
}

// The parameters of one step of the schedule (the trainer's views read them
// through the returned unit table).
static floatX *const *zero_fetch(Zero *z, const PassStep *s) {
    for (int k = 0; k < s->n_params && !s->kept; k++) zero_fetch_params(z, s->params[k]);
    return z->unit_params;
}
// After the step's compute; a training forward keeps what the backward's first step reads.
static void zero_release(Zero *z, const PassStep *s) {
    if (z->training && s->keep) return;
    for (int k = 0; k < s->n_params; k++) zero_release_params(z, s->params[k]);
}

// Stage 3, end of a pass: a prefetch that the pass did not use (none with the
// planned orders) would hold arena space; drain it so every pass starts empty.
static void zero_end_pass(Zero *z) {
#if ZERO_STAGE == 3
    while (z->ring_count) zero_release_params(z, z->ring[z->ring_head].unit);
#endif
}

// ----------------------------------------------------------------------------
// gradients

// The buffer that unit u's backward accumulates its full gradient into.
//   stages 0-1: the unit's place in the full gradient buffer (accumulates over micro-steps)
//   stages 2-3: a zeroed slot, reduce-scattered by zero_grads_end
static floatX *zero_grads_begin(Zero *z, int u) {
#if ZERO_STAGE <= 1
    z->unit_grads[u] = z->grads + z->plan.u[u].full_off;
#else
    int slot = z->plan.u[u].grad_slot;
    if (slot < 0) { slot = z->slot_next; z->slot_next ^= 1; }
    z->unit_slot[u] = slot;
    z->unit_grads[u] = z->grad_slots + z->plan.slot_off[slot];
    zb_slot_acquire(&z->be, slot);   // the slot's last reduce-scatter is done with it
    zb_fill(&z->be, z->unit_grads[u], 0, z->plan.u[u].padded * sizeof(floatX));
#endif
    return z->unit_grads[u];
}

// This rank's gradient slice of unit u is final for this step (the optimizer
// may read it): ZeRO-Offload starts copying it to the host.
static void zero_grad_final(Zero *z, int u) {
    zb_grad_slice_final(&z->be, z->plan.u[u].shard_off, zero_grad_slice(z, u), z->plan.u[u].shard);
}

// Stages 0-1: start the boundary's reduction of unit u's full gradient (non-blocking;
// zero_step_reduce waits for it). Every rank starts the units in the same order (the
// schedule's), so the collectives match.
static void zero_start_grad_reduce(Zero *z, int u, int in_backward) {
#if ZERO_STAGE <= 1
    const ZeroUnit *U = &z->plan.u[u];
#if ZERO_STAGE == 0
    // plain data parallel: all-reduce (average) the unit's full gradient
    z->grad_reduce[u] = comm_iall_reduce(z->comm, z->grads + U->full_off, U->padded, ZPARAM_DT, OP_AVG);
#else
    // P_os: reduce-scatter the unit's full, locally accumulated gradient; each rank
    // keeps the averaged gradient of its own slice, in place
    z->grad_reduce[u] = comm_ireduce_scatter(z->comm, z->grads + U->full_off, zero_grad_slice(z, u), U->shard, ZPARAM_DT, OP_AVG);
#endif
    z->grad_reducing[u] = 1;
    z->reduced_in_backward += in_backward;
#endif
}

// Unit u's backward is finished.
//   stages 0-1: on the step's last micro-step its gradient is complete: its reduction
//   starts now and overlaps the backward of the units before it (DDP-style buckets;
//   only the last unit's, the embedding's, is exposed).
//   stages 2-3: reduce-scatter its gradient now (the paper: "as the gradients of a
//   partition become available, they are reduced to the rank that owns it"), and
//   accumulate the averaged slice into this rank's fp32 gradient shard.
static void zero_grads_end(Zero *z, int u) {
    if (z->grads_observer) z->grads_observer(z->observer_ctx, u, z->unit_grads[u]);
#if ZERO_STAGE <= 1
    if (z->micro == z->cfg->accum - 1) zero_start_grad_reduce(z, u, 1);
#else
    const ZeroUnit *U = &z->plan.u[u];
    if (z->plan.P == 1 && ZB_ONE_RANK_IN_PLACE) {
        // one rank: the reduce-scatter's result would be its input; the slot is added as it is
        CommRequest none = {0};
        zb_accumulate_reduced(&z->be, &none, z->grad_shard + U->shard_off, z->unit_grads[u], U->shard, z->micro == 0);
    } else {
        CommRequest r = comm_ireduce_scatter(z->comm, z->unit_grads[u], z->rs_scratch, U->shard, ZPARAM_DT, OP_AVG);
        zb_accumulate_reduced(&z->be, &r, z->grad_shard + U->shard_off, z->rs_scratch, U->shard, z->micro == 0);
    }
    if (z->micro == z->cfg->accum - 1) { zero_grad_final(z, u); z->reduced_in_backward++; }
    zb_slot_release(&z->be, z->unit_slot[u]);
#endif
}

// The gradients one backward step writes: opened at the first step that writes
// a unit, closed (reduced) after the last.
static floatX *const *zero_grads_open(Zero *z, const PassStep *s) {
    for (int k = 0; k < s->n_grads; k++) {
        int u = s->grads[k];
        if (ZERO_STAGE <= 1 || z->plan.u[u].grad_slot < 0 || !z->unit_grads[u]) zero_grads_begin(z, u);
    }
    return z->unit_grads;
}
static void zero_grads_close(Zero *z, const PassStep *s) {
    int step = (int)(s - z->layout->schedule.bwd);
    for (int k = 0; k < s->n_grads; k++) {
        int u = s->grads[k];
        zb_grads_stored(&z->be, z->unit_grads[u], z->plan.u[u].padded);   // the step's gradients, as floatX stores them
        if (z->plan.u[u].last_grad_step != step) continue;
        zero_grads_end(z, u);
        if (ZERO_STAGE >= 2) z->unit_grads[u] = NULL;
    }
}

// ----------------------------------------------------------------------------
// the optimizer step

// Stages 0-1, where each unit's gradient has its own place that micro-steps add to: with a trainer
// whose backward can write a unit's gradients instead of adding them (ZB_GRADS_FIRST_WRITE), at a
// step's first micro-step every unit but the embedding is written whole by its one backward step
// (GEMMs with beta 0, the sums of norms and biases stored), so it is not zeroed first; its padding,
// which no kernel writes, keeps the zeros of its allocation (reductions of zeros are zeros). The
// embedding's backward adds rows (and gpt2's head adds its tied lm_head into wte): it is zeroed.
static int zero_grads_first_write(const Zero *z, int u) {
    return ZB_GRADS_FIRST_WRITE && ZERO_STAGE <= 1 && z->micro == 0 && u != model_unit_embed(z->layout);
}

static void zero_step_begin(Zero *z) {
    z->micro = 0;
    z->reduced_in_backward = 0;
#if ZERO_STAGE <= 1
    const ZeroPlan *p = &z->plan;
    if (!ZB_GRADS_FIRST_WRITE) zb_fill(&z->be, z->grads, 0, p->full_elems * sizeof(floatX));
    for (int i = 0; i < p->n_units && ZB_GRADS_FIRST_WRITE; i++)
        if (!zero_grads_first_write(z, i)) zb_fill(&z->be, z->grads + p->u[i].full_off, 0, p->u[i].padded * sizeof(floatX));
#endif
}

static void zero_micro_step_end(Zero *z) { z->micro++; }

typedef struct { float lr, beta1, beta2, eps, weight_decay, grad_clip; int t; } ZeroOptim;

// where a segment starts inside its unit's slice on this rank
static size_t zero_seg_in_slice(const ZeroPlan *p, const ZeroSegment *sg) {
    return sg->unit_off - (size_t)p->part * p->u[sg->unit].shard;
}

// AdamW's view of the partition's segments into z->adam_seg: weight_decay on the tensors that decay
static void zero_adam_segments(Zero *z, float weight_decay) {
    const ZeroPlan *p = &z->plan;
    for (int s = 0; s < p->n_seg; s++) {
        const ZeroSegment *sg = &p->seg[s];
        size_t in_slice = zero_seg_in_slice(p, sg);
        floatX *param = zero_param_slice(z, sg->unit);
        z->adam_seg[s] = (ZeroAdamSeg){p->u[sg->unit].shard_off + in_slice, sg->n, sg->decay ? weight_decay : 0.0f,
                                       zero_grad_slice(z, sg->unit) + in_slice, param ? param + in_slice : NULL};
    }
}

// What of the step the backend runs lean (ZB_LEAN_*; zero/device.cuh: the GPU's norm, and its AdamW
// where the state is in device memory; with --lean-step 1): over the whole partition in one
// launch each. It gets the partition once, as whole unit slices, padding included (zero there, and
// left zero), and the segments' weight-decay flags; the rest walks the segments below one by one.
static int zero_lean(Zero *z) {
    if (z->lean < 0) {
        const ZeroPlan *p = &z->plan;
        ZeroAdamSeg *slices = (ZeroAdamSeg *)xmalloc(sizeof(ZeroAdamSeg) * p->n_units, "unit slices");
        for (int i = 0; i < p->n_units; i++)
            slices[i] = (ZeroAdamSeg){p->u[i].shard_off, p->u[i].shard, 0.0f, zero_grad_slice(z, i), zero_param_slice(z, i)};
        zero_adam_segments(z, 1.0f);
        z->lean = zb_lean_init(&z->be, slices, p->n_units, z->adam_seg, p->n_seg, p->shard_elems, z->decay_mask);
        free(slices);
    }
    return z->lean;
}

// The global gradient norm: each rank's partition contributes its squares.
static float zero_global_norm(Zero *z) {
    const ZeroPlan *p = &z->plan;
    if (zero_lean(z) & ZB_LEAN_NORM) zb_lean_sumsq(&z->be);
    else for (int s = 0; s < p->n_seg; s++)
        zb_sumsq_add(&z->be, zero_grad_slice(z, p->seg[s].unit) + zero_seg_in_slice(p, &p->seg[s]), p->seg[s].n);
    double sumsq = zb_sumsq_take(&z->be);
#if ZERO_STAGE >= 1
    comm_all_reduce_host(z->comm, &sumsq, 1, DT_F64, OP_SUM);
#endif
    return (float)sqrt(sumsq);
}

// AdamW on this rank's partition, segment by segment (weight decay per tensor), in
// shard order (with ZeRO-Infinity the state streams from NVMe in that order);
// grad_scale (the clip coefficient, / the loss scale with fp16) multiplies every gradient first.
static void zero_adamw_partition(Zero *z, const ZeroOptim *o, float grad_scale) {
    AdamWParams ap = {o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, o->t, grad_scale, !z->cfg->adam_w_mode};
    if (zero_lean(z) & ZB_LEAN_ADAMW) { zb_lean_adamw(&z->be, ap); return; }   // (the decayed elements: zero_lean's flags)
    zero_adam_segments(z, o->weight_decay);
    zb_adamw_partition(&z->be, z->adam_seg, z->plan.n_seg, ap);
}

// At the accumulation boundary: reduce the gradients to their owners, so that
// each rank holds the averaged gradient of its own partition.
static void zero_step_reduce(Zero *z) {
#if ZERO_STAGE <= 1
    // stages 0-1: the last micro-step's backward started each unit's all-reduce (stage 0) or
    // reduce-scatter (stage 1); a unit it did not start (a step driven without train/passes.h's
    // backward) starts here, in unit order. Wait for each, then its slice is final.
    const ZeroPlan *p = &z->plan;
    for (int i = 0; i < p->n_units; i++)
        if (!z->grad_reducing[i]) zero_start_grad_reduce(z, i, 0);
    for (int i = 0; i < p->n_units; i++) {
        comm_wait(z->comm, &z->grad_reduce[i]);
        z->grad_reducing[i] = 0;
        zero_grad_final(z, i);
    }
#endif
    // (stages 2-3 reduced every unit during the backward)
    zb_wait_collectives(&z->be);
}

// Global-norm clipping: the coefficient the gradients are multiplied by,
// clip / (norm + 1e-6) when that is below 1 (grad_clip 0: off)
static float zero_clip_coef(float grad_clip, float norm) {
    return grad_clip > 0 && grad_clip / (norm + 1e-6f) < 1.0f ? grad_clip / (norm + 1e-6f) : 1.0f;
}

// AdamW on this rank's partition, grad_scale multiplied into every gradient
// first (the clip coefficient; with fp16 loss scaling also 1 / the scale), then
// every rank gets the parameters it needs for the next step.
static void zero_step_update(Zero *z, const ZeroOptim *o, float grad_scale) {
    zero_adamw_partition(z, o, grad_scale);
#if ZERO_STAGE >= 1
    const ZeroPlan *p = &z->plan;
#endif
#if ZERO_STAGE == 1 || ZERO_STAGE == 2
    // every rank updated its slice: all-gather the updated parameters, in place
    for (int i = 0; i < p->n_units; i++)
        comm_all_gather(z->comm, zero_param_slice(z, i), z->params + p->u[i].full_off, p->u[i].shard, ZPARAM_DT);
#elif ZERO_STAGE == 3
    // parameters stay partitioned; only the persistent units are re-gathered (at one rank they are the shard)
    for (int i = 0; i < p->n_units && !z->whole; i++) {
        const ZeroUnit *U = &p->u[i];
        if (!U->persistent) continue;
        floatX *full = z->resident + U->resident_off, *mine = full + (size_t)p->part * U->shard;
        zb_param_slice_to(&z->be, mine, zero_param_slice(z, i), U->shard_off, U->shard);   // (from host memory or NVMe with offload_param)
        comm_all_gather(z->comm, mine, full, U->shard, ZPARAM_DT);
    }
#endif
}

// The whole boundary as the paper has it: reduce the gradients to their owners,
// clip by the global norm, run AdamW on this rank's partition, and give every
// rank the parameters it needs. Returns the global gradient norm.
static float zero_step_end(Zero *z, const ZeroOptim *o) {
    zero_step_reduce(z);
    float norm = zero_global_norm(z);
    zero_step_update(z, o, zero_clip_coef(o->grad_clip, norm));
    return norm;
}
