// zero.h: ZeRO, the Zero Redundancy Optimizer (Rajbhandari et al., 2020), for both
// trainers. make ... ZERO=k compiles stage k (ZERO_STAGE).
//
// Data parallel training keeps three model states of every parameter on every rank:
// the parameter, its gradient and its optimizer state (AdamW's m and v, and an fp32
// master beside bf16 parameters). Each ZeRO stage partitions one more of them over the
// ranks, and each rank updates only its own partition. Per step, with Ψ parameters and
// K micro-steps:
//
//   stage              partitioned        communication
//   0  data parallel   nothing            all-reduce of the gradients: 2Ψ
//   1  P_os            optimizer state    reduce-scatter of the gradients, all-gather of the parameters: 2Ψ
//   2  P_os+g          + gradients        a reduce-scatter every micro-step, then the all-gather: (K + 1)Ψ
//   3  P_os+g+p        + parameters       every micro-step, all-gathers for the forward and the
//                                         backward, and a reduce-scatter: 3Ψ
//
// Each stage is a section below, with the few functions that move its data. The
// trainers (train/passes.h, train/loop.h) drive them through these calls:
//   zero_step_begin                           once per optimizer step
//   per micro-step:
//     zero_begin_pass                         a forward, or forward and backward, pass starts
//     for each step of the schedule (model/model.h):
//       zero_fetch / zero_release             the step's parameters, around its compute
//       zero_grads_open / zero_grads_close    backward: the step's gradients, around its compute
//     zero_end_pass, zero_micro_step_end
//   zero_step_reduce                          at the boundary: each rank gets its gradient partition
//   zero_global_norm                          train/step_guard.h checks it for Inf and NaN
//   zero_step_update                          AdamW on the partition, then the all-gather
//
// Beside this file: zero/plan.h computes the partition (units, slices, segments, the
// gather order); zero/placement.h says where each state lives and holds the buffers;
// zero/load.h loads parameters and reads checkpoints. zero.h makes no CUDA call: it
// calls the primitives of zero/backend.h, which zero/host.h implements for the CPU
// (MPI) and zero/device.cuh for the GPU (streams, NCCL, ZeRO-Offload).
#pragma once
#include "comm/comm.h"
#include "comm/nodes.h"
#include "zero/load.h"

#if ZERO_STAGE < 0 || ZERO_STAGE > 3
#error "ZERO_STAGE must be 0, 1, 2 or 3"
#endif
#ifndef ZERO_POISON
#define ZERO_POISON 0   // debug build: fill released gather buffers with NaN
#endif

// ============================================================================
// Stage 0: plain data parallel
//
// Every rank holds the whole model state. Unit u's gradient accumulates over the
// micro-steps at its place in the full gradient buffer, as in stage 1. On the last
// micro-step the unit's all-reduce starts as soon as its backward is done, so it
// overlaps the backward of the units before it: PyTorch DDP's gradient buckets and
// DeepSpeed's overlap_comm, with the units as the buckets (--overlap-reduce 0 starts
// them all at the boundary instead). Every rank then runs the same AdamW on the same
// averaged gradient.

static floatX *zero_full_grads(Zero *z, int u) { return z->grads + z->plan.u[u].full_off; }

static CommRequest zero_all_reduce_grads(Zero *z, int u) {
    return comm_iall_reduce(z->comm, zero_full_grads(z, u), z->plan.u[u].padded, ZPARAM_DT, OP_AVG);
}

// ============================================================================
// Stage 1: P_os, the optimizer state partitioned
//
// Each rank keeps m, v and the master of its own slices only, so it updates only
// those. The full gradient is reduce-scattered in place instead of all-reduced, with
// the same overlap: each rank receives the averaged gradient of its slice. After AdamW
// the ranks all-gather the updated slices, so all hold the whole model again.

static CommRequest zero_reduce_scatter_grads(Zero *z, int u) {
    return comm_ireduce_scatter(z->comm, zero_full_grads(z, u), zero_grad_slice(z, u), z->plan.u[u].shard, ZPARAM_DT, OP_AVG);
}

