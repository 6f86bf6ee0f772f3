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
// The trainer drives a step through six calls, in this order:
//   zero_step_begin                       once per optimizer step
//   zero_fetch_params / zero_release_params   around each unit's forward and backward
//   zero_grads_begin / zero_grads_end     around each unit's backward
//   zero_step_end                         reduce, clip, AdamW, re-gather
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
// memory: one allocation per kind of buffer, each counted

enum { MEM_PARAMS = 0, MEM_GRADS, MEM_OPTIM, MEM_GATHER, MEM_GRAD_BUCKETS, MEM_ACTIVATIONS, N_MEM };
static const char *MEM_NAMES[N_MEM] = {"params", "grads", "optimizer", "gathered_params", "grad_buckets", "activations"};

typedef struct {
    ZeroPlan plan;
    Comm *comm;
    const ModelLayout *layout;
    const TrainConfig *cfg;
    size_t mem[N_MEM];          // bytes allocated, by kind

    // model states
    float *params;      // stages 0-2: full padded parameters (this rank's slice is the master)
                        // stage 3: this rank's shard, the master copy
    float *resident;    // stage 3: full copies of the persistent units
    float *grads;       // stages 0-1: full padded gradients; stages 2-3: this rank's shard, accumulated in fp32
    float *opt_m, *opt_v;  // AdamW moments of this rank's shard (everything in stage 0)

    // working buffers
    float *arena;       // stage 3: gathered units (a FIFO ring)
    float *grad_slots;  // stages 2-3: full gradients of units in backward: [tied embedding][slot 0][slot 1]
    float *rs_scratch;  // stages 2-3: where a unit's reduced slice lands before it is accumulated
    int slot_next;

    // stage 3 ring state
    struct { int unit; size_t off, n; CommRequest req; } ring[8];
    int ring_head, ring_count;  // FIFO of gathered units
    size_t live, peak_live;
    const int *order; int n_order, cursor;   // the fetch order of the pass in progress
    int micro;                  // micro-step index within the step
} Zero;

static float *zero_alloc(Zero *z, int kind, size_t elems) {
    z->mem[kind] += elems * sizeof(float);
    return (float *)xcalloc(elems * sizeof(float), MEM_NAMES[kind]);
}

static void zero_init(Zero *z, const ModelLayout *L, const TrainConfig *cfg, Comm *comm) {
    memset(z, 0, sizeof(*z));
    z->comm = comm; z->layout = L; z->cfg = cfg;
    zero_plan_build(&z->plan, L, comm->world, comm->rank, cfg);
    const ZeroPlan *p = &z->plan;
#if ZERO_STAGE <= 2
    z->params = zero_alloc(z, MEM_PARAMS, p->full_elems);
#else
    z->params = zero_alloc(z, MEM_PARAMS, p->shard_elems);
    if (p->resident_elems) z->resident = zero_alloc(z, MEM_GATHER, p->resident_elems);
    z->arena = zero_alloc(z, MEM_GATHER, p->arena_elems);
#endif
#if ZERO_STAGE <= 1
    z->grads = zero_alloc(z, MEM_GRADS, p->full_elems);
#else
    z->grads = zero_alloc(z, MEM_GRADS, p->shard_elems);
    size_t tied = p->tied ? p->u[0].padded : 0;
    z->grad_slots = zero_alloc(z, MEM_GRAD_BUCKETS, tied + 2 * p->max_slot);
    z->rs_scratch = zero_alloc(z, MEM_GRAD_BUCKETS, p->max_shard);
#endif
    z->opt_m = zero_alloc(z, MEM_OPTIM, p->shard_elems);
    z->opt_v = zero_alloc(z, MEM_OPTIM, p->shard_elems);
}

static void zero_free(Zero *z) {
    free(z->params); free(z->resident); free(z->grads); free(z->opt_m); free(z->opt_v);
    free(z->arena); free(z->grad_slots); free(z->rs_scratch);
    zero_plan_free(&z->plan);
}

// where this rank's slice of unit u lives in the master parameters, the gradient
// shard (after the reduce) and the optimizer state
static float *zero_master_slice(Zero *z, int u) {
    const ZeroUnit *U = &z->plan.u[u];
#if ZERO_STAGE <= 2
    return z->params + U->full_off + (size_t)z->plan.part * U->shard;
#else
    return z->params + U->shard_off;
#endif
}
static float *zero_grad_slice(Zero *z, int u) {
    const ZeroUnit *U = &z->plan.u[u];
#if ZERO_STAGE <= 1
    return z->grads + U->full_off + (size_t)z->plan.part * U->shard;
#else
    return z->grads + U->shard_off;
#endif
}

