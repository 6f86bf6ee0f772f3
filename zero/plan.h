// zero/plan.h: what ZeRO partitions, computed once from the model's layout, the stage and
// the world size: arithmetic only, so the estimator and dev/cuda use it too. The units,
// embedding, layers, final norm with head, are padded to multiples of P * ZERO_ALIGN and
// cut into P equal slices, rank r owning slice r; P is the world size, 1 in stage 0. The
// full buffer lays the padded units end to end at full_off: stages 0-2's parameters and
// stages 0-1's gradients. The shard lays this rank's slices end to end at shard_off: the
// optimizer state, stages 2-3's gradients, stage 3's parameters.
#pragma once
#include "model/model.h"

#define ZERO_ALIGN 16   // slices start 64-byte aligned, in 16s, for the GPU's vector kernels

typedef struct {
    size_t numel;       // real elements of the unit
    size_t padded;      // numel rounded up to a multiple of P * ZERO_ALIGN
    size_t shard;       // padded / P: the slice every rank owns
    size_t full_off;    // the unit's offset in the full buffer
    size_t shard_off;   // this rank's slice's offset in the shard
    size_t resident_off;// stage 3, persistent units: offset in the resident buffer
    int persistent;     // stage 3: small enough to stay whole, stage3_param_persistence_threshold
    int grad_slot;      // stages 2-3: the slot it owns, or -1 for one of the two alternating slots
    int last_grad_step; // the backward step after which its gradient is complete
    int has_matrix;     // holds a 2-D tensor; ZeRO++'s qgZ skips units of 1-D ones
} ZeroUnit;

// AdamW walks the shard as segments: each tensor clipped to this rank's slice
typedef struct { int unit; size_t unit_off, n; int decay; } ZeroSegment;

typedef struct {
    int stage, world, rank;     // a field, not ZERO_STAGE: the estimator plans every stage
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
    size_t arena_elems;         // live_cap + the largest unit: the ring's wrap
    int *fetch_fwd, n_fetch_fwd;        // the gather order of a forward-only pass
    int *fetch_train, n_fetch_train;    // the gather order of a forward and backward pass
    int n_slots;                // stages 2-3: 0 and 1 alternate; a tied embedding owns 2
    size_t *slot_off;           // each slot's offset in the slot buffer
    size_t slot_elems;          // the slot buffer
} ZeroPlan;

static size_t zero_padded(size_t numel, int P) { return round_up(numel, (size_t)P * ZERO_ALIGN); }

// where this rank's slice of unit u starts inside the padded unit
static size_t zero_slice_start(const ZeroPlan *p, int u) { return (size_t)p->part * p->u[u].shard; }

// where this rank's slice of unit u starts in the full buffer
static size_t zero_slice_full_off(const ZeroPlan *p, int u) { return p->u[u].full_off + zero_slice_start(p, u); }

// where a segment starts inside its unit's slice, and in the shard
static size_t zero_seg_in_slice(const ZeroPlan *p, const ZeroSegment *sg) {
    return sg->unit_off - zero_slice_start(p, sg->unit);
}
static size_t zero_seg_shard_off(const ZeroPlan *p, const ZeroSegment *sg) {
    return p->u[sg->unit].shard_off + zero_seg_in_slice(p, sg);
}

// the stage-3 gather order of a pass: every unit a step reads, unless persistent or
// still gathered from the forward
static int zero_fetch_order(const ZeroPlan *p, const Schedule *S, int with_backward, int *order) {
    int n = 0;
    for (int pass = 0; pass <= with_backward; pass++) {
        const PassStep *steps = pass ? S->bwd : S->fwd;
        for (int i = 0; i < (pass ? S->n_bwd : S->n_fwd); i++)
            for (int k = 0; k < steps[i].n_params && !steps[i].reuses_forward; k++)
                if (!p->u[steps[i].params[k]].persistent) order[n++] = steps[i].params[k];
    }
    return n;
}

// Stage 3's sizes, from a walk through a training pass as the gather ring makes it: a
// step's units live, with what the forward kept, and a prefetch adds the next unit.
// `need` must fit, `peak` is what prefetching uses; --max-live may cap between them.
static void zero_size_gathers(ZeroPlan *p, const Schedule *S, const TrainConfig *cfg) {
    size_t live = 0, need = 0, peak = 0, max_np = 0;
    int next = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < (pass ? S->n_bwd : S->n_fwd); i++) {
            const PassStep *s = pass ? &S->bwd[i] : &S->fwd[i];
            for (int k = 0; k < s->n_params && !s->reuses_forward; k++) {
                const ZeroUnit *U = &p->u[s->params[k]];
                if (U->persistent) continue;
                live += U->padded;
                next++;
                size_t ahead = cfg->prefetch && next < p->n_fetch_train ? p->u[p->fetch_train[next]].padded : 0;
                if (live > need) need = live;
                if (live + ahead > peak) peak = live + ahead;
                if (U->padded > max_np) max_np = U->padded;
            }
            if (!s->keep_for_backward)
                for (int k = 0; k < s->n_params; k++)
                    if (!p->u[s->params[k]].persistent) live -= p->u[s->params[k]].padded;
        }
    p->gather_need = need;
    p->live_cap = (long long)peak < cfg->max_live_elems ? peak : (size_t)cfg->max_live_elems;
    if (p->live_cap < need) p->live_cap = need;
    // Units leave in the order they came, so the free space is [h, cap) and [0, t), or
    // [h, t) beside a wasted tail shorter than a unit. Either way, with the largest unit
    // of slack, n contiguous elements are free whenever live + n <= live_cap.
    p->arena_elems = p->live_cap + max_np;
}

// Stages 2-3: a unit's gradient is complete after the last backward step that writes it.
// A unit written by two steps with others between, a tied embedding, keeps its own slot.
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

// the plan of one stage at one world size, for one rank
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

    // the optimizer's segments
    int cap = 0;
    for (int i = 0; i < p->n_units; i++) cap += L->units[i].n_tensors;
    p->seg = (ZeroSegment *)xcalloc(sizeof(ZeroSegment) * cap, "zero segments");
    for (int i = 0; i < p->n_units; i++) {
        size_t lo = zero_slice_start(p, i), hi = lo + p->u[i].shard;
        for (int k = 0; k < L->units[i].n_tensors; k++) {
            const TensorSpec *t = &L->units[i].t[k];
            size_t a = t->offset > lo ? t->offset : lo, b = t->offset + t->numel < hi ? t->offset + t->numel : hi;
            p->u[i].has_matrix |= t->decay;   // decay: the 2-D weights and embeddings
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