// Stages 0-1, at the boundary: start the reduction of unit u's gradient (non-blocking).
// Every rank starts the units in the same order, the schedule's, so the collectives match.
static void zero_start_grad_reduce(Zero *z, int u, int in_backward) {
    z->grad_reduce[u] = ZERO_STAGE == 0 ? zero_all_reduce_grads(z, u) : zero_reduce_scatter_grads(z, u);
    z->grad_reducing[u] = 1;
    z->reduced_in_backward += in_backward;
}

// Stages 1-2, after AdamW: every rank's updated slice of each unit to every rank, in place.
static void zero_all_gather_params(Zero *z) {
    const ZeroPlan *p = &z->plan;
    for (int i = 0; i < p->n_units; i++)
        comm_all_gather(z->comm, zero_param_slice(z, i), z->params + p->u[i].full_off, p->u[i].shard, ZPARAM_DT);
}

// ============================================================================
// Stage 2: P_g, the gradients partitioned too
//
// No rank holds a full gradient buffer. A unit's backward writes its full gradient
// into a zeroed slot. When the unit's backward is done, the slot is reduce-scattered
// and this rank adds the averaged slice into its fp32 gradient partition, on every
// micro-step. The paper: "as the gradients of a partition become available, they are
// reduced to the rank that owns it". Two slots alternate, so one can be reducing while
// the next unit computes. Stage 3 handles gradients the same way.

static floatX *zero_open_slot(Zero *z, int u) {
    int slot = z->plan.u[u].grad_slot;
    if (slot < 0) { slot = z->slot_next; z->slot_next ^= 1; }
    z->unit_slot[u] = slot;
    floatX *g = z->grad_slots + z->plan.slot_off[slot];
    zb_slot_acquire(&z->be, slot);   // wait until the slot's last reduce-scatter is done with it
    zb_fill(&z->be, g, 0, z->plan.u[u].padded * sizeof(floatX));
    return g;
}

// This rank's gradient slice of unit u is final for this step: ZeRO-Offload starts its copy to the host.
static void zero_grad_final(Zero *z, int u) {
    zb_grad_slice_final(&z->be, z->plan.u[u].shard_off, zero_grad_slice(z, u), z->plan.u[u].shard);
}

static void zero_qg_reduce_scatter(Zero *z, int u, const floatX *g, floatX *out);   // ZeRO++, below

static void zero_reduce_scatter_slot(Zero *z, int u) {
    const ZeroUnit *U = &z->plan.u[u];
    float *acc = z->grad_shard + U->shard_off;
    int first = z->micro == 0;   // the step's first micro-step copies instead of adding
    if (z->plan.P == 1 && ZERO_ONE_RANK_IN_PLACE) {
        // At one rank the reduce-scatter's result would be its input: the slot is added as it is.
        CommRequest none = {0};
        zb_accumulate_reduced(&z->be, &none, acc, z->unit_grads[u], U->shard, first);
    } else if (z->place.qg) {   // ZeRO++'s quantized, hierarchical reduce-scatter (below), complete on return
        CommRequest done = {0};
        zero_qg_reduce_scatter(z, u, z->unit_grads[u], z->rs_scratch);
        zb_accumulate_reduced(&z->be, &done, acc, z->rs_scratch, U->shard, first);
    } else {
        CommRequest r = comm_ireduce_scatter(z->comm, z->unit_grads[u], z->rs_scratch, U->shard, ZPARAM_DT, OP_AVG);
        zb_accumulate_reduced(&z->be, &r, acc, z->rs_scratch, U->shard, first);
    }
    if (z->micro == z->cfg->accum - 1) { zero_grad_final(z, u); z->reduced_in_backward++; }
    zb_slot_release(&z->be, z->unit_slot[u]);
}

// ============================================================================
// Stage 3: P_p, the parameters partitioned too
//
// Each rank keeps only its slice of every unit's parameters. Before a unit's forward,
// and again before its backward, the ranks all-gather the unit: the paper's
// "broadcast of the parameters of a partition". After use it is released. While a
// unit computes, the next unit of the pass's order is already being gathered. The
// persistent units (zero/plan.h) stay gathered, like DeepSpeed's persistent parameters.
//
// Units are released in the order they were gathered, so the gather arena is a ring.
// It holds the live cap plus one unit of slack, so a unit always fits when the live
// count allows it.

