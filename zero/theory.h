// zero/theory.h: the papers' bytes of each model state and of a step's collectives;
// train/zero_report.h prints them beside the measured ones.
#pragma once
#include "zero/placement.h"

// Bytes per parameter of params, grads and optimizer: CPU fp32 4, 4, 8, its master the
// parameter; CPU fp16 4, 4, 12; GPU 2, 2 or 4 from stage 2, 12.
typedef struct { double param, grad, optim; } ZeroBytesPerParam;

static ZeroBytesPerParam zero_bytes_per_param(int separate_master) {
    return (ZeroBytesPerParam){sizeof(floatX), sizeof(zgrad_t), (double)zero_optim_elem_bytes(separate_master)};
}

// the paper's formula: a state is partitioned from its stage on
static double zero_state_bytes(int stage, int kind, double psi, int world, ZeroBytesPerParam b) {
    double N = world;
    switch (kind) {
    case MEM_PARAMS: return stage >= 3 ? b.param * psi / N : b.param * psi;
    case MEM_GRADS:  return stage >= 2 ? b.grad * psi / N : b.grad * psi;
    case MEM_OPTIM:  return stage >= 1 ? b.optim * psi / N : b.optim * psi;
    default: return 0;
    }
}

// One step's bytes with K micro-steps, as comm/comm.h counts them: by collective, inside
// a node or across. Stage 3 follows a training pass's gathers; quantized messages carry scales.
typedef struct { double total[N_COLL], intra[N_COLL], cross[N_COLL]; } CommTheory;

static void theory_add(CommTheory *t, const Comm *c, CollKind k, double bytes, CommScope scope) {
    t->total[k] += bytes;
    (comm_scope_crosses(c, scope) ? t->cross : t->intra)[k] += bytes;
}

static CommTheory zero_comm_theory(const ZeroPlan *p, const ZeroPlacement *pl, const Comm *c, int K) {
    double eb = sizeof(floatX), psi = (double)p->full_elems * eb;   // the padded model
    CommTheory t;
    memset(&t, 0, sizeof(t));
    theory_add(&t, c, COLL_ALL_REDUCE, 2 * 4, SCOPE_WORLD);                   // the mean loss
    theory_add(&t, c, COLL_ALL_REDUCE, ZERO_STAGE == 0 ? 2 * psi : 2 * 8, SCOPE_WORLD);   // the gradients, or the norm
#if ZERO_STAGE == 1 || ZERO_STAGE == 2
    // stage 1 reduce-scatters once a step, stage 2 every micro-step
    theory_add(&t, c, COLL_REDUCE_SCATTER, ZERO_STAGE == 1 ? psi : K * psi, SCOPE_WORLD);
    theory_add(&t, c, COLL_ALL_GATHER, psi, SCOPE_WORLD);
#elif ZERO_STAGE == 3
    // hpZ: a unit's later gathers in a step stay in the group
    unsigned char *kept = (unsigned char *)xcalloc(p->n_units, "theory");
    for (int k = 0; k < K; k++)
        for (int i = 0; i < p->n_fetch_train && !pl->whole; i++) {
            int u = p->fetch_train[i];
            const ZeroUnit *U = &p->u[u];
            size_t n = kept[u] ? U->padded / pl->hpz : U->shard;
            double parts = kept[u] ? pl->hpz : p->P;
            theory_add(&t, c, COLL_ALL_GATHER, parts * (pl->qw ? zq_bytes(n, 8) : n * eb), kept[u] ? SCOPE_GROUP : SCOPE_WORLD);
            kept[u] = pl->hpz > 0;
        }
    free(kept);
    for (int i = 0; i < p->n_units && !pl->whole; i++) if (p->u[i].persistent) theory_add(&t, c, COLL_ALL_GATHER, (double)p->u[i].padded * eb, SCOPE_WORLD);
    for (int i = 0; i < p->n_units; i++) {
        const ZeroUnit *U = &p->u[i];
        if (!zero_qg_applies(pl, p, c->n_nodes, i)) { theory_add(&t, c, COLL_REDUCE_SCATTER, K * (double)U->padded * eb, SCOPE_WORLD); continue; }
        if (c->node_size > 1) theory_add(&t, c, COLL_ALL_TO_ALL, K * (double)p->P * zq_bytes(U->shard, 4), SCOPE_NODE);   // hop 1
        theory_add(&t, c, COLL_ALL_TO_ALL, K * (double)c->n_nodes * zq_bytes(U->shard, 4), SCOPE_ACROSS);   // hop 2
    }
#endif
    return t;
}

// The ZeRO++ paper's bytes across nodes per iteration, in fp16 models M: 3 for ZeRO-3;
// qwZ's forward 0.5, hpZ's backward 0, qgZ's gradients 0.25.
static double zero_paper_cross_m(const ZeroPlacement *pl) {
    return (pl->qw ? 0.5 : 1) + (pl->hpz ? 0 : 1) + (pl->qg ? 0.25 : 1);
}
