// zero.h: ZeRO, the Zero Redundancy Optimizer (Rajbhandari et al., 2020); ZERO=k compiles
// stage k. Each stage partitions one more model state over the ranks: optimizer state,
// gradients, parameters; each rank updates only its partition. A section per stage, Ψ
// parameters, K micro-steps; then the calls of train/passes.h and train/loop.h.
#pragma once
#include "zero/rank.h"
#include "zero/zeropp.h"
#include "zero/dpu.h"

// ============================================================================
// Stage 0: plain data parallel
//
// Every rank holds everything; 2Ψ per step. Gradients accumulate in the full buffer. On
// the last micro-step a unit's all-reduce starts as its backward ends, overlapping the
// backward of the units before it: DDP's buckets, a unit each.

static floatX *zero_full_grads(Zero *z, int u) { return z->grads + z->plan.u[u].full_off; }

static CommRequest zero_all_reduce_grads(Zero *z, int u) {
    return comm_iall_reduce(z->comm, zero_full_grads(z, u), z->plan.u[u].padded, ZPARAM_DT, OP_AVG);
}

static CommRequest zero_reduce_scatter_grads(Zero *z, int u);   // stage 1's, below

// start unit u's reduction; every rank starts units in the same order
static void zero_start_grad_reduce(Zero *z, int u, int in_backward) {
    z->grad_reduce[u] = ZERO_STAGE == 0 ? zero_all_reduce_grads(z, u) : zero_reduce_scatter_grads(z, u);
    z->grad_reducing[u] = 1;
    z->reduced_in_backward += in_backward;
}

// this rank's slice of unit u's gradient is final
static void zero_grad_final(Zero *z, int u) {
    zb_grad_slice_final(&z->be, z->plan.u[u].shard_off, zero_grad_slice(z, u), z->plan.u[u].shard);
}

// the boundary: start what the backward did not, wait for all
static void zero_finish_grad_reduce(Zero *z) {
    for (int i = 0; i < z->plan.n_units; i++)
        if (!z->grad_reducing[i]) zero_start_grad_reduce(z, i, 0);
    for (int i = 0; i < z->plan.n_units; i++) {
        comm_wait(z->comm, &z->grad_reduce[i]);
        z->grad_reducing[i] = 0;
        zero_grad_final(z, i);
    }
}

// ============================================================================
// Stage 1: P_os, the optimizer state partitioned
//
// 2Ψ. Each rank keeps and updates m, v and the master of its slices only: the gradient
// is reduce-scattered instead of all-reduced, and after AdamW the slices are all-gathered.

static CommRequest zero_reduce_scatter_grads(Zero *z, int u) {
    return comm_ireduce_scatter(z->comm, zero_full_grads(z, u), zero_grad_slice(z, u), z->plan.u[u].shard, ZPARAM_DT, OP_AVG);
}

// stages 1-2: the updated slices to every rank
static void zero_all_gather_params(Zero *z) {
    const ZeroPlan *p = &z->plan;
    for (int i = 0; i < p->n_units; i++)
        comm_all_gather(z->comm, zero_param_slice(z, i), z->params + p->u[i].full_off, p->u[i].shard, ZPARAM_DT);
}

// ============================================================================
// Stage 2: P_g, the gradients partitioned too
//
// (K+1)Ψ. A unit's backward writes a zeroed slot; when it is done the slot is
// reduce-scattered and the slice added to the fp32 shard, every micro-step. Two slots
// alternate: one reduces while the next unit computes.

static floatX *zero_open_slot(Zero *z, int u) {
    int slot = z->plan.u[u].grad_slot;
    if (slot < 0) { slot = z->slot_next; z->slot_next ^= 1; }
    z->unit_slot[u] = slot;
    floatX *g = z->grad_slots + z->plan.slot_off[slot];
    zb_slot_acquire(&z->be, slot);
    zb_fill(&z->be, g, 0, z->plan.u[u].padded * sizeof(floatX));
    return g;
}

static void zero_reduce_scatter_slot(Zero *z, int u) {
    const ZeroUnit *U = &z->plan.u[u];
    CommRequest r = {0};
    if (!zero_zpp_reduce_scatter(z, u, z->unit_grads[u], z->rs_scratch))
        r = comm_ireduce_scatter(z->comm, z->unit_grads[u], z->rs_scratch, U->shard, ZPARAM_DT, OP_AVG);
    zb_accumulate_reduced(&z->be, &r, z->grad_shard + U->shard_off, z->rs_scratch, U->shard, z->micro == 0);
    if (z->micro == z->cfg->accum - 1) { zero_grad_final(z, u); z->reduced_in_backward++; }
    zb_slot_release(&z->be, z->unit_slot[u]);
}

