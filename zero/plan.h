// zero/plan.h: ZeRO's plan, the arithmetic every rank computes once from the model's
// layout (model/model.h), the stage, the world size and the config. It allocates
// memory for its tables but moves no data and needs no communicator, so the
// estimator (train/zero_report.h), the checkpoint loader and the kernel checks in
// dev/cuda use it as zero.h does.
//
// Units: the embedding, each transformer layer, the final norm with the head. Each
// unit is padded to a multiple of P * ZERO_ALIGN elements and cut into P equal
// slices; rank r owns slice r of every unit. P is the world size in stages 1-3 and
// 1 in stage 0. A tensor may straddle two ranks' slices, as in FSDP's flat
// parameters and DeepSpeed's stages 1-2.
//
// Two layouts follow. The full buffer lays the padded units end to end (unit u at
// full_off); it holds the parameters of stages 0-2 and the gradients of stages 0-1.
// The shard lays this rank's slices end to end (unit u at shard_off); it holds the
// optimizer state, the gradient partition of stages 2-3 and the parameters of stage 3.
// The optimizer walks the shard as segments: each tensor clipped to this rank's
// slice, with its weight-decay flag.
//
// Stage 3 also needs, from the schedule: the order in which a pass gathers units, the
// persistent units (small enough to stay whole, DeepSpeed's
// stage3_param_persistence_threshold), and the cap on gathered elements alive at once.
// Stages 2-3 need the gradient slots a backward writes full unit gradients into.
#pragma once
#include "model/model.h"

// Every slice starts on a 64-byte boundary (fp32) and is a multiple of 16 elements,
// which the GPU's vectorized optimizer kernels rely on.
#define ZERO_ALIGN 16

typedef struct {
    size_t numel;       // real elements of the unit
    size_t padded;      // numel rounded up to a multiple of P * ZERO_ALIGN
    size_t shard;       // padded / P: the slice every rank owns
    size_t full_off;    // the unit's offset in the full buffer
    size_t shard_off;   // this rank's slice's offset in the shard
    size_t resident_off;// stage 3, persistent units: offset in the resident buffer
    int persistent;     // stage 3: small enough to stay gathered
    int grad_slot;      // stages 2-3: the slot it owns, or -1 for one of the two alternating slots
    int last_grad_step; // the backward step after which its gradient is complete
} ZeroUnit;

typedef struct {
    int unit;
    size_t unit_off;    // first element, as an offset inside the padded unit
    size_t n;
    int decay;
} ZeroSegment;

typedef struct {
    // The stage is a field, not ZERO_STAGE, because the estimator plans every stage.
    int stage, world, rank;
    int P, part;                // partitions, and this rank's partition
    int n_units;
    ZeroUnit *u;
    size_t num_params;          // Ψ
    size_t full_elems;          // Σ padded
    size_t shard_elems;         // Σ shard
    size_t max_padded, max_shard;
    ZeroSegment *seg;
    int n_seg;
    // stage 3
    size_t resident_elems;      // Σ padded of the persistent units
    size_t gather_need;         // gathered elements the largest step needs at once
    size_t live_cap;            // most gathered elements alive at once
    size_t arena_elems;         // live_cap + one unit of slack for the ring's wrap
    int *fetch_fwd, n_fetch_fwd;        // the gather order of a forward-only pass
    int *fetch_train, n_fetch_train;    // the gather order of a forward + backward pass
    // Stages 2-3: slots 0 and 1 alternate, so one can be reducing while the next unit
    // computes. A unit whose gradient stays open across other units (a tied embedding)
    // owns a slot of its own, 2, 3, ...
    int n_slots;
    size_t *slot_off;           // each slot's offset in the slot buffer
    size_t slot_elems;          // the slot buffer
} ZeroPlan;

static size_t zero_padded(size_t numel, int P) { return round_up(numel, (size_t)P * ZERO_ALIGN); }

// Where this rank's slice of unit u starts inside the padded unit.
static size_t zero_slice_start(const ZeroPlan *p, int u) { return (size_t)p->part * p->u[u].shard; }

// Where this rank's slice of unit u starts in the full buffer.
static size_t zero_slice_full_off(const ZeroPlan *p, int u) { return p->u[u].full_off + zero_slice_start(p, u); }

// Where a segment starts inside its unit's slice on this rank, and in the shard.
static size_t zero_seg_in_slice(const ZeroPlan *p, const ZeroSegment *sg) {
    return sg->unit_off - zero_slice_start(p, sg->unit);
}
static size_t zero_seg_shard_off(const ZeroPlan *p, const ZeroSegment *sg) {
    return p->u[sg->unit].shard_off + zero_seg_in_slice(p, sg);
}

// The stage-3 gather order of a pass: every unit a step reads, unless it is
// persistent or still held from the forward.
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

// Stage 3's sizes, from a walk through a training pass as the gather ring will make
// it. Before a step runs, its units are all live, with what the forward kept; a
// prefetch adds the next unit of the order. `need` is what must fit, `peak` what
// prefetching uses; --max-live may cap the ring between the two.
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
    p->gather_need = need;
    p->live_cap = (long long)peak < cfg->max_live_elems ? peak : (size_t)cfg->max_live_elems;
    if (p->live_cap < need) p->live_cap = need;
    // Units are released in the order they were gathered. With that order, one unit
    // of slack guarantees a unit fits whenever the live count allows it.
    p->arena_elems = p->live_cap + max_np;
}

// Stages 2-3: a unit's gradient is complete after the last backward step that writes
// it. A unit written by two steps with others between (a tied embedding: the head,
// then the embedding) keeps its own slot; the others alternate.
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

// The plan of one stage at one world size, for one rank.
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

    // the optimizer's segments: each tensor clipped to this rank's slice of its unit
    int cap = 0;
    for (int i = 0; i < p->n_units; i++) cap += L->units[i].n_tensors;
    p->seg = (ZeroSegment *)xcalloc(sizeof(ZeroSegment) * cap, "zero segments");
    for (int i = 0; i < p->n_units; i++) {
        size_t lo = zero_slice_start(p, i), hi = lo + p->u[i].shard;
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