// ----------------------------------------------------------------------------
// loading and saving full parameters (flat, unpadded order: the model file)

// every rank takes what it holds from the full flat parameters
static void zero_load_params(Zero *z, const float *flat) {
    const ZeroPlan *p = &z->plan;
    for (int i = 0; i < p->n_units; i++) {
        const ZeroUnit *U = &p->u[i];
        const float *src = flat + z->layout->units[i].flat_offset;
#if ZERO_STAGE <= 2
        memcpy(z->params + U->full_off, src, U->numel * sizeof(float));
#else
        size_t lo = (size_t)p->part * U->shard;
        float *dst = z->params + U->shard_off;
        memset(dst, 0, U->shard * sizeof(float));
        if (lo < U->numel) memcpy(dst, src + lo, ((U->numel - lo) < U->shard ? (U->numel - lo) : U->shard) * sizeof(float));
        if (U->persistent) memcpy(z->resident + U->resident_off, src, U->numel * sizeof(float));
#endif
    }
}

// Unit u's full parameters into dst (padded size). Collective in stage 3:
// every rank must call it (this is how rank 0 writes a ZeRO-3 model file,
// DeepSpeed's stage3_gather_16bit_weights_on_model_save).
static void zero_gather_unit(Zero *z, int u, float *dst) {
    const ZeroUnit *U = &z->plan.u[u];
#if ZERO_STAGE <= 2
    memcpy(dst, z->params + U->full_off, U->padded * sizeof(float));
#else
    comm_all_gather(z->comm, z->params + U->shard_off, dst, U->shard, DT_F32);
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
    z->ring[slot].req = comm_iall_gather(z->comm, z->params + U->shard_off, z->arena + off, U->shard, DT_F32);
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
static float *zero_fetch_params(Zero *z, int u) {
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
static void zero_release_params(Zero *z, int u) {
#if ZERO_STAGE == 3
    if (z->plan.u[u].persistent) return;
    if (z->ring_count == 0 || z->ring[z->ring_head].unit != u)
        fatal("zero stage 3: unit %d released out of order", u);
    int s = z->ring_head;
    comm_wait(z->comm, &z->ring[s].req);
#if ZERO_POISON
    for (size_t i = 0; i < z->ring[s].n; i++) z->arena[z->ring[s].off + i] = NAN;
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
static float *zero_grads_begin(Zero *z, int u) {
#if ZERO_STAGE <= 1
    return z->grads + z->plan.u[u].full_off;
#else
    const ZeroUnit *U = &z->plan.u[u];
    float *g;
    if (u == 0 && z->plan.tied) g = z->grad_slots;   // the tied embedding collects from the head and the embedding
    else {
        g = z->grad_slots + (z->plan.tied ? z->plan.u[0].padded : 0) + (size_t)z->slot_next * z->plan.max_slot;
        z->slot_next ^= 1;   // two slots: one can be in flight while the next unit computes
    }
    memset(g, 0, U->padded * sizeof(float));
    return g;
#endif
}

// Unit u's backward is finished.
//   stages 2-3: reduce-scatter its gradient now (the paper: "as the gradients of a
//   partition become available, they are reduced to the rank that owns it"), and
//   accumulate the averaged slice into this rank's fp32 gradient shard.
static void zero_grads_end(Zero *z, int u, float *g) {
#if ZERO_STAGE >= 2
    const ZeroUnit *U = &z->plan.u[u];
    comm_reduce_scatter(z->comm, g, z->rs_scratch, U->shard, DT_F32, OP_AVG);
    float *acc = zero_grad_slice(z, u);
    if (z->micro == 0) memcpy(acc, z->rs_scratch, U->shard * sizeof(float));
    else for (size_t i = 0; i < U->shard; i++) acc[i] += z->rs_scratch[i];
#else
    (void)z; (void)u; (void)g;
#endif
}

// ----------------------------------------------------------------------------
// the optimizer step

static void zero_step_begin(Zero *z) {
#if ZERO_STAGE <= 1
    memset(z->grads, 0, z->plan.full_elems * sizeof(float));
#endif
    z->micro = 0;
}

static void zero_micro_step_end(Zero *z) { z->micro++; }

typedef struct { float lr, beta1, beta2, eps, weight_decay, grad_clip; int t; } ZeroOptim;

// At the accumulation boundary: reduce the gradients to their owners, clip by
// the global norm, run AdamW on this rank's partition, and give every rank the
// parameters it needs for the next step. Returns the global gradient norm.
static float zero_step_end(Zero *z, const ZeroOptim *o) {
    const ZeroPlan *p = &z->plan;
#if ZERO_STAGE == 0
    // plain data parallel: all-reduce (average) the full gradients
    comm_all_reduce(z->comm, z->grads, p->full_elems, DT_F32, OP_AVG);
#elif ZERO_STAGE == 1
    // P_os: reduce-scatter the full, locally accumulated gradients unit by unit;
    // each rank keeps the averaged gradient of its own slice, in place
    for (int i = 0; i < p->n_units; i++) {
        const ZeroUnit *U = &p->u[i];
        comm_reduce_scatter(z->comm, z->grads + U->full_off, zero_grad_slice(z, i), U->shard, DT_F32, OP_AVG);
    }
#endif
    // stages 2-3 reduced every unit during backward: the shard is complete

    // global gradient norm: each rank's partition contributes its squares
    double sumsq = 0;
    for (int s = 0; s < p->n_seg; s++) {
        const ZeroSegment *sg = &p->seg[s];
        const float *g = zero_grad_slice(z, sg->unit) + (sg->unit_off - (size_t)p->part * p->u[sg->unit].shard);
        double acc = 0;
        #pragma omp parallel for reduction(+:acc)
        for (size_t i = 0; i < sg->n; i++) acc += (double)g[i] * g[i];
        sumsq += acc;
    }
#if ZERO_STAGE >= 1
    comm_all_reduce_host(z->comm, &sumsq, 1, DT_F64, OP_SUM);
#endif
    float norm = (float)sqrt(sumsq);
    float scale = 1.0f;
    if (o->grad_clip > 0) { float c = o->grad_clip / (norm + 1e-6f); if (c < 1.0f) scale = c; }

    // AdamW on this rank's partition (CPU-Adam: adamw.cuh), segment by segment
    AdamWParams ap = {o->lr, o->beta1, o->beta2, o->eps, 0.0f, o->t, scale};
    for (int s = 0; s < p->n_seg; s++) {
        const ZeroSegment *sg = &p->seg[s];
        size_t in_slice = sg->unit_off - (size_t)p->part * p->u[sg->unit].shard;
        size_t so = p->u[sg->unit].shard_off + in_slice;
        ap.weight_decay = sg->decay ? o->weight_decay : 0.0f;
        adamw_cpu_step(zero_master_slice(z, sg->unit) + in_slice, zero_grad_slice(z, sg->unit) + in_slice,
                       z->opt_m + so, z->opt_v + so, NULL, sg->n, ap);
    }

#if ZERO_STAGE == 1 || ZERO_STAGE == 2
    // every rank updated its slice: all-gather the updated parameters, in place
    for (int i = 0; i < p->n_units; i++) {
        const ZeroUnit *U = &p->u[i];
        comm_all_gather(z->comm, zero_master_slice(z, i), z->params + U->full_off, U->shard, DT_F32);
    }
#elif ZERO_STAGE == 3
    // parameters stay partitioned; only the persistent units are re-gathered
    for (int i = 0; i < p->n_units; i++) {
        const ZeroUnit *U = &p->u[i];
        if (U->persistent) comm_all_gather(z->comm, zero_master_slice(z, i), z->resident + U->resident_off, U->shard, DT_F32);
    }
#endif
    return norm;
}

// ----------------------------------------------------------------------------
// reports: measured memory and communication beside the paper's formulas

// Bytes per parameter of each model state: (param, grad, optimizer) =
// (4, 4, 8) for the fp32 CPU trainer (the master is the parameter; m and v),
// (2, 2, 12) for the bf16 GPU trainer (fp32 master, m and v).
typedef struct { double param, grad, optim; } ZeroBytesPerParam;

// The formula for one model state at this stage and world size, for psi parameters.
static double zero_formula_bytes(int kind, double psi, int world, ZeroBytesPerParam b) {
    double N = world;
    switch (kind) {
    case MEM_PARAMS: return ZERO_STAGE >= 3 ? b.param * psi / N : b.param * psi;
    case MEM_GRADS:  return ZERO_STAGE >= 2 ? b.grad * psi / N : b.grad * psi;
    case MEM_OPTIM:  return ZERO_STAGE >= 1 ? b.optim * psi / N : b.optim * psi;
    default: return 0;
    }
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
        double measured = (double)z->mem[k];
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