// ============================================================================
// Stage 3: P_p, the parameters partitioned too
//
// 3Ψ per micro-step. Each rank keeps its slices. A unit is all-gathered before its
// forward and its backward, released after use, and the next unit's gather overlaps its
// compute; persistent units stay whole. Units leave in the order they came, so the arena
// is a ring: zero/plan.h sizes it. On the GPU a gather into released space waits for
// its readers, by zero/device.cuh's stream rule.

static int zero_ring_slot(const Zero *z, int k) { return (z->ring_head + k) % ZERO_RING_SLOTS; }
static int zero_ring_alloc(Zero *z, size_t n, size_t *off);   // below

// start gathering order[pos]; 0 when it does not fit, fatal if it must
static int zero_start_gather(Zero *z, int pos, int must) {
    int u = z->order[pos];
    const ZeroUnit *U = &z->plan.u[u];
    size_t off;
    if (must && z->ring_count == ZERO_RING_SLOTS)
        fatal("zero stage 3: unit %d does not fit: %d units are gathered, the ring's limit, ZERO_RING_SLOTS", u, ZERO_RING_SLOTS);
    if (z->ring_count == ZERO_RING_SLOTS || z->live + U->padded > z->plan.live_cap || !zero_ring_alloc(z, U->padded, &off)) {
        if (must) fatal("zero stage 3: unit %d of %zu elements does not fit: live %zu of %zu, raise --max-live",
                        u, U->padded, z->live, z->plan.live_cap);
        return 0;
    }
    int slot = zero_ring_slot(z, z->ring_count);
    z->ring[slot].unit = u; z->ring[slot].off = off; z->ring[slot].n = U->padded;
    // this rank's slice in place; the gather fills the rest
    floatX *full = z->arena + off, *mine = full + zero_slice_start(&z->plan, u);
    zb_param_slice_to(&z->be, mine, zero_param_slice(z, u), U->shard_off, U->shard);
    if (!zero_zpp_gather(z, pos, full, mine, &z->ring[slot].req))
        z->ring[slot].req = comm_iall_gather(z->comm, mine, full, U->shard, ZPARAM_DT);
    z->ring_count++;
    z->live += U->padded;
    if (z->live > z->peak_live) z->peak_live = z->live;
    return 1;
}

// room for n: after the newest unit, or at the start
static int zero_ring_alloc(Zero *z, size_t n, size_t *off) {
    size_t cap = z->plan.arena_elems;
    if (z->ring_count == 0) { *off = 0; return n <= cap; }
    int first = z->ring_head, last = zero_ring_slot(z, z->ring_count - 1);
    size_t t = z->ring[first].off, h = z->ring[last].off + z->ring[last].n;
    if (z->ring[last].off >= t) {                 // free: [h, cap), [0, t)
        if (cap - h >= n) { *off = h; return 1; }
        if (t >= n) { *off = 0; return 1; }
        return 0;
    }
    if (t - h >= n) { *off = h; return 1; }       // free: [h, t)
    return 0;
}

static int zero_ring_find(Zero *z, int u) {
    for (int k = 0; k < z->ring_count; k++)
        if (z->ring[zero_ring_slot(z, k)].unit == u) return zero_ring_slot(z, k);
    return -1;
}

// persistent, or at one rank the shard itself
static int zero_stays_whole(const Zero *z, int u) { return z->plan.u[u].persistent || z->place.whole; }

// unit u whole: wait for its gather, then start the next one's
static floatX *zero_fetch_params(Zero *z, int u) {
    if (ZERO_STAGE != 3 || zero_stays_whole(z, u)) return z->unit_params[u];
    if (z->cursor >= z->n_order || z->order[z->cursor] != u)
        fatal("zero stage 3: unit %d fetched out of the planned order, expected %d", u,
              z->cursor < z->n_order ? z->order[z->cursor] : -1);
    z->cursor++;
    int s = zero_ring_find(z, u);
    if (s < 0) { zero_start_gather(z, z->cursor - 1, 1); s = zero_ring_find(z, u); }
    comm_wait(z->comm, &z->ring[s].req);
    if (z->cfg->prefetch && z->cursor < z->n_order && zero_ring_find(z, z->order[z->cursor]) < 0)
        zero_start_gather(z, z->cursor, 0);
    z->unit_params[u] = z->arena + z->ring[s].off;
    return z->unit_params[u];
}