static int zero_ring_slot(const Zero *z, int k) { return (z->ring_head + k) % ZERO_RING_SLOTS; }

// Where n more elements fit in the arena: after the newest unit, or at the start.
static int zero_ring_alloc(Zero *z, size_t n, size_t *off) {
    size_t cap = z->plan.arena_elems;
    if (z->ring_count == 0) { *off = 0; return n <= cap; }
    int first = z->ring_head, last = zero_ring_slot(z, z->ring_count - 1);
    size_t t = z->ring[first].off, h = z->ring[last].off + z->ring[last].n;
    if (z->ring[last].off >= t) {                 // not wrapped: free is [h, cap) and [0, t)
        if (cap - h >= n) { *off = h; return 1; }
        if (t >= n) { *off = 0; return 1; }
        return 0;
    }
    if (t - h >= n) { *off = h; return 1; }       // wrapped: free is [h, t)
    return 0;
}

// ZeRO++'s ways of gathering unit order[pos] into full (the next section)
static CommRequest zero_zpp_gather(Zero *z, int pos, floatX *full, floatX *mine);

// Start gathering the unit at position pos of the pass's order, without waiting for it.
// Returns 0 when it does not fit yet; with `must` that stops the run.
static int zero_start_gather(Zero *z, int pos, int must) {
    int u = z->order[pos];
    const ZeroUnit *U = &z->plan.u[u];
    size_t off;
    if (z->ring_count == ZERO_RING_SLOTS || z->live + U->padded > z->plan.live_cap || !zero_ring_alloc(z, U->padded, &off)) {
        if (must) fatal("zero stage 3: unit %d (%zu elements) does not fit in the gather arena (live %zu of %zu): raise --max-live",
                        u, U->padded, z->live, z->plan.live_cap);
        return 0;
    }
    int slot = zero_ring_slot(z, z->ring_count);
    z->ring[slot].unit = u; z->ring[slot].off = off; z->ring[slot].n = U->padded;
    // This rank's slice goes to its place in the unit, then the all-gather fills in the
    // others' in place. The slice comes from host memory with offload_param, or from NVMe
    // with ZeRO-Infinity, whose read of the next unit starts now.
    floatX *full = z->arena + off, *mine = full + zero_slice_start(&z->plan, u);
    zb_param_slice_to(&z->be, mine, zero_param_slice(z, u), U->shard_off, U->shard);
    if (pos + 1 < z->n_order) {
        const ZeroUnit *next = &z->plan.u[z->order[pos + 1]];
        zb_param_read_ahead(&z->be, next->shard_off, next->shard);
    }
    z->ring[slot].req = z->place.qw || z->place.hpz ? zero_zpp_gather(z, pos, full, mine)
                                                    : comm_iall_gather(z->comm, mine, full, U->shard, ZPARAM_DT);
    z->ring_count++;
    z->live += U->padded;
    if (z->live > z->peak_live) z->peak_live = z->live;
    return 1;
}

static int zero_ring_find(Zero *z, int u) {
    for (int k = 0; k < z->ring_count; k++)
        if (z->ring[zero_ring_slot(z, k)].unit == u) return zero_ring_slot(z, k);
    return -1;
}

// Unit u's parameters, whole. Stage 3 waits for the prefetched gather, or gathers now,
// then starts the next unit's gather so that it overlaps this unit's compute.
static floatX *zero_fetch_params(Zero *z, int u) {
    if (ZERO_STAGE != 3 || z->plan.u[u].persistent) return z->unit_params[u];
    if (z->cursor >= z->n_order || z->order[z->cursor] != u)
        fatal("zero stage 3: unit %d fetched out of the planned order (expected %d)", u,
              z->cursor < z->n_order ? z->order[z->cursor] : -1);
    z->cursor++;
    if (z->place.whole) return z->unit_params[u];   // one rank: the shard is the unit
    int s = zero_ring_find(z, u);
    if (s < 0) { zero_start_gather(z, z->cursor - 1, 1); s = zero_ring_find(z, u); }
    comm_wait(z->comm, &z->ring[s].req);
    if (z->cfg->prefetch && z->cursor < z->n_order && zero_ring_find(z, z->order[z->cursor]) < 0)
        zero_start_gather(z, z->cursor, 0);
    z->unit_params[u] = z->arena + z->ring[s].off;
    return z->unit_params[u];
}

