// zero/zeropp.h: ZeRO++ (Wang et al., 2023): stage 3 sends less between nodes. zero.h
// calls a hook per collective it changes; each returns 0 where ZeRO++ is off.
//   qwZ  zero_quantized_weights: parameter gathers of int8 blocks, util/quantize.h.
//   hpZ  zero_hpz_partition_size = L: a unit's first gather in a step keeps this
//        rank's 1/L; its later gathers stay in a group of L ranks.
//   qgZ  zero_quantized_gradients: two int4 all-to-alls, inside then across nodes.
// Across nodes, 3M per iteration becomes 0.5M + 0 + 0.25M. They block: bytes, not time.
#pragma once
#include "zero/rank.h"
#include "comm/nodes.h"

static void zero_zpp_buffers(Zero *z, uint8_t **send, uint8_t **recv, float **sums) {
    ZeroZppStaging st = zero_zpp_staging(&z->plan, &z->place);
    *send = z->zpp_staging; *recv = *send + st.send; *sums = (float *)(*recv + st.recv);
}

// qwZ: parts of n values over scope; all ranks dequantize all parts, alike
static void zero_qw_gather(Zero *z, CommScope scope, floatX *full, const floatX *mine, size_t n) {
    size_t q = zq_bytes(n, 8);
    uint8_t *send, *recv; float *sums;
    zero_zpp_buffers(z, &send, &recv, &sums);
    zb_quantize(&z->be, mine, 1, n, 8, send);
    comm_group_all_gather(z->comm, scope, send, recv, q);
    for (int r = 0; r < comm_group_size(z->comm, scope); r++) zb_dequantize(&z->be, recv + r * q, n, 8, full + r * n, 1, 0);
}

// hpZ: this rank's part of unit u's secondary partition, in the gathered unit
static floatX *zero_hpz_part(Zero *z, int u, floatX *full) {
    return full + (size_t)comm_group_rank(z->comm, SCOPE_GROUP) * (z->plan.u[u].padded / z->place.hpz);
}

// hpZ as DeepSpeed: the first gather in a step keeps the part; later ones use it
static CommRequest zero_zpp_gather_unit(Zero *z, int pos, floatX *full, floatX *mine) {
    int u = z->order[pos];
    size_t part = z->place.hpz ? z->plan.u[u].padded / z->place.hpz : 0, shard = z->plan.u[u].shard;
    floatX *own = z->place.hpz ? zero_hpz_part(z, u, full) : NULL, *kept = z->hpz_params + z->hpz_off[u];
    CommRequest r = {0};
    if (z->place.hpz && z->hpz_valid[u]) {
        zb_copy(&z->be, own, kept, part * sizeof(floatX));
        if (z->place.qw) zero_qw_gather(z, SCOPE_GROUP, full, own, part);
        else comm_group_all_gather(z->comm, SCOPE_GROUP, own, full, part * sizeof(floatX));
        return r;
    }
    if (z->place.qw) zero_qw_gather(z, SCOPE_WORLD, full, mine, shard);
    else r = comm_iall_gather(z->comm, mine, full, shard, ZPARAM_DT);
    if (z->place.hpz) {
        comm_wait(z->comm, &r);
        zb_copy(&z->be, kept, own, part * sizeof(floatX));
        z->hpz_valid[u] = 1;
    }
    return r;
}

// The all-gather hook: unit order[pos] into full, from this rank's slice mine.
static int zero_zpp_gather(Zero *z, int pos, floatX *full, floatX *mine, CommRequest *req) {
    if (!z->place.qw && !z->place.hpz) return 0;
    *req = zero_zpp_gather_unit(z, pos, full, mine);
    return 1;
}

// hpZ's parts go stale: at each optimizer step, as DeepSpeed, and at DPU's install
static void zero_zpp_step_end(Zero *z) {
    if (z->place.hpz) memset(z->hpz_valid, 0, z->plan.n_units);
}

// qgZ: rank n*L + k owns slice n*L + k. Hop 1 sends node rank k every node's slice k,
// the paper's slice reordering, so its sums are what hop 2 sends to node n.
static void zero_qg_reduce_scatter_unit(Zero *z, int u, const floatX *g, floatX *out) {
    const Comm *c = z->comm;
    int L = c->node_size, N = c->n_nodes;
    size_t s = z->plan.u[u].shard, q = zq_bytes(s, 4);
    uint8_t *send, *recv; float *sums, *mine;
    zero_zpp_buffers(z, &send, &recv, &sums);
    mine = sums + (size_t)N * s;
    if (L > 1) {   // hop 1, inside the node: int4, summed in fp32
        for (int k = 0; k < L; k++)
            for (int n = 0; n < N; n++) zb_quantize(&z->be, g + (size_t)(n * L + k) * s, 1, s, 4, send + (size_t)(k * N + n) * q);
        comm_group_all_to_all(z->comm, SCOPE_NODE, send, recv, (size_t)N * q);
        for (int k = 0; k < L; k++)
            for (int n = 0; n < N; n++) zb_dequantize(&z->be, recv + (size_t)(k * N + n) * q, s, 4, sums + (size_t)n * s, 0, k > 0);
    }
    // hop 2, across nodes: the sums requantized
    for (int n = 0; n < N; n++) {
        const void *piece = L > 1 ? (const void *)(sums + (size_t)n * s) : (const void *)(g + (size_t)n * s);
        zb_quantize(&z->be, piece, L == 1, s, 4, send + (size_t)n * q);
    }
    comm_group_all_to_all(z->comm, SCOPE_ACROSS, send, recv, q);
    for (int n = 0; n < N; n++) zb_dequantize(&z->be, recv + (size_t)n * q, s, 4, mine, 0, n > 0);
    zb_scale_to_floatX(&z->be, mine, out, s, 1.0f / (float)z->plan.P);
}

// The reduce-scatter hook: unit u's averaged slice into out, done on return.
static int zero_zpp_reduce_scatter(Zero *z, int u, const floatX *g, floatX *out) {
    if (!zero_qg_applies(&z->place, &z->plan, z->comm->n_nodes, u)) return 0;
    zero_qg_reduce_scatter_unit(z, u, g, out);
    return 1;
}

// the step's relative RMS error of what qwZ and qgZ sent, all ranks; -1: off
static void zero_quant_errors(Zero *z, float err[2]) {
    double s[4];
    err[0] = err[1] = -1;
    if (!z->place.qw && !z->place.qg) return;
    zb_quant_sums(&z->be, s);
    comm_control_sum(z->comm, s, 4);
    if (z->place.qw) err[0] = s[1] > 0 ? (float)sqrt(s[0] / s[1]) : 0;
    if (z->place.qg) err[1] = s[3] > 0 ? (float)sqrt(s[2] / s[3]) : 0;
}