// frees unit u's ring place
static void zero_release_params(Zero *z, int u) {
    if (ZERO_STAGE != 3 || zero_stays_whole(z, u)) return;
    if (z->ring_count == 0 || z->ring[z->ring_head].unit != u)
        fatal("zero stage 3: unit %d released out of order", u);
    int s = z->ring_head;
    comm_wait(z->comm, &z->ring[s].req);
    if (ZERO_POISON) zb_fill(&z->be, z->arena + z->ring[s].off, 0xFF, z->ring[s].n * sizeof(floatX));   // NaN
    z->live -= z->ring[s].n;
    z->ring_head = zero_ring_slot(z, 1);
    z->ring_count--;
    z->unit_params[u] = NULL;
}

// after AdamW only persistent units are gathered
static void zero_gather_persistent(Zero *z) {
    const ZeroPlan *p = &z->plan;
    for (int i = 0; i < p->n_units; i++) {
        const ZeroUnit *U = &p->u[i];
        if (!U->persistent || z->place.whole) continue;
        floatX *full = z->resident + U->resident_off, *mine = full + zero_slice_start(p, i);
        zb_param_slice_to(&z->be, mine, zero_param_slice(z, i), U->shard_off, U->shard);
        comm_all_gather(z->comm, mine, full, U->shard, ZPARAM_DT);
    }
}

// ============================================================================
// The trainer's calls, in the order of a step

static void zero_step_begin(Zero *z) {
    z->micro = 0;
    z->reduced_in_backward = 0;
    if (ZERO_STAGE <= 1) zb_fill(&z->be, z->grads, 0, z->plan.full_elems * sizeof(floatX));
}

// every rank runs the same passes, so the gathers match
static void zero_begin_pass(Zero *z, int with_backward) {
    z->training = with_backward;
    z->order = with_backward ? z->plan.fetch_train : z->plan.fetch_fwd;
    z->n_order = with_backward ? z->plan.n_fetch_train : z->plan.n_fetch_fwd;
    z->cursor = 0;
    zb_pass_begin(&z->be, &z->plan, z->order, z->n_order);
}

// a schedule step's parameters, by unit
static floatX *const *zero_fetch(Zero *z, const PassStep *s) {
    for (int k = 0; k < s->n_params && !s->reuses_forward; k++) zero_fetch_params(z, s->params[k]);
    return z->unit_params;
}

// after its compute; a training forward keeps the backward's first units
static void zero_release(Zero *z, const PassStep *s) {
    if (z->training && s->keep_for_backward) return;
    for (int k = 0; k < s->n_params; k++) zero_release_params(z, s->params[k]);
}

// drains an unused prefetch
static void zero_end_pass(Zero *z) {
    while (ZERO_STAGE == 3 && z->ring_count) zero_release_params(z, z->ring[z->ring_head].unit);
}

// a backward step's gradients, opened at a unit's first writer
static floatX *const *zero_grads_open(Zero *z, const PassStep *s) {
    for (int k = 0; k < s->n_grads; k++) {
        int u = s->grads[k];
        if (ZERO_STAGE <= 1) z->unit_grads[u] = zero_full_grads(z, u);
        else if (z->plan.u[u].grad_slot < 0 || !z->unit_grads[u]) z->unit_grads[u] = zero_open_slot(z, u);
    }
    return z->unit_grads;
}

// unit u's backward is done; --overlap-reduce 0 waits for the boundary
static void zero_grads_end(Zero *z, int u) {
    if (z->grads_observer) z->grads_observer(z->observer_ctx, u, z->unit_grads[u]);
    if (ZERO_STAGE >= 2) zero_reduce_scatter_slot(z, u);
    else if (z->micro == z->cfg->accum - 1 && z->cfg->overlap_reduce) zero_start_grad_reduce(z, u, 1);
}

// a unit is done after its last writer
static void zero_grads_close(Zero *z, const PassStep *s) {
    int step = (int)(s - z->layout->schedule.bwd);
    for (int k = 0; k < s->n_grads; k++) {
        int u = s->grads[k];
        zb_round_floatX(&z->be, z->unit_grads[u], z->plan.u[u].padded);
        if (z->plan.u[u].last_grad_step != step) continue;
        zero_grads_end(z, u);
        if (ZERO_STAGE >= 2) z->unit_grads[u] = NULL;
    }
}

static void zero_micro_step_end(Zero *z) { z->micro++; }