// Done with unit u until its next fetch: stage 3 frees its place in the ring. On the GPU
// the kernels that read it may still be queued; a later gather into the place waits for them.
static void zero_release_params(Zero *z, int u) {
    if (ZERO_STAGE != 3 || z->plan.u[u].persistent || z->place.whole) return;
    if (z->ring_count == 0 || z->ring[z->ring_head].unit != u)
        fatal("zero stage 3: unit %d released out of order", u);
    int s = z->ring_head;
    comm_wait(z->comm, &z->ring[s].req);
    if (ZERO_POISON) zb_fill(&z->be, z->arena + z->ring[s].off, 0xFF, z->ring[s].n * sizeof(floatX));   // all-ones bits: NaN
    z->live -= z->ring[s].n;
    z->ring_head = zero_ring_slot(z, 1);
    z->ring_count--;
    z->unit_params[u] = NULL;
}

// After AdamW the parameters stay partitioned; only the persistent units are gathered again.
static void zero_gather_persistent(Zero *z) {
    const ZeroPlan *p = &z->plan;
    for (int i = 0; i < p->n_units && !z->place.whole; i++) {
        const ZeroUnit *U = &p->u[i];
        if (!U->persistent) continue;
        floatX *full = z->resident + U->resident_off, *mine = full + zero_slice_start(p, i);
        zb_param_slice_to(&z->be, mine, zero_param_slice(z, i), U->shard_off, U->shard);
        comm_all_gather(z->comm, mine, full, U->shard, ZPARAM_DT);
    }
}

// ============================================================================
// Stage 3 with ZeRO++ (Wang et al., 2023): less traffic between nodes
//
// The link between nodes is many times slower than inside one, and stage 3 sends the
// model over it three times per micro-step. ZeRO++ changes each of those collectives,
// each part switched on by itself (DeepSpeed's keys, or config/flags.h's flags):
//   qwZ  zero_quantized_weights: all-gathers of int8 blocks, one scale per block
//        (util/quantize.h), instead of 16-bit weights: half the bytes.
//   hpZ  zero_hpz_partition_size = L ranks per node: the forward's gather also keeps this
//        rank's 1/L of the unit, so the backward gathers it inside the node.
//   qgZ  zero_quantized_gradients: the reduce-scatter becomes two all-to-alls of int4
//        blocks, inside the node, then across nodes, each followed by an fp32 sum.
// The paper's count, M the model's 16-bit bytes: 3M across nodes per micro-step becomes
// 0.5M + 0 + 0.25M = 0.75M. The quantized collectives here block: they save bytes, not time.

static void zero_zpp_buffers(Zero *z, uint8_t **send, uint8_t **recv, float **sums) {
    ZeroZppStaging st = zero_zpp_staging(&z->plan, &z->place);
    *send = z->zpp_staging; *recv = *send + st.send; *sums = (float *)(*recv + st.recv);
}

// qwZ: every rank quantizes its slice and dequantizes all of them, its own too: all hold the same weights.
static void zero_qw_gather(Zero *z, int u, floatX *full, const floatX *mine) {
    size_t s = z->plan.u[u].shard, q = zq_bytes(s, 8);
    uint8_t *send, *recv; float *sums;
    zero_zpp_buffers(z, &send, &recv, &sums);
    zb_quantize(&z->be, mine, 1, s, 8, send);
    comm_group_all_gather(z->comm, SCOPE_WORLD, send, recv, q);
    for (int r = 0; r < z->plan.P; r++) zb_dequantize(&z->be, recv + r * q, s, 8, full + (size_t)r * s, 1, 0);
}

// hpZ: this rank's part of unit u's secondary partition, as it sits in the gathered unit
static floatX *zero_hpz_part(Zero *z, int u, floatX *full) {
    return full + (size_t)z->comm->node_rank * (z->plan.u[u].padded / z->place.hpz);
}