// ============================================================================
// The optimizer step, at the accumulation boundary
//
// A step's timeline on the GPU, stage 2 with ZeRO-Offload:
//   backward  as a unit's backward ends, its slot is reduce-scattered on the reduce
//             stream and added to the fp32 shard; on the last micro-step the slice is
//             copied to pinned host memory, zb_grad_slice_final.
//   reduce    zero_step_reduce: the compute stream waits for the reduce stream.
//   norm      squares summed on the compute stream; zb_sumsq_take waits for it on the
//             host. That is the offload barrier: every gradient slice is on the host.
//   update    CPU-Adam updates the partition tile by tile; each tile of parameters is
//             copied back on the compute stream.
//   gather    the all-gather follows those copies by zero/device.cuh's stream rule.
//   DPU       zero/dpu.h: the update runs beside the next step, whose passes read the
//             parameters from before it: one update stale. They land at its end.
// On the CPU each call is done when it returns, in the same order.

// each rank ends with its partition's averaged gradient
static void zero_step_reduce(Zero *z) {
    if (ZERO_STAGE <= 1) zero_finish_grad_reduce(z);
    zb_wait_collectives(&z->be);
    zero_zpp_step_end(z);
}

// AdamW's segments; a NULL state is on NVMe
static void zero_adam_segments(Zero *z, float weight_decay) {
    const ZeroPlan *p = &z->plan;
    for (int s = 0; s < p->n_seg; s++) {
        const ZeroSegment *sg = &p->seg[s];
        size_t in_slice = zero_seg_in_slice(p, sg), so = zero_seg_shard_off(p, sg);
        floatX *param = zero_param_slice(z, sg->unit);
        z->adam_seg[s] = (ZeroAdamSeg){so, sg->n, sg->decay ? weight_decay : 0.0f, zero_grad_slice(z, sg->unit) + in_slice,
                                       param ? param + in_slice : NULL, zero_opt_state(z, ZS_MASTER, so),
                                       zero_opt_state(z, ZS_M, so), zero_opt_state(z, ZS_V, so), so < zero_twin_dev(&z->place)};
    }
}

// --lean-step 1: the GPU's one-launch norm and AdamW, given the unit slices once
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

// each rank sums its partition's squares; stages 1-3 all-reduce them
static float zero_global_norm(Zero *z) {
    const ZeroPlan *p = &z->plan;
    if (zero_lean(z) & LEAN_NORM) zb_lean_sumsq(&z->be);
    else for (int s = 0; s < p->n_seg; s++)
        zb_sumsq_add(&z->be, zero_grad_slice(z, p->seg[s].unit) + zero_seg_in_slice(p, &p->seg[s]), p->seg[s].n);
    double sumsq = zb_sumsq_take(&z->be);
    if (ZERO_STAGE >= 1) comm_all_reduce_host(z->comm, &sumsq, 1, DT_F64, OP_SUM);
    return (float)sqrt(sumsq);
}

// clipping: clip / (norm + 1e-6), at most 1; clip 0 is off
static float zero_clip_coef(float grad_clip, float norm) {
    return grad_clip > 0 && grad_clip / (norm + 1e-6f) < 1.0f ? grad_clip / (norm + 1e-6f) : 1.0f;
}

typedef struct { float lr, beta1, beta2, eps, weight_decay; int t; } ZeroOptim;

// AdamW on this rank's partition, in shard order; delayed, on DPU's thread
static void zero_adamw_partition(Zero *z, const ZeroOptim *o, float grad_scale, int delayed) {
    AdamWParams ap = {o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, o->t, grad_scale, !z->cfg->adam_w_mode};
    if (zero_lean(z) & LEAN_ADAMW) { zb_lean_adamw(&z->be, ap); return; }
    zero_adam_segments(z, o->weight_decay);
    if (delayed) zero_dpu_start(z, ap);
    else zb_adamw_partition(&z->be, z->adam_seg, z->plan.n_seg, ap);
}

// the updated slices to the ranks that read them
static void zero_share_params(Zero *z) {
    if (ZERO_STAGE == 1 || ZERO_STAGE == 2) zero_all_gather_params(z);
    if (ZERO_STAGE == 3) zero_gather_persistent(z);
}

// grad_scale: the clip coefficient, over the fp16 loss scale. 1: the parameters changed
static int zero_step_update(Zero *z, const ZeroOptim *o, float grad_scale) {
    int delayed = zero_dpu_delays(z, o->t);
    zero_adamw_partition(z, o, grad_scale, delayed);
    if (!delayed) zero_share_params(z);
    return !delayed;
}

// DPU: the update in flight lands before the next forward; hpZ's parts go stale
static int zero_step_install(Zero *z) {
    if (!zero_dpu_install(z)) return 0;
    zero_zpp_step_end(z);
    zero_share_params(z);
    return 1;
}