// Unit order[pos] with qwZ or hpZ on: with hpZ the backward gathers inside the node; the
// forward's gather is quantized with qwZ, and with hpZ keeps this rank's secondary part.
static CommRequest zero_zpp_gather(Zero *z, int pos, floatX *full, floatX *mine) {
    int u = z->order[pos];
    size_t part = z->place.hpz ? z->plan.u[u].padded / z->place.hpz : 0;
    CommRequest r = {0};
    if (z->place.hpz && z->training && pos >= z->plan.n_fetch_fwd) {   // the backward's gather, inside the node
        zb_copy(&z->be, zero_hpz_part(z, u, full), z->hpz_params + z->hpz_off[u], part * sizeof(floatX));
        comm_group_all_gather(z->comm, SCOPE_NODE, zero_hpz_part(z, u, full), full, part * sizeof(floatX));
        return r;
    }
    if (z->place.qw) zero_qw_gather(z, u, full, mine);
    else r = comm_iall_gather(z->comm, mine, full, z->plan.u[u].shard, ZPARAM_DT);
    if (z->place.hpz && z->training) {   // a training forward keeps the secondary partition
        comm_wait(z->comm, &r);
        zb_copy(&z->be, z->hpz_params + z->hpz_off[u], zero_hpz_part(z, u, full), part * sizeof(floatX));
    }
    return r;
}

// qgZ: unit u's gradient g (every rank's) averaged, this rank's slice into out. With L ranks
// per node and N nodes, rank n*L + k owns slice n*L + k. Hop 1 sends node rank k the slices
// of every node's rank k, in node order (the paper's tensor slice reordering), so that after
// summing them it holds its node's partial sums of exactly the slices hop 2 sends across,
// to node n the slice of rank n*L + k.
static void zero_qg_reduce_scatter(Zero *z, int u, const floatX *g, floatX *out) {
    const Comm *c = z->comm;
    int L = c->node_size, N = c->n_nodes;
    size_t s = z->plan.u[u].shard, q = zq_bytes(s, 4);
    uint8_t *send, *recv; float *sums, *mine;
    zero_zpp_buffers(z, &send, &recv, &sums);
    mine = sums + (size_t)N * s;
    if (L > 1) {   // hop 1, inside the node: int4, then this rank's N slices summed over the node in fp32
        for (int k = 0; k < L; k++)
            for (int n = 0; n < N; n++) zb_quantize(&z->be, g + (size_t)(n * L + k) * s, 1, s, 4, send + (size_t)(k * N + n) * q);
        comm_group_all_to_all(z->comm, SCOPE_NODE, send, recv, (size_t)N * q);
        for (int k = 0; k < L; k++)
            for (int n = 0; n < N; n++) zb_dequantize(&z->be, recv + (size_t)(k * N + n) * q, s, 4, sums + (size_t)n * s, 0, k > 0);
    }
    if (N > 1) {   // hop 2, across nodes: the partial sums requantized, and this rank's slice summed over the nodes
        for (int n = 0; n < N; n++) {
            const void *piece = L > 1 ? (const void *)(sums + (size_t)n * s) : (const void *)(g + (size_t)n * s);
            zb_quantize(&z->be, piece, L == 1, s, 4, send + (size_t)n * q);
        }
        comm_group_all_to_all(z->comm, SCOPE_ACROSS, send, recv, q);
        for (int n = 0; n < N; n++) zb_dequantize(&z->be, recv + (size_t)n * q, s, 4, mine, 0, n > 0);
    } else mine = sums;   // one node: hop 1 summed it all
    zb_scale_to_floatX(&z->be, mine, out, s, 1.0f / (float)z->plan.P);
}

// The step's worst block error over all ranks (|x - dequantized| over the block's largest
// |x|): qwZ's int8 and qgZ's int4, -1 for a part that is off.
static void zero_quant_errors(Zero *z, float err[2]) {
    err[0] = err[1] = -1;
    if (!z->place.qw && !z->place.qg) return;
    zb_quant_errors(&z->be, err);
    comm_control_max(z->comm, err, 2);
    if (!z->place.qw) err[0] = -1;
    if (!z->place.qg) err[1] = -1;
}

// ============================================================================
// The trainer's calls, in the order of a step

// Stages 0-1 in the CPU trainer (ZERO_GRADS_FIRST_WRITE): at a step's first micro-step the
// backward writes every unit but the embedding whole instead of adding to it, so those are
// not zeroed; their padding, which no kernel writes, keeps the zeros it was allocated with.
// The embedding's backward adds rows, so it is zeroed.
static int zero_grads_first_write(const Zero *z, int u) {
    return ZERO_GRADS_FIRST_WRITE && ZERO_STAGE <= 1 && z->micro == 0 && u != model_unit_embed(z->layout);
}

static void zero_step_begin(Zero *z) {
    z->micro = 0;
    z->reduced_in_backward = 0;
    if (ZERO_STAGE >= 2) return;   // stages 2-3 zero each slot as it opens
    const ZeroPlan *p = &z->plan;
    if (!ZERO_GRADS_FIRST_WRITE) zb_fill(&z->be, z->grads, 0, p->full_elems * sizeof(floatX));
    for (int i = 0; i < p->n_units && ZERO_GRADS_FIRST_WRITE; i++)
        if (!zero_grads_first_write(z, i)) zb_fill(&z->be, z->grads + p->u[i].full_off, 0, p->u[i].padded * sizeof(floatX));
}

// A forward-only pass (evaluation, sampling) or a forward and backward pass starts.
// Every rank runs the same passes in the same order, so every rank issues the same
// collectives: no rank can wait on a gather that another rank never starts.
static void zero_begin_pass(Zero *z, int with_backward) {
    z->training = with_backward;
    z->order = with_backward ? z->plan.fetch_train : z->plan.fetch_fwd;
    z->n_order = with_backward ? z->plan.n_fetch_train : z->plan.n_fetch_fwd;
    z->cursor = 0;
    if (ZERO_STAGE == 3 && z->n_order) zb_param_read_ahead(&z->be, z->plan.u[z->order[0]].shard_off, z->plan.u[z->order[0]].shard);
}

// The parameters of one step of the schedule; the trainer's views read them through the unit table.
static floatX *const *zero_fetch(Zero *z, const PassStep *s) {
    for (int k = 0; k < s->n_params && !s->kept; k++) zero_fetch_params(z, s->params[k]);
    return z->unit_params;
}
// After the step's compute. A training forward keeps what the backward's first step reads.
static void zero_release(Zero *z, const PassStep *s) {
    if (z->training && s->keep) return;
    for (int k = 0; k < s->n_params; k++) zero_release_params(z, s->params[k]);
}

// Stage 3: a prefetch the pass did not use (none with the planned orders) would hold
// arena space, so it is drained and every pass starts empty.
static void zero_end_pass(Zero *z) {
    while (ZERO_STAGE == 3 && z->ring_count) zero_release_params(z, z->ring[z->ring_head].unit);
}

// Unit u's backward is done: its gradient is reduced now (stages 2-3), or on the step's
// last micro-step starts its reduction at the boundary (stages 0-1).
static void zero_grads_end(Zero *z, int u) {
    if (z->grads_observer) z->grads_observer(z->observer_ctx, u, z->unit_grads[u]);
    if (ZERO_STAGE >= 2) zero_reduce_scatter_slot(z, u);
    else if (z->micro == z->cfg->accum - 1 && z->cfg->overlap_reduce) zero_start_grad_reduce(z, u, 1);
}

// The gradients one backward step writes: opened at the first step that writes a unit,
// reduced after the last.
static floatX *const *zero_grads_open(Zero *z, const PassStep *s) {
    for (int k = 0; k < s->n_grads; k++) {
        int u = s->grads[k];
        if (ZERO_STAGE <= 1) z->unit_grads[u] = zero_full_grads(z, u);
        else if (z->plan.u[u].grad_slot < 0 || !z->unit_grads[u]) z->unit_grads[u] = zero_open_slot(z, u);
    }
    return z->unit_grads;
}
static void zero_grads_close(Zero *z, const PassStep *s) {
    int step = (int)(s - z->layout->schedule.bwd);
    for (int k = 0; k < s->n_grads; k++) {
        int u = s->grads[k];
        zb_grads_stored(&z->be, z->unit_grads[u], z->plan.u[u].padded);   // as floatX stores them
        if (z->plan.u[u].last_grad_step != step) continue;
        zero_grads_end(z, u);
        if (ZERO_STAGE >= 2) z->unit_grads[u] = NULL;
    }
}

static void zero_micro_step_end(Zero *z) { z->micro++; }

// ============================================================================
// The optimizer step, at the accumulation boundary

// Each rank ends with the averaged gradient of its own partition. Stages 0-1 wait for
// the reductions the last backward started, and start any it did not (a step driven
// without train/passes.h), in unit order. Stages 2-3 reduced every unit in the backward.
static void zero_step_reduce(Zero *z) {
    if (ZERO_STAGE <= 1) {
        const ZeroPlan *p = &z->plan;
        for (int i = 0; i < p->n_units; i++)
            if (!z->grad_reducing[i]) zero_start_grad_reduce(z, i, 0);
        for (int i = 0; i < p->n_units; i++) {
            comm_wait(z->comm, &z->grad_reduce[i]);
            z->grad_reducing[i] = 0;
            zero_grad_final(z, i);
        }
    }
    zb_wait_collectives(&z->be);
}

// AdamW's view of the partition's segments, into z->adam_seg: weight_decay where the tensor decays.
static void zero_adam_segments(Zero *z, float weight_decay) {
    const ZeroPlan *p = &z->plan;
    for (int s = 0; s < p->n_seg; s++) {
        const ZeroSegment *sg = &p->seg[s];
        size_t in_slice = zero_seg_in_slice(p, sg);
        floatX *param = zero_param_slice(z, sg->unit);
        z->adam_seg[s] = (ZeroAdamSeg){zero_seg_shard_off(p, sg), sg->n, sg->decay ? weight_decay : 0.0f,
                                       zero_grad_slice(z, sg->unit) + in_slice, param ? param + in_slice : NULL};
    }
}

// With --lean-step 1 the GPU backend runs parts of the step over the whole partition in one
// launch each (LEAN_*): the norm, and AdamW where the state is in device memory. It gets the
// partition once, as whole unit slices whose padding is zero and stays zero. The rest walks the segments.
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

// The global gradient norm: each rank sums the squares of its partition, and in stages
// 1-3 the partial sums are all-reduced as one fp64.
static float zero_global_norm(Zero *z) {
    const ZeroPlan *p = &z->plan;
    if (zero_lean(z) & LEAN_NORM) zb_lean_sumsq(&z->be);
    else for (int s = 0; s < p->n_seg; s++)
        zb_sumsq_add(&z->be, zero_grad_slice(z, p->seg[s].unit) + zero_seg_in_slice(p, &p->seg[s]), p->seg[s].n);
    double sumsq = zb_sumsq_take(&z->be);
    if (ZERO_STAGE >= 1) comm_all_reduce_host(z->comm, &sumsq, 1, DT_F64, OP_SUM);
    return (float)sqrt(sumsq);
}

// Global-norm clipping: the coefficient the gradients are multiplied by,
// clip / (norm + 1e-6) where that is below 1 (grad_clip 0: off).
static float zero_clip_coef(float grad_clip, float norm) {
    return grad_clip > 0 && grad_clip / (norm + 1e-6f) < 1.0f ? grad_clip / (norm + 1e-6f) : 1.0f;
}

typedef struct { float lr, beta1, beta2, eps, weight_decay; int t; } ZeroOptim;

// AdamW on this rank's partition, segment by segment in shard order (so that ZeRO-Infinity
// streams the state from NVMe in that order), unless the backend runs it lean.
static void zero_adamw_partition(Zero *z, const ZeroOptim *o, float grad_scale) {
    AdamWParams ap = {o->lr, o->beta1, o->beta2, o->eps, o->weight_decay, o->t, grad_scale, !z->cfg->adam_w_mode};
    if (zero_lean(z) & LEAN_ADAMW) { zb_lean_adamw(&z->be, ap); return; }
    zero_adam_segments(z, o->weight_decay);
    zb_adamw_partition(&z->be, z->adam_seg, z->plan.n_seg, ap);
}

// AdamW with every gradient multiplied by grad_scale first (the clip coefficient; with
// fp16, divided by the loss scale too), then every rank gets the parameters it needs
// for the next step.
static void zero_step_update(Zero *z, const ZeroOptim *o, float grad_scale) {
    zero_adamw_partition(z, o, grad_scale);
    if (ZERO_STAGE == 1 || ZERO_STAGE == 2) zero_all_gather_params(z);
    if (ZERO_STAGE == 3) zero_gather_persistent(z);
}
